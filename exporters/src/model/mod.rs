//! The snapshot data model: what the loader reads out of the BPF maps, in
//! cumulative form, and what every consumer (OpenMetrics, JSON, `iowarden top`)
//! renders. All counters are cumulative since the daemon started; consumers
//! that want rates take [`Snapshot::delta_since`].
//!
//! [`Snapshot`] is here; the types every part shares are in `core`; each
//! domain's part is in a file of its own, which imports only `core` and
//! `metric`, whose `metrics!` declares each record's counters and gauges
//! once: its [`Delta`] and its OpenMetrics families follow.

use serde::{Deserialize, Serialize};

mod core;
pub mod cost;
pub mod culprits;
pub mod delay;
pub mod diskstats;
pub mod io;
pub mod iocost;
pub mod limits;
pub mod locks;
pub mod metric;
pub mod nvme;
pub mod queues;
pub mod runtime;
pub mod tune_model;
pub mod tuner;
pub mod volume;

#[cfg(test)]
mod delta_tests;

pub use self::core::*;
pub use cost::{CostClass, DeviceCostModel, LinearModel};
pub use culprits::CulpritSeries;
pub use delay::TaskDelay;
pub use diskstats::KernelDiskStats;
pub use io::{DropCounters, IoSeries};
pub use iocost::{derive_hweights, IocostCgroup, IocostDevice};
pub use limits::{LimitKnob, LimitReason, LimitState, LimitVerdict};
pub use locks::{log2_quantile_seconds, LockReport, LockSeries, LockSiteRow, LockStack};
pub use metric::{Families, Family, FamilyKind, MetricUnit};
pub use nvme::{HolSeries, NvmeQueue, NvmeQueueCgroup};
pub use queues::{CpuQueueMap, QueueSeries};
pub use runtime::{BpfProgramStats, ProbeStatus, RuntimeMetrics, SelfMetrics, TableFill};
pub use tune_model::{ModelParam, ModelTunerStatus};
pub use tuner::{TunerDecision, TunerSlo, TunerStatus};
pub use volume::Volume;

/// Version of the JSON schema of [`Snapshot`]; bump on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

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
    pub cpu_queue_map: Vec<CpuQueueMap>,
    /// NVMe per-queue, per-cgroup commands (where the nvme driver is).
    #[serde(default)]
    pub nvme_queue_cgroups: Vec<NvmeQueueCgroup>,
    #[serde(default)]
    pub nvme_queues: Vec<NvmeQueue>,
    /// NVMe head-of-line interference (cumulative).
    #[serde(default)]
    pub nvme_hol: Vec<HolSeries>,
    /// iocost state (where iocost is enabled).
    #[serde(default)]
    pub iocost_devices: Vec<IocostDevice>,
    #[serde(default)]
    pub iocost_cgroups: Vec<IocostCgroup>,
    /// Kernel lock contention (None when the lock programs are off).
    #[serde(default)]
    pub locks: Option<LockReport>,
    /// The linear cost model of every traced device: configured, measured
    /// against device time per class (in a delta: the window's samples and
    /// the configured model's error over them), refitted (from every sample
    /// since start, in a delta too).
    #[serde(default)]
    pub cost_models: Vec<DeviceCostModel>,
    /// The kernel's own completion counts of the traced devices
    /// (/proc/diskstats, cumulative since boot).
    #[serde(default)]
    pub kernel_diskstats: Vec<KernelDiskStats>,
    /// The online io.cost.qos tuner's state (`iowarden tune` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuner: Option<TunerStatus>,
    /// The bio-based volumes with traced I/O and the disks below them.
    #[serde(default)]
    pub volumes: Vec<Volume>,
    /// Every io limit and weight set on the host, judged over the last
    /// judging window (`iowarden run`; empty elsewhere).
    #[serde(default)]
    pub limits: Vec<LimitVerdict>,
    /// The delays io.latency and iocost put on each cgroup's tasks between
    /// their I/Os (where the kernel lets them be timed).
    #[serde(default)]
    pub task_delays: Vec<TaskDelay>,
    /// Whom each cgroup's requests waited behind on the device
    /// (`--culprits`; empty without).
    #[serde(default)]
    pub culprits: Vec<CulpritSeries>,
}

