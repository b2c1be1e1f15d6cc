//! Tests of the HTTP/2 connection's state (`conn.rs`), driven frame by frame without I/O: the
//! preface, stream limits, windows, GOAWAY, protocol errors.
use std::task::Waker;

use proptest::prelude::*;

use super::*;

fn frame_of(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::put_head(&mut out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
    out
}

fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::put_settings(&mut out, pairs);
    out
}

/// A connection whose server sent `pairs` and answered the set-up PING.
fn ready(pairs: &[(u16, u32)]) -> State {
    let mut c = State::new(false);
    let mut input = settings(pairs);
    input.extend(frame_of(frame::PING, frame::ACK, 0, b"stampede"));
    assert_eq!(c.receive(&input, Instant::now()), input.len());
    assert!(c.ready() && c.closed.is_none(), "{:?}", c.closed);
    wrote_all(&mut c);
    c
}

fn open(c: &mut State, body: &'static [u8]) -> Option<u32> {
    let t = c.ticket();
    c.try_open(
        t,
        Waker::noop(),
        &[0x82, 0x86, 0x84],
        &Bytes::from_static(body),
        Instant::now(),
    )
}

/// The frames in what the connection queued, as (type, flags, stream, payload length).
fn frames(out: &[u8]) -> Vec<(u8, u8, u32, usize)> {
    let mut at = 0;
    let mut seen = Vec::new();
    while let Some(h) = Head::parse(&out[at..]) {
        seen.push((h.kind, h.flags, h.stream, h.len));
        at += frame::HEADER_LEN + h.len;
    }
    seen
}

#[test]
fn the_set_up_says_the_preface_and_acknowledges_the_server_s_settings() {
    let c = State::new(false);
    assert!(c.out.starts_with(frame::PREFACE));
    let kinds: Vec<u8> = frames(&c.out[frame::PREFACE.len()..])
        .iter()
        .map(|f| f.0)
        .collect();
    assert_eq!(kinds, [frame::SETTINGS, frame::WINDOW_UPDATE, frame::PING]);
    let mut c = State::new(false);
    c.out.clear();
    c.receive(
        &settings(&[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 2)]),
        Instant::now(),
    );
    assert!(!c.ready(), "the PING is not answered yet");
    assert_eq!(c.max_streams, Some(2));
    assert!(frames(&c.out).contains(&(frame::SETTINGS, frame::ACK, 0, 0)));
}

#[test]
fn no_more_streams_open_than_the_server_allows_and_the_next_opens_when_one_ends() {
    let mut c = ready(&[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 2)]);
    assert_eq!(open(&mut c, b""), Some(1));
    assert_eq!(open(&mut c, b""), Some(3));
    let t = c.ticket();
    let block = [0x82u8];
    let none = Bytes::new();
    assert_eq!(
        c.try_open(t, Waker::noop(), &block, &none, Instant::now()),
        None
    );
    // Stream 1's reply: :status 200 (static index 8) and six bytes of body.
    let now = Instant::now();
    c.receive(
        &frame_of(frame::HEADERS, frame::END_HEADERS, 1, &[0x88]),
        now,
    );
    c.receive(
        &frame_of(frame::DATA, frame::END_STREAM, 1, b"hello\n"),
        now,
    );
    let reply = c.poll_reply(1, Waker::noop()).unwrap().unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!((c.header_bytes, c.body_bytes, c.active), (1, 6, 1));
    assert_eq!(
        c.try_open(t, Waker::noop(), &block, &none, Instant::now()),
        Some(5)
    );
}

#[test]
fn a_body_past_the_server_s_window_waits_for_it_and_the_wait_is_timed() {
    let mut c = ready(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 10)]);
    let id = open(&mut c, b"0123456789abcdefghijklmno").unwrap();
    let sent = frames(&c.out);
    assert_eq!(sent[1], (frame::DATA, 0, id, 10), "{sent:?}");
    assert_eq!(c.stalls, 1);
    c.out.clear();
    let later = Instant::now() + Duration::from_millis(5);
    c.receive(
        &frame_of(frame::WINDOW_UPDATE, 0, id, &20u32.to_be_bytes()),
        later,
    );
    assert_eq!(frames(&c.out), [(frame::DATA, frame::END_STREAM, id, 15)]);
    assert!(c.stalled >= Duration::from_millis(4), "{:?}", c.stalled);
}

