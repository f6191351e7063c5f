//! The snapshot data model: what the loader reads out of the BPF maps, in
//! cumulative form, and what every consumer (OpenMetrics, JSON, `iowarden top`)
//! renders. All counters are cumulative since the daemon started; consumers
//! that want rates take [`Snapshot::delta_since`].

use serde::{Deserialize, Serialize};

/// Version of the JSON schema of [`Snapshot`]; bump on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// Cgroup id used for requests that carry no bio or no blkg (flushes issued by
/// the flush machinery, some passthrough commands).
pub const UNATTRIBUTED_CGROUP_ID: u64 = 0;

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Op {
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
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// From allocation of the request to its issue to the driver: time spent in
    /// the block layer and the I/O scheduler.
    Queue,
    /// From issue to the driver until completion.
    Device,
    /// From allocation to completion.
    Total,
}

impl Stage {
    pub const ALL: [Stage; 3] = [Stage::Queue, Stage::Device, Stage::Total];

    pub fn as_str(self) -> &'static str {
        match self {
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
/// [`Snapshot::hist_lower_bounds_seconds`]: bucket `i` holds samples in
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

    fn saturating_sub(&self, prev: &Histogram) -> Histogram {
        Histogram {
            counts: self
                .counts
                .iter()
                .enumerate()
                .map(|(i, &c)| c.saturating_sub(prev.counts.get(i).copied().unwrap_or(0)))
                .collect(),
            sum_seconds: (self.sum_seconds - prev.sum_seconds).max(0.0),
        }
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
    pub queue: Histogram,
    pub device: Histogram,
    pub total: Histogram,
}

impl StageHistograms {
    pub fn get(&self, stage: Stage) -> &Histogram {
        match stage {
            Stage::Queue => &self.queue,
            Stage::Device => &self.device,
            Stage::Total => &self.total,
        }
    }
}

/// Block I/O of one cgroup on one device for one operation type.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct IoSeries {
    pub cgroup: CgroupRef,
    pub device: DeviceRef,
    pub op: Op,
    /// Completed requests.
    pub ios: u64,
    /// Completed bytes.
    pub bytes: u64,
    /// Requests merged into another request (never completed on their own).
    pub merged: u64,
    /// Requests put back by the driver for another issue.
    pub requeued: u64,
    /// Cost the device's linear iocost model charged the completed reads
    /// and writes, in seconds of device time (see [`crate::DeviceCostModel`]).
    #[serde(default)]
    pub cost_seconds: f64,
    /// Completed requests the model classified random (the rest sequential).
    #[serde(default)]
    pub random_ios: u64,
    pub latency: StageHistograms,
}

impl IoSeries {
    pub fn key(&self) -> (u64, u32, u32, Op) {
        (
            self.cgroup.id,
            self.device.major,
            self.device.minor,
            self.op,
        )
    }
}

/// One blk-mq hardware queue of one device.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct QueueSeries {
    pub device: DeviceRef,
    /// blk-mq hardware queue number (`hctx->queue_num`).
    pub hctx: u32,
    /// Requests inserted into the I/O scheduler (stays 0 without a
    /// scheduler); None unless counted (`--hwq-events`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inserted: Option<u64>,
    /// Requests issued to the driver; None unless counted (`--hwq-events`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued: Option<u64>,
    pub completed: u64,
    pub requeued: u64,
    /// Requests in flight at the time of the snapshot (issued - completed -
    /// requeued); None unless issues are counted. busy_seconds gives the
    /// mean over any window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inflight: Option<u64>,
    /// Sum over completed requests of their issue-to-completion time, in
    /// seconds. Its rate is the mean occupancy of the queue (Little's law).
    pub busy_seconds: f64,
}

/// Whether an optional probe (BPF program or feature) is active, and why not.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ProbeStatus {
    pub name: String,
    pub active: bool,
    /// Empty when active; otherwise what is missing or disabled.
    pub reason: String,
}

