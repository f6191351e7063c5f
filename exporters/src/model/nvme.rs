//! NVMe queues (bpf/nvme.bpf.c, where the nvme driver is): commands per
//! queue and cgroup, submission-queue occupancy, and head-of-line
//! interference between cgroups sharing a queue.

use serde::{Deserialize, Serialize};

use super::core::{CgroupRef, Delta, DeviceRef};
use super::metric::metrics;

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

impl NvmeQueueCgroup {
    pub fn key(&self) -> (u32, u32, u32, u64) {
        (
            self.device.major,
            self.device.minor,
            self.qid,
            self.cgroup.id,
        )
    }
}

metrics!(NvmeQueueCgroup {
    counter commands => "iowarden_nvme_commands", "NVMe commands set up per queue and cgroup";
    counter completions => "iowarden_nvme_completions", "NVMe commands completed per queue and cgroup";
    counter bytes => "iowarden_nvme_command" [Bytes], "Bytes of the NVMe commands set up per queue and cgroup";
    gauge inflight => "iowarden_nvme_inflight", "NVMe commands in flight per queue and cgroup";
    counter small_commands;
    counter large_commands => "iowarden_nvme_large_commands",
        "NVMe commands of at least the large size (128 KiB) per queue and cgroup";
});

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

impl NvmeQueue {
    pub fn key(&self) -> (u32, u32, u32) {
        (self.device.major, self.device.minor, self.qid)
    }
}

metrics!(NvmeQueue, families only {
    counter sq_samples;
    gauge sq_occupancy_last => "iowarden_nvme_sq_occupancy",
        "Submission-queue entries not yet fetched by the controller, at the last completion";
    gauge sq_occupancy_mean => "iowarden_nvme_sq_occupancy_mean",
        "Mean submission-queue occupancy over all completions";
    gauge sq_occupancy_max => "iowarden_nvme_sq_occupancy_max", "Largest submission-queue occupancy seen";
});

/// The samples of the window and their mean (from the two means and
/// counts); last and max stay the later reading's (max: since start).
impl Delta for NvmeQueue {
    fn delta(&self, earlier: &NvmeQueue) -> NvmeQueue {
        let samples = self.sq_samples.delta(&earlier.sq_samples);
        let sum = self.sq_occupancy_mean * self.sq_samples as f64
            - earlier.sq_occupancy_mean * earlier.sq_samples as f64;
        NvmeQueue {
            sq_samples: samples,
            sq_occupancy_mean: if samples > 0 {
                (sum / samples as f64).max(0.0)
            } else {
                0.0
            },
            ..self.clone()
        }
    }
}

impl HolSeries {
    pub fn key(&self) -> (DeviceRef, u32, u64, Option<u64>) {
        (
            self.device.clone(),
            self.qid,
            self.victim.id,
            self.culprit.as_ref().map(|c| c.id),
        )
    }
}

// Families by culprit, and one computed across series: openmetrics/nvme.rs.
metrics!(HolSeries {
    counter count;
    counter latency_sum_seconds;
});

#[cfg(test)]
mod tests {
    use super::*;

    fn hol(culprit: Option<u64>, count: u64) -> HolSeries {
        HolSeries {
            device: DeviceRef {
                name: "nvme0n1".into(),
                major: 259,
                minor: 0,
            },
            qid: 1,
            victim: CgroupRef {
                id: 5,
                path: "/v".into(),
            },
            culprit: culprit.map(|id| CgroupRef {
                id,
                path: format!("/c{id}"),
            }),
            count,
            latency_sum_seconds: count as f64 / 1000.0,
        }
    }

    #[test]
    fn delta_matches_series_by_culprit() {
        let earlier = [hol(None, 10), hol(Some(6), 4)];
        let now = [hol(None, 15), hol(Some(6), 4), hol(Some(7), 2)];
        let d = crate::model::core::delta_by_key(&now, &earlier, HolSeries::key);
        let counts: Vec<u64> = d.iter().map(|h| h.count).collect();
        assert_eq!(counts, vec![5, 0, 2], "new culprits are taken whole");
        assert!((d[0].latency_sum_seconds - 0.005).abs() < 1e-12);
    }
}
