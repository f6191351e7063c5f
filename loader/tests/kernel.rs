//! Integration tests against the real kernel: BPF programs attached to the
//! block tracepoints, loop devices, cgroups, fio, promtool. Run as root.

use crate::fixtures;

use std::process::Command;
use std::time::Duration;

use fixtures::*;
use iowarden_exporters::{Op, Snapshot};

/// Without throttling, latency is tens of microseconds and fio's clat adds
/// its own wake-up: the block layer's view must never be slower than fio's.
#[test]
fn block_layer_latency_is_within_what_fio_sees() {
    let dev = LoopDev::file(512);
    let a = Cgroup::new("iowarden-test-fast");
    let daemon = Daemon::start(19618, &["--device", &dev.name()]);
    let mut args = fio_args(&dev.path, "randread", "4k", 1, 2000, "0", "256M");
    args[3] = "--ioengine=psync".into();
    args.retain(|a| a != "--userspace_reap=1"); // a libaio option
    let f = fio_json(&mut a.command("fio", &args));
    let job = &f["jobs"][0]["read"];
    let fio_ios = job["total_ios"].as_u64().unwrap();
    // Polled until the reads are in (the daemon polls every 500 ms; the
    // kernel may charge a stray bio to an ancestor cgroup, hence 0.5 %).
    let mut io = Vec::new();
    let (snap, s) = poll_until(Duration::from_secs(30), Duration::from_millis(200), || {
        let snap = daemon.snapshot();
        let found = snap
            .io
            .iter()
            .find(|s| s.cgroup.id == a.id() && s.op == Op::Read)
            .filter(|s| within(s.ios + s.merged, fio_ios, 0.005))
            .cloned();
        if let Some(s) = found {
            return Some((snap, s));
        }
        io = snap.io;
        None
    })
    .unwrap_or_else(|| panic!("{fio_ios} reads not counted: {io:?}"));
    assert!(within(
        s.ios + s.merged,
        job["total_ios"].as_u64().unwrap(),
        0.005
    ));
    let fio_p50 = job["clat_ns"]["percentile"]["50.000000"].as_u64().unwrap() as f64 / 1e9;
    let ours = s
        .latency
        .total
        .quantile(&snap.hist_lower_bounds_seconds, 0.5)
        .unwrap();
    println!(
        "unthrottled p50: iowarden {:.1} us, fio clat {:.1} us",
        ours * 1e6,
        fio_p50 * 1e6
    );
    assert!(
        ours <= fio_p50 * 1.25,
        "block layer p50 {ours} above fio's {fio_p50}"
    );
    // Device time is part of total time, and queue + device add up to total.
    let t = &s.latency;
    assert!(t.device.sum_seconds <= t.total.sum_seconds * 1.0001);
    assert!(
        ((t.queue.sum_seconds + t.device.sum_seconds) - t.total.sum_seconds).abs()
            <= 1e-6 * s.ios as f64
    );
}

#[test]
fn unknown_device_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_iowarden"))
        .args(["snapshot", "--json", "--device", "nosuchdisk9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown block device 'nosuchdisk9'") && err.contains("this host has:"),
        "{err}"
    );
}

#[test]
fn port_in_use_is_a_clear_error() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let out = Command::new(env!("CARGO_BIN_EXE_iowarden"))
        .args([
            "run",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--duration",
            "1s",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("already in use") && err.contains("--listen"),
        "{err}"
    );
}

/// A kernel without an optional tracepoint: the rest loads, the missing
/// probe is reported once on stderr and in the snapshot, I/O is still
/// counted. Without a required one: a clear error. (Every tracepoint exists
/// on this kernel, so the loader is told to treat some as absent; the code
/// path after the BTF lookup is the one a kernel lacking them takes.)
#[test]
fn missing_tracepoints_degrade_or_fail_clearly() {
    let dev = LoopDev::file(64);
    let snapshot = Command::new(env!("CARGO_BIN_EXE_iowarden"))
        .args([
            "snapshot",
            "--json",
            "--wait",
            "4s",
            "--device",
            &dev.name(),
        ])
        .env(
            "IOWARDEN_HIDE_TRACEPOINTS",
            "block_rq_merge,block_rq_insert",
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once its programs are loaded: well inside its 4 s.
    let undelivered = Undelivered::start(snapshot.id());
    dev.read_direct(100);
    let out = snapshot.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    for tp in ["block_rq_merge", "block_rq_insert"] {
        assert!(
            err.contains(&format!("{tp} inactive: kernel has no tracepoint {tp}")),
            "{err}"
        );
    }
    let snap: Snapshot = serde_json::from_slice(&out.stdout).unwrap();
    let active = |name: &str| {
        snap.probes
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.active)
    };
    assert_eq!(active("block_rq_merge"), Some(false));
    assert_eq!(active("block_rq_insert"), Some(false));
    assert_eq!(active("block_rq_complete"), Some(true));
    let ios: u64 = snap
        .io
        .iter()
        .filter(|s| s.device.name == dev.name())
        .map(|s| s.ios)
        .sum();
    assert_only_undelivered_missing("100 reads", ios, 100, undelivered.so_far());

    let out = Command::new(env!("CARGO_BIN_EXE_iowarden"))
        .args(["snapshot", "--json", "--wait", "1s"])
        .env("IOWARDEN_HIDE_TRACEPOINTS", "block_rq_complete")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the kernel has no block_rq_complete tracepoint"),
        "{err}"
    );
}

