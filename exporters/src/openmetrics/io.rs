//! The counter families of each (cgroup, device, op) series, selectable
//! one by one: each costs one series per (cgroup, device, op).

use prometheus_client::registry::Unit;

use crate::model::IoSeries;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoCounter {
    Requests,
    Bytes,
    Merged,
    Requeued,
    Cost,
    Random,
    Device,
}

impl IoCounter {
    /// In exposition order.
    pub const ALL: [IoCounter; 7] = [
        IoCounter::Requests,
        IoCounter::Bytes,
        IoCounter::Merged,
        IoCounter::Requeued,
        IoCounter::Cost,
        IoCounter::Random,
        IoCounter::Device,
    ];

    /// Fleet default: what the dashboards and rules use (IOPS, throughput,
    /// device-time share).
    pub const FLEET: [IoCounter; 3] = [IoCounter::Requests, IoCounter::Bytes, IoCounter::Device];

    /// Name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            IoCounter::Requests => "requests",
            IoCounter::Bytes => "bytes",
            IoCounter::Merged => "merged",
            IoCounter::Requeued => "requeued",
            IoCounter::Cost => "cost",
            IoCounter::Random => "random",
            IoCounter::Device => "device",
        }
    }

    /// Family name (before the unit and `_total` suffixes), help and unit.
    pub fn family(self) -> (&'static str, &'static str, Option<Unit>) {
        match self {
            IoCounter::Requests => ("iowarden_io_requests", "Completed block requests", None),
            IoCounter::Bytes => ("iowarden_io", "Completed bytes", Some(Unit::Bytes)),
            IoCounter::Merged => ("iowarden_io_merged", "Requests merged into another request", None),
            IoCounter::Requeued => ("iowarden_io_requeued", "Requests requeued by the driver", None),
            IoCounter::Cost => (
                "iowarden_io_cost",
                "Cost the device's linear iocost model charged the completed reads and writes (device time)",
                Some(Unit::Seconds),
            ),
            IoCounter::Random => (
                "iowarden_io_random_requests",
                "Completed requests the cost model classified random (more than 16 MiB from the previous one's end)",
                None,
            ),
            IoCounter::Device => (
                "iowarden_io_device",
                "Sum of issue-to-completion time of completed requests (device time)",
                Some(Unit::Seconds),
            ),
        }
    }

    pub fn value(self, x: &IoSeries) -> f64 {
        match self {
            IoCounter::Requests => x.ios as f64,
            IoCounter::Bytes => x.bytes as f64,
            IoCounter::Merged => x.merged as f64,
            IoCounter::Requeued => x.requeued as f64,
            IoCounter::Cost => x.cost_seconds,
            IoCounter::Random => x.random_ios as f64,
            IoCounter::Device => x.latency.device.sum_seconds,
        }
    }
}
