//! The kernel's own accounting beside iowarden's: over a plain fio load on
//! a loop device, the completions and sectors /proc/diskstats adds up for
//! the device (as the daemon exports them) equal iowarden's requests and
//! bytes, but for the completions the kernel did not deliver to BPF
//! (fixtures/undelivered.rs), and no more.
//! Needs root (BPF, loop devices, cgroups).

use crate::fixtures;

use fixtures::*;
use iowarden_exporters::{Op, Snapshot};
use promserver::free_port;

use crate::promserver;

const BLOCK: u64 = 4096;

/// (kernel's completed requests, kernel's bytes, iowarden's requests,
/// iowarden's bytes) of `device` in `snap`, reads, writes and discards.
fn counts(snap: &Snapshot, device: &str) -> (u64, u64, u64, u64) {
    let k = snap
        .kernel_diskstats
        .iter()
        .find(|k| k.device.name == device)
        .unwrap_or_else(|| {
            panic!(
                "no kernel diskstats of {device}: {:?}",
                snap.kernel_diskstats
            )
        });
    let (mut ios, mut bytes) = (0, 0);
    for s in snap
        .io
        .iter()
        .filter(|s| s.device.name == device && s.op != Op::Flush)
    {
        ios += s.ios;
        bytes += s.bytes;
    }
    (k.completed_requests, k.sectors * 512, ios, bytes)
}

#[test]
fn kernel_and_iowarden_counts_agree_under_fio() {
    let dev = LoopDev::file(512);
    let cg = Cgroup::new("iowarden-diskstats");
    let daemon = Daemon::start(free_port(), &["--device", &dev.name()]);
    // The device has a series (so its diskstats line is read) once it saw I/O.
    let warm = cg
        .command(
            "fio",
            &fio_args(&dev.path, "randread", "4k", 1, 10, "0", "1M"),
        )
        .output()
        .expect("fio");
    assert!(warm.status.success());
    let before = daemon.settled();
    let undelivered = Undelivered::start(daemon.child.id());

    let out = cg
        .command(
            "fio",
            &fio_args(&dev.path, "randrw", "4k", 4, 6000, "0", "256M"),
        )
        .output()
        .expect("fio");
    assert!(out.status.success(), "fio failed");
    let after = daemon.settled();
    let missed = undelivered.so_far();

    let (k0, kb0, i0, ib0) = counts(&before, &dev.name());
    let (k1, kb1, i1, ib1) = counts(&after, &dev.name());
    let (kernel, iowarden) = (k1 - k0, i1 - i0);
    let (kernel_bytes, iowarden_bytes) = (kb1 - kb0, ib1 - ib0);
    println!(
        "kernel {kernel} requests {kernel_bytes} B, iowarden {iowarden} requests {iowarden_bytes} B, \
         {missed} completions not delivered to BPF"
    );
    assert!(
        kernel >= 6000,
        "the kernel saw {kernel} of fio's 6000 requests"
    );
    assert!(
        kernel >= iowarden && kernel - iowarden <= missed,
        "request gap {} beyond the {missed} undelivered completions",
        kernel as i64 - iowarden as i64
    );
    assert!(
        kernel_bytes >= iowarden_bytes && kernel_bytes - iowarden_bytes <= missed * BLOCK,
        "byte gap {} beyond the {missed} undelivered 4 KiB completions",
        kernel_bytes as i64 - iowarden_bytes as i64
    );

    // The kernel's busy time (io_ticks): some, and no more than the time
    // between the two readings, which time in queue (the next field, summed
    // over fio's 4 requests in flight) would exceed.
    let busy_ms = |s: &Snapshot| {
        s.kernel_diskstats
            .iter()
            .find(|k| k.device.name == dev.name())
            .map_or(0, |k| k.busy_ms)
    };
    let busy = busy_ms(&after) - busy_ms(&before);
    let between_ms = (after.taken_at_unix_seconds - before.taken_at_unix_seconds) * 1e3;
    println!("busy {busy} ms of the {between_ms:.0} ms between the readings");
    assert!(
        busy > 0 && busy as f64 <= between_ms + 10.0,
        "busy {busy} ms in {between_ms:.0} ms"
    );

    // The same counts in the exposition.
    let metrics = daemon.get("/metrics").expect("/metrics");
    let line = format!(
        "iowarden_kernel_completed_requests_total{{device=\"{}\",devt=\"{}\"}} ",
        dev.name(),
        dev.majmin()
    );
    assert!(
        sample(&metrics, &line).is_some_and(|v| v >= k1 as f64),
        "{line} not in /metrics"
    );
    let line = format!(
        "iowarden_kernel_busy_seconds_total{{device=\"{}\",devt=\"{}\"}} ",
        dev.name(),
        dev.majmin()
    );
    assert!(
        sample(&metrics, &line).is_some_and(|v| v >= busy_ms(&after) as f64 / 1e3),
        "{line} not in /metrics"
    );
    assert_promtool_accepts(&metrics);
}
