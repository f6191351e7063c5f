//! Snapshot parts for NVMe queues and the iocost controller: present only
//! where the nvme driver / iocost are (empty elsewhere).

use serde::{Deserialize, Serialize};

use crate::model::{CgroupRef, DeviceRef};

/// Commands of one cgroup on one NVMe queue (qid as the driver numbers it:
/// I/O queues from 1; blk-mq hctx = qid - 1).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct NvmeQueueCgroup {
    pub device: DeviceRef,
    pub qid: u32,
    pub cgroup: CgroupRef,
    pub commands: u64,
    pub completions: u64,
    pub bytes: u64,
    /// Set up and not yet completed, at the time of the snapshot.
    pub inflight: i64,
    pub small_commands: u64,
    pub large_commands: u64,
}

/// One NVMe queue: submission-queue occupancy (tail - head as nvme_sq
/// reports at each completion) and the CPUs whose I/O it carries.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct NvmeQueue {
    pub device: DeviceRef,
    pub qid: u32,
    pub cpus: Vec<u32>,
    pub sq_samples: u64,
    pub sq_occupancy_mean: f64,
    pub sq_occupancy_last: u32,
    pub sq_occupancy_max: u32,
}

/// Small requests of `victim` on one queue, split by whether a large
/// request of `culprit` was in flight on that queue at submission
/// (`culprit` None: none was — the victim's baseline).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct HolSeries {
    pub device: DeviceRef,
    pub qid: u32,
    pub victim: CgroupRef,
    pub culprit: Option<CgroupRef>,
    pub count: u64,
    /// Sum of submission -> completion times of those requests.
    pub latency_sum_seconds: f64,
}

/// A blk-mq hardware queue and the CPUs mapped to it
/// (/sys/block/DEV/mq/N/cpu_list): tenants on those CPUs share the queue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct CpuQueueMap {
    pub device: String,
    pub hctx: u32,
    pub cpus: Vec<u32>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct IocostDevice {
    pub device: DeviceRef,
    /// 1.0 = 100 %: the base vrate, as io.stat's cost.vrate prints it.
    pub vrate_ratio: f64,
    /// cost.vrate from the root's io.stat at the same poll (None if absent).
    pub io_stat_vrate_ratio: Option<f64>,
    pub busy_level: i32,
    pub missed_ppm_read: u32,
    pub missed_ppm_write: u32,
    pub rq_wait_ratio: f64,
    pub nr_lagging: i32,
    pub nr_shortages: i32,
    pub vrate_adjustments: u64,
    /// The device's io.cost.qos and io.cost.model lines, verbatim.
    pub qos: Option<String>,
    pub model: Option<String>,
    pub qos_vrate_min_ratio: Option<f64>,
    pub qos_vrate_max_ratio: Option<f64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct IocostCgroup {
    pub device: DeviceRef,
    pub cgroup: CgroupRef,
    pub weight: u32,
    pub inuse: u32,
    /// Hierarchical weight shares (1.0 = the whole device).
    pub hweight_active_ratio: f64,
    pub hweight_inuse_ratio: f64,
    /// Budget left at the last event (global vtime - the cgroup's), in
    /// device seconds at 100 % vrate; negative = running ahead.
    pub vtime_budget_seconds: f64,
    pub debt_seconds: f64,
    pub delay_seconds: f64,
    pub activations: u64,
    pub idles: u64,
    pub shortages: u64,
    pub transfers: u64,
    pub adjusts: u64,
    pub forgives: u64,
    /// cost.usage from the cgroup's io.stat (device time charged), seconds.
    pub usage_seconds: Option<f64>,
}
