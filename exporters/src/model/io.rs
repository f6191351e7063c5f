//! Block I/O per (cgroup, device, operation), from bpf/iowarden.bpf.c's
//! block_rq_* programs, and what those programs could not record.

use serde::{Deserialize, Serialize};

use super::core::{CgroupRef, DeviceRef, Op, StageHistograms};
use super::metric::metrics;

/// Block I/O of one cgroup on one device for one operation type.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
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
    /// The part of the throttle stage blk-throttle (io.max) held the
    /// requests' first bios, in seconds (where its program attaches; the
    /// rest of the stage is the rq-qos policies' wait).
    #[serde(default)]
    pub held_io_max_seconds: f64,
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

    /// A series that has counted nothing yet.
    pub fn empty(cgroup: CgroupRef, device: DeviceRef, op: Op) -> IoSeries {
        IoSeries {
            cgroup,
            device,
            op,
            ..Default::default()
        }
    }

    /// Adds the counters of `other` (of any cgroup) to this series'. The
    /// pattern names every field, so a new one cannot be left out.
    pub fn add(&mut self, other: &IoSeries) {
        let IoSeries {
            cgroup: _,
            device: _,
            op: _,
            ios,
            bytes,
            merged,
            requeued,
            cost_seconds,
            random_ios,
            held_io_max_seconds,
            latency:
                StageHistograms {
                    throttle,
                    queue,
                    device,
                    total,
                },
        } = other;
        self.ios += ios;
        self.bytes += bytes;
        self.merged += merged;
        self.requeued += requeued;
        self.cost_seconds += cost_seconds;
        self.random_ios += random_ios;
        self.held_io_max_seconds += held_io_max_seconds;
        self.latency.throttle.add(throttle);
        self.latency.queue.add(queue);
        self.latency.device.add(device);
        self.latency.total.add(total);
    }
}

// In exposition order; `as` names what `--io-counters` selects each by
// (openmetrics::IoCounter).
metrics!(IoSeries {
    counter ios => "iowarden_io_requests" as "requests", "Completed block requests";
    counter bytes => "iowarden_io" [Bytes] as "bytes", "Completed bytes";
    counter merged => "iowarden_io_merged" as "merged", "Requests merged into another request";
    counter requeued => "iowarden_io_requeued" as "requeued", "Requests requeued by the driver";
    counter cost_seconds => "iowarden_io_cost" [Seconds] as "cost",
        "Cost the device's linear iocost model charged the completed reads and writes (device time)";
    counter random_ios => "iowarden_io_random_requests" as "random",
        "Completed requests the cost model classified random (more than 16 MiB from the previous one's end)";
    counter latency => "iowarden_io_device" [Seconds] as "device",
        "Sum of issue-to-completion time of completed requests (device time)",
        |s: &IoSeries| Some(s.latency.device.sum_seconds);
    counter held_io_max_seconds => "iowarden_io_held_io_max" [Seconds] as "held-io-max",
        "Time blk-throttle (io.max) held the first bio of completed requests (part of the throttle stage)",
        |s: &IoSeries| (s.held_io_max_seconds > 0.0).then_some(s.held_io_max_seconds);
} derived {
    counter latency => "iowarden_io_throttle" [Seconds] as "throttle",
        "Sum of the throttle stage of completed requests: bio submission to request allocation, held by io.max, iocost, io.latency and wbt",
        |s: &IoSeries| (s.latency.throttle.sum_seconds > 0.0).then_some(s.latency.throttle.sum_seconds);
});

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
    /// Requests whose time the culprit account did not wholly split: they
    /// outlived its horizon, logged after the span they started in was
    /// replayed (docs/culprits.md).
    #[serde(default)]
    pub culprit_late: u64,
    /// Requests the culprit account did not split at all: lost from its
    /// log before they were read (a ring overwritten, the drain starved).
    #[serde(default)]
    pub culprit_lost: u64,
}

// One family with a reason label: openmetrics/io.rs encode_drops.
metrics!(DropCounters {
    counter slot_table_full;
    counter device_table_full;
    counter no_issue_stamp;
    counter no_start_stamp;
    counter culprit_late;
    counter culprit_lost;
});
