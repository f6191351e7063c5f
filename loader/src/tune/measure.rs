//! Turns one decision period's snapshot delta into what the controller
//! judges: each protected cgroup's quantile per SLO (submission →
//! completion where the throttle stage is measured, else allocation →
//! completion; from iowarden's own histograms) with its mean hold, the
//! device's aggregate throughput and cost rate, and whether it saturated.

use iowarden_exporters::{Histogram, Snapshot, Stage};

use super::controller::{Measurement, SloSample};
use super::slo::Slo;
use crate::costmodel::online::windows::Window;

/// A protected cgroup: its path and id on the io controller's hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protected {
    pub path: String,
    pub id: u64,
}

pub fn measure(
    delta: &Snapshot,
    device: (u32, u32),
    protected: &[Protected],
    slos: &[Slo],
) -> Measurement {
    let on_device = |s: &&iowarden_exporters::IoSeries| (s.device.major, s.device.minor) == device;
    // Reads and writes carry the bio's submission stamp: total includes
    // the hold, and the throttle stage's sum is it.
    let held_measured = delta
        .probes
        .iter()
        .any(|p| p.name == "throttle_stage" && p.active);
    let mut m = Measurement::default();
    for p in protected {
        let need = own_need(delta, device, p.id);
        for slo in slos {
            let (mut h, mut held) = (Histogram::default(), Histogram::default());
            for s in delta
                .io
                .iter()
                .filter(on_device)
                .filter(|s| s.cgroup.id == p.id && slo.class.covers(s.op))
            {
                h.add(s.latency.get(Stage::Total));
                held.add(s.latency.get(Stage::Throttle));
            }
            m.slos.push(SloSample {
                name: format!("{} {}", p.path, slo.spec),
                target_seconds: slo.target.as_secs_f64(),
                observed_seconds: h.quantile(&delta.hist_lower_bounds_seconds, slo.quantile),
                samples: h.count(),
                throttle_seconds: match (held_measured, h.count()) {
                    (true, n) if n > 0 => held.sum_seconds / n as f64,
                    _ => 0.0,
                },
                held_in_observed: held_measured,
                throttle_tail_seconds: match held_measured {
                    true => held.quantile(&delta.hist_lower_bounds_seconds, slo.quantile),
                    false => None,
                },
                own_need: need,
            });
        }
    }
    let (bytes, ios, cost) = delta
        .io
        .iter()
        .filter(on_device)
        .fold((0u64, 0u64, 0.0), |(b, n, c), s| {
            (b + s.bytes, n + s.ios, c + s.cost_seconds)
        });
    if delta.window_seconds > 0.0 {
        m.throughput_bytes_per_second = bytes as f64 / delta.window_seconds;
        m.iops = ios as f64 / delta.window_seconds;
        m.cost_rate = cost / delta.window_seconds;
    }
    m
}

/// The device saturated over `delta` as the cost-model fitter counts a
/// window (requests queued inside it, a mean depth of at least `depth`, and
/// busy nearly throughout): its completed rate is its pace, not the load's.
pub fn device_saturated(delta: &Snapshot, device: (u32, u32), depth: f64) -> bool {
    let is_dev = |d: &iowarden_exporters::DeviceRef| (d.major, d.minor) == device;
    let classes = delta
        .cost_models
        .iter()
        .find(|m| is_dev(&m.device))
        .map(|m| m.classes.as_slice())
        .unwrap_or_default();
    let busy = delta
        .kernel_diskstats
        .iter()
        .find(|k| is_dev(&k.device))
        .map(|k| k.busy_ms as f64 / 1e3);
    Window::between(&[], classes, delta.window_seconds, busy).saturated(depth)
}

