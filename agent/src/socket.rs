//! A worker's TCP connections: from which local address (round robin over `--source-addrs`, per
//! worker thread), how (bind before connect, without claiming a port at bind time), how many at
//! once (each worker thread's share of the fd limit, so the process keeps its reserve), and the
//! socket each is on the worker's reactor ([`Tcp`]), made to cost as few system calls as a
//! connection can: a new connection per request spends most of its CPU in them.
use std::cell::Cell;
use std::io;
use std::marker::PhantomData;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};

use socket2::{Domain, SockAddr, Socket, Type};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf, Ready};

thread_local! {
    /// This thread's position in the source list. Each worker thread owns its connections, so a
    /// thread-local counter spreads them without a lock or an atomic per connection.
    static NEXT: Cell<usize> = const { Cell::new(0) };
    /// Sockets this thread may hold open at once ([`set_budget`]); none set means no limit but the
    /// kernel's.
    static BUDGET: Cell<u64> = const { Cell::new(u64::MAX) };
    /// Sockets this thread holds open now: one per live [`Held`].
    static OPEN: Cell<u64> = const { Cell::new(0) };
}

/// Gives the calling thread its socket budget: a worker thread's share of the descriptors left after
/// the reserve. Without it the connections could take the whole RLIMIT_NOFILE, and the process
/// around them (a coordinator writing run.json, its monitor reading /proc, the control connection)
/// would find no descriptor left. Per thread, because each worker owns its connections: counting
/// costs no lock and no atomic.
pub fn set_budget(sockets: u64) {
    BUDGET.with(|b| b.set(sockets));
}

/// One socket of this thread's budget, taken before socket() and given back when dropped with the
/// stream that holds it. Not `Send`: it must be given back to the thread whose count it is in.
#[derive(Debug)]
pub struct Held {
    _thread: PhantomData<*const ()>,
}

/// Takes a socket from this thread's budget, or fails as socket() would at the fd limit (EMFILE,
/// which the caller classes as `fd-unavailable`: the generator's failure, not the target's).
pub fn hold() -> io::Result<Held> {
    OPEN.with(|open| {
        let n = open.get();
        if n >= BUDGET.with(Cell::get) {
            return Err(io::Error::from_raw_os_error(libc::EMFILE));
        }
        open.set(n + 1);
        Ok(Held {
            _thread: PhantomData,
        })
    })
}

impl Drop for Held {
    fn drop(&mut self) {
        // `try_with`: a stream dropped while the thread's locals are torn down has nothing to give
        // back to.
        let _ = OPEN.try_with(|open| open.set(open.get().saturating_sub(1)));
    }
}

/// The source address for this thread's next connection, or `None` to let the kernel choose.
pub fn next_source(sources: &[IpAddr]) -> Option<IpAddr> {
    match sources {
        [] => None,
        [only] => Some(*only),
        many => NEXT.with(|next| {
            let i = next.get() % many.len();
            next.set(i + 1);
            Some(many[i])
        }),
    }
}

/// Picks the target address among those a name resolved to: the first, or with source addresses the
/// first of their family (`localhost` may resolve to ::1 before 127.0.0.1). The error is `None` when
/// nothing resolved, else the family that was missing.
pub fn choose(
    resolved: impl Iterator<Item = SocketAddr>,
    sources: &[IpAddr],
) -> Result<SocketAddr, Option<&'static str>> {
    let mut resolved = resolved.peekable();
    if resolved.peek().is_none() {
        return Err(None);
    }
    match sources.first() {
        None => resolved.next().ok_or(None),
        Some(src) => resolved
            .find(|a| a.is_ipv4() == src.is_ipv4())
            .ok_or(Some(if src.is_ipv4() { "IPv4" } else { "IPv6" })),
    }
}

