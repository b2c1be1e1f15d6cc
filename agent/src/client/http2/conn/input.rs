//! The server's side of an HTTP/2 connection taken in: whole frames read off the driver's buffer,
//! each checked against RFC 9113 and applied to the connection's state (its streams' replies, its
//! settings and windows, the server's GOAWAY), a protocol error ending the connection with its
//! reason. Apart from the stream table and flow control in `conn`, which it drives.
use super::super::hpack::HpackError;
use super::*;

impl State {
    /// A stream id the server may send no frame on but HEADERS or PRIORITY (RFC 9113 5.1): one of
    /// its own (push is off, so never opened) or one of ours not opened yet.
    fn idle(&self, id: u32) -> bool {
        id.is_multiple_of(2) || id >= self.next_id
    }

    /// Takes in what was read: every whole frame at the start of `buf`. Returns how many bytes it
    /// used (the rest is an unfinished frame). After a protocol error the connection is closed and
    /// nothing more is read.
    pub fn receive(&mut self, buf: &[u8], now: Instant) -> usize {
        if self.first.len() < 24 {
            let take = buf.len().min(24 - self.first.len());
            self.first.extend_from_slice(&buf[..take]);
        }
        let mut at = 0;
        while self.closed.is_none() {
            let Some(head) = Head::parse(&buf[at..]) else {
                break;
            };
            if !self.setup.settings
                && (head.kind != frame::SETTINGS || head.flags & frame::ACK != 0)
            {
                let _ = self.broken(frame::PROTOCOL_ERROR, "its first frame was not SETTINGS");
                break;
            }
            if head.len > frame::MAX_FRAME {
                let _ = self.broken(
                    frame::FRAME_SIZE_ERROR,
                    format!("a frame of {} bytes, over the 16,384 allowed", head.len),
                );
                break;
            }
            let end = at + frame::HEADER_LEN + head.len;
            if buf.len() < end {
                break;
            }
            let payload = &buf[at + frame::HEADER_LEN..end];
            at = end;
            if self.frame(head, payload, now).is_err() {
                break;
            }
        }
        at
    }

    fn frame(&mut self, h: Head, p: &[u8], now: Instant) -> Result<(), ()> {
        if self.continuing.is_some() && h.kind != frame::CONTINUATION {
            return self.broken(frame::PROTOCOL_ERROR, "a header block left unfinished");
        }
        match h.kind {
            frame::DATA => self.data(h, p, now),
            frame::HEADERS => self.headers(h, p, now),
            frame::CONTINUATION => self.continuation(h, p, now),
            frame::PRIORITY => Ok(()),
            frame::RST_STREAM => self.rst_stream(h, p, now),
            frame::SETTINGS => self.settings(h, p, now),
            frame::PUSH_PROMISE => {
                self.broken(frame::PROTOCOL_ERROR, "PUSH_PROMISE, with push disabled")
            }
            frame::PING => self.ping(h, p),
            frame::GOAWAY => self.goaway(h, p, now),
            frame::WINDOW_UPDATE => self.window_update(h, p, now),
            // Unknown frame types are ignored (RFC 9113 4.1).
            _ => Ok(()),
        }
    }

    fn rst_stream(&mut self, h: Head, p: &[u8], now: Instant) -> Result<(), ()> {
        if h.stream == 0 || p.len() != 4 {
            return self.broken(frame::PROTOCOL_ERROR, "a malformed RST_STREAM");
        }
        if self.idle(h.stream) {
            return self.broken(frame::PROTOCOL_ERROR, "RST_STREAM on a stream never opened");
        }
        let code = frame::u32_at(p, 0);
        self.close_stream(h.stream, Some(StreamEnd::Reset(code)), now);
        Ok(())
    }

    fn ping(&mut self, h: Head, p: &[u8]) -> Result<(), ()> {
        if h.stream != 0 || p.len() != 8 {
            return self.broken(frame::FRAME_SIZE_ERROR, "a malformed PING");
        }
        if h.flags & frame::ACK != 0 {
            if p == b"stampede" {
                self.setup.pinged = true;
                self.setup_moved();
            }
        } else {
            let mut data = [0u8; 8];
            data.copy_from_slice(p);
            self.ack(Flood::Pings, |out| frame::put_ping(out, frame::ACK, data))?;
        }
        Ok(())
    }