/// The vrate (%) at which iocost's budget for cgroup `id` on the device
/// (vrate × its active hierarchical weight) equals the cost its I/O of the
/// period was charged; None where iocost's account of it is not traced.
/// The cost is the model in force's, the one vrate scales.
fn own_need(delta: &Snapshot, device: (u32, u32), id: u64) -> Option<f64> {
    let share = delta
        .iocost_cgroups
        .iter()
        .find(|c| (c.device.major, c.device.minor) == device && c.cgroup.id == id)
        // Idle at the snapshot (a 50 reads/s reader goes idle 4 times a
        // second): its share when last active, the kernel's cached one.
        .map(|c| match c.hweight_active_ratio {
            h if h > 0.0 => h,
            _ => c.hweight_active_cached_ratio,
        })
        .filter(|&h| h > 0.0)?;
    let cost: f64 = delta
        .io
        .iter()
        .filter(|s| (s.device.major, s.device.minor) == device && s.cgroup.id == id)
        .map(|s| s.cost_seconds)
        .sum();
    (delta.window_seconds > 0.0).then(|| 100.0 * cost / delta.window_seconds / share)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::slo::parse_slo;
    use iowarden_exporters::{CgroupRef, DeviceRef, IoSeries, Op, StageHistograms};

    fn series(cg: u64, dev: (u32, u32), op: Op, bucket: usize, n: u64, bytes: u64) -> IoSeries {
        let mut total = Histogram {
            counts: vec![0; 4],
            sum_seconds: 0.0,
        };
        total.counts[bucket] = n;
        IoSeries {
            cgroup: CgroupRef {
                id: cg,
                path: format!("/cg{cg}"),
            },
            device: DeviceRef {
                name: "nvme0n1".into(),
                major: dev.0,
                minor: dev.1,
            },
            op,
            ios: n,
            bytes,
            latency: StageHistograms {
                total,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn quantiles_per_protected_cgroup_and_class_throughput_over_the_device() {
        let snap = Snapshot {
            window_seconds: 2.0,
            // buckets [0,1ms) [1,2ms) [2,4ms) [4ms,..)
            hist_lower_bounds_seconds: vec![0.0, 0.001, 0.002, 0.004],
            io: vec![
                series(7, (259, 0), Op::Read, 0, 990, 990 * 4096),
                series(7, (259, 0), Op::Read, 2, 10, 10 * 4096),
                // writes of the protected cgroup: not in a read SLO
                series(7, (259, 0), Op::Write, 3, 500, 500 * 4096),
                // the hog
                series(9, (259, 0), Op::Write, 3, 1000, 1000 * 131072),
                // another device entirely
                series(7, (8, 0), Op::Read, 3, 1000, 1000 * 4096),
            ],
            ..Default::default()
        };
        let protected = [Protected {
            path: "/lc".into(),
            id: 7,
        }];
        let slos = [
            parse_slo("read-p99=2ms").unwrap(),
            parse_slo("any-p99=2ms").unwrap(),
        ];
        let m = measure(&snap, (259, 0), &protected, &slos);
        assert_eq!(m.slos.len(), 2);
        let read = &m.slos[0];
        assert_eq!(read.name, "/lc read-p99=2ms");
        assert_eq!(read.samples, 1000);
        // rank 990 is the last sample of the first bucket
        assert!(read.observed_seconds.unwrap() <= 0.001, "{read:?}");
        let any = &m.slos[1];
        assert_eq!(any.samples, 1500);
        assert!(any.observed_seconds.unwrap() >= 0.004, "{any:?}");
        let bytes = (1000 + 500) * 4096 + 1000 * 131072;
        assert!((m.throughput_bytes_per_second - bytes as f64 / 2.0).abs() < 1e-6);
        assert!((m.iops - 1250.0).abs() < 1e-9);
    }

    /// Where the throttle stage is measured the quantile runs from
    /// submission, so the hold is in it: the SLO is judged on it alone, and
    /// the mean hold (from the stage's sum) says whether iocost caused a
    /// miss. Without it, the hold is added (the runner's io.stat count).
    #[test]
    fn a_measured_hold_is_in_the_quantile_and_not_added_again() {
        let mut held = series(7, (259, 0), Op::Read, 2, 100, 100 * 4096);
        held.latency.throttle.sum_seconds = 0.25; // 2.5 ms each
        let mut snap = Snapshot {
            window_seconds: 1.0,
            hist_lower_bounds_seconds: vec![0.0, 0.001, 0.002, 0.004],
            io: vec![held],
            ..Default::default()
        };
        let protected = [Protected {
            path: "/lc".into(),
            id: 7,
        }];
        let slos = [parse_slo("read-p99=2ms").unwrap()];
        let without = measure(&snap, (259, 0), &protected, &slos).slos[0].clone();
        assert!(!without.held_in_observed && without.throttle_seconds == 0.0);
        snap.probes.push(iowarden_exporters::ProbeStatus {
            name: "throttle_stage".into(),
            active: true,
            reason: String::new(),
        });
        let with = measure(&snap, (259, 0), &protected, &slos).slos[0].clone();
        assert!(with.held_in_observed);
        assert!((with.throttle_seconds - 0.0025).abs() < 1e-12, "{with:?}");
        let p99 = with.observed_seconds.unwrap();
        assert_eq!(with.effective(), p99, "the hold is not added twice");
        assert!(
            with.throttled(),
            "2.5 ms held of a p99 below 4 ms: iocost's miss"
        );
    }

    /// Its own need: the cost its I/O was charged per second over its
    /// active weight, as vrate's percent; none without iocost's account.
    #[test]
    fn own_need_is_the_cost_rate_over_the_active_weight() {
        let mut reads = series(7, (259, 0), Op::Read, 0, 100, 100 * 4096);
        reads.cost_seconds = 0.2; // 100 reads of 2 ms
        let mut hog = series(9, (259, 0), Op::Read, 3, 100, 100 * 131072);
        hog.cost_seconds = 0.75;
        let mut snap = Snapshot {
            window_seconds: 2.0,
            hist_lower_bounds_seconds: vec![0.0, 0.001, 0.002, 0.004],
            io: vec![reads, hog],
            ..Default::default()
        };
        let protected = [Protected {
            path: "/lc".into(),
            id: 7,
        }];
        let slos = [parse_slo("read-p99=5ms").unwrap()];
        assert_eq!(
            measure(&snap, (259, 0), &protected, &slos).slos[0].own_need,
            None
        );
        let cgroup = |id: u64, major: u32, share: f64| iowarden_exporters::IocostCgroup {
            device: DeviceRef {
                name: "nvme0n1".into(),
                major,
                minor: 0,
            },
            cgroup: CgroupRef {
                id,
                path: format!("/cg{id}"),
            },
            hweight_active_ratio: share,
            ..Default::default()
        };
        snap.iocost_cgroups = vec![cgroup(7, 8, 1.0), cgroup(9, 259, 0.1), cgroup(7, 259, 0.8)];
        let need = measure(&snap, (259, 0), &protected, &slos).slos[0].own_need;
        // 0.1 s a second at 80 % of the device: 12.5 % of vrate.
        assert!((need.unwrap() - 12.5).abs() < 1e-9, "{need:?}");
    }

    /// Saturated as the fitter counts it: requests deep in the device (20 s
    /// of issue-to-completion time in 2 s: a depth of 10) and busy nearly
    /// throughout; not when it idled a quarter of the window, nor with
    /// the depth under the threshold, nor on another device.
    #[test]
    fn the_device_is_saturated_when_deep_and_busy_throughout() {
        let dev = DeviceRef {
            name: "nvme0n1".into(),
            major: 259,
            minor: 0,
        };
        let snap = |busy_ms: u64| Snapshot {
            window_seconds: 2.0,
            cost_models: vec![iowarden_exporters::DeviceCostModel {
                device: dev.clone(),
                classes: vec![iowarden_exporters::CostClass {
                    ios: 4000,
                    bytes: 4000 * 4096,
                    device_seconds: 20.0,
                    random: true,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            kernel_diskstats: vec![iowarden_exporters::KernelDiskStats {
                device: dev.clone(),
                busy_ms,
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(device_saturated(&snap(1990), (259, 0), 8.0));
        assert!(!device_saturated(&snap(1500), (259, 0), 8.0));
        assert!(!device_saturated(&snap(1990), (259, 0), 16.0));
        assert!(!device_saturated(&snap(1990), (8, 0), 8.0));
    }

    #[test]
    fn a_quiet_cgroup_has_no_quantile_and_no_samples() {
        let snap = Snapshot {
            window_seconds: 1.0,
            hist_lower_bounds_seconds: vec![0.0, 0.001],
            ..Default::default()
        };
        let protected = [Protected {
            path: "/lc".into(),
            id: 7,
        }];
        let m = measure(
            &snap,
            (259, 0),
            &protected,
            &[parse_slo("read-p99=2ms").unwrap()],
        );
        assert_eq!(m.slos[0].samples, 0);
        assert_eq!(m.slos[0].observed_seconds, None);
    }
}
