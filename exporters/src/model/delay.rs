//! The delays io.latency and iocost (a cgroup in debt) put on a cgroup's
//! tasks on their way back to user space: after a bio completed and
//! before the next one exists, so outside every latency stage of the
//! cgroup's I/O, and in what its application waits for.

use serde::{Deserialize, Serialize};

use super::core::{CgroupRef, DeviceRef};
use super::metric::metrics;

/// A cgroup's delays on one device, since start.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TaskDelay {
    pub cgroup: CgroupRef,
    /// The disk whose blkg asked for the delay.
    pub device: DeviceRef,
    pub delays: u64,
    pub seconds: f64,
}

impl TaskDelay {
    pub fn key(&self) -> (u32, u32, u64) {
        (self.device.major, self.device.minor, self.cgroup.id)
    }
}

metrics!(TaskDelay {
    counter delays => "iowarden_io_task_delays",
        "Times io.latency or iocost (a cgroup in debt) delayed a task of the cgroup on its way back to user space";
    counter seconds => "iowarden_io_task_delay" [Seconds],
        "Time io.latency or iocost (a cgroup in debt) delayed tasks of the cgroup on their way back to user space: between their I/Os, outside every latency stage";
});
