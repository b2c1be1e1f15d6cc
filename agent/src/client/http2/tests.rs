//! Tests of the HTTP/2 connection (`http2.rs`) against servers the tests play: floods cut off,
//! refusals before any load, ALPN over TLS, the preflight.
use shared::plan::{HttpVersion, RequestSpec, UrlOrder, Workload};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use super::*;
use crate::client::testing::{acceptor_offering, read_request};

async fn prepare(url: String, http: HttpVersion, streams: u32) -> Result<Endpoint, String> {
    let w = Workload::try_new(
        vec![RequestSpec::try_new("GET", &url, vec![], vec![]).unwrap()],
        UrlOrder::RoundRobin,
        Duration::from_secs(2),
        Duration::from_secs(2),
        true,
    )
    .unwrap()
    .with_http(http, streams)
    .unwrap();
    let target = Endpoint::prepare(&w).await.map_err(|e| e.to_string())?;
    preflight(target, &w).await.map_err(|e| e.to_string())
}

/// A plain server that answers whatever comes with `reply`, once per connection.
async fn answering(reply: &'static [u8]) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut b = [0u8; 1024];
                let _ = tokio::io::AsyncReadExt::read(&mut s, &mut b).await;
                let _ = s.write_all(reply).await;
            });
        }
    });
    addr
}

/// An h2c (or, with ALPN `protocols`, TLS) server announcing `max_streams`, answering 200.
async fn h2_server(max_streams: u32, tls: Option<&[&[u8]]>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let acc = tls.map(acceptor_offering);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = l.accept().await {
            let acc = acc.clone();
            tokio::spawn(async move {
                let mut b = h2::server::Builder::new();
                b.max_concurrent_streams(max_streams);
                let io: Box<dyn crate::client::testing::Io> = match acc {
                    None => Box::new(tcp),
                    Some(acc) => {
                        let Ok(mut s) = acc.accept(tcp).await else {
                            return;
                        };
                        if s.get_ref().1.alpn_protocol() != Some(b"h2") {
                            // An HTTP/1.1 server behind the same port.
                            read_request(&mut s).await;
                            let _ = s
                                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                                .await;
                            return;
                        }
                        Box::new(s)
                    }
                };
                let Ok(mut conn) = b.handshake::<_, bytes::Bytes>(io).await else {
                    return;
                };
                while let Some(Ok((_, mut respond))) = conn.accept().await {
                    let reply = http::Response::builder().status(200).body(()).unwrap();
                    let _ = respond.send_response(reply, true);
                }
            });
        }
    });
    addr
}

/// An HTTP/2 frame as bytes.
fn raw_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::put_head(&mut out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
    out
}

/// A hand-written h2c server: it says SETTINGS (`settings`, and the whole connection window),
/// acknowledges stampede's set-up PING, waits for the first request's HEADERS, writes `first`
/// to that stream and then `each`, again and again, until a write fails. It reads nothing past
/// that HEADERS. The task ends when stampede has closed the connection.
async fn endless(
    settings: &'static [(u16, u32)],
    first: fn(u32) -> Vec<u8>,
    each: fn(u32) -> Vec<u8>,
) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    use tokio::io::AsyncReadExt;
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let served = tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut hello = Vec::new();
        frame::put_settings(&mut hello, settings);
        frame::put_window_update(&mut hello, 0, (1 << 31) - 1 - 65_535);
        hello.extend(raw_frame(frame::PING, frame::ACK, 0, b"stampede"));
        s.write_all(&hello).await.unwrap();
        // The preface, then whole frames, until the first HEADERS.
        let mut got = Vec::new();
        let mut at = frame::PREFACE.len();
        let id = 'read: loop {
            let mut b = [0u8; 4096];
            let n = s.read(&mut b).await.unwrap();
            assert!(n > 0, "the client closed before its request");
            got.extend_from_slice(&b[..n]);
            while let Some(h) = got.get(at..).and_then(frame::Head::parse) {
                if h.kind == frame::HEADERS {
                    break 'read h.stream;
                }
                at += frame::HEADER_LEN + h.len;
            }
        };
        if s.write_all(&first(id)).await.is_err() {
            return;
        }
        let again = each(id);
        while s.write_all(&again).await.is_ok() {}
    });
    (addr, served)
}