#[test]
fn a_goaway_ends_the_streams_above_its_last_id_unprocessed_and_the_session_for_new_ones() {
    let mut c = ready(&[]);
    let (a, b) = (open(&mut c, b"").unwrap(), open(&mut c, b"").unwrap());
    let mut goaway = a.to_be_bytes().to_vec();
    goaway.extend(11u32.to_be_bytes());
    c.receive(&frame_of(frame::GOAWAY, 0, 0, &goaway), Instant::now());
    assert!(c.ended());
    assert_eq!(c.goaway, Some(GoAway { last: a, code: 11 }));
    assert_eq!(
        c.poll_reply(b, Waker::noop()),
        Some(Err(StreamEnd::AboveGoAway))
    );
    assert_eq!(
        c.poll_reply(a, Waker::noop()),
        None,
        "stream 1 may still be answered"
    );
    c.receive(
        &frame_of(frame::RST_STREAM, 0, a, &7u32.to_be_bytes()),
        Instant::now(),
    );
    assert_eq!(
        c.poll_reply(a, Waker::noop()),
        Some(Err(StreamEnd::Reset(7)))
    );
    assert_eq!(c.active, 0);
}

#[test]
fn a_server_that_breaks_the_protocol_is_told_why_and_the_session_ends() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (frame_of(frame::PUSH_PROMISE, 0, 1, &[0; 4]), "PUSH_PROMISE"),
        (frame_of(frame::DATA, 0, 99, b"x"), "never opened"),
        (
            frame_of(frame::HEADERS, frame::PADDED, 1, &[9, 0x88]),
            "padding",
        ),
        (
            frame_of(frame::HEADERS, frame::END_HEADERS, 1, &[0xff, 0xff]),
            "HPACK",
        ),
        (frame_of(frame::PING, 0, 0, &[0; 3]), "PING"),
        (
            frame_of(frame::WINDOW_UPDATE, 0, 0, &0u32.to_be_bytes()),
            "WINDOW_UPDATE of 0",
        ),
        (
            frame_of(frame::CONTINUATION, 0, 1, &[]),
            "CONTINUATION without",
        ),
        (
            settings(&[(frame::SETTINGS_MAX_FRAME_SIZE, 10)]),
            "MAX_FRAME_SIZE",
        ),
        (vec![0, 0x40, 0x01, 0, 0, 0, 0, 0, 1], "over the 16,384"),
    ];
    for (input, says) in cases {
        let mut c = ready(&[]);
        let id = open(&mut c, b"").unwrap();
        wrote_all(&mut c);
        c.receive(&input, Instant::now());
        match &c.closed {
            Some(Closed::Protocol { what, .. }) => assert!(what.contains(says), "{what}"),
            other => panic!("{says}: {other:?}"),
        }
        assert_eq!(frames(&c.out)[0].0, frame::GOAWAY);
        // Its last stream id is the server's streams stampede acted on: none.
        assert_eq!(c.out[9..13], [0, 0, 0, 0], "{says}");
        assert_eq!(
            c.poll_reply(id, Waker::noop()),
            Some(Err(StreamEnd::Connection))
        );
    }
    let mut c = State::new(false);
    c.receive(b"HTTP/1.1 400 Bad Request\r\n\r\n", Instant::now());
    assert!(matches!(c.closed, Some(Closed::Protocol { .. })));
    assert_eq!(&c.first[..8], b"HTTP/1.1");
}

/// The payload of every frame of `kind` in what the connection queued.
fn payloads(out: &[u8], kind: u8) -> Vec<Vec<u8>> {
    let mut at = 0;
    let mut seen = Vec::new();
    while let Some(h) = Head::parse(&out[at..]) {
        let p = &out[at + frame::HEADER_LEN..at + frame::HEADER_LEN + h.len];
        if h.kind == kind {
            seen.push(p.to_vec());
        }
        at += frame::HEADER_LEN + h.len;
    }
    seen
}

/// As the driver does: everything queued is taken and written to the socket.
fn wrote_all(c: &mut State) {
    c.taken += c.out.len() as u64;
    c.written = c.taken;
    c.out.clear();
}

fn rst_count(c: &State) -> usize {
    frames(&c.out)
        .iter()
        .filter(|f| f.0 == frame::RST_STREAM)
        .count()
}

