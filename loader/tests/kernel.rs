//! Integration tests against the real kernel: BPF programs attached to the
//! block tracepoints, loop devices, cgroups, fio, promtool. Run as root.

use crate::fixtures;

use std::process::Command;
use std::time::Duration;

use fixtures::*;
use iowarden_exporters::{Op, Snapshot};
use serde_json::Value;

fn fio_json(out: std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "fio failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("fio JSON")
}

/// Bucket index holding `seconds` in the snapshot's histogram layout.
fn bucket_of(snap: &Snapshot, seconds: f64) -> usize {
    let b = &snap.hist_lower_bounds_seconds;
    b.iter().rposition(|&lo| lo <= seconds + 1e-12).unwrap_or(0)
}

fn within(a: u64, b: u64, frac: f64) -> bool {
    (a as f64 - b as f64).abs() <= frac * b as f64
}

/// The kernel's own count of a device's requests, independent of BPF, in
/// /sys/block/<dev>/stat of a phase: requests completed and bios
/// merged into a request (a request, one of fio's I/Os or several).
#[derive(Clone, Copy, Debug)]
struct Counted {
    requests: u64,
    merges: u64,
}

impl Counted {
    /// fio's I/Os: each one a request of its own or merged into one.
    fn ios(&self) -> u64 {
        self.requests + self.merges
    }
}

/// Reads and writes in /sys/block/<dev>/stat.
fn diskstats(dev: &str) -> (Counted, Counted) {
    let s = std::fs::read_to_string(format!("/sys/block/{dev}/stat")).unwrap();
    let f: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    let counted = |requests: usize| Counted {
        requests: f[requests],
        merges: f[requests + 1],
    };
    (counted(0), counted(4))
}

fn since(after: Counted, before: Counted) -> Counted {
    Counted {
        requests: after.requests - before.requests,
        merges: after.merges - before.merges,
    }
}

/// Completions the kernel counted that never reached BPF: iowarden never
/// counts more than the kernel, and what it lacks is no more than the
/// completions the kernel skipped every BPF program for (see
/// fixtures::Undelivered), counted independently over the same window.
fn assert_only_undelivered_missing(what: &str, ours: u64, kernel: u64, undelivered: u64) {
    assert!(
        ours <= kernel,
        "{what}: iowarden {ours} > kernel's {kernel}"
    );
    assert!(
        kernel - ours <= undelivered,
        "{what}: iowarden {ours} vs the kernel's /sys/block stat {kernel}: {} completions missing, \
         {undelivered} not delivered to BPF by the kernel",
        kernel - ours
    );
}