    /// The server takes no more streams: those above its last id were never processed.
    fn goaway(&mut self, h: Head, p: &[u8], now: Instant) -> Result<(), ()> {
        if h.stream != 0 || p.len() < 8 {
            return self.broken(frame::PROTOCOL_ERROR, "a malformed GOAWAY");
        }
        let goaway = GoAway {
            last: frame::u31(p, 0),
            code: frame::u32_at(p, 4),
        };
        self.goaway = Some(goaway);
        self.setup_moved();
        let above: Vec<u32> = self
            .streams
            .keys()
            .copied()
            .filter(|&id| id > goaway.last)
            .collect();
        for id in above {
            self.close_stream(id, Some(StreamEnd::AboveGoAway), now);
        }
        // Streams waiting for a slot learn that this connection takes no more.
        for (_, w) in self.waiting.drain(..) {
            w.wake();
        }
        Ok(())
    }

    fn window_update(&mut self, h: Head, p: &[u8], now: Instant) -> Result<(), ()> {
        if p.len() != 4 {
            return self.broken(frame::FRAME_SIZE_ERROR, "a malformed WINDOW_UPDATE");
        }
        let inc = i64::from(frame::u31(p, 0));
        if h.stream != 0 && self.idle(h.stream) {
            return self.broken(
                frame::PROTOCOL_ERROR,
                "WINDOW_UPDATE on a stream never opened",
            );
        }
        if h.stream == 0 {
            if inc == 0 {
                return self.broken(frame::PROTOCOL_ERROR, "a WINDOW_UPDATE of 0");
            }
            self.send_window += inc;
            if self.send_window > frame::MAX_WINDOW {
                return self.broken(frame::FLOW_CONTROL_ERROR, "a connection window over 2^31-1");
            }
        } else if let Some(s) = self.streams.get_mut(&h.stream) {
            s.window += inc;
            if inc == 0 {
                let why = "a stream's WINDOW_UPDATE of 0";
                self.reset_by_us(h.stream, frame::PROTOCOL_ERROR, why, now);
                return Ok(());
            }
            if s.window > frame::MAX_WINDOW {
                let why = "a stream's window over 2^31-1";
                self.reset_by_us(h.stream, frame::FLOW_CONTROL_ERROR, why, now);
                return Ok(());
            }
        }
        if !self.blocked.is_empty() {
            self.unblock(now);
        }
        Ok(())
    }

    fn headers(&mut self, h: Head, p: &[u8], now: Instant) -> Result<(), ()> {
        if h.stream == 0 || h.stream.is_multiple_of(2) {
            return self.broken(frame::PROTOCOL_ERROR, "HEADERS on a stream it cannot use");
        }
        let mut block = unpad(h, p).ok_or(()).or_else(|_| self.padding())?;
        if h.flags & frame::PRIORITY_FLAG != 0 {
            if block.len() < 5 {
                return self.broken(frame::FRAME_SIZE_ERROR, "a HEADERS frame too short");
            }
            block = &block[5..];
        }
        let end_stream = h.flags & frame::END_STREAM != 0;
        if h.flags & frame::END_HEADERS != 0 {
            self.header_block(h.stream, end_stream, block, now)
        } else {
            self.continuing = Some(Continuing {
                id: h.stream,
                end_stream,
                block: block.to_vec(),
                frames: 0,
            });
            Ok(())
        }
    }

    fn continuation(&mut self, h: Head, p: &[u8], now: Instant) -> Result<(), ()> {
        let Some(mut c) = self.continuing.take() else {
            return self.broken(frame::PROTOCOL_ERROR, "CONTINUATION without HEADERS");
        };
        if h.stream != c.id {
            return self.broken(frame::PROTOCOL_ERROR, "CONTINUATION on another stream");
        }
        c.frames += 1;
        if c.frames > MAX_CONTINUATIONS {
            return self.flooded(Flood::Continuations);
        }
        c.block.extend_from_slice(p);
        if c.block.len() > MAX_HEADER_BLOCK {
            return self.broken(
                frame::PROTOCOL_ERROR,
                "a header block over 256 KiB (SETTINGS_MAX_HEADER_LIST_SIZE)",
            );
        }
        if h.flags & frame::END_HEADERS != 0 {
            self.header_block(c.id, c.end_stream, &c.block, now)
        } else {
            self.continuing = Some(c);
            Ok(())
        }
    }

