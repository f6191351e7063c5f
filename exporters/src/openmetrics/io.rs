//! OpenMetrics for block I/O per (cgroup, device, op): the counter
//! families, selectable one by one (each costs one series per (cgroup,
//! device, op)), the latency histogram, and what the BPF side dropped.

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use super::expose::{Expose, Input, IoCounter};
use super::family::{collapse_buckets, counter, encode_family, ClassicBuckets, Labels};
use crate::model::{
    DropCounters, Families, IoSeries, Stage, TaskDelay, Volume, OTHER_CGROUP, OTHER_CGROUP_ID,
};

/// The selected counter families, then the latency histogram of each
/// selected stage.
impl Expose for Vec<IoSeries> {
    fn expose(&self, enc: &mut DescriptorEncoder, input: &Input) -> std::fmt::Result {
        let opts = input.opts;
        encode_counters(enc, self, &opts.counters)?;
        let lower_bounds = &input.snap.hist_lower_bounds_seconds;
        encode_latency(enc, self, lower_bounds, &opts.stages, opts.classic)
    }
}

impl Expose for Vec<Volume> {
    fn expose(&self, enc: &mut DescriptorEncoder, _: &Input) -> std::fmt::Result {
        encode_volumes(enc, self)
    }
}

impl Expose for Vec<TaskDelay> {
    fn expose(&self, enc: &mut DescriptorEncoder, _: &Input) -> std::fmt::Result {
        encode_task_delays(enc, self)
    }
}

impl Expose for DropCounters {
    fn expose(&self, enc: &mut DescriptorEncoder, _: &Input) -> std::fmt::Result {
        encode_drops(enc, self)
    }
}

pub(super) fn cgroup_id_label(id: u64) -> String {
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
fn encode_counters(
    enc: &mut DescriptorEncoder,
    io: &[IoSeries],
    counters: &[IoCounter],
) -> std::fmt::Result {
    let families = IoSeries::families();
    let records: Vec<(Labels, &IoSeries)> = io.iter().map(|x| (io_labels(x), x)).collect();
    for &c in counters {
        encode_family(enc, &families[c.index()], &records)?;
    }
    Ok(())
}

/// The latency family's help, in every exposition format.
pub(crate) const LATENCY_HELP: &str = "Request latency by stage: throttle (bio submission to request \
    allocation: held by io.max, iocost, io.latency, wbt), queue (allocation to issue), device (issue \
    to completion), total (submission to completion)";

/// The latency histogram of every series for each selected stage, in
/// classic buckets.
fn encode_latency(
    enc: &mut DescriptorEncoder,
    io: &[IoSeries],
    lower_bounds: &[f64],
    stages: &[Stage],
    classic: ClassicBuckets,
) -> std::fmt::Result {
    if io.is_empty() || stages.is_empty() {
        return Ok(());
    }
    let mut d = enc.encode_descriptor(
        "iowarden_io_latency",
        LATENCY_HELP,
        Some(&Unit::Seconds),
        MetricType::Histogram,
    )?;
    for x in io {
        for &stage in stages {
            let h = x.latency.get(stage);
            let mut l = io_labels(x);
            l.push(("stage".into(), stage.as_str().into()));
            let buckets = collapse_buckets(h, lower_bounds, classic);
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

/// One sample per (volume, disk below it): join on device to show a
/// volume with its disk.
fn encode_volumes(enc: &mut DescriptorEncoder, volumes: &[Volume]) -> std::fmt::Result {
    let rows: Vec<(Labels, f64)> = volumes
        .iter()
        .flat_map(|v| {
            v.lower.iter().map(|lower| {
                let labels = [
                    ("device", v.device.name.as_str()),
                    ("kind", v.kind.as_str()),
                    ("name", v.name.as_str()),
                    ("lower", lower.as_str()),
                ];
                let labels = labels.map(|(k, v)| (k.to_string(), v.to_string()));
                (labels.to_vec(), 1.0)
            })
        })
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    super::family::gauge(
        enc,
        "iowarden_volume_lower_info",
        "A device-mapper or md volume (device, its dm or md name) and a disk it sits on (lower)",
        None,
        &rows,
    )
}

/// The delays io.latency and iocost put on each cgroup's tasks, per
/// device.
fn encode_task_delays(enc: &mut DescriptorEncoder, delays: &[TaskDelay]) -> std::fmt::Result {
    let records: Vec<(Labels, &TaskDelay)> = delays
        .iter()
        .map(|d| {
            let l = vec![
                ("cgroup".into(), d.cgroup.path.clone()),
                ("cgroup_id".into(), cgroup_id_label(d.cgroup.id)),
                ("device".into(), d.device.name.clone()),
            ];
            (l, d)
        })
        .collect();
    super::family::encode_families(enc, &records)
}

/// Events the BPF side could not record fully, by reason.
fn encode_drops(enc: &mut DescriptorEncoder, drops: &DropCounters) -> std::fmt::Result {
    let rows: Vec<(Labels, f64)> = [
        ("slot_table_full", drops.slot_table_full),
        ("device_table_full", drops.device_table_full),
        ("no_issue_stamp", drops.no_issue_stamp),
        ("no_start_stamp", drops.no_start_stamp),
        ("culprit_late", drops.culprit_late),
        ("culprit_lost", drops.culprit_lost),
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