fn closed_with(c: &State) -> Option<u32> {
    match &c.closed {
        Some(Closed::Protocol { code, .. }) => Some(*code),
        _ => None,
    }
}

#[test]
fn a_header_table_lowered_below_4096_is_signalled_at_the_start_of_the_next_header_block() {
    // nghttp2 (a decoder whose SETTINGS_HEADER_TABLE_SIZE went below the 4,096 the encoder may
    // use) refuses a block that does not open with a size update (RFC 7541 4.2).
    let mut c = ready(&[(0x1, 256)]);
    open(&mut c, b"").unwrap();
    open(&mut c, b"").unwrap();
    let blocks = payloads(&c.out, frame::HEADERS);
    assert_eq!(
        blocks[0],
        [0x20, 0x82, 0x86, 0x84],
        "size 0, then the request"
    );
    assert_eq!(blocks[1], [0x82, 0x86, 0x84], "said once");
    // Once at 0 the table can go no lower: later SETTINGS need no more updates.
    c.out.clear();
    c.receive(&settings(&[(0x1, 0)]), Instant::now());
    open(&mut c, b"").unwrap();
    assert_eq!(payloads(&c.out, frame::HEADERS)[0], [0x82, 0x86, 0x84]);
    // A table left at 4,096 or raised needs none.
    let mut c = ready(&[(0x1, 65_536)]);
    open(&mut c, b"").unwrap();
    assert_eq!(payloads(&c.out, frame::HEADERS)[0], [0x82, 0x86, 0x84]);
    // A size update makes the block longer by a byte; one filling a frame still splits right.
    let mut c = ready(&[(0x1, 0)]);
    let big = vec![0x82u8; frame::MAX_FRAME];
    let t = c.ticket();
    c.try_open(t, Waker::noop(), &big, &Bytes::new(), Instant::now())
        .unwrap();
    let f = frames(&c.out);
    assert_eq!(
        f[0],
        (frame::HEADERS, frame::END_STREAM, 1, frame::MAX_FRAME)
    );
    assert_eq!(f[1], (frame::CONTINUATION, frame::END_HEADERS, 1, 1));
}

#[test]
fn a_reset_from_the_server_is_never_answered_with_a_reset_and_no_stream_is_reset_twice() {
    // A body waiting for window when the server resets the stream: nothing is said back
    // (RFC 9113 5.4.2).
    let mut c = ready(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 10)]);
    let id = open(&mut c, b"0123456789abcdefghijklmno").unwrap();
    c.out.clear();
    c.receive(
        &frame_of(frame::RST_STREAM, 0, id, &frame::CANCEL.to_be_bytes()),
        Instant::now(),
    );
    assert_eq!(rst_count(&c), 0, "{:?}", frames(&c.out));
    assert_eq!(
        c.poll_reply(id, Waker::noop()),
        Some(Err(StreamEnd::Reset(8)))
    );
    // DATA before HEADERS on a stream whose body waits: one reset (PROTOCOL_ERROR), not a
    // second (CANCEL) for the body.
    let id = open(&mut c, b"0123456789abcdefghijklmno").unwrap();
    c.out.clear();
    c.receive(&frame_of(frame::DATA, 0, id, b"x"), Instant::now());
    assert_eq!(rst_count(&c), 1, "{:?}", frames(&c.out));
    // Given up after that, it is not reset again.
    c.forget(id);
    assert_eq!(rst_count(&c), 1, "{:?}", frames(&c.out));
}

#[test]
fn a_reset_stampede_sends_itself_is_not_read_as_the_server_s() {
    // DATA before any HEADERS: stampede resets the stream (PROTOCOL_ERROR), not the server.
    let mut c = ready(&[]);
    let id = open(&mut c, b"").unwrap();
    c.receive(&frame_of(frame::DATA, 0, id, b"x"), Instant::now());
    let end = c.poll_reply(id, Waker::noop());
    assert!(
        !matches!(end, Some(Err(StreamEnd::Reset(_)))),
        "read as the server's reset: {end:?}"
    );
    assert_eq!(
        end,
        Some(Err(StreamEnd::ResetByUs {
            code: frame::PROTOCOL_ERROR,
            why: "DATA before the reply's HEADERS"
        }))
    );
}