/// Counters of things the BPF side could not record.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct DropCounters {
    /// Completions not recorded because the (cgroup, device) slot table was full.
    pub slot_table_full: u64,
    /// Completions not recorded because the device table was full.
    pub device_table_full: u64,
    /// Requests whose device-stage latency was unknown (no issue timestamp).
    pub no_issue_stamp: u64,
    /// Requests whose queue/total latency was unknown (no allocation timestamp).
    pub no_start_stamp: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub schema: u32,
    /// Wall clock time the snapshot was taken, seconds since the Unix epoch.
    pub taken_at_unix_seconds: f64,
    /// Seconds covered: since the daemon started for a cumulative snapshot, the
    /// window length for a delta.
    pub window_seconds: f64,
    pub hostname: String,
    pub kernel: String,
    /// Lower bound, in seconds, of every latency histogram bucket.
    pub hist_lower_bounds_seconds: Vec<f64>,
    pub io: Vec<IoSeries>,
    pub queues: Vec<QueueSeries>,
    pub probes: Vec<ProbeStatus>,
    pub drops: DropCounters,
    /// blk-mq CPU -> hardware queue map of the traced devices.
    #[serde(default)]
    pub cpu_queue_map: Vec<crate::blockext::CpuQueueMap>,
    /// NVMe per-queue, per-cgroup commands (where the nvme driver is).
    #[serde(default)]
    pub nvme_queue_cgroups: Vec<crate::blockext::NvmeQueueCgroup>,
    #[serde(default)]
    pub nvme_queues: Vec<crate::blockext::NvmeQueue>,
    /// NVMe head-of-line interference (cumulative).
    #[serde(default)]
    pub nvme_hol: Vec<crate::blockext::HolSeries>,
    /// iocost state (where iocost is enabled).
    #[serde(default)]
    pub iocost_devices: Vec<crate::blockext::IocostDevice>,
    #[serde(default)]
    pub iocost_cgroups: Vec<crate::blockext::IocostCgroup>,
    /// Kernel lock contention (None when the lock programs are off).
    #[serde(default)]
    pub locks: Option<crate::locks::LockReport>,
    /// The linear cost model of every traced device: configured, measured
    /// against device time per class, refitted (cumulative).
    #[serde(default)]
    pub cost_models: Vec<crate::costmodel::DeviceCostModel>,
    /// The online io.cost.qos tuner's state (`iowarden tune` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuner: Option<crate::tuner::TunerStatus>,
}