/// Two cgroups doing direct I/O on one loop device: counts and bytes per
/// cgroup equal the kernel's /sys/block stat (which equals fio's report),
/// but for completions the kernel did not deliver to BPF; p50 and p99 of the total
/// latency never more than one histogram bucket above fio's clat
/// percentiles and at most two below (fio's reaping, see below); I/O from
/// the root cgroup stays out of both; nothing is left behind.
///
/// The loop device's backing blocks are written first: reads of a sparse
/// file's holes finish in a few microseconds without touching the disk, and
/// there fio's clat is dominated by fio's own wake-up after the kernel
/// completed the request (~10 us on this 2-vCPU VM), which no block-layer
/// event can see. The two-sided one-bucket check is made where requests
/// take milliseconds and that wake-up is a fraction of a bucket: the
/// guest's null_blk test, tests/vmtest/guest/t-15-fidelity.sh.
#[test]
fn per_cgroup_fidelity_against_fio() {
    let top = LoopDev::file(1024);
    let a = Cgroup::new("iowarden-test-a");
    let b = Cgroup::new("iowarden-test-b");

    // Reads of a sparse file's holes never reach the disk: give A's region
    // real blocks so its reads cost what reads cost.
    let st = Command::new("dd")
        .args([
            "if=/dev/urandom",
            &format!("of={}", top.path),
            "bs=1M",
            "count=64",
            "oflag=direct",
            "status=none",
        ])
        .status()
        .unwrap();
    assert!(st.success());
    let daemon = Daemon::start(19617, &["--device", &top.name()]);
    let undelivered = Undelivered::start(daemon.child.id());
    let k0 = diskstats(&top.name());
    let fa = a
        .command(
            "fio",
            &fio_args(&top.path, "randread", "4k", 4, 3000, "0", "64M"),
        )
        .output();
    let fa = fio_json(fa.unwrap());
    let k1 = diskstats(&top.name());
    let fb = b.command(
        "fio",
        &fio_args(&top.path, "randwrite", "64k", 8, 1000, "512M", "512M"),
    );
    let fb = std::thread::spawn(move || {
        let mut fb = fb;
        fb.output()
    });
    let fb = fio_json(fb.join().unwrap().unwrap());
    let k2 = diskstats(&top.name());

    // I/O from the root cgroup on the same device.
    let (root, _) = io_root();
    let st = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}/cgroup.procs && exec dd if={} of=/dev/null bs=4k count=200 iflag=direct status=none",
            root.display(),
            top.path
        ))
        .status()
        .unwrap();
    assert!(st.success());
    let k3 = diskstats(&top.name());
    // The kernel's count of each phase: A's reads, B's writes, dd's reads.
    let (kernel_a, kernel_b, kernel_root) =
        (since(k1.0, k0.0), since(k2.1, k1.1), since(k3.0, k2.0));
    println!("kernel (/sys/block stat): A reads {kernel_a:?}, B writes {kernel_b:?}, root reads {kernel_root:?}");

    // Scrape OpenMetrics while the daemon runs; promtool must accept it.
    let metrics = daemon.get("/metrics").expect("/metrics");
    assert_promtool_accepts(&metrics);

    // Every phase has completed: a poll that starts now counts it all.
    let snap = daemon.settled();
    let undelivered = undelivered.so_far();
    let kernel_all = kernel_a.requests + kernel_b.requests + kernel_root.requests;
    let on_top: Vec<_> = snap
        .io
        .iter()
        .filter(|s| s.device.name == top.name())
        .collect();
    assert!(
        on_top.iter().all(|s| s.device.name == top.name()),
        "device filter leaked other devices"
    );

    for s in &on_top {
        println!(
            "series {} {:?}: ios {} bytes {} merged {} requeued {}",
            s.cgroup.path, s.op, s.ios, s.bytes, s.merged, s.requeued
        );
    }
    println!("drops {:?}", snap.drops);
    println!(
        "completions the kernel did not deliver to BPF (all devices): {undelivered}, \
         of which counted as recursion misses: {}",
        daemon.completions_missed()
    );
    // Requests completed: fio's I/Os less the bios merged into a request
    // (fio's random offsets now and then meet, rarely: 1 in 1,000 of B's).
    let ours_all: u64 = on_top.iter().map(|s| s.ios).sum();
    assert_only_undelivered_missing(&top.name(), ours_all, kernel_all, undelivered);
    for (cg, fio, op, key, kernel) in [
        (&a, &fa, Op::Read, "read", kernel_a),
        (&b, &fb, Op::Write, "write", kernel_b),
    ] {
        let job = &fio["jobs"][0][key];
        let fio_ios = job["total_ios"].as_u64().unwrap();
        let fio_bytes = job["io_bytes"].as_u64().unwrap();
        let s = on_top
            .iter()
            .find(|s| s.cgroup.id == cg.id() && s.op == op)
            .unwrap_or_else(|| panic!("no {key} series for {} in {:?}", cg.rel, on_top));
        assert_eq!(s.cgroup.path, cg.rel);
        let ios = s.ios;
        // Checked against two counts iowarden has no part in: fio's, and the
        // kernel's own /sys/block stat for the phase (which must agree with
        // fio's); what iowarden lacks is bounded by what the kernel did not
        // deliver, never by iowarden's own in-flight gauge.
        assert!(
            within(kernel.ios(), fio_ios, 0.005),
            "{}: the kernel counted {kernel:?}, fio {fio_ios} I/Os",
            cg.rel
        );
        assert_only_undelivered_missing(&cg.rel, ios, kernel.requests, undelivered);
        // Merged requests are a part of the kernel's merges (which also
        // count bios merged into a request).
        assert!(
            s.merged <= kernel.merges,
            "{}: {} requests merged, the kernel's merges {kernel:?}",
            cg.rel,
            s.merged
        );
        // Every byte of fio's completed with a request; a request whose
        // completion the kernel did not deliver takes whole I/Os with it.
        let size = fio_bytes / fio_ios;
        if undelivered == 0 {
            assert_eq!(
                s.bytes, fio_bytes,
                "{}: bytes of fio's {fio_ios} I/Os",
                cg.rel
            );
        } else {
            assert!(
                s.bytes <= fio_bytes && (fio_bytes - s.bytes) % size == 0,
                "{}: {} bytes of fio's {fio_bytes} in I/Os of {size}",
                cg.rel,
                s.bytes
            );
        }
        // The cgroup did nothing but this op.
        assert!(on_top
            .iter()
            .filter(|x| x.cgroup.id == cg.id() && x.op != op)
            .all(|x| x.ios == 0));
        for (q, pct) in [(0.5, "50.000000"), (0.99, "99.000000")] {
            let fio_s = job["clat_ns"]["percentile"][pct].as_u64().unwrap() as f64 / 1e9;
            let ours = s.latency.total.quantile_bucket(q).unwrap();
            let theirs = bucket_of(&snap, fio_s);
            println!(
                "{} p{}: iowarden bucket {} [{:.3} ms], fio {:.3} ms (bucket {})",
                cg.rel,
                q * 100.0,
                ours,
                snap.hist_lower_bounds_seconds[ours] * 1e3,
                fio_s * 1e3,
                theirs
            );
            // Never above what fio saw (the block layer sees a part of it).
            assert!(
                ours <= theirs + 1,
                "{} p{}: iowarden's bucket {ours} is above fio's {theirs}",
                cg.rel,
                q * 100.0
            );
            // Not far below either: at least half of fio's median (four
            // buckets, each ~19% wide). fio's clat ends when fio reaps the
            // completion, which no block-layer event sees: on this 2-vCPU VM
            // that added 0.03-0.15 ms, up to two buckets at sub-ms latencies,
            // and in a CI run on 2026-11-28 0.26 ms to B's 64 KiB writes
            // (0.384 against 0.643 ms, three buckets). The p99s are left out: a vCPU descheduled by
            // the hypervisor or fio waiting for the run queue has been seen
            // to add 1.4 ms (A's reads) and 10 ms (B's writes, with another
            // build running) there. The two-sided p99 check is the guest's,
            // on null_blk's 2 ms completions (t-15-fidelity.sh).
            if q < 0.9 {
                assert!(
                    theirs <= ours + 4,
                    "{} p{}: iowarden's bucket {ours} is below fio's {theirs}",
                    cg.rel,
                    q * 100.0
                );
            }
        }
        println!(
            "{}: {} I/Os, {} bytes; fio {} I/Os, {} bytes",
            cg.rel, ios, s.bytes, fio_ios, fio_bytes
        );
    }

    // Root-cgroup I/O is attributed to the root, never to A or B.
    let root_id = iowarden::host::cgroups::CgroupResolver::new(&root)
        .unwrap()
        .id_of("/")
        .unwrap();
    let root_reads: u64 = on_top
        .iter()
        .filter(|s| s.cgroup.id == root_id && s.op == Op::Read)
        .map(|s| s.ios)
        .sum();
    // dd's 200 reads, as the kernel counted them.
    assert_eq!(kernel_root.ios(), 200, "the kernel's count of dd's reads");
    assert_only_undelivered_missing(
        "root cgroup reads",
        root_reads,
        kernel_root.requests,
        undelivered,
    );
    // No unattributed I/O: every request of A and B carried its cgroup.
    let unattributed: u64 = on_top
        .iter()
        .filter(|s| s.cgroup.id == 0)
        .map(|s| s.ios)
        .sum();
    assert_eq!(unattributed, 0, "unattributed I/O on {}", top.name());
    assert_eq!(snap.drops.slot_table_full + snap.drops.device_table_full, 0);

    // Leave nothing behind.
    let pid = daemon.child.id();
    let files = vec![top.backing_file().unwrap().to_path_buf()];
    let (dirs, devs) = (vec![a.dir.clone(), b.dir.clone()], vec![top.path.clone()]);
    drop(daemon);
    drop((a, b));
    drop(top);
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "daemon {pid} still running"
    );
    for d in dirs {
        assert!(!d.exists(), "cgroup {} left behind", d.display());
    }
    let losetup =
        String::from_utf8(Command::new("losetup").arg("-a").output().unwrap().stdout).unwrap();
    for f in files {
        assert!(
            !losetup.contains(&f.display().to_string()),
            "loop device over {} left: {losetup}",
            f.display()
        );
        assert!(!f.exists(), "{} left behind", f.display());
    }
    for d in devs {
        let name = d.trim_start_matches("/dev/");
        let size = std::fs::read_to_string(format!("/sys/block/{name}/size")).unwrap_or_default();
        assert!(matches!(size.trim(), "0" | ""), "{d} still attached");
    }
}

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
    let f = fio_json(a.command("fio", &args).output().unwrap());
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
    let st = Command::new("dd")
        .args([
            &format!("if={}", dev.path),
            "of=/dev/null",
            "bs=4k",
            "count=100",
            "iflag=direct",
            "status=none",
        ])
        .status()
        .unwrap();
    assert!(st.success());
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
    let read = |n: usize| {
        let st = Command::new("dd")
            .args([&format!("if={}", dev.path), "of=/dev/null", "bs=4k"])
            .args([&format!("count={n}"), "iflag=direct", "status=none"])
            .status()
            .unwrap();
        assert!(st.success());
    };
    // Until it is attached, requests have no issue stamp.
    read(10);
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
    read(500);
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
    let st = Command::new("dd")
        .args([&format!("if={}", dev.path), "of=/dev/null", "bs=4k"])
        .args(["count=300", "iflag=direct", "status=none"])
        .status()
        .unwrap();
    assert!(st.success());
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
