//! Whom each cgroup's requests waited behind on the device (`--culprits`):
//! while N requests are on a device, each has 1/N of it (its service) and
//! waits behind each other one for the rest (processor sharing). Summed
//! over a victim's requests, the parts add up to their device time.

use serde::{Deserialize, Serialize};

use super::core::{CgroupRef, DeviceRef, Op};
use super::metric::metrics;

/// The device time of `victim`'s `op` requests spent behind `culprit`'s
/// `culprit_op` requests on the device, since start. `culprit` None: the
/// victim's own share of the device (its service); `culprit` = `victim`:
/// behind its own other requests.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct CulpritSeries {
    pub device: DeviceRef,
    pub victim: CgroupRef,
    pub op: Op,
    pub culprit: Option<CgroupRef>,
    pub culprit_op: Option<Op>,
    /// Summed over the victim's requests: two requests waiting 1 ms each
    /// count 2 ms.
    pub seconds: f64,
}

impl CulpritSeries {
    pub fn key(&self) -> (u32, u32, u64, Op, Option<(u64, Op)>) {
        (
            self.device.major,
            self.device.minor,
            self.victim.id,
            self.op,
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
        "Device time (issue to completion, summed over requests) of `victim`'s `op` requests spent behind `culprit`'s `culprit_op` requests: with N requests on the device, n of them the culprit's, n/N of the time (culprit = victim: behind its own requests; culprit=\"none\": its own 1/N, its service). Needs --culprits";
});
