//! Accepting control connections by hand, for both listeners (an agent's `--listen`, a coordinator's
//! join port), so that every peer refused below gRPC is logged with its address and reason: tonic's
//! own TLS server drops a failed handshake silently. The first byte tells TLS from plain text; a
//! plain-text gRPC client on a TLS port is served a refusal in words instead of a TLS alert that it
//! would read as an HTTP/2 frame ("frame with invalid size").
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;

use super::Side;

/// How long a peer has to send its first byte and finish its TLS handshake (tonic's server used 5 s).
const HANDSHAKE: Duration = Duration::from_secs(5);
/// A TLS record of type handshake: the first byte of every ClientHello.
const TLS_HANDSHAKE: u8 = 0x16;
/// Connections handshaken but not yet taken by the server.
const BACKLOG: usize = 16;

/// Logs a peer that `me` refused: the one line every refusal gets, wherever it is decided.
pub fn log_refused(me: Side, peer: &dyn std::fmt::Display, why: &dyn std::fmt::Display) {
    match me {
        Side::Agent => tracing::warn!(peer = %peer, reason = %why, "Refused a coordinator"),
        Side::Coordinator => tracing::warn!(peer = %peer, reason = %why, "Refused an agent"),
    }
}

/// Who is on the other end of an accepted connection, as a request's extension.
#[derive(Debug, Clone)]
pub struct Peer {
    pub addr: SocketAddr,
    /// Why every request on this connection is refused: plain text to a listener that takes TLS.
    refusal: Option<String>,
}

impl Peer {
    /// The peer of a request that came through [`incoming`], checked: a request from a plain-text
    /// connection to a listener that takes TLS is refused, and so is one that did not come through
    /// [`incoming`] at all (fail closed: nothing reaches a session without passing the check).
    pub fn admit<T>(request: &tonic::Request<T>) -> Result<Peer, tonic::Status> {
        let peer = request
            .extensions()
            .get::<Peer>()
            .cloned()
            .ok_or_else(|| tonic::Status::internal("a connection accepted without its peer"))?;
        peer.check()?;
        Ok(peer)
    }

    /// Refuses a request from a connection that should not have been plain text.
    fn check(&self) -> Result<(), tonic::Status> {
        match &self.refusal {
            Some(words) => Err(tonic::Status::unauthenticated(words.clone())),
            None => Ok(()),
        }
    }
}

/// An accepted connection, plain or TLS, as tonic's server takes it.
pub struct Conn {
    io: Io,
    peer: Peer,
}

impl Conn {
    fn plain(tcp: TcpStream, peer: Peer) -> Conn {
        Conn {
            io: Io::Plain(tcp),
            peer,
        }
    }
}

enum Io {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = Peer;

    fn connect_info(&self) -> Peer {
        self.peer.clone()
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The connections of `listener` for `me`'s gRPC server: TLS handshaken when `tls` is given (a
/// failed handshake logged and dropped), plain text otherwise. The accept loop ends when the server
/// drops the stream.
pub fn incoming(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    me: Side,
) -> impl Stream<Item = Result<Conn, io::Error>> {
    let (tx, rx) = mpsc::channel(BACKLOG);
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    tokio::spawn(async move {
        loop {
            let (tcp, addr) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of descriptors, say: the listener stays; try again shortly.
                        tracing::warn!(error = %e, "Cannot accept a connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                _ = tx.closed() => return,
            };
            let (tx, acceptor) = (tx.clone(), acceptor.clone());
            // Each handshake on a task of its own: a slow peer does not hold up the next one.
            tokio::spawn(async move {
                if let Some(conn) = open(tcp, addr, acceptor.as_ref(), me).await {
                    let _ = tx.send(Ok(conn)).await;
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

/// One accepted connection made ready for gRPC, or refused (and logged).
async fn open(
    tcp: TcpStream,
    addr: SocketAddr,
    acceptor: Option<&tokio_rustls::TlsAcceptor>,
    me: Side,
) -> Option<Conn> {
    let _ = tcp.set_nodelay(true);
    let mut first = [0u8; 1];
    let speaks_tls = match tokio::time::timeout(HANDSHAKE, tcp.peek(&mut first)).await {
        // Connected and closed without a word (a port check): nothing to refuse.
        Ok(Ok(0)) | Ok(Err(_)) => return None,
        Ok(Ok(_)) => first[0] == TLS_HANDSHAKE,
        Err(_) => {
            log_refused(me, &addr, &format!("it sent nothing within {HANDSHAKE:?}"));
            return None;
        }
    };
    let (peer, other) = (
        Peer {
            addr,
            refusal: None,
        },
        me.other().name(),
    );
    match (acceptor, speaks_tls) {
        (Some(acceptor), true) => {
            match tokio::time::timeout(HANDSHAKE, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => Some(Conn {
                    io: Io::Tls(Box::new(tls)),
                    peer,
                }),
                Ok(Err(e)) => {
                    log_refused(me, &addr, &handshake_words(&e, me));
                    None
                }
                Err(_) => {
                    let why = format!("its TLS handshake did not finish within {HANDSHAKE:?}");
                    log_refused(me, &addr, &why);
                    None
                }
            }
        }
        (Some(_), false) => {
            log_refused(
                me,
                &addr,
                &format!("it speaks plain text; this {} takes TLS only", me.name()),
            );
            Some(Conn::plain(
                tcp,
                Peer {
                    refusal: Some(format!(
                        "this {} takes mutual TLS only: give the {other} --tls-cert, --tls-key and \
                     --tls-ca (made by `stampede certs init`)",
                        me.name()
                    )),
                    ..peer
                },
            ))
        }
        (None, true) => {
            // Passed on all the same: the HTTP/2 server's plain-text answer is what tells the
            // peer's TLS client, for certain, that nobody speaks TLS here.
            log_refused(
                me,
                &addr,
                &format!("it speaks TLS; this {} listens in plain text", me.name()),
            );
            Some(Conn::plain(tcp, peer))
        }
        (None, false) => Some(Conn::plain(tcp, peer)),
    }
}

/// Why a peer's TLS handshake failed, as the listener says it.
fn handshake_words(e: &io::Error, me: Side) -> String {
    let other = me.other().name();
    let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) else {
        return format!("its TLS handshake failed: {e}");
    };
    use rustls::CertificateError as Cert;
    match tls {
        rustls::Error::NoCertificatesPresented => format!(
            "it presented no certificate (mutual TLS: give the {other} --tls-cert and --tls-key)"
        ),
        rustls::Error::InvalidCertificate(Cert::UnknownIssuer | Cert::BadSignature) => {
            format!(
                "its certificate is not signed by this {}'s --tls-ca",
                me.name()
            )
        }
        rustls::Error::InvalidCertificate(Cert::Expired | Cert::ExpiredContext { .. }) => {
            "its certificate has expired".into()
        }
        rustls::Error::InvalidCertificate(Cert::NotValidYet | Cert::NotValidYetContext { .. }) => {
            "its certificate is not valid yet".into()
        }
        other => format!("its TLS handshake failed: {other}"),
    }
}