/// One request (a POST of `body`) to `addr` over h2c with a 1 s timeout, on a session of its
/// own: its outcome, the session, and the note of its class. On a `LocalSet`, as a worker's
/// sessions are: the driver lives as long as it does.
async fn send_once(addr: SocketAddr, body: &'static [u8]) -> (Result<(), SendError>, Conn, String) {
    let mut target = crate::client::testing::target(addr, false);
    target.http2 = true;
    target.timeout = Duration::from_secs(1);
    let t = Template::new(
        &http::Method::POST,
        &"/".parse().unwrap(),
        &http::HeaderMap::new(),
        body,
    );
    let rec = Rc::new(Recorder::default());
    let session = Conn::open(&target, &rec).await.unwrap();
    let r = session
        .send(&t, Instant::now(), target.timeout, &rec, &Tries::default())
        .await;
    let note = match r {
        Err(SendError::Failed(class)) => rec
            .swap()
            .messages
            .get(class)
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    };
    (r, session, note)
}

#[tokio::test]
async fn a_reply_whose_header_block_never_ends_is_cut_off_as_a_flood_not_a_timeout() {
    // A HEADERS that says more is to come, then empty CONTINUATIONs for ever.
    let (addr, server) = endless(
        &[],
        |id| raw_frame(frame::HEADERS, 0, id, &[0x88]),
        |id| raw_frame(frame::CONTINUATION, 0, id, &[]),
    )
    .await;
    let began = Instant::now();
    let local = tokio::task::LocalSet::new();
    let (r, session, note) = local.run_until(send_once(addr, b"")).await;
    assert_eq!(r, Err(SendError::Failed(ErrorClass::Other)), "{note}");
    assert!(
        began.elapsed() < Duration::from_millis(900),
        "not the timeout"
    );
    let closed = format!("{:?}", session.conn.borrow().closed);
    assert!(
        matches!(
            session.conn.borrow().closed,
            Some(Closed::Flood(conn::Flood::Continuations))
        ),
        "{closed}"
    );
    assert!(note.contains("flooded HTTP/2"), "{note}");
    assert!(note.ends_with("(GOAWAY ENHANCE_YOUR_CALM)"), "{note}");
    drop(session);
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the connection is closed")
        .unwrap();
}

#[tokio::test]
async fn endless_informational_replies_are_cut_off_as_a_flood_not_a_timeout() {
    // :status 103 (literal, name index 8), for ever.
    let (addr, _server) = endless(
        &[],
        |_| Vec::new(),
        |id| {
            raw_frame(
                frame::HEADERS,
                frame::END_HEADERS,
                id,
                &[0x08, 0x03, b'1', b'0', b'3'],
            )
        },
    )
    .await;
    let began = Instant::now();
    let local = tokio::task::LocalSet::new();
    let (r, session, note) = local.run_until(send_once(addr, b"")).await;
    assert_eq!(r, Err(SendError::Failed(ErrorClass::Other)), "{note}");
    assert!(
        began.elapsed() < Duration::from_millis(900),
        "not the timeout"
    );
    assert!(
        note.contains("flooded an HTTP/2 stream (more than"),
        "{note}"
    );
    assert!(
        note.ends_with("stampede reset it (ENHANCE_YOUR_CALM)"),
        "{note}"
    );
    // The stream's, not the connection's.
    assert!(session.conn.borrow().closed.is_none());
}

