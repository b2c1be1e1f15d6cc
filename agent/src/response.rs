//! Reading an HTTP/1.1 reply without keeping it: the head parsed in place, the body's framing, and a
//! chunked decoder that only counts. Pure functions over byte slices, so every case is tested here.

/// The largest reply head accepted; a server sending more is broken or hostile.
pub const MAX_HEAD: usize = 64 * 1024;

/// Most headers a reply may carry (hyper's limit too).
pub const MAX_HEADERS: usize = 100;

/// How the body after a head ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (HEAD, 1xx, 204, 304).
    None,
    Length(u64),
    Chunked,
    /// Read until the server closes (HTTP/1.0 style).
    UntilClose,
}

/// A parsed reply head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    /// Bytes of the head, to be consumed from the buffer.
    pub len: usize,
    pub framing: Framing,
    /// The connection can carry another request after this reply.
    pub keep_alive: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadError {
    /// Not an HTTP/1.x reply head.
    Malformed,
    /// Longer than [`MAX_HEAD`].
    TooLarge,
    /// Framing headers that contradict each other (request smuggling territory): two different
    /// Content-Lengths.
    BadFraming,
    /// More than [`MAX_HEADERS`] header lines.
    TooManyHeaders,
    /// A Content-Length that is no length: negative, not digits, beyond 2^64 bytes. Its first bytes.
    BadLength(Shown),
}

/// The first bytes of a header's value, kept in the error (which is `Copy`, made per failure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shown {
    bytes: [u8; 24],
    len: u8,
    /// The value was longer than what is kept.
    cut: bool,
}

impl Shown {
    fn of(value: &[u8]) -> Shown {
        let mut bytes = [0; 24];
        let len = value.len().min(bytes.len());
        bytes[..len].copy_from_slice(&value[..len]);
        Shown {
            bytes,
            len: len as u8,
            cut: value.len() > len,
        }
    }
}

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = &self.bytes[..usize::from(self.len)];
        write!(
            f,
            "{}{}",
            value.escape_ascii(),
            if self.cut { "..." } else { "" }
        )
    }
}

/// Parses a reply head at the start of `buf`: `Ok(None)` when more bytes are needed.
pub fn parse_head(buf: &[u8], request_was_head: bool) -> Result<Option<Head>, HeadError> {
    // Uninitialised: zeroing 100 headers before every parse was the client's largest own cost.
    let mut headers =
        [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut resp,
        buf,
        &mut headers,
    );
    let len = match parsed {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => return Err(HeadError::TooLarge),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooManyHeaders),
        Err(_) => return Err(HeadError::Malformed),
    };
    if len > MAX_HEAD {
        return Err(HeadError::TooLarge);
    }
    let status = resp.code.ok_or(HeadError::Malformed)?;
    let http10 = resp.version == Some(0);
    let mut length: Option<u64> = None;
    // Transfer-Encoding seen, and whether its last coding is chunked.
    let mut coded = false;
    let mut chunked = false;
    let mut said_close = false;
    let mut said_keep_alive = false;
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            // Digits only: Rust's parse would also take "+3".
            let v = std::str::from_utf8(h.value)
                .ok()
                .map(str::trim)
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or(HeadError::BadLength(Shown::of(h.value.trim_ascii())))?;
            if length.is_some_and(|l| l != v) {
                return Err(HeadError::BadFraming);
            }
            length = Some(v);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            coded = true;
            chunked = h
                .value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                said_close |= token.eq_ignore_ascii_case(b"close");
                said_keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    // RFC 9112 6.3: Transfer-Encoding overrides Content-Length; chunked must be its last coding,
    // and any other coding is read to the close.
    let framing =
        if request_was_head || (100..200).contains(&status) || status == 204 || status == 304 {
            Framing::None
        } else if chunked {
            Framing::Chunked
        } else if coded {
            Framing::UntilClose
        } else if let Some(l) = length {
            Framing::Length(l)
        } else {
            Framing::UntilClose
        };
    let close = said_close || framing == Framing::UntilClose || (http10 && !said_keep_alive);
    // 101 hands the connection to another protocol: it cannot carry our next request.
    let keep_alive = !close && status != 101;
    Ok(Some(Head {
        status,
        len,
        framing,
        keep_alive,
    }))
}