/// Starts a connection to `addr`, from `source` if given, within this thread's socket budget: one
/// socket() made non-blocking by its own flags and one connect() that does not wait, then the socket
/// on the reactor. Nothing is waited for: [`Tcp::established`] waits, or the first write proves the
/// connection (see [`Tcp`]). `writes` registers for writability at once (a caller that will wait for
/// the connect, or for room to write). A source the machine does not have fails with EADDRNOTAVAIL,
/// which the caller classes as `addr-unavailable` (the generator's, not the target's).
pub fn start(addr: SocketAddr, source: Option<IpAddr>, writes: bool) -> io::Result<Tcp> {
    // Before socket(): over budget, no descriptor is taken at all.
    let held = hold()?;
    let socket = match source {
        None => Socket::new(Domain::for_address(addr), Type::STREAM.nonblocking(), None)?,
        // `choose` picked a target address of the sources' family.
        Some(source) => bound(source)?,
    };
    match socket.connect(&SockAddr::from(addr)) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Tcp::register(socket.into(), writes, held)
}

/// Checks that `source` is an address of this machine by binding to it (no port is claimed and no
/// packet is sent). Used once at configure, to warn before a run whose connections would all fail.
pub fn check_source(source: IpAddr) -> io::Result<()> {
    bound(source).map(drop)
}

/// A non-blocking socket bound to `source`, its port left for connect() to choose.
fn bound(source: IpAddr) -> io::Result<Socket> {
    let domain = match source {
        IpAddr::V4(_) => Domain::IPV4,
        IpAddr::V6(_) => Domain::IPV6,
    };
    let socket = Socket::new(domain, Type::STREAM.nonblocking(), None)?;
    defer_port_choice(&socket);
    socket.bind(&SockAddr::from(SocketAddr::new(source, 0)))?;
    Ok(socket)
}

/// A TCP connection on the worker's reactor, registered for reads only: a write goes straight to the
/// socket, so no wake-up is spent learning that a fresh connection can be written (tokio's
/// `TcpStream` waits for that event, then asks SO_ERROR). On loopback the handshake is done before
/// connect() returns, and the request's send is the proof that the connection stands; a send that
/// finds it still connecting (EAGAIN, a remote target) registers for writes too, once, and waits as
/// any stream would; a refused or unreachable connect is that send's error. Its socket leaves the
/// reactor and closes when it is dropped; its place in the budget comes back after.
#[derive(Debug)]
pub struct Tcp {
    /// `None` only after a re-registration failed: the connection is gone.
    fd: Option<AsyncFd<std::net::TcpStream>>,
    /// Registered for writability too.
    writes: bool,
    /// After `fd`, so the descriptor is closed first.
    _held: Held,
}

impl Tcp {
    fn register(stream: std::net::TcpStream, writes: bool, held: Held) -> io::Result<Tcp> {
        let interest = if writes {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        Ok(Tcp {
            fd: Some(on_reactor(stream, interest)?),
            writes,
            _held: held,
        })
    }

    fn fd(&self) -> io::Result<&AsyncFd<std::net::TcpStream>> {
        self.fd
            .as_ref()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))
    }

    /// Waits until the connect is done: an error if it failed. Costs the wake-up and, only when the
    /// socket reports an error or a hang-up, the SO_ERROR that says which.
    pub async fn established(&mut self) -> io::Result<()> {
        self.want_writes()?;
        let fd = self.fd()?;
        let guard = fd.writable().await?;
        let ready = guard.ready();
        if (ready.is_write_closed() || ready.is_error())
            && let Some(e) = fd.get_ref().take_error()?
        {
            return Err(e);
        }
        Ok(())
    }

    /// TCP_NODELAY: a write that is more than one segment must not wait for Nagle.
    pub fn set_nodelay(&self) -> io::Result<()> {
        self.fd()?.get_ref().set_nodelay(true)
    }

    #[cfg(test)]
    pub fn nodelay(&self) -> io::Result<bool> {
        self.fd()?.get_ref().nodelay()
    }

    /// Returns when there is something to read or the peer has closed (or the socket is gone).
    pub async fn readable(&self) {
        if let Ok(fd) = self.fd() {
            let _ = fd.readable().await;
        }
    }

    /// The peer has closed its side (a FIN seen with the last readiness), with no system call: what
    /// reading to the end would have found.
    pub fn peer_closed(&self) -> bool {
        let Ok(fd) = self.fd() else {
            return true;
        };
        let mut cx = Context::from_waker(Waker::noop());
        matches!(fd.poll_read_ready(&mut cx), Poll::Ready(Ok(g)) if g.ready().is_read_closed())
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.fd()?.get_ref().local_addr()
    }

    /// Registers for writability too (leaving the reactor and joining it again), once.
    fn want_writes(&mut self) -> io::Result<()> {
        if self.writes {
            return Ok(());
        }
        let stream = self
            .fd
            .take()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))?
            .into_inner();
        self.fd = Some(on_reactor(stream, Interest::READABLE | Interest::WRITABLE)?);
        self.writes = true;
        Ok(())
    }
}