#[test]
fn streams_not_written_when_the_connection_drops_are_sent_again_not_failed() {
    // No GOAWAY: the socket fails with one request written and one still in the buffer.
    let mut c = ready(&[]);
    let written = open(&mut c, b"").unwrap();
    wrote_all(&mut c);
    let queued = open(&mut c, b"").unwrap();
    // Half of its header block: the server cannot have it whole.
    c.taken += c.out.len() as u64;
    c.written += 9 + 1;
    c.close(Closed::Io(std::io::ErrorKind::BrokenPipe.into()));
    assert_eq!(
        c.poll_reply(written, Waker::noop()),
        Some(Err(StreamEnd::Connection)),
        "the server may have taken it: failed"
    );
    assert_eq!(
        c.poll_reply(queued, Waker::noop()),
        Some(Err(StreamEnd::Unsent)),
        "never left: sent again"
    );
    assert_eq!(c.active, 0);
}

#[test]
fn an_initial_window_raised_past_2_31_on_an_open_stream_is_a_flow_control_error() {
    let mut c = ready(&[]);
    let id = open(&mut c, b"").unwrap();
    // The stream's window to exactly 2^31-1: allowed.
    let inc = (frame::MAX_WINDOW - frame::DEFAULT_WINDOW) as u32;
    c.receive(
        &frame_of(frame::WINDOW_UPDATE, 0, id, &inc.to_be_bytes()),
        Instant::now(),
    );
    assert!(c.closed.is_none(), "{:?}", c.closed);
    // One more by SETTINGS (RFC 9113 6.9.2): a connection error.
    c.receive(
        &settings(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 65_536)]),
        Instant::now(),
    );
    assert_eq!(
        closed_with(&c),
        Some(frame::FLOW_CONTROL_ERROR),
        "{:?}",
        c.closed
    );
}

#[test]
fn a_1xx_that_ends_the_stream_is_not_taken_for_the_reply() {
    // :status 103 (literal, name index 8) with END_STREAM: malformed (RFC 9113 8.1).
    let mut c = ready(&[]);
    let id = open(&mut c, b"").unwrap();
    c.out.clear();
    c.receive(
        &frame_of(
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            id,
            &[0x08, 0x03, b'1', b'0', b'3'],
        ),
        Instant::now(),
    );
    let end = c.poll_reply(id, Waker::noop());
    assert!(!matches!(end, Some(Ok(_))), "taken for the reply: {end:?}");
    assert!(end.is_some(), "the stream ended");
    assert_eq!(
        payloads(&c.out, frame::RST_STREAM),
        [frame::PROTOCOL_ERROR.to_be_bytes()]
    );
    assert_eq!(c.active, 0);
}

#[test]
fn a_stalled_upload_given_up_still_counts_its_stall_time() {
    for session_ends in [false, true] {
        let mut c = ready(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 10)]);
        let id = open(&mut c, b"0123456789abcdefghijklmno").unwrap();
        assert_eq!(c.stalls, 1);
        std::thread::sleep(Duration::from_millis(5));
        if session_ends {
            c.close(Closed::Eof);
            let _ = c.poll_reply(id, Waker::noop());
        } else {
            c.forget(id);
        }
        assert!(
            c.stalled >= Duration::from_millis(5),
            "session ends {session_ends}: {:?}",
            c.stalled
        );
    }
}

#[test]
fn frames_on_idle_streams_are_a_connection_error() {
    // RFC 9113 5.1: on an idle stream only HEADERS and PRIORITY may come; stream 2 is a
    // server's (push is off), stream 5 is not opened yet.
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (frame_of(frame::DATA, 0, 2, b"x"), "DATA on 2"),
        (
            frame_of(frame::RST_STREAM, 0, 5, &frame::CANCEL.to_be_bytes()),
            "RST_STREAM on 5",
        ),
        (
            frame_of(frame::RST_STREAM, 0, 2, &frame::CANCEL.to_be_bytes()),
            "RST_STREAM on 2",
        ),
        (
            frame_of(frame::WINDOW_UPDATE, 0, 5, &1u32.to_be_bytes()),
            "WINDOW_UPDATE on 5",
        ),
        (
            frame_of(frame::WINDOW_UPDATE, 0, 4, &1u32.to_be_bytes()),
            "WINDOW_UPDATE on 4",
        ),
    ];
    for (input, case) in cases {
        let mut c = ready(&[]);
        open(&mut c, b"").unwrap();
        c.receive(&input, Instant::now());
        assert_eq!(
            closed_with(&c),
            Some(frame::PROTOCOL_ERROR),
            "{case}: {:?}",
            c.closed
        );
    }
    // PRIORITY on an idle stream is allowed.
    let mut c = ready(&[]);
    c.receive(&frame_of(frame::PRIORITY, 0, 9, &[0; 5]), Instant::now());
    assert!(c.closed.is_none(), "{:?}", c.closed);
}

