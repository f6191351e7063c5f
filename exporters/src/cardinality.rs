//! A cap on the cgroups exported per host: the K cgroups with the most
//! device time keep their own series, every other cgroup's I/O is summed
//! into one `cgroup="other"` series per (device, op).
//!
//! "other" is kept monotonic across polls: it accumulates the activity
//! (deltas) of whichever cgroups are outside the top K at each poll, so a
//! cgroup entering or leaving the top K never makes it go down (which
//! Prometheus would read as a counter reset). Rates therefore add up: the
//! exported series' rates sum to the host's, except for the one poll
//! interval in which a cgroup changes side.

use std::collections::{BTreeMap, HashSet};
use std::num::NonZeroUsize;

use crate::model::{CgroupRef, DeviceRef, IoSeries, Op, Snapshot, StageHistograms};

/// Label value of the summed series.
pub const OTHER_CGROUP: &str = "other";
/// Cgroup id of the summed series (no kernel cgroup has it).
pub const OTHER_CGROUP_ID: u64 = u64::MAX;

/// Keeps the top-K cgroups by device time since start, sums the rest.
#[derive(Debug)]
pub struct CgroupCap {
    max: NonZeroUsize,
    prev: Snapshot,
    other: BTreeMap<(DeviceRef, Op), IoSeries>,
}

impl CgroupCap {
    pub fn new(max: NonZeroUsize) -> CgroupCap {
        CgroupCap {
            max,
            prev: Snapshot::default(),
            other: BTreeMap::new(),
        }
    }

    /// The cgroups that keep their own series: the K with the most device
    /// time (the device stage's sum), then requests, then id for ties.
    fn top(&self, snap: &Snapshot) -> HashSet<u64> {
        let mut per_cgroup: BTreeMap<u64, (f64, u64)> = BTreeMap::new();
        for s in &snap.io {
            let e = per_cgroup.entry(s.cgroup.id).or_default();
            e.0 += s.latency.device.sum_seconds;
            e.1 += s.ios;
        }
        let mut ranked: Vec<(u64, (f64, u64))> = per_cgroup.into_iter().collect();
        ranked.sort_by(|a, b| {
            b.1 .0
                .total_cmp(&a.1 .0)
                .then(b.1 .1.cmp(&a.1 .1))
                .then(a.0.cmp(&b.0))
        });
        ranked
            .into_iter()
            .take(self.max.get())
            .map(|(id, _)| id)
            .collect()
    }

    /// The snapshot to export: top-K series as they are, then "other".
    pub fn apply(&mut self, snap: &Snapshot) -> Snapshot {
        let top = self.top(snap);
        let delta = io_only(snap).delta_since(&self.prev);
        for d in delta.io.iter().filter(|d| !top.contains(&d.cgroup.id)) {
            let sum = self
                .other
                .entry((d.device.clone(), d.op))
                .or_insert_with(|| empty_other(&d.device, d.op));
            add_series(sum, d);
        }
        self.prev = io_only(snap);
        let mut out = snap.clone();
        out.io.retain(|s| top.contains(&s.cgroup.id));
        out.io.extend(self.other.values().cloned());
        out
    }
}

fn io_only(snap: &Snapshot) -> Snapshot {
    Snapshot {
        io: snap.io.clone(),
        ..Default::default()
    }
}

fn empty_other(device: &DeviceRef, op: Op) -> IoSeries {
    IoSeries {
        cgroup: CgroupRef {
            id: OTHER_CGROUP_ID,
            path: OTHER_CGROUP.into(),
        },
        device: device.clone(),
        op,
        ios: 0,
        bytes: 0,
        merged: 0,
        requeued: 0,
        cost_seconds: 0.0,
        random_ios: 0,
        latency: StageHistograms::default(),
    }
}

