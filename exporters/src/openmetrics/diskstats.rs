//! OpenMetrics for the kernel's own completion counts of the traced devices
//! (/proc/diskstats), to compare with iowarden's per-cgroup sums.

use prometheus_client::encoding::DescriptorEncoder;

use super::family::{encode_families, Labels};
use crate::model::KernelDiskStats;

/// The families model/diskstats.rs declares, per device.
pub(crate) fn encode(enc: &mut DescriptorEncoder, stats: &[KernelDiskStats]) -> std::fmt::Result {
    let records: Vec<(Labels, &KernelDiskStats)> = stats
        .iter()
        .map(|s| {
            let l: Labels = vec![
                ("device".into(), s.device.name.clone()),
                ("devt".into(), s.device.devt()),
            ];
            (l, s)
        })
        .collect();
    encode_families(enc, &records)
}
