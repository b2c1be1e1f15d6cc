//! The bytes under any protocol: a TCP connection, wrapped in TLS for an https target, whose bytes
//! are added to the worker's counters as they pass, opened within the connect timeout.
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use rustls::HandshakeKind;
use shared::metrics::ErrorClass;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::failure::{Doing, Failure};
use super::target::Endpoint;
use crate::recorder::Recorder;

/// Connects (TCP, then TLS if the target is https) within the connect timeout. A failure is counted
/// in words under its class; a success, with its connect time.
pub(super) async fn open(target: &Endpoint, rec: &Rc<Recorder>) -> Result<Stream, ErrorClass> {
    let began = Instant::now();
    let connect = async {
        let source = crate::socket::next_source(&target.sources);
        let (tcp, held) = crate::socket::connect(target.addr, source)
            .await
            .map_err(|e| Failure::io(Doing::Connecting, e))?;
        // Small requests must leave at once, not wait for Nagle.
        let _ = tcp.set_nodelay(true);
        let counted = Counted {
            inner: tcp,
            rec: rec.clone(),
            _held: held,
        };
        match &target.tls {
            None => Ok(Stream::Plain(counted)),
            Some(tls) => tls
                .connector
                .connect(tls.name.clone(), counted)
                .await
                .map(|s| Stream::Tls(Box::new(s)))
                .map_err(|e| Failure::io(Doing::Handshake, e)),
        }
    };
    let io = match tokio::time::timeout(target.connect_timeout, connect).await {
        Ok(Ok(io)) => io,
        Ok(Err(f)) => {
            rec.note(f.class, || f.words(target.addr));
            return Err(f.class);
        }
        Err(_) => {
            rec.note(ErrorClass::ConnectTimeout, || {
                format!(
                    "connection to {} not established within {:?} (--connect-timeout)",
                    target.addr, target.connect_timeout
                )
                .into()
            });
            return Err(ErrorClass::ConnectTimeout);
        }
    };
    rec.connected(began.elapsed());
    if let Stream::Tls(s) = &io {
        rec.tls_handshake(s.get_ref().1.handshake_kind() == Some(HandshakeKind::Resumed));
    }
    Ok(io)
}

/// A TCP stream that adds the bytes it moves to its worker's counters.
pub(super) struct Counted {
    inner: TcpStream,
    rec: Rc<Recorder>,
    /// Its place in the thread's socket budget; after `inner`, so the descriptor is closed first.
    _held: crate::socket::Held,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        if n > 0 {
            self.rec.bytes(n, 0);
        }
        r
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.rec.bytes(0, n as u64);
        }
        r
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            self.rec.bytes(0, n as u64);
        }
        r
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Plain or TLS, chosen once per target.
pub(super) enum Stream {
    Plain(Counted),
    Tls(Box<tokio_rustls::client::TlsStream<Counted>>),
}

impl Stream {
    /// The protocol ALPN agreed on a TLS connection (`None`: plain TCP, or a server without ALPN).
    pub(super) fn alpn(&self) -> Option<&[u8]> {
        match self {
            Stream::Plain(_) => None,
            Stream::Tls(s) => s.get_ref().1.alpn_protocol(),
        }
    }

    pub(super) fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }

    /// The local end's address, for tests that look the port up in the kernel's tables.
    #[cfg(test)]
    pub(super) fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        match self {
            Stream::Plain(s) => s.inner.local_addr(),
            Stream::Tls(s) => s.get_ref().0.inner.local_addr(),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
