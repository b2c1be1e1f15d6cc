//! The new-connection path's system calls, counted by strace (not ours) while stampede opens a
//! connection per request (`--model connections --num-call 1`) to a real nginx, whose stub_status
//! counts the requests. A connection's own calls are socket, connect, one epoll_ctl to join the
//! reactor and one to leave it, sendto, a wait and a recvfrom for the reply, close, and the
//! arrival's wake (its epoll_wait and timerfd_settime): 10, fewer when wakes coincide. What it no
//! longer makes is held at zero: the SO_ERROR of waiting for the connect (getsockopt), TCP_NODELAY
//! for a request of one segment (setsockopt), the read that heard the server's close again and the
//! read of the timer's expiry. (The debug build the tests run adds an fcntl per socket, a debug
//! check the release build does not make; it is not among the calls counted.) Skipped without
//! strace or nginx, except under CI=true.
use std::collections::BTreeMap;
use std::process::Command;

use tests::nginx::Nginx;
use tests::{bin, text};

/// A connection's own calls, each per connection, from `strace -c`'s table.
fn per_connection(table: &str, connections: u64) -> BTreeMap<String, f64> {
    table
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // "% time seconds usecs/call calls [errors] syscall"
            let calls: u64 = f.get(3)?.parse().ok()?;
            let name = f.last()?.to_string();
            (name != "total").then(|| (name, calls as f64 / connections as f64))
        })
        .collect()
}

#[test]
fn a_new_connection_per_request_makes_at_most_ten_system_calls() {
    if !tests::installed("strace", "strace", "syscalls") {
        return;
    }
    let Some(nginx) = Nginx::start("syscalls") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("strace.txt");
    let out = dir.path().join("out");
    let before = nginx.requests();
    let ran = Command::new("strace")
        .args(["-f", "-c", "-o"])
        .arg(&table)
        .arg(bin("stampede"))
        .args(["run", &nginx.url()])
        .args([
            "--model",
            "connections",
            "--num-call",
            "1",
            "--steps",
            "1000",
        ])
        .args([
            "--step-duration",
            "3s",
            "--threads",
            "1",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    // stub_status counts the request that reads it.
    let served = nginx.requests() - before - 1;
    assert_eq!(
        served, 3000,
        "nginx served the step's 3,000 connections' requests"
    );
    let table = std::fs::read_to_string(&table).unwrap();
    let per = per_connection(&table, served);
    let of = |name: &str| per.get(name).copied().unwrap_or(0.0);
    let said = format!("per connection: {per:?}\n{table}");
    for once in ["socket", "connect", "sendto"] {
        assert!((0.99..1.05).contains(&of(once)), "{once} once: {said}");
    }
    assert!(
        (1.99..2.05).contains(&of("epoll_ctl")),
        "join and leave: {said}"
    );
    // The whole process's, the coordinator's few included: none is a connection's.
    assert!(of("getsockopt") < 0.01, "no SO_ERROR: {said}");
    assert!(of("setsockopt") < 0.01, "no TCP_NODELAY: {said}");
    // The server's close mostly comes with the reply; when it comes apart it costs a wait and a
    // read more.
    assert!(of("recvfrom") < 1.5, "one read of the reply: {said}");
    let own = [
        "socket",
        "connect",
        "epoll_ctl",
        "sendto",
        "epoll_wait",
        "recvfrom",
        "close",
        "timerfd_settime",
        "read",
        "getsockopt",
        "setsockopt",
    ];
    let total: f64 = own.iter().map(|n| of(n)).sum();
    // 10 by the count above; a close apart from the reply, and the coordinator's own waits and
    // closes divided among the connections, may add a little.
    eprintln!("{total:.2} calls a connection: {per:.2?}");
    assert!(total <= 11.0, "{total:.2} calls a connection: {said}");
}
