//! The types every part of the snapshot shares: who (cgroup), where
//! (device), what (operation, latency stage), latency histograms, and
//! [`Delta`], how a cumulative value becomes a window's activity.

use std::collections::HashMap;
use std::hash::Hash;

use serde::{Deserialize, Serialize};

use super::metric::metrics;

/// Cgroup id used for requests that carry no bio or no blkg (flushes issued by
/// the flush machinery, some passthrough commands).
pub const UNATTRIBUTED_CGROUP_ID: u64 = 0;

/// Label value of the series that sums the cgroups outside the exported
/// top K (see [`crate::CgroupCap`]).
pub const OTHER_CGROUP: &str = "other";
/// Cgroup id of that summed series (no kernel cgroup has it).
pub const OTHER_CGROUP_ID: u64 = u64::MAX;

#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    #[default]
    Read,
    Write,
    Discard,
    Flush,
}

impl Op {
    pub const ALL: [Op; 4] = [Op::Read, Op::Write, Op::Discard, Op::Flush];

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Discard => "discard",
            Op::Flush => "flush",
        }
    }
}

/// Latency stage of a request.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// From the submission of the request's first bio to the allocation of
    /// the request: held by blk-throttle (io.max) and by the rq-qos
    /// policies (iocost, io.latency, wbt). Only requests whose bio carries
    /// the kernel's submission stamp have a sample.
    Throttle,
    /// From allocation of the request to its issue to the driver: time spent in
    /// the block layer and the I/O scheduler.
    Queue,
    /// From issue to the driver until completion.
    Device,
    /// From submission to completion (throttle + queue + device): what the
    /// application waits for; from allocation where the bio has no stamp.
    Total,
}

impl Stage {
    pub const ALL: [Stage; 4] = [Stage::Throttle, Stage::Queue, Stage::Device, Stage::Total];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Throttle => "throttle",
            Stage::Queue => "queue",
            Stage::Device => "device",
            Stage::Total => "total",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CgroupRef {
    /// Kernel cgroup id (kernfs node id; the inode number of the cgroup's
    /// directory). 0 is the unattributed bucket.
    pub id: u64,
    /// Path relative to the hierarchy root ("/" for the root, "" when the id
    /// could not be resolved, e.g. the cgroup was removed). For the
    /// unattributed bucket: "(unattributed)".
    pub path: String,
}

impl CgroupRef {
    /// The series that sums the cgroups outside the exported top K.
    pub fn other() -> CgroupRef {
        CgroupRef {
            id: OTHER_CGROUP_ID,
            path: OTHER_CGROUP.into(),
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceRef {
    /// Kernel disk name, e.g. "nvme0n1", "loop3".
    pub name: String,
    pub major: u32,
    pub minor: u32,
}

impl DeviceRef {
    pub fn devt(&self) -> String {
        format!("{}:{}", self.major, self.minor)
    }
}

/// A latency histogram with the bucket layout given by
/// [`crate::Snapshot::hist_lower_bounds_seconds`]: bucket `i` holds samples in
/// `[lower[i], lower[i+1])`, the last bucket is open-ended.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    pub counts: Vec<u64>,
    /// Sum of all samples, in seconds.
    pub sum_seconds: f64,
}

impl Histogram {
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Estimated `q`-quantile (0..=1) in seconds, interpolating linearly inside
    /// the bucket that holds it. `None` when the histogram is empty.
    pub fn quantile(&self, lower_bounds: &[f64], q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let q = q.clamp(0.0, 1.0);
        // Rank of the wanted sample, 1-based, as fio and Prometheus do.
        let rank = (q * total as f64).ceil().max(1.0);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            if (seen + c) as f64 >= rank {
                let lo = lower_bounds.get(i).copied().unwrap_or(0.0);
                let hi = match lower_bounds.get(i + 1) {
                    Some(&hi) => hi,
                    // Open-ended last bucket: report its lower bound.
                    None => return Some(lo),
                };
                let frac = (rank - seen as f64) / c as f64;
                return Some(lo + (hi - lo) * frac);
            }
            seen += c;
        }
        lower_bounds.last().copied()
    }

    /// Index of the bucket that holds the `q`-quantile.
    pub fn quantile_bucket(&self, q: f64) -> Option<usize> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = (q.clamp(0.0, 1.0) * total as f64).ceil().max(1.0);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if c > 0 && seen as f64 >= rank {
                return Some(i);
            }
        }
        None
    }

