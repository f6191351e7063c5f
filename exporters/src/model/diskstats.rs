//! The kernel's own completion accounting of the traced devices
//! (/proc/diskstats), beside iowarden's sums: the gap between the two is
//! what the kernel completed without delivering it to BPF (or counted
//! differently: see docs/semantics.md).

use serde::{Deserialize, Serialize};

use super::core::DeviceRef;
use super::metric::metrics;

/// One device's line of /proc/diskstats, cumulative since boot.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct KernelDiskStats {
    pub device: DeviceRef,
    /// Reads, writes and discards completed (flushes are counted apart).
    pub completed_requests: u64,
    /// Sectors (512 bytes) read, written and discarded.
    pub sectors: u64,
    /// Milliseconds the device had a request in flight (io_ticks, field 10):
    /// a window it idled in is not a saturated one, whatever its mean depth.
    #[serde(default)]
    pub busy_ms: u64,
    /// A counter that exists in tests only: docs/contributing.md's "Adding a metric"
    /// followed for it (this field and its line in `metrics!` below), and
    /// walkthrough_tests.rs
    /// checks it reaches JSON, a delta, OpenMetrics and protobuf.
    #[cfg(test)]
    #[serde(default)]
    pub walkthrough: u64,
}

impl KernelDiskStats {
    pub fn key(&self) -> (u32, u32) {
        (self.device.major, self.device.minor)
    }
}

/// Bytes in a /proc/diskstats sector, whatever the device's block size.
const SECTOR_BYTES: f64 = 512.0;

metrics!(KernelDiskStats {
    counter completed_requests => "iowarden_kernel_completed_requests",
        "Reads, writes and discards the kernel accounted as completed (/proc/diskstats, since boot): \
         compare with iowarden_io_requests_total";
    counter sectors => "iowarden_kernel_completed" [Bytes],
        "Bytes read, written and discarded as the kernel accounts them (/proc/diskstats sectors, since boot): \
         compare with iowarden_io_bytes_total",
        |s: &KernelDiskStats| Some(s.sectors as f64 * SECTOR_BYTES);
    counter busy_ms => "iowarden_kernel_busy" [Seconds],
        "Time the device had a request in flight (/proc/diskstats io_ticks, since boot): its utilization as iostat's %util",
        |s: &KernelDiskStats| Some(s.busy_ms as f64 / 1e3);
    #[cfg(test)]
    counter walkthrough => "iowarden_walkthrough", "The test-only counter of docs/contributing.md's Adding a metric";
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::core::Delta;

    #[test]
    fn delta_subtracts_every_count() {
        let at = |requests, sectors, busy_ms| KernelDiskStats {
            device: DeviceRef {
                name: "loop0".into(),
                major: 7,
                minor: 0,
            },
            completed_requests: requests,
            sectors,
            busy_ms,
            ..Default::default()
        };
        assert_eq!(at(10, 80, 900).delta(&at(4, 32, 400)), at(6, 48, 500));
    }
}
