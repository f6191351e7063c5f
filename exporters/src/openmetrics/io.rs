//! OpenMetrics for block I/O per (cgroup, device, op): the counter
//! families, selectable one by one (each costs one series per (cgroup,
//! device, op)), the latency histogram, and what the BPF side dropped.

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use super::family::{collapse_buckets, counter, ClassicBuckets, Labels};
use crate::model::{DropCounters, IoSeries, Snapshot, Stage, OTHER_CGROUP, OTHER_CGROUP_ID};

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

fn cgroup_id_label(id: u64) -> String {
    match id {
        OTHER_CGROUP_ID => OTHER_CGROUP.into(),
        id => id.to_string(),
    }
}

/// The labels of a series: cgroup, cgroup_id, device, op.
pub(crate) fn io_labels(s: &IoSeries) -> Labels {
    vec![
        ("cgroup".into(), s.cgroup.path.clone()),
        ("cgroup_id".into(), cgroup_id_label(s.cgroup.id)),
        ("device".into(), s.device.name.clone()),
        ("op".into(), s.op.as_str().into()),
    ]
}

/// One family per selected counter, in the order given.
pub(crate) fn encode_counters(
    enc: &mut DescriptorEncoder,
    io: &[IoSeries],
    counters: &[IoCounter],
) -> std::fmt::Result {
    for &c in counters {
        let (name, help, unit) = c.family();
        let rows: Vec<(Labels, f64)> = io.iter().map(|x| (io_labels(x), c.value(x))).collect();
        counter(enc, name, help, unit, &rows)?;
    }
    Ok(())
}

/// The latency histogram of every series for each selected stage, in
/// classic buckets.
pub(crate) fn encode_latency(
    enc: &mut DescriptorEncoder,
    snap: &Snapshot,
    stages: &[Stage],
    classic: ClassicBuckets,
) -> std::fmt::Result {
    if snap.io.is_empty() || stages.is_empty() {
        return Ok(());
    }
    let mut d = enc.encode_descriptor(
        "iowarden_io_latency",
        "Request latency by stage: queue (allocation to issue), device (issue to completion), total",
        Some(&Unit::Seconds),
        MetricType::Histogram,
    )?;
    for x in &snap.io {
        for &stage in stages {
            let h = x.latency.get(stage);
            let mut l = io_labels(x);
            l.push(("stage".into(), stage.as_str().into()));
            let buckets = collapse_buckets(h, &snap.hist_lower_bounds_seconds, classic);
            d.encode_family(&l)?.encode_histogram::<Labels>(
                h.sum_seconds,
                h.count(),
                &buckets,
                None,
            )?;
        }
    }
    Ok(())
}

/// Events the BPF side could not record fully, by reason.
pub(crate) fn encode_drops(enc: &mut DescriptorEncoder, drops: &DropCounters) -> std::fmt::Result {
    let rows: Vec<(Labels, f64)> = [
        ("slot_table_full", drops.slot_table_full),
        ("device_table_full", drops.device_table_full),
        ("no_issue_stamp", drops.no_issue_stamp),
        ("no_start_stamp", drops.no_start_stamp),
    ]
    .iter()
    .map(|(r, v)| (vec![("reason".to_string(), r.to_string())], *v as f64))
    .collect();
    counter(
        enc,
        "iowarden_dropped",
        "Events the BPF side could not record fully",
        None,
        &rows,
    )
}
