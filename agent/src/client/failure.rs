//! Why a request was not answered: the error class every failure maps to, and its words with a hint
//! (`--insecure`, `https://`, `ulimit -n`), made only when the recorder asks for them.
use std::borrow::Cow;
use std::io;
use std::net::SocketAddr;

use shared::metrics::ErrorClass;

use crate::response::{HeadError, MAX_HEAD};

/// Why a request was not answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The server had closed the kept-alive connection before taking the request (nothing reached
    /// it): reconnect and send.
    Stale,
    /// The request was written and failed; the connection is unusable.
    Failed(ErrorClass),
    /// The request was never written and is not to be (HTTP/2: it timed out waiting for a stream
    /// slot under the server's limit): the caller counts it as unsent, in this class.
    Unsent(ErrorClass),
    /// The connection this request was the first on failed to connect (refused, unreachable, not
    /// established within the connect timeout), found by its first write, before any byte left:
    /// counted as a connect that failed is, the request unsent in this class (already noted).
    Connect(ErrorClass),
}

pub(super) fn io_class(e: &io::Error) -> ErrorClass {
    match e.raw_os_error() {
        Some(errno) => ErrorClass::from_errno(errno),
        None => match e.kind() {
            io::ErrorKind::ConnectionRefused => ErrorClass::ConnRefused,
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof => ErrorClass::ConnReset,
            io::ErrorKind::TimedOut => ErrorClass::ConnectTimeout,
            _ => ErrorClass::Other,
        },
    }
}

/// The peer closed or reset the connection. UnexpectedEof is how rustls reports a TCP close without a
/// TLS close_notify, which many servers do.
pub(super) fn is_closed(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::UnexpectedEof
    )
}

/// A failure's class and what is known of it, carried as it is (no formatting, no allocation) until
/// the recorder asks for words, which it does once per class per interval.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) class: ErrorClass,
    why: Why,
}

#[derive(Debug)]
enum Why {
    /// An OS or TLS error while doing this.
    Io(Doing, io::Error),
    /// The target closed the connection before the reply was complete.
    Closed(Doing),
    /// The reply head did not parse; the bytes it began with.
    Head(HeadError, Prefix),
    Chunked,
}

/// What the client was doing when it failed.
#[derive(Debug, Clone, Copy)]
pub(super) enum Doing {
    Connecting,
    Handshake,
    Writing,
    ReadingHead,
    ReadingBody,
}

impl Doing {
    fn words(self) -> &'static str {
        match self {
            Doing::Connecting => "connecting",
            Doing::Handshake => "TLS handshake",
            Doing::Writing => "sending the request",
            Doing::ReadingHead => "reading the reply",
            Doing::ReadingBody => "reading the reply body",
        }
    }
}

/// The first bytes of something that was not a reply head, copied into a fixed array.
#[derive(Debug, Clone, Copy)]
struct Prefix {
    bytes: [u8; 24],
    len: usize,
}

impl Prefix {
    fn of(buf: &[u8]) -> Prefix {
        let mut bytes = [0; 24];
        let len = buf.len().min(bytes.len());
        bytes[..len].copy_from_slice(&buf[..len]);
        Prefix { bytes, len }
    }
}

impl Failure {
    pub(super) fn io(doing: Doing, e: io::Error) -> Failure {
        Failure {
            class: io_class(&e),
            why: Why::Io(doing, e),
        }
    }

    pub(super) fn closed(doing: Doing) -> Failure {
        Failure {
            class: ErrorClass::ConnReset,
            why: Why::Closed(doing),
        }
    }

    /// A reply head that did not parse, with the first bytes of what came instead.
    pub(super) fn head(e: HeadError, buf: &[u8]) -> Failure {
        Failure {
            class: ErrorClass::Other,
            why: Why::Head(e, Prefix::of(buf)),
        }
    }

    pub(super) fn chunked() -> Failure {
        Failure {
            class: ErrorClass::Other,
            why: Why::Chunked,
        }
    }

    /// The failure in words, with a hint where one helps.
    pub(super) fn words(&self, addr: SocketAddr) -> Cow<'static, str> {
        match &self.why {
            Why::Io(doing, e) => io_words(*doing, e, addr),
            Why::Closed(Doing::ReadingHead) => {
                "the target closed the connection before replying".into()
            }
            Why::Closed(doing) => format!(
                "the target closed the connection while {}, before a complete reply",
                doing.words()
            )
            .into(),
            Why::Head(HeadError::Malformed, p) => {
                let start = &p.bytes[..p.len];
                // A TLS record (an alert, a handshake) where HTTP was expected.
                if matches!(start.first(), Some(0x15 | 0x16)) {
                    "not an HTTP reply: the target speaks TLS, use https://".into()
                } else {
                    format!("not an HTTP reply (it began \"{}\")", start.escape_ascii()).into()
                }
            }
            Why::Head(HeadError::TooLarge, _) => {
                format!("reply head longer than {} KiB", MAX_HEAD / 1024).into()
            }
            Why::Head(HeadError::BadFraming, _) => {
                "reply framing headers contradict each other (two different Content-Lengths)".into()
            }
            Why::Head(HeadError::TooManyHeaders, _) => format!(
                "reply has more than {} headers",
                crate::response::MAX_HEADERS
            )
            .into(),
            Why::Head(HeadError::BadLength(value), _) => format!(
                "reply has a bad Content-Length '{value}': not a whole number of bytes below 2^64"
            )
            .into(),
            Why::Chunked => "malformed chunked reply body".into(),
        }
    }
}