fn add_series(sum: &mut IoSeries, d: &IoSeries) {
    sum.ios += d.ios;
    sum.bytes += d.bytes;
    sum.merged += d.merged;
    sum.requeued += d.requeued;
    sum.cost_seconds += d.cost_seconds;
    sum.random_ios += d.random_ios;
    sum.latency.queue.add(&d.latency.queue);
    sum.latency.device.add(&d.latency.device);
    sum.latency.total.add(&d.latency.total);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Histogram;

    fn series(id: u64, dev: &str, ios: u64, device_s: f64) -> IoSeries {
        let mut counts = vec![0u64; 8];
        counts[3] = ios;
        let h = Histogram {
            counts,
            sum_seconds: device_s,
        };
        IoSeries {
            cgroup: CgroupRef {
                id,
                path: format!("/c{id}"),
            },
            device: DeviceRef {
                name: dev.into(),
                major: 7,
                minor: if dev == "loop0" { 0 } else { 1 },
            },
            op: Op::Read,
            ios,
            bytes: ios * 4096,
            merged: 0,
            requeued: 0,
            cost_seconds: 0.0,
            random_ios: 0,
            latency: StageHistograms {
                queue: Histogram::default(),
                device: h.clone(),
                total: h,
            },
        }
    }

    fn snap(io: Vec<IoSeries>) -> Snapshot {
        Snapshot {
            io,
            ..Default::default()
        }
    }

    fn total(s: &Snapshot, f: impl Fn(&IoSeries) -> u64) -> u64 {
        s.io.iter().map(f).sum()
    }

    fn other_ios(s: &Snapshot, dev: &str) -> u64 {
        s.io.iter()
            .find(|x| x.cgroup.path == OTHER_CGROUP && x.device.name == dev)
            .map_or(0, |x| x.ios)
    }

    #[test]
    fn keeps_top_k_by_device_time_and_sums_the_rest() {
        let mut cap = CgroupCap::new(NonZeroUsize::new(2).unwrap());
        let s = snap(vec![
            series(1, "loop0", 10, 0.1),
            series(2, "loop0", 1, 5.0),
            series(3, "loop0", 100, 1.0),
            series(4, "loop0", 7, 0.2),
            series(4, "loop1", 3, 0.2),
        ]);
        let out = cap.apply(&s);
        let ids: HashSet<u64> = out.io.iter().map(|x| x.cgroup.id).collect();
        assert_eq!(ids, HashSet::from([2, 3, OTHER_CGROUP_ID]));
        // Totals add up, per device too.
        assert_eq!(total(&out, |x| x.ios), total(&s, |x| x.ios));
        assert_eq!(total(&out, |x| x.bytes), total(&s, |x| x.bytes));
        assert_eq!(total(&out, |x| x.latency.total.count()), 121);
        assert_eq!(other_ios(&out, "loop0"), 17);
        assert_eq!(other_ios(&out, "loop1"), 3);
        let sum_device: f64 = out.io.iter().map(|x| x.latency.device.sum_seconds).sum();
        assert!((sum_device - 6.5).abs() < 1e-9);
    }

    #[test]
    fn other_never_decreases_when_a_cgroup_enters_the_top() {
        let mut cap = CgroupCap::new(NonZeroUsize::new(1).unwrap());
        let first = cap.apply(&snap(vec![
            series(1, "loop0", 10, 1.0),
            series(2, "loop0", 5, 0.5),
        ]));
        assert_eq!(other_ios(&first, "loop0"), 5);
        // Cgroup 2 overtakes cgroup 1: 1 moves to "other", 2 gets its own series.
        let second = cap.apply(&snap(vec![
            series(1, "loop0", 12, 1.2),
            series(2, "loop0", 20, 3.0),
        ]));
        assert!(second.io.iter().any(|x| x.cgroup.id == 2));
        assert!(!second.io.iter().any(|x| x.cgroup.id == 1));
        // "other" kept cgroup 2's earlier 5 and gained cgroup 1's 2 new requests.
        assert_eq!(other_ios(&second, "loop0"), 7);
        // Increase of the exported series = the host's increase, but for the
        // switching cgroups: 2's own series now shows its whole history (20).
        let third = cap.apply(&snap(vec![
            series(1, "loop0", 13, 1.3),
            series(2, "loop0", 30, 4.0),
        ]));
        assert_eq!(total(&third, |x| x.ios) - total(&second, |x| x.ios), 11);
    }
}