/// `n` copies of `one`, as one read.
fn times(one: &[u8], n: usize) -> Vec<u8> {
    one.repeat(n)
}

#[test]
fn a_server_asking_for_acks_faster_than_it_reads_them_is_told_to_calm_down_and_cut_off() {
    let ping = frame_of(frame::PING, 0, 0, b"floodfld");
    let settings = settings(&[]);
    for (one, kind) in [(&ping, Flood::Pings), (&settings, Flood::Settings)] {
        // The socket takes nothing: the ACKs wait, up to the bound.
        let mut c = ready(&[]);
        let id = open(&mut c, b"").unwrap();
        wrote_all(&mut c);
        c.receive(&times(one, MAX_PENDING_ACKS), Instant::now());
        assert!(c.closed.is_none(), "{kind:?}: {:?}", c.closed);
        let queued = c.out.len();
        c.receive(one, Instant::now());
        assert!(
            matches!(c.closed, Some(Closed::Flood(k)) if k == kind),
            "{kind:?}: {:?}",
            c.closed
        );
        // Said after the ACKs already queued, and no ACK more.
        let said = frames(&c.out[queued..]);
        assert_eq!(said, [(frame::GOAWAY, 0, 0, 8)], "{kind:?}");
        assert_eq!(
            payloads(&c.out[queued..], frame::GOAWAY)[0][4..],
            frame::ENHANCE_YOUR_CALM.to_be_bytes()
        );
        assert_eq!(
            c.poll_reply(id, Waker::noop()),
            Some(Err(StreamEnd::Connection))
        );
        // A server that reads its socket may ask as often as it likes.
        let mut c = ready(&[]);
        for _ in 0..6 {
            c.receive(&times(one, MAX_PENDING_ACKS / 2), Instant::now());
            wrote_all(&mut c);
        }
        assert!(c.closed.is_none(), "{kind:?}: {:?}", c.closed);
        // Only what the socket has not taken counts: half taken, half a bound more fits.
        c.receive(&times(one, MAX_PENDING_ACKS), Instant::now());
        let half = c.out.len() / 2;
        c.taken += half as u64;
        c.written += half as u64;
        c.out.drain(..half);
        c.receive(&times(one, MAX_PENDING_ACKS / 2), Instant::now());
        assert!(c.closed.is_none(), "{kind:?}: {:?}", c.closed);
        c.receive(one, Instant::now());
        assert!(c.closed.is_some(), "{kind:?}");
    }
}

#[test]
fn an_endless_header_block_of_empty_continuations_ends_the_session_as_a_flood() {
    let status_200 = frame_of(frame::HEADERS, 0, 1, &[0x88]);
    let empty = frame_of(frame::CONTINUATION, 0, 1, &[]);
    let mut c = ready(&[]);
    let id = open(&mut c, b"").unwrap();
    wrote_all(&mut c);
    c.receive(&status_200, Instant::now());
    c.receive(&times(&empty, MAX_CONTINUATIONS as usize), Instant::now());
    assert!(c.closed.is_none(), "{:?}", c.closed);
    c.receive(&empty, Instant::now());
    assert!(
        matches!(c.closed, Some(Closed::Flood(Flood::Continuations))),
        "{:?}",
        c.closed
    );
    assert_eq!(frames(&c.out), [(frame::GOAWAY, 0, 0, 8)]);
    assert_eq!(
        payloads(&c.out, frame::GOAWAY)[0][4..],
        frame::ENHANCE_YOUR_CALM.to_be_bytes()
    );
    assert_eq!(
        c.poll_reply(id, Waker::noop()),
        Some(Err(StreamEnd::Connection))
    );
    // Up to the bound, a block is a block: the last CONTINUATION ends it, and the reply comes.
    let mut c = ready(&[]);
    let id = open(&mut c, b"").unwrap();
    c.receive(&status_200, Instant::now());
    c.receive(
        &times(&empty, MAX_CONTINUATIONS as usize - 1),
        Instant::now(),
    );
    c.receive(
        &frame_of(frame::CONTINUATION, frame::END_HEADERS, 1, &[]),
        Instant::now(),
    );
    c.receive(
        &frame_of(frame::DATA, frame::END_STREAM, 1, b"ok"),
        Instant::now(),
    );
    assert!(c.closed.is_none(), "{:?}", c.closed);
    assert_eq!(
        c.poll_reply(id, Waker::noop()).unwrap().unwrap().status,
        200
    );
}