/// An OS or TLS error in words: the OS's text without its number, or what rustls found, with the
/// flag that changes it where there is one.
fn io_words(doing: Doing, e: &io::Error, addr: SocketAddr) -> Cow<'static, str> {
    if let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        return tls_words(tls);
    }
    match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => {
            format!("connection refused by {addr}: is the target up?").into()
        }
        Some(libc::EMFILE | libc::ENFILE) => {
            "too many open files: the generator is out of file descriptors (raise ulimit -n or add agents)"
                .into()
        }
        Some(libc::EADDRNOTAVAIL) => format!(
            "cannot assign requested address: the generator is out of local ports to {addr}, or lacks a --source-addrs address"
        )
        .into(),
        _ => {
            let text = e.to_string();
            // "Connection reset by peer (os error 104)" reads as "connection reset by peer".
            let text = text.split(" (os error").next().unwrap_or_default();
            let mut chars = text.chars();
            let text: String = match chars.next() {
                Some(c) => c.to_lowercase().chain(chars).collect(),
                None => format!("{:?}", e.kind()),
            };
            match doing {
                Doing::Connecting => format!("connecting to {addr}: {text}").into(),
                _ => format!("{}: {text}", doing.words()).into(),
            }
        }
    }
}

fn tls_words(e: &rustls::Error) -> Cow<'static, str> {
    use rustls::{CertificateError as Cert, Error as Tls};
    match e {
        Tls::InvalidCertificate(Cert::UnknownIssuer) => {
            "TLS: certificate signed by unknown issuer: use --insecure for a self-signed target"
                .into()
        }
        Tls::InvalidCertificate(Cert::NotValidForName | Cert::NotValidForNameContext { .. }) => {
            format!("TLS: {e}: use the host name the certificate names, or --insecure").into()
        }
        Tls::InvalidCertificate(_) => format!("TLS: {e}: use --insecure to accept it").into(),
        Tls::InvalidMessage(_) => format!(
            "TLS: {e}: the target does not speak TLS here (a plain HTTP server? use http://)"
        )
        .into(),
        _ => format!("TLS: {e}").into(),
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;
    use std::sync::Arc;

    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    use super::*;
    use crate::client::http1::Conn;
    use crate::client::testing::{acceptor, read_request, send_one, target};

    #[test]
    fn a_head_with_many_headers_or_a_bad_length_was_misnamed() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let words = |reply: &[u8]| {
            let e = crate::response::parse_head(reply, false).unwrap_err();
            Failure::head(e, reply).words(addr).into_owned()
        };
        let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..=crate::response::MAX_HEADERS {
            many.extend(format!("X-{i}: a\r\n").as_bytes());
        }
        many.extend(b"\r\n");
        assert_eq!(words(&many), "reply has more than 100 headers");
        assert_eq!(
            words(b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n"),
            "reply has a bad Content-Length '-5': not a whole number of bytes below 2^64"
        );
        let w = words(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n");
        assert!(!w.contains("Transfer-Encoding"), "{w}");
    }
    use crate::recorder::Recorder;

    #[tokio::test(flavor = "current_thread")]
    async fn a_failure_is_kept_in_words_not_only_counted() {
        // A self-signed certificate without --insecure.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let acc = acceptor();
        tokio::spawn(async move {
            let (tcp, _) = l.accept().await.unwrap();
            let _ = acc.accept(tcp).await;
        });
        let mut t = target(addr, true);
        t.tls.as_mut().unwrap().connector =
            tokio_rustls::TlsConnector::from(Arc::new(crate::client::tls::config(false)));
        let rec = Rc::new(Recorder::default());
        assert!(matches!(Conn::open(&t, &rec).await, Err(ErrorClass::Other)));
        assert_eq!(
            rec.swap().messages.get(ErrorClass::Other),
            Some(
                "TLS: certificate signed by unknown issuer: use --insecure for a self-signed target"
            )
        );

        // Something that is not HTTP, then a plain request to a TLS server.
        for (reply, words) in [
            (
                &b"SSH-2.0-OpenSSH_9.2 nothing like HTTP\r\n"[..],
                "not an HTTP reply (it began \"SSH-2.0-OpenSSH_9.2 noth\")",
            ),
            (
                &b"\x15\x03\x03\x00\x02\x02\x32"[..],
                "not an HTTP reply: the target speaks TLS, use https://",
            ),
        ] {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            tokio::spawn(async move {
                let (mut s, _) = l.accept().await.unwrap();
                read_request(&mut s).await;
                s.write_all(reply).await.unwrap();
            });
            let t = target(addr, false);
            let rec = Recorder::default();
            let mut c = Conn::open(&t, &Rc::new(Recorder::default())).await.unwrap();
            let r = send_one(&mut c, &t.templates[0], t.timeout, &rec).await;
            assert_eq!(r, Err(SendError::Failed(ErrorClass::Other)));
            assert_eq!(rec.swap().messages.get(ErrorClass::Other), Some(words));
        }

        // Nothing listening.
        let port = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap();
        // A plain connection is only started by `open`; its request's write finds the refusal,
        // before anything left, as the connect's: the same class and words.
        let rec = Rc::new(Recorder::default());
        let t = target(port, false);
        let mut c = Conn::open(&t, &rec).await.unwrap();
        let r = send_one(&mut c, &t.templates[0], t.timeout, &rec).await;
        assert_eq!(r, Err(SendError::Connect(ErrorClass::ConnRefused)));
        let swapped = rec.swap();
        assert_eq!(
            swapped.counters.connections, 0,
            "a refused connect is no connection"
        );
        assert_eq!(
            swapped.messages.get(ErrorClass::ConnRefused),
            Some(format!("connection refused by {port}: is the target up?").as_str())
        );
    }
}
