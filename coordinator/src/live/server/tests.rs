//! Tests of the live page's server (`server.rs`): routes, the token, seats, scrape allowances, log
//! hush.
use super::*;

fn query_escape(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[test]
fn only_loopback_names_are_loopback_hosts() {
    for h in [
        "127.0.0.1:5665",
        "127.1.2.3",
        "localhost:80",
        "LOCALHOST",
        "[::1]:5665",
        "[::1]",
    ] {
        assert!(is_loopback_host(h), "{h}");
    }
    for h in [
        "evil.example:5665",
        "10.0.0.1:5665",
        "",
        "[::2]:1",
        "localhost.evil:1",
        "0.0.0.0:1",
    ] {
        assert!(!is_loopback_host(h), "{h}");
    }
}

#[test]
fn a_token_survives_the_page_s_stream_address() {
    for t in ["plain", "a b+c/d=e&f%g", "ünï"] {
        assert_eq!(query_unescape(&query_escape(t)), t);
    }
    assert_eq!(query_unescape("%4"), "%4");
    assert_eq!(query_unescape("%zz"), "%zz");
}

fn get(target: &str, headers: &[(&str, &str)], token: Option<&str>) -> Route {
    let mut h = HeaderMap::new();
    for (k, v) in headers {
        h.append(
            header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    route(&Method::GET, &Uri::try_from(target).unwrap(), &h, token)
}

#[test]
fn targets_without_a_path_are_not_found_and_only_the_token_admits() {
    let host = [("host", "127.0.0.1:5665")];
    // The authority form and the asterisk form have no path ("" and "*"): they once panicked
    // on the report's name.
    assert_eq!(get("127.0.0.1:5665", &host, None), Route::NotFound);
    assert_eq!(get("*", &host, None), Route::NotFound);
    assert_eq!(
        get("/report.html", &host, None),
        Route::Named("report.html".into())
    );
    assert_eq!(get("/a/b", &host, None), Route::NotFound);
    assert_eq!(
        get("http://127.0.0.1:5665/metrics", &host, None),
        Route::Metrics
    );
    assert_eq!(
        get("http://evil.example/metrics", &host, None),
        Route::OtherHost
    );
    assert_eq!(
        get("/", &[("host", "evil.example")], None),
        Route::OtherHost
    );
    let t = Some("t0k");
    assert_eq!(get("127.0.0.1:5665", &host, t), Route::NoToken);
    assert_eq!(get("/?token=nope", &host, t), Route::NoToken);
    assert_eq!(get("/?token=t0k", &host, t), Route::Page);
    assert_eq!(get("/?token=t%30k", &host, t), Route::Page);
    assert_eq!(
        get("/events?after=7", &[("authorization", "Bearer t0k")], t),
        Route::Events { after: 7 }
    );
    assert_eq!(
        get(
            "/events",
            &[("authorization", "bearer t0k"), ("last-event-id", " 9")],
            t
        ),
        Route::Events { after: 9 }
    );
    let mut h = HeaderMap::new();
    h.insert(header::HOST, HeaderValue::from_static("127.0.0.1"));
    let post = route(&Method::POST, &Uri::from_static("/"), &h, None);
    assert_eq!(post, Route::NotAllowed);
    assert!(!post.admitted() && get("/x", &host, None).admitted());
}

#[test]
fn the_fuzz_target_s_own_seeds_pass() {
    for seed in [
        &b"\x01GET\n127.0.0.1:5665\nauthorization: Bearer 0123456789abcdef0123456789abcdef"[..],
        b"\x00GET\n127.0.0.1:5665\nhost: 127.0.0.1",
        b"\x00HEAD\n*\nhost: [::1]:1",
        b"\x01GET\n/?token=%30123456789abcdef0123456789abcdef\n",
        b"\x00GET\nhttp://localhost/events?after=99999999999999999999999\nhost: localhost",
        b"\x01GET\n/metrics\nauthorization: Bearer",
        b"",
        b"\x00",
        b"\x00\xff\n\xff",
    ] {
        fuzz_route(seed);
    }
}

proptest::proptest! {
    #[test]
    fn any_request_is_routed_without_a_panic(
        flags in 0u8..2,
        method in "GET|HEAD|POST|[A-Z]{1,6}",
        target in "(/|\\*|127\\.0\\.0\\.1:[0-9]{1,5}|http://[a-z.]{1,9}(:[0-9]{1,5})?/)[ -~]{0,40}",
        headers in proptest::collection::vec(("[a-z-]{1,12}", "[ -~]{0,40}"), 0..4),
    ) {
        let mut data = vec![flags];
        data.extend_from_slice(method.as_bytes());
        data.push(b'\n');
        data.extend_from_slice(target.as_bytes());
        for (k, v) in headers {
            data.push(b'\n');
            data.extend_from_slice(format!("{k}: {v}").as_bytes());
        }
        fuzz_route(&data);
    }
}

fn ip(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

fn let_in(door: &Door, ip: IpAddr) -> Ticket {
    match door.arrive(ip) {
        Arrival::Let(t, _) => t,
        Arrival::Refused => panic!("{ip} refused"),
    }
}

#[test]
fn idle_connections_from_one_address_cannot_push_out_another_s() {
    let door = Arc::new(Door::default());
    let crowd: Vec<Ticket> = (0..MAX_UNPROVEN_PER_IP)
        .map(|_| let_in(&door, ip(2)))
        .collect();
    // One more from the crowd's address is closed at once; the door holds what it held.
    assert!(matches!(door.arrive(ip(2)), Arrival::Refused));
    assert_eq!(door.counts(), (MAX_UNPROVEN_PER_IP, 0));
    // Fill the rest from other addresses, then one more: the oldest of an address holding the
    // most goes (the first crowd's), never the single connection of 127.0.0.99.
    let mine = let_in(&door, ip(99));
    let mut others = Vec::new();
    for k in 0..(MAX_UNPROVEN - MAX_UNPROVEN_PER_IP - 1) {
        others.push(let_in(&door, ip(3 + (k / MAX_UNPROVEN_PER_IP) as u8)));
    }
    assert_eq!(door.counts(), (MAX_UNPROVEN, 0));
    let Arrival::Let(_newest, Some(closed)) = door.arrive(ip(200)) else {
        panic!("room made");
    };
    assert_eq!(closed, ip(2));
    assert!(crowd[0].closed.is_cancelled());
    assert!(!mine.closed.is_cancelled());
    // A connection closed by the door takes no seat; one still waiting does.
    assert_eq!(door.seat_for(&crowd[0]), Err(NoSeat::Closed));
    assert_eq!(door.seat_for(&mine), Ok(()));
    assert!(mine.seated());
    assert_eq!(door.counts(), (MAX_UNPROVEN - 1, 1));
    door.leave(&mine);
    assert_eq!(door.counts(), (MAX_UNPROVEN - 1, 0));
}

#[test]
fn seats_are_bounded_in_all_and_per_address() {
    let door = Arc::new(Door::default());
    let mut seated = Vec::new();
    for k in 0..MAX_SEATS_PER_IP {
        let t = let_in(&door, ip(1));
        assert_eq!(door.seat_for(&t), Ok(()), "seat {k}");
        seated.push(t);
    }
    let t = let_in(&door, ip(1));
    assert_eq!(door.seat_for(&t), Err(NoSeat::Full));
    door.leave(&t);
    for k in 0..(MAX_VIEWERS - MAX_SEATS_PER_IP) {
        let t = let_in(&door, ip(2 + (k / 8) as u8));
        assert_eq!(door.seat_for(&t), Ok(()));
        seated.push(t);
    }
    let t = let_in(&door, ip(100));
    assert_eq!(door.seat_for(&t), Err(NoSeat::Full));
    door.leave(&seated[0]);
    assert_eq!(door.seat_for(&t), Ok(()), "a seat given back is taken");
}

#[test]
fn scrapes_beyond_an_address_s_allowance_are_refused() {
    let scrapes = Scrapes::default();
    let now = Instant::now();
    let allowed = (0..100).filter(|_| scrapes.allow(ip(1), now)).count();
    assert_eq!(allowed, SCRAPE_BURST as usize);
    assert!(scrapes.allow(ip(2), now), "another address has its own");
    assert!(scrapes.exhausted(ip(1), now) && !scrapes.exhausted(ip(2), now));
    assert!(!scrapes.exhausted(ip(1), now + Duration::from_millis(250)));
    let later = now + Duration::from_secs(1);
    let allowed = (0..100).filter(|_| scrapes.allow(ip(1), later)).count();
    assert_eq!(allowed, SCRAPES_PER_S as usize);
    // A sweep of addresses forgets the whole allowances first, and never grows past its bound.
    for k in 0..(2 * SCRAPERS_KEPT as u32) {
        scrapes.allow(IpAddr::from(k.to_be_bytes()), later);
    }
    assert!(scrapes.0.lock().unwrap().len() <= SCRAPERS_KEPT);
}

#[test]
fn a_crowd_of_refusals_is_one_line_a_second_with_the_count_of_the_rest() {
    let hush = Hush::default();
    let now = Instant::now();
    // 64 slow readers dropped at once: one line, then the next second's says the other 63.
    let said: Vec<_> = (0..64)
        .filter_map(|_| hush.0.due(Refusal::SlowReader, now))
        .collect();
    assert_eq!(said, [0]);
    assert_eq!(
        hush.0.due(Refusal::NoToken, now),
        Some(0),
        "each reason its own"
    );
    assert_eq!(
        hush.0
            .due(Refusal::SlowReader, now + shared::hush::LOG_EVERY),
        Some(63)
    );
    assert_eq!(
        hush.0
            .due(Refusal::SlowReader, now + shared::hush::LOG_EVERY),
        None
    );
}