#[test]
fn endless_informational_replies_reset_their_stream_as_a_flood_and_the_session_goes_on() {
    // :status 103 (literal, name index 8), never the final reply.
    let early = [0x08, 0x03, b'1', b'0', b'3'];
    let mut c = ready(&[]);
    let (a, b) = (open(&mut c, b"").unwrap(), open(&mut c, b"").unwrap());
    wrote_all(&mut c);
    let one = frame_of(frame::HEADERS, frame::END_HEADERS, a, &early);
    c.receive(&times(&one, usize::from(MAX_INFORMATIONAL)), Instant::now());
    assert_eq!(c.poll_reply(a, Waker::noop()), None, "still waiting");
    assert!(c.out.is_empty(), "{:?}", frames(&c.out));
    c.receive(&times(&one, 100), Instant::now());
    assert_eq!(
        c.poll_reply(a, Waker::noop()),
        Some(Err(StreamEnd::Flooded(Flood::Informational)))
    );
    assert_eq!(
        payloads(&c.out, frame::RST_STREAM),
        [frame::ENHANCE_YOUR_CALM.to_be_bytes()],
        "reset once"
    );
    assert!(c.closed.is_none(), "{:?}", c.closed);
    // The other stream, with as many 1xx as allowed, gets its reply.
    let one = frame_of(frame::HEADERS, frame::END_HEADERS, b, &early);
    c.receive(&times(&one, usize::from(MAX_INFORMATIONAL)), Instant::now());
    c.receive(
        &frame_of(
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            b,
            &[0x88],
        ),
        Instant::now(),
    );
    assert_eq!(c.poll_reply(b, Waker::noop()).unwrap().unwrap().status, 200);
    assert_eq!(c.active, 0);
}

/// Any frame a server might send, as bytes: a real type or not, any flags, a small stream id.
fn any_frame() -> impl Strategy<Value = Vec<u8>> {
    (
        0u8..12,
        any::<u8>(),
        0u32..8,
        proptest::collection::vec(any::<u8>(), 0..40),
    )
        .prop_map(|(kind, flags, stream, payload)| frame_of(kind, flags, stream, &payload))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// The frame handling is ours, so it is fuzzed (here as real frames of any type, by
    /// `fuzz/`'s h2_frames as any bytes): whatever a server sends, in whatever order
    /// and cut wherever the reads cut it, nothing panics and the stream accounting holds.
    #[test]
    fn whatever_a_server_sends_nothing_panics_and_the_slots_add_up(
        frames in proptest::collection::vec(any_frame(), 0..24),
        cut in 1usize..64,
        opens in 0usize..4,
    ) {
        let mut c = ready(&[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 3)]);
        let mut ids = Vec::new();
        for _ in 0..opens {
            if let Some(id) = open(&mut c, b"body") {
                ids.push(id);
            }
        }
        let input: Vec<u8> = frames.concat();
        let mut pending = Vec::new();
        for piece in input.chunks(cut) {
            pending.extend_from_slice(piece);
            let used = c.receive(&pending, Instant::now());
            pending.drain(..used);
            if c.closed.is_some() {
                break;
            }
        }
        prop_assert!(c.active as usize <= ids.len());
        let open_now = c.streams.values().filter(|s| s.open).count();
        prop_assert_eq!(open_now, c.active as usize);
        for id in ids {
            let _ = c.poll_reply(id, Waker::noop());
            c.forget(id);
        }
        prop_assert_eq!(c.active, 0);
    }
}