#[tokio::test]
async fn a_session_dropped_with_output_a_server_never_reads_still_closes_its_connection() {
    // The server opens every window and reads nothing: a 32 MiB upload fills the socket's
    // buffers and the rest stays queued. Once the request has timed out and the session is
    // dropped, the connection must still end (within CLOSE_GRACE), not wait for a drain.
    static BODY: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| vec![b'b'; 32 << 20]);
    let (addr, server) = endless(
        &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, (1 << 31) - 1)],
        |_| Vec::new(),
        // A frame of a type no one knows, ignored (RFC 9113 4.1): it only shows when the
        // connection is gone.
        |_| raw_frame(0xfa, 0, 0, b"still there?"),
    )
    .await;
    let local = tokio::task::LocalSet::new();
    let dropped = local
        .run_until(async move {
            let (r, session, _) = send_once(addr, &BODY).await;
            assert_eq!(r, Err(SendError::Failed(ErrorClass::ClientTimeout)));
            let dropped = Instant::now();
            drop(session);
            tokio::time::timeout(CLOSE_GRACE + Duration::from_secs(2), server)
                .await
                .expect("the connection outlived its session")
                .unwrap();
            dropped.elapsed()
        })
        .await;
    // Its grace, not at once: what was queued had its chance.
    assert!(dropped >= CLOSE_GRACE / 2, "{dropped:?}");
}

#[tokio::test]
async fn h2c_to_an_http1_server_names_what_came_back_before_any_load() {
    let addr = answering(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n").await;
    let e = prepare(format!("http://{addr}/"), HttpVersion::Http2, 1)
        .await
        .err()
        .unwrap();
    assert_eq!(
        e,
        format!(
            "before any load, {addr} answered the HTTP/2 preface in HTTP/1 (\"HTTP/1.1 400 Bad Request\"): it does not speak h2c on this port; for HTTP/1.1 write the target http://, not h2c://, and without --http 2 (or h2:// over TLS)"
        )
    );
}

#[tokio::test]
async fn a_server_allowing_no_streams_is_refused_before_any_load() {
    let addr = h2_server(0, None).await;
    let e = prepare(format!("http://{addr}/"), HttpVersion::Http2, 4)
        .await
        .err()
        .unwrap();
    assert!(e.contains("SETTINGS allow 0 concurrent streams"), "{e}");
}

#[tokio::test]
async fn over_tls_h2_needs_the_server_s_alpn_and_auto_falls_back() {
    // ALPN offers only http/1.1.
    let h1 = h2_server(100, Some(&[b"http/1.1"])).await;
    let url = format!("https://localhost:{}/", h1.port());
    let e = prepare(url.clone(), HttpVersion::Http2, 4)
        .await
        .err()
        .unwrap();
    assert!(
        e.contains("does not offer HTTP/2 over TLS (its ALPN refused h2): use --http auto"),
        "{e}"
    );
    let auto = prepare(url, HttpVersion::Auto, 4).await.unwrap();
    assert_eq!((auto.http2, auto.streams), (false, 1));

    let h2 = h2_server(100, Some(&[b"h2", b"http/1.1"])).await;
    let url = format!("https://localhost:{}/", h2.port());
    let auto = prepare(url.clone(), HttpVersion::Auto, 4).await.unwrap();
    assert_eq!((auto.http2, auto.streams), (true, 4));
    let forced = prepare(url, HttpVersion::Http2, 4).await.unwrap();
    assert!(forced.http2);
}

#[tokio::test]
async fn an_unreachable_target_is_left_to_the_run_unless_auto_must_ask_it() {
    let port = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let h2 = prepare(format!("http://127.0.0.1:{port}/"), HttpVersion::Http2, 2).await;
    assert!(h2.is_ok_and(|e| e.http2));
    let e = prepare(format!("https://localhost:{port}/"), HttpVersion::Auto, 2)
        .await
        .err()
        .unwrap();
    assert!(
            e.starts_with(
                "before any load, --http auto cannot tell which HTTP the target speaks: connection refused"
            ),
            "{e}"
        );
}