impl Snapshot {
    /// The activity between `prev` and `self` (both cumulative): counters and
    /// histograms subtracted series by series (each part's [`Delta`]),
    /// `window_seconds` set to the wall time between the two. Series absent
    /// in `prev` are taken whole; state and gauges are `self`'s.
    pub fn delta_since(&self, prev: &Snapshot) -> Snapshot {
        Snapshot {
            schema: self.schema,
            taken_at_unix_seconds: self.taken_at_unix_seconds,
            window_seconds: (self.taken_at_unix_seconds - prev.taken_at_unix_seconds).max(0.0),
            hostname: self.hostname.clone(),
            kernel: self.kernel.clone(),
            hist_lower_bounds_seconds: self.hist_lower_bounds_seconds.clone(),
            io: delta_by_key(&self.io, &prev.io, IoSeries::key),
            queues: delta_by_key(&self.queues, &prev.queues, QueueSeries::key),
            probes: self.probes.clone(),
            drops: self.drops.delta(&prev.drops),
            cpu_queue_map: self.cpu_queue_map.clone(),
            nvme_queue_cgroups: delta_by_key(
                &self.nvme_queue_cgroups,
                &prev.nvme_queue_cgroups,
                NvmeQueueCgroup::key,
            ),
            nvme_queues: delta_by_key(&self.nvme_queues, &prev.nvme_queues, NvmeQueue::key),
            nvme_hol: delta_by_key(&self.nvme_hol, &prev.nvme_hol, HolSeries::key),
            iocost_devices: delta_by_key(
                &self.iocost_devices,
                &prev.iocost_devices,
                IocostDevice::key,
            ),
            iocost_cgroups: delta_by_key(
                &self.iocost_cgroups,
                &prev.iocost_cgroups,
                IocostCgroup::key,
            ),
            locks: match (&self.locks, &prev.locks) {
                (Some(now), Some(earlier)) => Some(now.delta(earlier)),
                (now, _) => now.clone(),
            },
            cost_models: delta_by_key(&self.cost_models, &prev.cost_models, DeviceCostModel::key),
            kernel_diskstats: delta_by_key(
                &self.kernel_diskstats,
                &prev.kernel_diskstats,
                KernelDiskStats::key,
            ),
            tuner: self.tuner.clone(),
            volumes: self.volumes.clone(),
            limits: self.limits.clone(),
            task_delays: delta_by_key(&self.task_delays, &prev.task_delays, TaskDelay::key),
            culprits: delta_by_key(&self.culprits, &prev.culprits, CulpritSeries::key),
        }
    }

    /// This snapshot with other I/O series (everything else cloned).
    pub fn with_io(&self, io: Vec<IoSeries>) -> Snapshot {
        Snapshot {
            schema: self.schema,
            taken_at_unix_seconds: self.taken_at_unix_seconds,
            window_seconds: self.window_seconds,
            hostname: self.hostname.clone(),
            kernel: self.kernel.clone(),
            hist_lower_bounds_seconds: self.hist_lower_bounds_seconds.clone(),
            io,
            queues: self.queues.clone(),
            probes: self.probes.clone(),
            drops: self.drops.clone(),
            cpu_queue_map: self.cpu_queue_map.clone(),
            nvme_queue_cgroups: self.nvme_queue_cgroups.clone(),
            nvme_queues: self.nvme_queues.clone(),
            nvme_hol: self.nvme_hol.clone(),
            iocost_devices: self.iocost_devices.clone(),
            iocost_cgroups: self.iocost_cgroups.clone(),
            locks: self.locks.clone(),
            cost_models: self.cost_models.clone(),
            kernel_diskstats: self.kernel_diskstats.clone(),
            tuner: self.tuner.clone(),
            volumes: self.volumes.clone(),
            limits: self.limits.clone(),
            task_delays: self.task_delays.clone(),
            culprits: self.culprits.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            latency: StageHistograms {
                total: Histogram {
                    counts: vec![c, 0],
                    sum_seconds: c as f64,
                },
                ..Default::default()
            },
            ..Default::default()
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