fn on_reactor(
    stream: std::net::TcpStream,
    interest: Interest,
) -> io::Result<AsyncFd<std::net::TcpStream>> {
    // SAFETY: the stream owns its descriptor and keeps it open until the AsyncFd, which holds it,
    // leaves the reactor and drops it.
    unsafe { AsyncFd::register_with_interest(stream, interest) }.map_err(|e| e.into_parts().1)
}

/// One send(2) (std's write on a socket: MSG_NOSIGNAL, no retry on EAGAIN).
fn send(mut stream: &std::net::TcpStream, buf: &[u8]) -> io::Result<usize> {
    io::Write::write(&mut stream, buf)
}

impl AsyncRead for Tcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let fd = self.fd()?;
        loop {
            let mut guard = ready!(fd.poll_read_ready(cx))?;
            // SAFETY: recv only writes into the unfilled part, and what it wrote is marked filled.
            let unfilled = unsafe { buf.unfilled_mut() };
            let len = unfilled.len();
            let read = guard.try_io(|s| {
                // SAFETY: recv writes at most `len` bytes into `unfilled`, alive for the call.
                let n = unsafe {
                    libc::recv(
                        s.get_ref().as_raw_fd(),
                        unfilled.as_mut_ptr().cast(),
                        len,
                        0,
                    )
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            });
            match read {
                Ok(Ok(n)) => {
                    // SAFETY: recv initialized the first `n` bytes of the unfilled part.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    // A short read emptied the socket: the next read waits for the next event
                    // rather than asking the kernel to hear EAGAIN (an end seen stays seen).
                    if n > 0 && n < len {
                        guard.clear_ready_matching(Ready::READABLE);
                    }
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // EAGAIN: try_io cleared the readiness; wait for the next event.
                Err(_) => continue,
            }
        }
    }
}

impl AsyncWrite for Tcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if !this.writes {
            match send(this.fd()?.get_ref(), buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => this.want_writes()?,
                done => return Poll::Ready(done),
            }
        }
        let fd = this.fd()?;
        loop {
            let mut guard = ready!(fd.poll_write_ready(cx))?;
            if let Ok(done) = guard.try_io(|s| send(s.get_ref(), buf)) {
                return Poll::Ready(done);
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.fd()?.get_ref().shutdown(std::net::Shutdown::Write))
    }
}

