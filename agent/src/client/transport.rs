//! The bytes under any protocol: a TCP connection, wrapped in TLS for an https target, whose bytes
//! are added to the worker's counters as they pass, opened within the connect timeout.
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::HandshakeKind;
use shared::metrics::ErrorClass;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use super::failure::{Doing, Failure};
use super::target::Endpoint;
use crate::recorder::Recorder;

/// Connects (TCP, then TLS if the target is https) within the connect timeout, and waits for it. A
/// failure is counted in words under its class; a success, with its connect time.
pub(super) async fn open(target: &Endpoint, rec: &Rc<Recorder>) -> Result<Stream, ErrorClass> {
    let began = Instant::now();
    let connect = async {
        let source = crate::socket::next_source(&target.sources);
        let mut tcp = crate::socket::start(target.addr, source, true)
            .map_err(|e| Failure::io(Doing::Connecting, e))?;
        tcp.established()
            .await
            .map_err(|e| Failure::io(Doing::Connecting, e))?;
        // A TLS handshake's flights and HTTP/2's frames are small writes in a row: none may wait
        // for Nagle.
        let _ = tcp.set_nodelay();
        let counted = Counted {
            inner: tcp,
            rec: rec.clone(),
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
        Ok(Err(f)) => return Err(failed(target.addr, rec, f)),
        Err(_) => return Err(timed_out(target.addr, target.connect_timeout, rec)),
    };
    rec.connected(began.elapsed());
    if let Stream::Tls(s) = &io {
        rec.tls_handshake(s.get_ref().1.handshake_kind() == Some(HandshakeKind::Resumed));
    }
    Ok(io)
}

/// Starts a plain TCP connection and does not wait for it: the caller's first write proves it
/// (`http1::Conn`), and counts its connect time. Only socket() or connect() failing at once fails
/// here, counted as `open`'s failures are.
pub(super) fn start(target: &Endpoint, rec: &Rc<Recorder>) -> Result<Stream, ErrorClass> {
    let source = crate::socket::next_source(&target.sources);
    match crate::socket::start(target.addr, source, false) {
        Ok(tcp) => Ok(Stream::Plain(Counted {
            inner: tcp,
            rec: rec.clone(),
        })),
        Err(e) => Err(failed(target.addr, rec, Failure::io(Doing::Connecting, e))),
    }
}

/// A connect (or handshake) to `addr` that failed, noted in words: its class.
pub(super) fn failed(addr: SocketAddr, rec: &Recorder, f: Failure) -> ErrorClass {
    rec.note(f.class, || f.words(addr));
    f.class
}

/// A connect to `addr` not established `within` the connect timeout, noted in words: its class.
pub(super) fn timed_out(addr: SocketAddr, within: Duration, rec: &Recorder) -> ErrorClass {
    rec.note(ErrorClass::ConnectTimeout, || {
        format!("connection to {addr} not established within {within:?} (--connect-timeout)").into()
    });
    ErrorClass::ConnectTimeout
}

/// A TCP connection that adds the bytes it moves to its worker's counters.
pub(super) struct Counted {
    inner: crate::socket::Tcp,
    rec: Rc<Recorder>,
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
        self.tcp().local_addr()
    }

    fn tcp(&self) -> &crate::socket::Tcp {
        match self {
            Stream::Plain(s) => &s.inner,
            Stream::Tls(s) => &s.get_ref().0.inner,
        }
    }

    /// The socket's TCP_NODELAY, as the kernel has it.
    #[cfg(test)]
    pub(super) fn tcp_nodelay(&self) -> io::Result<bool> {
        self.tcp().nodelay()
    }

    /// TCP_NODELAY, for a write of more than one segment on a connection `start`ed without it.
    pub(super) fn set_nodelay(&self) -> io::Result<()> {
        self.tcp().set_nodelay()
    }

    /// Returns when a plain connection has something to read or its peer has closed (the reactor
    /// says so); a TLS one at once (its reads say).
    pub(super) async fn readable(&self) {
        if let Stream::Plain(s) = self {
            s.inner.readable().await;
        }
    }

    /// The server has closed its side of a plain connection, seen without a system call. Over TLS
    /// always false: the end is read there, close_notify and all.
    pub(super) fn peer_closed(&self) -> bool {
        match self {
            Stream::Plain(s) => s.inner.peer_closed(),
            Stream::Tls(_) => false,
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
