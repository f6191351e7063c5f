//! The culprit account has no ceiling on who is in flight: 32, 64 and 256
//! cgroups each read 4 KiB at QD1 from one loop device at once, under the
//! shipped defaults. No record may be lost from the log
//! (`iowarden_dropped_total{reason="culprit_lost"}` stays 0), a request
//! goes late (`culprit_late`) only where it lived past the horizon's least
//! lag (100 ms: a loop worker that this 2-CPU host, busy with 512 tasks
//! and the suite beside, did not run for that long), and every
//! cgroup's account (its service, its waits behind each cgroup named and
//! behind "other" cgroups) must tile its device time within 10 %: the
//! replay names the 16 busiest series per device and tells the rest by
//! op, so past 16 the waits behind the others must be there, as "other".

use crate::fixtures;

use std::process::Child;

use fixtures::*;
use iowarden::culprits::horizon::MIN_LAG_NS;
use iowarden_exporters::{Snapshot, Stage, OTHER_CGROUP};

/// A reader in each cgroup, of its own MiB of `dev` over and over for
/// `secs` seconds (dd: one direct 4 KiB read in flight at a time).
fn readers(dev: &LoopDev, cgroups: &[Cgroup], secs: u32) -> Vec<Child> {
    cgroups
        .iter()
        .enumerate()
        .map(|(i, cg)| {
            let script = format!(
                "end=$(($(date +%s) + {secs})); while [ $(date +%s) -lt $end ]; do \
                 dd if={} of=/dev/null bs=4k iflag=direct skip={} count=256 2>/dev/null; done",
                dev.path,
                (i % 256) * 256
            );
            cg.command("sh", &["-c".into(), script])
                .spawn()
                .expect("a reader")
        })
        .collect()
}

/// Each victim's device time and its account's sum, in one window.
fn tiling(window: &Snapshot, cgroups: &[Cgroup]) -> Vec<(String, f64, f64)> {
    cgroups
        .iter()
        .map(|cg| {
            let device: f64 = window
                .io
                .iter()
                .filter(|s| s.cgroup.path == cg.rel)
                .map(|s| s.latency.device.sum_seconds)
                .sum();
            let account: f64 = window
                .culprits
                .iter()
                .filter(|c| c.victim.path == cg.rel && c.stage == Stage::Device)
                .map(|c| c.seconds)
                .sum();
            (cg.rel.clone(), device, account)
        })
        .collect()
}

/// Requests that outlived the horizon, and those lost from the log.
fn untold(s: &Snapshot) -> (u64, u64) {
    (s.drops.culprit_late, s.drops.culprit_lost)
}

/// The requests in `window` whose life (submission to completion, which
/// holds allocation or issue to completion) may have passed the horizon's
/// least lag: those in every histogram bucket that reaches past it.
fn lived_past_least_lag(window: &Snapshot) -> u64 {
    let lag = MIN_LAG_NS as f64 / 1e9;
    let bounds = &window.hist_lower_bounds_seconds;
    let reaches = |i: usize| bounds.get(i + 1).is_none_or(|&hi| hi > lag);
    window
        .io
        .iter()
        .flat_map(|s| s.latency.total.counts.iter().enumerate())
        .filter(|&(i, _)| reaches(i))
        .map(|(_, n)| n)
        .sum()
}

#[test]
fn no_ceiling_on_the_cgroups_in_flight() {
    let dev = LoopDev::file(256);
    dev.fill(256);
    let daemon = Daemon::start(19654, &["--device", &dev.name()]);
    for n in [32, 64, 256] {
        let cgroups: Vec<Cgroup> = (0..n)
            .map(|i| Cgroup::new(&format!("iowarden-test-many-{i}")))
            .collect();
        let before = daemon.settled_account();
        for mut r in readers(&dev, &cgroups, 4) {
            let st = r.wait().unwrap();
            assert!(st.success(), "a reader failed: {st}");
        }
        let after = daemon.settled_account();
        let window = after.delta_since(&before);
        let requests: u64 = window.io.iter().map(|s| s.ios).sum();
        let ((late_a, lost_a), (late_b, lost_b)) = (untold(&after), untold(&before));
        let (late, lost, long) = (
            late_a - late_b,
            lost_a - lost_b,
            lived_past_least_lag(&window),
        );
        assert_eq!(
            lost, 0,
            "{n} cgroups: records lost from the log, of {requests}"
        );
        assert!(
            late <= long,
            "{n} cgroups: {late} requests outlived the horizon, of {requests}, where {long} \
             lived past its least lag"
        );
        let rows = tiling(&window, &cgroups);
        let idle: Vec<&String> = rows
            .iter()
            .filter(|(_, d, _)| *d == 0.0)
            .map(|(c, _, _)| c)
            .collect();
        assert!(idle.is_empty(), "{n} cgroups: no I/O seen from {idle:?}");
        for (cg, device, account) in &rows {
            assert!(
                (account - device).abs() <= 0.1 * device,
                "{n} cgroups: {cg}'s account {account:.4} s against its device time {device:.4} s"
            );
        }
        let others = window
            .culprits
            .iter()
            .filter(|c| c.culprit.as_ref().is_some_and(|c| c.path == OTHER_CGROUP))
            .count();
        eprintln!(
            "{n} cgroups: device time {:.3} s in all, accounts within {:.2} %, {others} records \
             behind other cgroups, {late} requests late, {long} in latency buckets reaching past 100 ms",
            rows.iter().map(|r| r.1).sum::<f64>(),
            rows.iter()
                .map(|(_, d, a)| (a - d).abs() / d * 100.0)
                .fold(0.0, f64::max)
        );
        assert!(
            n <= 16 || others > 0,
            "{n} cgroups, beyond the 16 named: no wait told as behind other cgroups"
        );
    }
}