    pub fn add(&mut self, other: &Histogram) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (i, &c) in other.counts.iter().enumerate() {
            self.counts[i] += c;
        }
        self.sum_seconds += other.sum_seconds;
    }
}

/// Latency histograms of one series, one per [`Stage`].
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct StageHistograms {
    #[serde(default)]
    pub throttle: Histogram,
    pub queue: Histogram,
    pub device: Histogram,
    pub total: Histogram,
}

impl StageHistograms {
    pub fn get(&self, stage: Stage) -> &Histogram {
        match stage {
            Stage::Throttle => &self.throttle,
            Stage::Queue => &self.queue,
            Stage::Device => &self.device,
            Stage::Total => &self.total,
        }
    }
}

/// A cumulative reading whose activity over a window is itself less an
/// `earlier` reading. Counters never go back: a difference below zero (a
/// counter that restarted) is taken as zero. Each series type subtracts its
/// own counters, beside their declarations, and keeps its labels and gauges.
pub trait Delta {
    fn delta(&self, earlier: &Self) -> Self;
}

impl Delta for u64 {
    fn delta(&self, earlier: &u64) -> u64 {
        self.saturating_sub(*earlier)
    }
}

impl Delta for f64 {
    fn delta(&self, earlier: &f64) -> f64 {
        (self - earlier).max(0.0)
    }
}

/// A counter that is not always counted: known only when both readings are.
impl<T: Delta> Delta for Option<T> {
    fn delta(&self, earlier: &Option<T>) -> Option<T> {
        self.as_ref().zip(earlier.as_ref()).map(|(a, b)| a.delta(b))
    }
}

/// An optional report (the lock programs'): its delta where the earlier
/// reading has one too; otherwise the later reading whole, as a series new
/// since the earlier one.
pub fn delta_if_earlier<T: Delta + Clone>(now: &Option<T>, earlier: &Option<T>) -> Option<T> {
    match (now, earlier) {
        (Some(now), Some(earlier)) => Some(now.delta(earlier)),
        (now, _) => now.clone(),
    }
}

/// Bucket by bucket; buckets absent from `earlier` count from zero.
pub fn delta_counts(now: &[u64], earlier: &[u64]) -> Vec<u64> {
    now.iter()
        .enumerate()
        .map(|(i, c)| c.delta(&earlier.get(i).copied().unwrap_or(0)))
        .collect()
}

/// Histogram buckets and other per-index counts.
impl Delta for Vec<u64> {
    fn delta(&self, earlier: &Vec<u64>) -> Vec<u64> {
        delta_counts(self, earlier)
    }
}

metrics!(Histogram {
    counter counts;
    counter sum_seconds;
});
metrics!(StageHistograms {
    counter throttle;
    counter queue;
    counter device;
    counter total;
});

/// Every series of `now` less the series of `earlier` with the same key;
/// series new since `earlier` are taken whole.
pub fn delta_by_key<T, K>(now: &[T], earlier: &[T], key: impl Fn(&T) -> K) -> Vec<T>
where
    T: Delta + Clone,
    K: Hash + Eq,
{
    let earlier: HashMap<K, &T> = earlier.iter().map(|s| (key(s), s)).collect();
    now.iter()
        .map(|s| match earlier.get(&key(s)) {
            Some(e) => s.delta(e),
            None => s.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds() -> Vec<f64> {
        vec![0.0, 1e-6, 2e-6, 4e-6, 8e-6]
    }

    #[test]
    fn quantile_interpolates_inside_bucket() {
        let h = Histogram {
            counts: vec![0, 0, 10, 0, 0],
            sum_seconds: 0.0,
        };
        // All samples in [2us, 4us): the median is half-way.
        let q = h.quantile(&bounds(), 0.5).unwrap();
        assert!((q - 3e-6).abs() < 1e-12, "{q}");
        assert_eq!(h.quantile_bucket(0.5), Some(2));
        assert_eq!(h.quantile(&bounds(), 1.0).unwrap(), 4e-6);
    }

    #[test]
    fn quantile_of_empty_and_open_bucket() {
        let h = Histogram {
            counts: vec![0; 5],
            sum_seconds: 0.0,
        };
        assert_eq!(h.quantile(&bounds(), 0.99), None);
        let h = Histogram {
            counts: vec![1, 0, 0, 0, 3],
            sum_seconds: 0.0,
        };
        assert_eq!(h.quantile(&bounds(), 0.99), Some(8e-6));
        assert_eq!(h.quantile_bucket(0.1), Some(0));
    }
}