    fn padding(&mut self) -> Result<&'static [u8], ()> {
        self.broken(frame::PROTOCOL_ERROR, "padding longer than its frame")
            .map(|_| &[][..])
    }

    fn data(&mut self, h: Head, p: &[u8], now: Instant) -> Result<(), ()> {
        if h.stream == 0 || self.idle(h.stream) {
            return self.broken(frame::PROTOCOL_ERROR, "DATA on a stream never opened");
        }
        // The whole payload, padding too, counts against the windows (RFC 9113 6.9.1).
        let len = p.len() as u32;
        self.recv_consumed += len;
        if self.recv_consumed >= REFILL {
            frame::put_window_update(&mut self.out, 0, self.recv_consumed);
            self.recv_consumed = 0;
            self.wake_driver();
        }
        let Some(body) = unpad(h, p) else {
            return self.padding().map(|_| ());
        };
        let Some(s) = self.streams.get_mut(&h.stream).filter(|s| s.end.is_none()) else {
            // A stream stampede gave up on, or one already reset: what was already in flight is
            // dropped.
            return Ok(());
        };
        if s.status.is_none() {
            let why = "DATA before the reply's HEADERS";
            self.reset_by_us(h.stream, frame::PROTOCOL_ERROR, why, now);
            return Ok(());
        }
        self.body_bytes += body.len() as u64;
        s.consumed += len;
        if s.consumed >= REFILL {
            frame::put_window_update(&mut self.out, h.stream, s.consumed);
            s.consumed = 0;
            self.wake_driver();
        }
        if h.flags & frame::END_STREAM != 0 {
            self.close_stream(h.stream, None, now);
        }
        Ok(())
    }

    fn header_block(
        &mut self,
        id: u32,
        end_stream: bool,
        block: &[u8],
        now: Instant,
    ) -> Result<(), ()> {
        if id >= self.next_id {
            return self.broken(frame::PROTOCOL_ERROR, "HEADERS on a stream never opened");
        }
        self.header_bytes += block.len() as u64;
        // Decoded whatever the stream's state: the table the server keeps must stay in step.
        let decoded = match self.decoder.decode(block) {
            Ok(d) => d,
            Err(HpackError(what)) => {
                return self.broken(frame::COMPRESSION_ERROR, format!("HPACK: {what}"));
            }
        };
        // A stream gone, or ended by a reset (the server's or ours) and not yet polled: what
        // still comes for it is dropped, never reset again.
        let Some(s) = self.streams.get_mut(&id).filter(|s| s.end.is_none()) else {
            return Ok(());
        };
        let malformed = match (s.status, decoded.status) {
            // Informational (1xx): the final reply is still to come, so it cannot end the stream
            // (RFC 9113 8.1).
            (None, Some(status)) if (100..200).contains(&status) => {
                s.informational = s.informational.saturating_add(1);
                if s.informational > MAX_INFORMATIONAL && !end_stream {
                    let end = StreamEnd::Flooded(Flood::Informational);
                    self.reset(id, frame::ENHANCE_YOUR_CALM, end, now);
                    return Ok(());
                }
                end_stream.then_some("an informational (1xx) reply that ended the stream")
            }
            (None, Some(status)) => {
                s.status = Some(status);
                s.headers_at = Some(now);
                None
            }
            (None, None) => Some("a reply without :status"),
            // Trailers, which must end the stream.
            (Some(_), _) if end_stream => None,
            (Some(_), _) => Some("a header block after the reply's that did not end the stream"),
        };
        if let Some(why) = malformed {
            self.reset_by_us(id, frame::PROTOCOL_ERROR, why, now);
            return Ok(());
        }
        if end_stream {
            self.close_stream(id, None, now);
        }
        Ok(())
    }

    fn settings(&mut self, h: Head, p: &[u8], now: Instant) -> Result<(), ()> {
        if h.stream != 0 {
            return self.broken(frame::PROTOCOL_ERROR, "SETTINGS on a stream");
        }
        if h.flags & frame::ACK != 0 {
            return Ok(());
        }
        if !p.len().is_multiple_of(6) {
            return self.broken(frame::FRAME_SIZE_ERROR, "a SETTINGS frame of a bad length");
        }
        for s in p.chunks_exact(6) {
            let id = u16::from_be_bytes([s[0], s[1]]);
            let value = frame::u32_at(s, 2);
            match id {
                frame::SETTINGS_MAX_CONCURRENT_STREAMS => self.max_streams = Some(value),
                frame::SETTINGS_INITIAL_WINDOW_SIZE => self.initial_window(value)?,
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    if !(frame::MAX_FRAME as u32..=(1 << 24) - 1).contains(&value) {
                        return self.broken(
                            frame::PROTOCOL_ERROR,
                            "SETTINGS_MAX_FRAME_SIZE outside 16,384..16,777,215",
                        );
                    }
                    self.max_frame = value as usize;
                }
                frame::SETTINGS_ENABLE_PUSH if value > 1 => {
                    return self.broken(frame::PROTOCOL_ERROR, "SETTINGS_ENABLE_PUSH not 0 or 1");
                }
                // The encoder indexes nothing, but a table smaller than the one it may use must
                // still be said, in the next header block (`put_headers`).
                frame::SETTINGS_HEADER_TABLE_SIZE if value < self.encoder_table => {
                    self.table_update = true;
                }
                _ => {}
            }
        }
        self.setup.settings = true;
        self.ack(Flood::Settings, |out| {
            frame::put_head(out, 0, frame::SETTINGS, frame::ACK, 0)
        })?;
        if !self.blocked.is_empty() {
            self.unblock(now);
        }
        self.wake_next();
        Ok(())
    }

    /// SETTINGS_INITIAL_WINDOW_SIZE: every open stream's window moves by the change (RFC 9113
    /// 6.9.2).
    fn initial_window(&mut self, value: u32) -> Result<(), ()> {
        if i64::from(value) > frame::MAX_WINDOW {
            return self.broken(
                frame::FLOW_CONTROL_ERROR,
                "SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1",
            );
        }
        let delta = i64::from(value) - self.initial_window;
        self.initial_window = i64::from(value);
        let mut over = false;
        for st in self.streams.values_mut().filter(|st| st.open) {
            st.window += delta;
            over |= st.window > frame::MAX_WINDOW;
        }
        // A change that takes a stream's window past the most allowed is the connection's error
        // (RFC 9113 6.9.2).
        if over {
            return self.broken(
                frame::FLOW_CONTROL_ERROR,
                "SETTINGS_INITIAL_WINDOW_SIZE took a stream's window over 2^31-1",
            );
        }
        Ok(())
    }
}