impl Snapshot {
    /// The activity between `prev` and `self` (both cumulative): counters and
    /// histograms subtracted series by series, `window_seconds` set to the
    /// wall time between the two. Series absent in `prev` are taken whole.
    pub fn delta_since(&self, prev: &Snapshot) -> Snapshot {
        use std::collections::HashMap;
        let old_io: HashMap<_, _> = prev.io.iter().map(|s| (s.key(), s)).collect();
        let io = self
            .io
            .iter()
            .map(|s| match old_io.get(&s.key()) {
                None => s.clone(),
                Some(p) => IoSeries {
                    cgroup: s.cgroup.clone(),
                    device: s.device.clone(),
                    op: s.op,
                    ios: s.ios.saturating_sub(p.ios),
                    bytes: s.bytes.saturating_sub(p.bytes),
                    merged: s.merged.saturating_sub(p.merged),
                    requeued: s.requeued.saturating_sub(p.requeued),
                    cost_seconds: (s.cost_seconds - p.cost_seconds).max(0.0),
                    random_ios: s.random_ios.saturating_sub(p.random_ios),
                    latency: StageHistograms {
                        queue: s.latency.queue.saturating_sub(&p.latency.queue),
                        device: s.latency.device.saturating_sub(&p.latency.device),
                        total: s.latency.total.saturating_sub(&p.latency.total),
                    },
                },
            })
            .collect();
        let old_q: HashMap<_, _> = prev
            .queues
            .iter()
            .map(|q| ((q.device.major, q.device.minor, q.hctx), q))
            .collect();
        let queues = self
            .queues
            .iter()
            .map(
                |q| match old_q.get(&(q.device.major, q.device.minor, q.hctx)) {
                    None => q.clone(),
                    Some(p) => QueueSeries {
                        device: q.device.clone(),
                        hctx: q.hctx,
                        inserted: q.inserted.zip(p.inserted).map(|(a, b)| a.saturating_sub(b)),
                        issued: q.issued.zip(p.issued).map(|(a, b)| a.saturating_sub(b)),
                        completed: q.completed.saturating_sub(p.completed),
                        requeued: q.requeued.saturating_sub(p.requeued),
                        inflight: q.inflight,
                        busy_seconds: (q.busy_seconds - p.busy_seconds).max(0.0),
                    },
                },
            )
            .collect();
        Snapshot {
            schema: self.schema,
            taken_at_unix_seconds: self.taken_at_unix_seconds,
            window_seconds: (self.taken_at_unix_seconds - prev.taken_at_unix_seconds).max(0.0),
            hostname: self.hostname.clone(),
            kernel: self.kernel.clone(),
            hist_lower_bounds_seconds: self.hist_lower_bounds_seconds.clone(),
            io,
            queues,
            probes: self.probes.clone(),
            drops: DropCounters {
                slot_table_full: self
                    .drops
                    .slot_table_full
                    .saturating_sub(prev.drops.slot_table_full),
                device_table_full: self
                    .drops
                    .device_table_full
                    .saturating_sub(prev.drops.device_table_full),
                no_issue_stamp: self
                    .drops
                    .no_issue_stamp
                    .saturating_sub(prev.drops.no_issue_stamp),
                no_start_stamp: self
                    .drops
                    .no_start_stamp
                    .saturating_sub(prev.drops.no_start_stamp),
            },
            cpu_queue_map: self.cpu_queue_map.clone(),
            cost_models: self.cost_models.clone(),
            tuner: self.tuner.clone(),
            nvme_queue_cgroups: self.nvme_queue_cgroups.clone(),
            nvme_queues: self.nvme_queues.clone(),
            nvme_hol: self
                .nvme_hol
                .iter()
                .map(|h| {
                    let p = prev.nvme_hol.iter().find(|p| {
                        p.device == h.device
                            && p.qid == h.qid
                            && p.victim.id == h.victim.id
                            && p.culprit.as_ref().map(|c| c.id) == h.culprit.as_ref().map(|c| c.id)
                    });
                    let mut d = h.clone();
                    if let Some(p) = p {
                        d.count = h.count.saturating_sub(p.count);
                        d.latency_sum_seconds =
                            (h.latency_sum_seconds - p.latency_sum_seconds).max(0.0);
                    }
                    d
                })
                .collect(),
            iocost_devices: self.iocost_devices.clone(),
            iocost_cgroups: self.iocost_cgroups.clone(),
            locks: self.locks.as_ref().map(|l| match &prev.locks {
                Some(p) => l.delta_since(p),
                None => l.clone(),
            }),
        }
    }
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

    #[test]
    fn delta_subtracts_matching_series() {
        let series = |ios, c| IoSeries {
            cgroup: CgroupRef {
                id: 7,
                path: "/a".into(),
            },
            device: DeviceRef {
                name: "loop0".into(),
                major: 7,
                minor: 0,
            },
            op: Op::Read,
            ios,
            bytes: ios * 4096,
            merged: 0,
            requeued: 0,
            cost_seconds: 0.0,
            random_ios: 0,
            latency: StageHistograms {
                total: Histogram {
                    counts: vec![c, 0],
                    sum_seconds: c as f64,
                },
                ..Default::default()
            },
        };
        let a = Snapshot {
            taken_at_unix_seconds: 10.0,
            io: vec![series(5, 5)],
            ..Default::default()
        };
        let b = Snapshot {
            taken_at_unix_seconds: 12.5,
            io: vec![series(12, 9)],
            ..Default::default()
        };
        let d = b.delta_since(&a);
        assert_eq!(d.window_seconds, 2.5);
        assert_eq!(d.io[0].ios, 7);
        assert_eq!(d.io[0].bytes, 7 * 4096);
        assert_eq!(d.io[0].latency.total.counts, vec![4, 0]);
        assert_eq!(d.io[0].latency.total.sum_seconds, 4.0);
    }
}
