//! Whom each cgroup's requests waited behind (the culprit account, on by
//! default: docs/culprits.md). On the device:
//! while N requests are on it, each has 1/N of it (its service) and waits
//! behind each other one for the rest (processor sharing); summed over a
//! victim's requests, the parts add up to their device time. In the I/O
//! scheduler: behind the requests it issued while the victim's waited.

use serde::{Deserialize, Serialize};

use super::core::{CgroupRef, DeviceRef, Op, Stage};
use super::metric::metrics;

/// The time of `victim`'s `op` requests spent behind `culprit`'s
/// `culprit_op` requests in `stage`, since start: on the device, or queued
/// in the I/O scheduler while the culprit's held the device. `culprit`
/// None: the victim's own share of the device (its service); `culprit` =
/// `victim`: behind its own other requests; `culprit` "other": behind the
/// series not named apart on the device (beyond its 16 busiest).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CulpritSeries {
    pub device: DeviceRef,
    pub victim: CgroupRef,
    pub op: Op,
    pub culprit: Option<CgroupRef>,
    pub culprit_op: Option<Op>,
    /// Stage::Device or Stage::Queue.
    #[serde(default = "device_stage")]
    pub stage: Stage,
    /// Summed over the victim's requests: two requests waiting 1 ms each
    /// count 2 ms.
    pub seconds: f64,
}

fn device_stage() -> Stage {
    Stage::Device
}

impl Default for CulpritSeries {
    fn default() -> CulpritSeries {
        CulpritSeries {
            device: DeviceRef::default(),
            victim: CgroupRef::default(),
            op: Op::default(),
            culprit: None,
            culprit_op: None,
            stage: Stage::Device,
            seconds: 0.0,
        }
    }
}

/// A culprit record's identity: device (major, minor), victim, op, stage,
/// culprit and its op.
pub type CulpritKey = (u32, u32, u64, Op, Stage, Option<(u64, Op)>);

impl CulpritSeries {
    pub fn key(&self) -> CulpritKey {
        (
            self.device.major,
            self.device.minor,
            self.victim.id,
            self.op,
            self.stage,
            self.culprit
                .as_ref()
                .zip(self.culprit_op)
                .map(|(c, o)| (c.id, o)),
        )
    }

    /// Whether the victim waited behind another cgroup (not its own
    /// service or its own queue).
    pub fn behind_another(&self) -> bool {
        self.culprit
            .as_ref()
            .is_some_and(|c| c.id != self.victim.id)
    }
}

metrics!(CulpritSeries {
    counter seconds => "iowarden_culprit" [Seconds],
        "Time (summed over requests) of `victim`'s `op` requests spent behind `culprit`'s `culprit_op` requests. stage=\"device\" (issue to completion): with N requests on the device, n of them the culprit's, n/N of the time (culprit=\"none\": its own 1/N, its service). stage=\"queue\" (allocation to issue, under an I/O scheduler): the time it waited while the culprit's requests held the device, or, with none on it, while the scheduler kept the device for the culprit. culprit = victim: behind its own requests; culprit=\"other\": the device's series beyond its 16 busiest, by op. On by default (--no-culprits)";
});
