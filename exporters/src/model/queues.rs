//! blk-mq hardware queues of the traced devices: per-queue request counts
//! (bpf/iowarden.bpf.c) and which CPUs submit to each queue (sysfs).

use serde::{Deserialize, Serialize};

use super::core::DeviceRef;
use super::metric::metrics;

/// One blk-mq hardware queue of one device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
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

impl QueueSeries {
    pub fn key(&self) -> (u32, u32, u32) {
        (self.device.major, self.device.minor, self.hctx)
    }
}

metrics!(QueueSeries {
    counter inserted => "iowarden_hwq_inserted", "Requests inserted into the I/O scheduler";
    counter issued => "iowarden_hwq_issued", "Requests issued on the hardware queue";
    counter completed => "iowarden_hwq_completed", "Requests completed on the hardware queue";
    counter requeued => "iowarden_hwq_requeued", "Requests requeued on the hardware queue";
    counter busy_seconds => "iowarden_hwq_busy" [Seconds],
        "Sum of in-flight time on the hardware queue; its rate is the mean occupancy";
    gauge inflight => "iowarden_hwq_inflight", "Requests in flight on the hardware queue";
});

/// A blk-mq hardware queue and the CPUs mapped to it
/// (/sys/block/DEV/mq/N/cpu_list): tenants on those CPUs share the queue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct CpuQueueMap {
    pub device: String,
    pub hctx: u32,
    pub cpus: Vec<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::core::Delta;

    fn queue(inserted: Option<u64>, completed: u64, inflight: Option<u64>) -> QueueSeries {
        QueueSeries {
            device: DeviceRef {
                name: "loop0".into(),
                major: 7,
                minor: 0,
            },
            hctx: 0,
            inserted,
            issued: inserted,
            completed,
            requeued: 0,
            inflight,
            busy_seconds: completed as f64,
        }
    }

    #[test]
    fn delta_subtracts_counters_and_keeps_the_inflight_gauge() {
        let d = queue(Some(30), 25, Some(5)).delta(&queue(Some(10), 9, Some(1)));
        assert_eq!(
            (d.inserted, d.issued, d.completed),
            (Some(20), Some(20), 16)
        );
        assert_eq!(d.busy_seconds, 16.0);
        assert_eq!(d.inflight, Some(5), "a gauge: the latest reading");
        // Counted in one reading only (--hwq-events toggled): unknown.
        let d = queue(Some(30), 25, Some(5)).delta(&queue(None, 9, None));
        assert_eq!((d.inserted, d.completed), (None, 16));
    }
}
