//! OpenMetrics for the kernel's own completion counts of the traced devices
//! (/proc/diskstats), to compare with iowarden's per-cgroup sums.

use prometheus_client::encoding::DescriptorEncoder;

use super::expose::{Expose, Input};
use super::family::{encode_families, Labels};
use crate::model::KernelDiskStats;

impl Expose for Vec<KernelDiskStats> {
    fn expose(&self, enc: &mut DescriptorEncoder, _: &Input) -> std::fmt::Result {
        encode(enc, self)
    }
}

/// The families model/diskstats.rs declares, per device.
fn encode(enc: &mut DescriptorEncoder, stats: &[KernelDiskStats]) -> std::fmt::Result {
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