/// IP_BIND_ADDRESS_NO_PORT: without it, bind(addr, 0) picks the local port at once, knowing nothing of
/// the destination, so each port serves one connection per source address and TIME_WAIT ports cannot
/// be reused (`tcp_tw_reuse` only applies to connect's choice). With it, connect() picks the port for
/// the whole 4-tuple, exactly as an unbound connect would. Best effort: a kernel older than 4.2 lacks it
/// and binding still works, with the smaller port space.
fn defer_port_choice(socket: &Socket) {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads `on` for the given length; the fd belongs to `socket`, alive here.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection started and waited for, as the TLS and HTTP/2 paths open theirs.
    async fn connect(addr: SocketAddr, source: Option<IpAddr>) -> io::Result<Tcp> {
        let mut tcp = start(addr, source, true)?;
        tcp.established().await?;
        Ok(tcp)
    }

    #[test]
    fn sources_go_round_robin_per_thread() {
        let list: Vec<IpAddr> = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        // A fresh thread starts at the first address whatever other tests did on theirs.
        let picked = std::thread::spawn(move || {
            (0..7)
                .map(|_| next_source(&list).unwrap().to_string())
                .collect::<Vec<_>>()
        })
        .join()
        .unwrap();
        assert_eq!(
            picked,
            [
                "127.0.0.2",
                "127.0.0.3",
                "127.0.0.4",
                "127.0.0.2",
                "127.0.0.3",
                "127.0.0.4",
                "127.0.0.2"
            ]
        );
        assert_eq!(next_source(&[]), None);
    }

    #[test]
    fn a_thread_holds_no_more_sockets_than_its_budget() {
        std::thread::spawn(|| {
            // No budget set: only the kernel's limit.
            let unlimited: Vec<Held> = (0..1000).map(|_| hold().unwrap()).collect();
            drop(unlimited);
            set_budget(2);
            let a = hold().unwrap();
            let b = hold().unwrap();
            let e = hold().unwrap_err();
            // Exactly as socket() at the fd limit: the same class, the same words.
            assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}");
            assert_eq!(
                shared::metrics::ErrorClass::from_errno(e.raw_os_error().unwrap()),
                shared::metrics::ErrorClass::FdUnavailable
            );
            drop(a);
            let c = hold().unwrap();
            assert!(hold().is_err());
            // Another thread's budget and count are its own: this one's full budget takes nothing
            // from it.
            std::thread::spawn(|| {
                set_budget(1);
                let _only = hold().unwrap();
                assert!(hold().is_err());
            })
            .join()
            .unwrap();
            drop((b, c));
            assert!(hold().is_ok());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn over_budget_a_connect_fails_without_a_socket_and_a_closed_one_frees_its_place() {
        std::thread::spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                set_budget(1);
                let first = connect(addr, None).await.unwrap();
                // Over budget the connect fails before socket(): had it connected, the listener
                // would have a second connection waiting (the backlog takes it without accept).
                let e = connect(addr, None).await.unwrap_err();
                assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}");
                let (_, from) = listener.accept().await.unwrap();
                assert_eq!(from, first.local_addr().unwrap());
                let nothing =
                    tokio::time::timeout(std::time::Duration::from_millis(100), listener.accept());
                assert!(
                    nothing.await.is_err(),
                    "a second connection reached the listener"
                );
                drop(first);
                assert!(connect(addr, None).await.is_ok());
            });
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_target_address_matches_the_sources_family() {
        let v6: SocketAddr = "[::1]:80".parse().unwrap();
        let v4: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let src4: IpAddr = "127.0.0.2".parse().unwrap();
        let src6: IpAddr = "::1".parse().unwrap();
        assert_eq!(choose([v6, v4].into_iter(), &[]), Ok(v6));
        assert_eq!(choose([v6, v4].into_iter(), &[src4]), Ok(v4));
        assert_eq!(choose([v4].into_iter(), &[src6]), Err(Some("IPv6")));
        assert_eq!(choose([].into_iter(), &[src6]), Err(None));
    }

    #[tokio::test]
    async fn connections_leave_from_the_source_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let source: IpAddr = "127.0.0.3".parse().unwrap();
        let (client, accepted) = tokio::join!(connect(addr, Some(source)), listener.accept());
        assert_eq!(client.unwrap().local_addr().unwrap().ip(), source);
        assert_eq!(accepted.unwrap().1.ip(), source);
    }

    #[tokio::test]
    async fn a_source_this_machine_lacks_is_addr_unavailable() {
        // TEST-NET-3 (RFC 5737): assigned to no machine. The bind fails before any packet is sent.
        let source: IpAddr = "203.0.113.77".parse().unwrap();
        let e = connect("127.0.0.1:9".parse().unwrap(), Some(source))
            .await
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EADDRNOTAVAIL), "{e}");
        assert_eq!(
            shared::metrics::ErrorClass::from_errno(e.raw_os_error().unwrap()),
            shared::metrics::ErrorClass::AddrUnavailable
        );
        assert!(check_source(source).is_err());
        assert!(check_source("127.0.0.2".parse().unwrap()).is_ok());
    }
}