/// A chunked body, decoded only to find its end. All state is here, so the bytes fed to it can be
/// dropped after every call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunked {
    Size { value: u64, digits: u32, ext: bool },
    SizeLf { value: u64 },
    Data(u64),
    DataCr,
    DataLf,
    Trailer { line: usize },
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadChunk;

/// Longest trailer line or chunk-size line accepted.
const MAX_LINE: usize = 8 * 1024;

impl Chunked {
    pub fn new() -> Chunked {
        Chunked::Size {
            value: 0,
            digits: 0,
            ext: false,
        }
    }

    pub fn is_done(&self) -> bool {
        *self == Chunked::Done
    }

    /// Consumes bytes; returns how many belonged to the body (all of them, unless it ended).
    pub fn feed(&mut self, bytes: &[u8]) -> Result<usize, BadChunk> {
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            *self = match *self {
                Chunked::Done => return Ok(i),
                Chunked::Data(n) => {
                    let take = (bytes.len() - i).min(usize::try_from(n).unwrap_or(usize::MAX));
                    i += take;
                    let left = n - take as u64;
                    *self = if left == 0 {
                        Chunked::DataCr
                    } else {
                        Chunked::Data(left)
                    };
                    continue;
                }
                Chunked::Size { value, digits, ext } => match b {
                    b'\r' if digits > 0 => Chunked::SizeLf { value },
                    b'\n' if digits > 0 => end_of_size(value),
                    _ if ext => {
                        if digits as usize > MAX_LINE {
                            return Err(BadChunk);
                        }
                        Chunked::Size {
                            value,
                            digits: digits + 1,
                            ext,
                        }
                    }
                    b';' | b' ' | b'\t' if digits > 0 => Chunked::Size {
                        value,
                        digits,
                        ext: true,
                    },
                    _ => {
                        let d = (b as char).to_digit(16).ok_or(BadChunk)?;
                        // Leading zeros are fine; a value past 64 bits (or an endless line) is not.
                        if value > u64::MAX >> 4 || digits as usize > MAX_LINE {
                            return Err(BadChunk);
                        }
                        Chunked::Size {
                            value: value * 16 + u64::from(d),
                            digits: digits + 1,
                            ext,
                        }
                    }
                },
                Chunked::SizeLf { value } if b == b'\n' => end_of_size(value),
                Chunked::DataCr if b == b'\r' => Chunked::DataLf,
                Chunked::DataCr | Chunked::DataLf if b == b'\n' => Chunked::new(),
                Chunked::Trailer { line } => match b {
                    b'\r' => Chunked::Trailer { line },
                    b'\n' if line == 0 => Chunked::Done,
                    b'\n' => Chunked::Trailer { line: 0 },
                    _ if line >= MAX_LINE => return Err(BadChunk),
                    _ => Chunked::Trailer { line: line + 1 },
                },
                Chunked::SizeLf { .. } | Chunked::DataCr | Chunked::DataLf => {
                    return Err(BadChunk);
                }
            };
            i += 1;
        }
        Ok(i)
    }
}

impl Default for Chunked {
    fn default() -> Self {
        Chunked::new()
    }
}