/// A padded frame's payload without its padding; `None` when the padding does not fit.
fn unpad(h: Head, p: &[u8]) -> Option<&[u8]> {
    if h.flags & frame::PADDED == 0 {
        return Some(p);
    }
    let (&pad, rest) = p.split_first()?;
    rest.len()
        .checked_sub(usize::from(pad))
        .map(|keep| &rest[..keep])
}

/// The fuzz target's entry (`fuzz/`, `h2_frames`): a connection whose server allows a few
/// streams, some opened, then `data`'s rest fed to it as a server's bytes, cut as its first bytes
/// say. Whatever comes, nothing panics, the open streams are those counted, and every stream given
/// up frees its slot.
#[doc(hidden)]
pub fn fuzz_frames(data: &[u8]) {
    let [limit, cut, opens, rest @ ..] = data else {
        return;
    };
    let now = Instant::now();
    let mut c = State::new(false);
    let mut setup = Vec::new();
    frame::put_settings(
        &mut setup,
        &[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, u32::from(limit % 8))],
    );
    frame::put_head(&mut setup, 8, frame::PING, frame::ACK, 0);
    setup.extend_from_slice(b"stampede");
    assert_eq!(c.receive(&setup, now), setup.len());
    let mut ids = Vec::new();
    for k in 0..opens % 5 {
        let t = c.ticket();
        let body = if k % 2 == 0 {
            Bytes::new()
        } else {
            Bytes::from_static(b"body")
        };
        if let Some(id) = c.try_open(t, std::task::Waker::noop(), &[0x82, 0x86, 0x84], &body, now) {
            ids.push(id);
        }
    }
    assert!(c.max_streams.is_none_or(|m| c.active <= m));
    let mut pending = Vec::new();
    for piece in rest.chunks(usize::from(cut % 64) + 1) {
        pending.extend_from_slice(piece);
        let used = c.receive(&pending, now);
        assert!(used <= pending.len());
        pending.drain(..used);
        if c.closed.is_some() {
            break;
        }
    }
    assert!(c.active as usize <= ids.len());
    assert_eq!(
        c.streams.values().filter(|s| s.open).count(),
        c.active as usize
    );
    for id in ids {
        let _ = c.poll_reply(id, std::task::Waker::noop());
        c.forget(id);
    }
    assert_eq!(c.active, 0);
}