/// Where a queue does not stamp io_start_time_ns itself, the loader attaches
/// block_rq_issue (once the completion program has seen such a request) and
/// device latency comes from its stamps. Every queue here stamps (wbt), so
/// IOWARDEN_IGNORE_KERNEL_ISSUE_STAMPS makes the programs ignore the
/// kernel's stamps.
#[test]
fn queues_without_issue_stamps_get_the_issue_program() {
    let dev = LoopDev::file(64);
    let (daemon, log) = Daemon::start_logged(
        19619,
        "200ms",
        &["--device", &dev.name(), "--histogram-stages", "all"],
        &[("IOWARDEN_IGNORE_KERNEL_ISSUE_STAMPS", "1")],
    );
    // Until it is attached, requests have no issue stamp.
    dev.read_direct(10);
    wait_until(
        "block_rq_issue never attached",
        Duration::from_secs(30),
        Duration::from_millis(100),
        || log.text().contains("attached block_rq_issue").then_some(()),
    );
    let device_samples = |s: &Snapshot| -> (u64, u64) {
        s.io.iter()
            .filter(|x| x.device.name == dev.name())
            .map(|x| (x.ios, x.latency.device.counts.iter().sum::<u64>()))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    };
    let undelivered = Undelivered::start(daemon.child.id());
    let before = daemon.settled();
    let (ios0, lat0) = device_samples(&before);
    dev.read_direct(500);
    let after = daemon.settled();
    let (ios1, lat1) = device_samples(&after);
    println!(
        "before attach: {ios0} requests, {lat0} with device latency; drops {:?}; after: +{} requests, +{} with device latency",
        before.drops,
        ios1 - ios0,
        lat1 - lat0
    );
    assert!(before.drops.no_issue_stamp > 0, "{:?}", before.drops);
    assert_only_undelivered_missing("500 reads", ios1 - ios0, 500, undelivered.so_far());
    assert_eq!(
        lat1 - lat0,
        ios1 - ios0,
        "every request counted after the attach has a device latency"
    );
    assert!(
        after
            .probes
            .iter()
            .any(|p| p.name == "block_rq_issue" && p.active),
        "{:?}",
        after.probes
    );
}

/// The queue and device stages' buckets are counted only where they are
/// exported: under `run`'s default (`--histogram-stages total`) the
/// snapshot has their sums and no counts, never zeros; with `all`, the
/// device stage counts every request the total stage counts.
#[test]
fn stage_histograms_are_counted_only_when_exported() {
    let dev = LoopDev::file(64);
    let fleet = Daemon::start_ephemeral(&["--device", &dev.name()], &[]).0;
    let all =
        Daemon::start_ephemeral(&["--device", &dev.name(), "--histogram-stages", "all"], &[]).0;
    dev.read_direct(300);
    let reads = |d: &Daemon| -> iowarden_exporters::StageHistograms {
        let s = d.settled();
        let mut h = iowarden_exporters::StageHistograms::default();
        for x in s.io.iter().filter(|x| x.device.name == dev.name()) {
            h.queue.add(&x.latency.queue);
            h.device.add(&x.latency.device);
            h.total.add(&x.latency.total);
        }
        h
    };
    let (f, a) = (reads(&fleet), reads(&all));
    let n = |h: &iowarden_exporters::Histogram| h.counts.iter().sum::<u64>();
    println!(
        "defaults: total {} requests, queue/device counts {}/{} buckets, sums {:.6}/{:.6} s; all: total {}, device {}",
        n(&f.total),
        f.queue.counts.len(),
        f.device.counts.len(),
        f.queue.sum_seconds,
        f.device.sum_seconds,
        n(&a.total),
        n(&a.device)
    );
    assert!(n(&f.total) > 0 && n(&a.total) > 0);
    assert!(f.queue.counts.is_empty() && f.device.counts.is_empty());
    assert!(f.device.sum_seconds > 0.0);
    assert_eq!(n(&a.device), n(&a.total));
    assert_eq!(n(&a.queue), n(&a.total));
}
