//! NVMe queues (bpf/nvme.bpf.c, where the nvme driver is): commands per
//! queue and cgroup, submission-queue occupancy, and head-of-line
//! interference between cgroups sharing a queue.

use serde::{Deserialize, Serialize};

use super::core::{delta_subtracts, CgroupRef, Delta, DeviceRef};

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

// inflight is a gauge.
delta_subtracts!(
    NvmeQueueCgroup: commands,
    completions,
    bytes,
    small_commands,
    large_commands
);

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

delta_subtracts!(HolSeries: count, latency_sum_seconds);

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
