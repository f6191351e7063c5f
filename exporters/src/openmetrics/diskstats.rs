//! OpenMetrics for the kernel's own completion counts of the traced devices
//! (/proc/diskstats), to compare with iowarden's per-cgroup sums.

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use super::family::{counter, Labels, Rows};
use crate::model::KernelDiskStats;

/// Bytes in a /proc/diskstats sector, whatever the device's block size.
const SECTOR_BYTES: f64 = 512.0;

fn per_device(stats: &[KernelDiskStats], value: fn(&KernelDiskStats) -> f64) -> Rows {
    stats
        .iter()
        .map(|s| {
            let l: Labels = vec![
                ("device".into(), s.device.name.clone()),
                ("devt".into(), s.device.devt()),
            ];
            (l, value(s))
        })
        .collect()
}

pub(crate) fn encode(enc: &mut DescriptorEncoder, stats: &[KernelDiskStats]) -> std::fmt::Result {
    counter(
        enc,
        "iowarden_kernel_completed_requests",
        "Reads, writes and discards the kernel accounted as completed (/proc/diskstats, since boot): \
         compare with iowarden_io_requests_total",
        None,
        &per_device(stats, |s| s.completed_requests as f64),
    )?;
    counter(
        enc,
        "iowarden_kernel_completed",
        "Bytes read, written and discarded as the kernel accounts them (/proc/diskstats sectors, since boot): \
         compare with iowarden_io_bytes_total",
        Some(Unit::Bytes),
        &per_device(stats, |s| s.sectors as f64 * SECTOR_BYTES),
    )?;
    #[cfg(test)]
    counter(
        enc,
        "iowarden_walkthrough",
        "The test-only counter of README's Adding a metric",
        None,
        &per_device(stats, |s| s.walkthrough as f64),
    )?;
    Ok(())
}
