//! What a hostile or broken client sends to the metrics port, while a real
//! Prometheus scrapes it every second: a 10 MB request line, 10,000
//! headers, a slow-loris head that never ends, 1,000 connections at once,
//! paths with `..` and NULs, methods other than GET and HEAD. Each bad
//! request gets a 4xx or a closed connection; the daemon never panics, its
//! resident size stays under RSS_BOUND_KB, and every scrape Prometheus made
//! meanwhile succeeded, with no gap of more than five intervals.
//! Needs root (the daemon loads BPF).

use crate::fixtures;
use crate::promserver;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use fixtures::*;
use promserver::{free_port, scrape_config, PromServer};

/// The daemon's resident size may not exceed this (it is ~20 MB idle here;
/// the server holds at most 256 connections with 16 KiB heads each).
const RSS_BOUND_KB: u64 = 128 * 1024;

fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// Sends `request` (stopping quietly if the server closes first) and
/// returns the status code answered, or None for a closed connection.
fn status_of(port: u16, request: &[u8]) -> Option<u16> {
    let mut s = connect(port);
    let _ = s.write_all(request);
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    let status = text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()?;
    assert!(
        !text.contains("iowarden_"),
        "a bad request got metrics: {}",
        &text[..text.len().min(200)]
    );
    Some(status)
}

fn assert_refused(port: u16, what: &str, request: &[u8]) {
    match status_of(port, request) {
        None => println!("{what}: connection closed"),
        Some(s) => {
            assert!((400..500).contains(&s), "{what}: status {s}");
            println!("{what}: {s}");
        }
    }
}

fn huge_request_line(port: u16) {
    let mut r = b"GET /".to_vec();
    r.extend(std::iter::repeat_n(b'a', 10 << 20));
    r.extend(b" HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_refused(port, "10 MB request line", &r);
}

fn many_headers(port: u16) {
    let mut r = b"GET /metrics HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..10_000 {
        r.extend(format!("X-H{i}: v\r\n").bytes());
    }
    r.extend(b"\r\n");
    assert_refused(port, "10,000 headers", &r);
}

fn bad_paths_and_methods(port: u16) {
    for path in [
        "/../metrics",
        "/metrics/../metrics",
        "/%2e%2e/etc/passwd",
        "/metrics%00",
        "/x/../../etc/passwd",
    ] {
        let r = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        assert_refused(port, path, r.as_bytes());
    }
    assert_refused(
        port,
        "raw NUL in path",
        b"GET /met\0rics HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    for m in ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "FOO"] {
        let r = format!(
            "{m} /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        assert_refused(port, m, r.as_bytes());
    }
}

/// A head sent one byte at a time, never finished: the server must close
/// the connection (after its 10 s head deadline) rather than wait forever.
fn slow_loris(port: u16) {
    let mut s = connect(port);
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 512];
    // No sleep between tries: the read's timeout is the pause.
    wait_until(
        "a never-ending head kept its connection for 60 s",
        Duration::from_secs(60),
        Duration::ZERO,
        || {
            // One more byte, then wait up to 500 ms for the server's verdict.
            if s.write_all(b"X").is_err() {
                return Some(());
            }
            match s.read(&mut buf) {
                Ok(0) => Some(()),
                Ok(n) => {
                    let text = String::from_utf8_lossy(&buf[..n]);
                    assert!(text.starts_with("HTTP/1.1 4"), "slow loris got {text}");
                    Some(())
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => None,
                Err(_) => Some(()), // reset
            }
        },
    );
    println!("slow loris: closed");
}

/// 1,000 connections opened at once, each holding an unfinished head.
fn thousand_connections(port: u16, pid: u32) -> u64 {
    let conns: Vec<TcpStream> = (0..1000)
        .filter_map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
            let _ = s.write_all(b"GET /metrics HTTP/1.1\r\n");
            Some(s)
        })
        .collect();
    println!("1,000 connections: {} opened", conns.len());
    std::thread::sleep(Duration::from_secs(3));
    let rss = rss_kb(pid);
    drop(conns);
    rss
}

#[test]
fn hostile_clients_get_4xx_or_closed_while_prometheus_scrapes() {
    let (mut d, log) = Daemon::start_ephemeral(&[], &[]);
    let port = d.port();
    let pid = d.child.id();
    let prom = PromServer::start(
        free_port(),
        &scrape_config(&format!("127.0.0.1:{port}")),
        &[],
    );
    prom.wait_for(r#"up{job="iowarden"}"#, 60, |v| v == 1.0);
    let t0 = Instant::now();
    let mut peak = rss_kb(pid);
    huge_request_line(port);
    many_headers(port);
    bad_paths_and_methods(port);
    peak = peak.max(rss_kb(pid));
    peak = peak.max(thousand_connections(port, pid));
    slow_loris(port);
    peak = peak.max(rss_kb(pid));
    println!("daemon RSS peak {peak} kB (bound {RSS_BOUND_KB} kB)");
    assert!(peak < RSS_BOUND_KB, "RSS {peak} kB");
    let alive = d.child.try_wait().unwrap().is_none();
    assert!(alive && !log.text().contains("panicked"), "{}", log.text());

    // Every scrape over the abuse succeeded, at most five intervals apart.
    let window = format!("{}s", t0.elapsed().as_secs() + 2);
    let r = prom.query(&format!("up{{job=\"iowarden\"}}[{window}]"));
    let values = r[0]["values"].as_array().unwrap();
    assert!(values.len() >= 2, "{values:?}");
    let mut last: Option<f64> = None;
    for v in values {
        assert_eq!(v[1], "1", "a scrape failed: {values:?}");
        let t = v[0].as_f64().unwrap();
        if let Some(l) = last {
            assert!(t - l <= 5.0, "no scrape for {} s: {values:?}", t - l);
        }
        last = Some(t);
    }
    assert!(d.get("/metrics").unwrap().contains("iowarden_polls_total"));
}