fn end_of_size(value: u64) -> Chunked {
    if value == 0 {
        Chunked::Trailer { line: 0 }
    } else {
        Chunked::Data(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(s: &str) -> Head {
        parse_head(s.as_bytes(), false).unwrap().unwrap()
    }

    #[test]
    fn content_length_keep_alive() {
        let h = head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
        assert_eq!(h.status, 200);
        assert_eq!(h.framing, Framing::Length(5));
        assert_eq!(h.len, 38);
        assert!(h.keep_alive);
    }

    #[test]
    fn partial_head_asks_for_more() {
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nConte", false), Ok(None));
        assert_eq!(parse_head(b"", false), Ok(None));
    }

    #[test]
    fn garbage_and_oversize_are_refused() {
        assert_eq!(
            parse_head(b"SSH-2.0-OpenSSH\r\n\r\n", false),
            Err(HeadError::Malformed)
        );
        let mut big = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        big.resize(MAX_HEAD + 10, b'a');
        assert_eq!(parse_head(&big, false), Err(HeadError::TooLarge));
        assert_eq!(
            parse_head(
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                false
            ),
            Err(HeadError::BadFraming)
        );
        assert!(matches!(
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", false),
            Err(HeadError::BadLength(_))
        ));
    }

    #[test]
    fn more_than_100_headers_was_not_an_http_reply() {
        let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend(format!("X-{i}: a\r\n").as_bytes());
        }
        many.extend(b"Content-Length: 0\r\n\r\n");
        assert_eq!(parse_head(&many, false), Err(HeadError::TooManyHeaders));
    }

    #[test]
    fn a_bad_content_length_blamed_a_transfer_encoding() {
        for (value, shown) in [
            ("-1", "-1"),
            ("18446744073709551616", "18446744073709551616"),
            (
                "99999999999999999999999999999",
                "999999999999999999999999...",
            ),
        ] {
            let reply = format!("HTTP/1.1 200 OK\r\nContent-Length: {value}\r\n\r\n");
            match parse_head(reply.as_bytes(), false) {
                Err(HeadError::BadLength(s)) => assert_eq!(s.to_string(), shown),
                other => panic!("{value}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_close_is_never_undone() {
        assert!(
            !head("HTTP/1.0 200 OK\r\nConnection: close\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")
                .keep_alive
        );
        assert!(matches!(
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\n", false),
            Err(HeadError::BadLength(_))
        ));
    }

    #[test]
    fn close_and_http10() {
        assert!(
            !head("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").keep_alive
        );
        assert!(!head("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").keep_alive);
        assert!(
            head("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")
                .keep_alive
        );
        let h = head("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!(h.framing, Framing::UntilClose);
        assert!(!h.keep_alive);
    }

    #[test]
    fn bodiless_replies() {
        assert_eq!(
            head("HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n").framing,
            Framing::None
        );
        assert_eq!(
            head("HTTP/1.1 304 Not Modified\r\n\r\n").framing,
            Framing::None
        );
        assert_eq!(head("HTTP/1.1 100 Continue\r\n\r\n").framing, Framing::None);
        let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true)
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::None);
        assert!(h.keep_alive);
    }

    #[test]
    fn chunked_wins_over_length() {
        let h = head(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 3\r\n\r\n",
        );
        assert_eq!(h.framing, Framing::Chunked);
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n");
        assert!(!h.keep_alive);
        // Any Transfer-Encoding overrides a Content-Length; not chunked, it runs to the close.
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\n");
        assert_eq!(h.framing, Framing::UntilClose);
        assert!(!h.keep_alive);
    }

    fn decode_in_pieces(body: &[u8], piece: usize) -> Result<(usize, bool), BadChunk> {
        let mut c = Chunked::new();
        let mut used = 0;
        for part in body.chunks(piece) {
            let n = c.feed(part)?;
            used += n;
            if n < part.len() {
                break;
            }
        }
        Ok((used, c.is_done()))
    }

    #[test]
    fn chunked_ends_exactly_whatever_the_read_sizes() {
        let body = b"5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\nNEXT";
        let end = body.len() - 4;
        for piece in 1..=body.len() {
            assert_eq!(
                decode_in_pieces(body, piece),
                Ok((end, true)),
                "piece {piece}"
            );
        }
        assert_eq!(decode_in_pieces(b"0\r\n\r\n", 1), Ok((5, true)));
        assert_eq!(
            decode_in_pieces(b"00000000000000000003\r\nabc\r\n0\r\n\r\n", 4),
            Ok((32, true))
        );
        // Bare LF line ends, as lenient servers send them.
        assert_eq!(decode_in_pieces(b"3\nabc\n0\n\n", 2), Ok((9, true)));
    }

    #[test]
    fn chunked_incomplete_is_not_done() {
        assert_eq!(decode_in_pieces(b"5\r\nhel", 2), Ok((6, false)));
        assert_eq!(decode_in_pieces(b"0\r\nX: y\r\n", 3), Ok((9, false)));
    }

    #[test]
    fn chunked_garbage_is_refused() {
        assert_eq!(decode_in_pieces(b"zz\r\n", 4), Err(BadChunk));
        assert_eq!(decode_in_pieces(b"\r\n", 4), Err(BadChunk));
        assert_eq!(decode_in_pieces(b"3\r\nabcX", 8), Err(BadChunk));
        assert_eq!(
            decode_in_pieces(b"11111111111111111\r\n", 32),
            Err(BadChunk)
        );
        let mut long = b"0\r\n".to_vec();
        long.resize(MAX_LINE + 100, b'a');
        assert_eq!(decode_in_pieces(&long, 1000), Err(BadChunk));
    }
}
