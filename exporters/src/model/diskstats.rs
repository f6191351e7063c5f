//! The kernel's own completion accounting of the traced devices
//! (/proc/diskstats), beside iowarden's sums: the gap between the two is
//! what the kernel completed without delivering it to BPF (or counted
//! differently: see the README's semantics).

use serde::{Deserialize, Serialize};

use super::core::{delta_subtracts, DeviceRef};

/// One device's line of /proc/diskstats, cumulative since boot.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct KernelDiskStats {
    pub device: DeviceRef,
    /// Reads, writes and discards completed (flushes are counted apart).
    pub completed_requests: u64,
    /// Sectors (512 bytes) read, written and discarded.
    pub sectors: u64,
    /// A counter that exists in tests only: README's "Adding a metric"
    /// followed for it (this field, its name in `delta_subtracts!` below,
    /// its family in openmetrics/diskstats.rs), and walkthrough_tests.rs
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

delta_subtracts!(
    KernelDiskStats: completed_requests,
    sectors,
    #[cfg(test)]
    walkthrough
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::core::Delta;

    #[test]
    fn delta_subtracts_both_counts() {
        let at = |requests, sectors| KernelDiskStats {
            device: DeviceRef {
                name: "loop0".into(),
                major: 7,
                minor: 0,
            },
            completed_requests: requests,
            sectors,
            ..Default::default()
        };
        assert_eq!(at(10, 80).delta(&at(4, 32)), at(6, 48));
    }
}
