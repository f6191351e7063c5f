//! Snapshot part for kernel lock contention (bpf/locks.bpf.c): wait time
//! per (lock site, cgroup of the waiting task, lock kind), with the
//! symbolized stack of each site. Empty where the lock programs are off.

use serde::{Deserialize, Serialize};

use super::core::{delta_by_key, CgroupRef, Delta};
use super::metric::metrics;

/// Waits of one cgroup at one lock site, of one lock kind.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct LockSeries {
    /// Innermost function of the stack that is not locking or tracing
    /// machinery (e.g. `dd_dispatch_request`); "(no stack)" when the stack
    /// could not be recorded.
    pub site: String,
    /// Kernel stack id (stable for the daemon's life; keys `stacks`).
    pub stack_id: u32,
    pub cgroup: CgroupRef,
    /// spin, read, write, mutex, rwsem-read, ... (contention_begin flags).
    pub kind: String,
    pub count: u64,
    pub wait_seconds: f64,
    /// Wait histogram: bucket i holds [2^i, 2^(i+1)) ns.
    pub hist_log2_ns: Vec<u64>,
}

/// A symbolized kernel stack, innermost frame first ("func+0x1f").
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct LockStack {
    pub id: u32,
    pub frames: Vec<String>,
}

/// A row of the bounded export: one of the top sites by wait time, or
/// "other" for the rest. Cumulative since the site was first exported.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct LockSiteRow {
    pub site: String,
    pub cgroup: CgroupRef,
    pub count: u64,
    pub wait_seconds: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct LockReport {
    /// "block" (only stacks through the block layer) or "all".
    pub mode: String,
    pub series: Vec<LockSeries>,
    pub stacks: Vec<LockStack>,
    /// Top sites + "other" per cgroup, for metrics (bounded cardinality).
    pub top: Vec<LockSiteRow>,
    /// Contentions outside the block layer, ignored in block mode.
    pub filtered: u64,
    /// (reason, count): what was not recorded, or recorded without a stack.
    pub dropped: Vec<(String, u64)>,
}

metrics!(LockSeries {
    counter count;
    counter wait_seconds;
    counter hist_log2_ns;
});
metrics!(LockSiteRow {
    counter wait_seconds => "iowarden_lock_wait" [Seconds],
        "Time tasks of the cgroup waited on contended kernel locks, by lock site (top sites by wait time; the rest as site=\"other\")";
    counter count => "iowarden_lock_contentions",
        "Contended kernel lock acquisitions by tasks of the cgroup, by lock site (top sites; the rest as site=\"other\")";
});

impl Delta for LockReport {
    fn delta(&self, earlier: &LockReport) -> LockReport {
        let dropped = self
            .dropped
            .iter()
            .map(|(reason, n)| {
                let before = earlier.dropped.iter().find(|(r, _)| r == reason);
                (reason.clone(), n.delta(&before.map_or(0, |x| x.1)))
            })
            .collect();
        LockReport {
            mode: self.mode.clone(),
            series: delta_by_key(&self.series, &earlier.series, |s| {
                (s.stack_id, s.cgroup.id, s.kind.clone())
            }),
            stacks: self.stacks.clone(),
            top: delta_by_key(&self.top, &earlier.top, |r| (r.site.clone(), r.cgroup.id)),
            filtered: self.filtered.delta(&earlier.filtered),
            dropped,
        }
    }
}

impl LockReport {
    pub fn stack(&self, id: u32) -> Option<&LockStack> {
        self.stacks.iter().find(|s| s.id == id)
    }
}

/// Quantile of a log2-ns histogram, in seconds (upper bound of the bucket
/// the quantile falls in); None when empty.
pub fn log2_quantile_seconds(hist: &[u64], q: f64) -> Option<f64> {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = (q * total as f64).ceil().max(1.0) as u64;
    let mut acc = 0;
    for (i, &c) in hist.iter().enumerate() {
        acc += c;
        if acc >= rank {
            return Some((1u64 << (i + 1).min(63)) as f64 / 1e9);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_is_bucket_upper_bound() {
        let mut h = vec![0u64; 32];
        h[10] = 99; // [1024, 2048) ns
        h[20] = 1;
        assert_eq!(log2_quantile_seconds(&h, 0.5), Some(2048e-9));
        assert_eq!(
            log2_quantile_seconds(&h, 1.0),
            Some((1u64 << 21) as f64 / 1e9)
        );
        assert_eq!(log2_quantile_seconds(&[0; 32], 0.5), None);
    }

    #[test]
    fn delta_subtracts_series_and_top_rows() {
        let cg = CgroupRef {
            id: 9,
            path: "/w".into(),
        };
        let s = |count, wait: f64| LockSeries {
            site: "dd_dispatch_request".into(),
            stack_id: 3,
            cgroup: cg.clone(),
            kind: "spin".into(),
            count,
            wait_seconds: wait,
            hist_log2_ns: vec![count, 0],
        };
        let row = |count, wait| LockSiteRow {
            site: "dd_dispatch_request".into(),
            cgroup: cg.clone(),
            count,
            wait_seconds: wait,
        };
        let a = LockReport {
            series: vec![s(5, 1.0)],
            top: vec![row(5, 1.0)],
            filtered: 10,
            dropped: vec![("stack".into(), 1)],
            ..Default::default()
        };
        let b = LockReport {
            series: vec![s(12, 3.0)],
            top: vec![row(12, 3.0)],
            filtered: 15,
            dropped: vec![("stack".into(), 4)],
            ..Default::default()
        };
        let d = b.delta(&a);
        assert_eq!(d.series[0].count, 7);
        assert_eq!(d.series[0].wait_seconds, 2.0);
        assert_eq!(d.series[0].hist_log2_ns, vec![7, 0]);
        assert_eq!(d.top[0].count, 7);
        assert_eq!(d.filtered, 5);
        assert_eq!(d.dropped, vec![("stack".to_string(), 3)]);
    }
}
