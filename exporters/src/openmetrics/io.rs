//! OpenMetrics for block I/O per (cgroup, device, op): the counter
//! families, selectable one by one (each costs one series per (cgroup,
//! device, op)), the latency histogram, and what the BPF side dropped.

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use super::family::{collapse_buckets, counter, encode_family, ClassicBuckets, Labels};
use crate::model::{
    DropCounters, Families, IoSeries, Snapshot, Stage, TaskDelay, Volume, OTHER_CGROUP,
    OTHER_CGROUP_ID,
};

/// A counter family of IoSeries that `--io-counters` selects: those
/// model/io.rs's `metrics!` names with `as "..."`, by their place there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoCounter(usize);

impl IoCounter {
    /// Fleet default: what the dashboards and rules use (IOPS, throughput,
    /// device-time share, time held by io.max: a series only for a cgroup
    /// io.max has held).
    /// As `--io-counters` takes it.
    pub const FLEET: &'static str = "requests,bytes,device,held-io-max";

    /// Every selectable family, in exposition order.
    pub fn all() -> Vec<IoCounter> {
        IoSeries::families()
            .iter()
            .enumerate()
            .filter(|(_, f)| f.select.is_some())
            .map(|(i, _)| IoCounter(i))
            .collect()
    }

    /// The family selected by `name`, if any.
    pub fn named(name: &str) -> Option<IoCounter> {
        Self::all().into_iter().find(|c| c.as_str() == name)
    }

    /// The fleet default's families.
    pub fn fleet() -> Vec<IoCounter> {
        Self::FLEET
            .split(',')
            .map(|n| Self::named(n).unwrap_or_else(|| panic!("FLEET names no counter '{n}'")))
            .collect()
    }

    /// Name on the command line.
    pub fn as_str(self) -> &'static str {
        IoSeries::families()[self.0].select.unwrap_or_default()
    }

    /// Its family's place among IoSeries' families.
    pub(crate) fn index(self) -> usize {
        self.0
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
        LATENCY_HELP,
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

/// One sample per (volume, disk below it): join on device to show a
/// volume with its disk.
pub(crate) fn encode_volumes(enc: &mut DescriptorEncoder, volumes: &[Volume]) -> std::fmt::Result {
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
pub(crate) fn encode_task_delays(
    enc: &mut DescriptorEncoder,
    delays: &[TaskDelay],
) -> std::fmt::Result {
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
pub(crate) fn encode_drops(enc: &mut DescriptorEncoder, drops: &DropCounters) -> std::fmt::Result {
    let rows: Vec<(Labels, f64)> = [
        ("slot_table_full", drops.slot_table_full),
        ("device_table_full", drops.device_table_full),
        ("no_issue_stamp", drops.no_issue_stamp),
        ("no_start_stamp", drops.no_start_stamp),
        ("culprit_untold", drops.culprit_untold),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_of_io_series_is_selectable_once_and_the_fleet_default_exists() {
        // encode_counters is IoSeries' only way out: a family without
        // `as "..."` would never be exported.
        let families = IoSeries::families();
        let all = IoCounter::all();
        assert_eq!(all.len(), families.len());
        let mut names: Vec<&str> = all.iter().map(|c| c.as_str()).collect();
        assert_eq!(names[0], "requests");
        names.sort();
        names.dedup();
        assert_eq!(names.len(), families.len(), "a name selects two families");
        assert_eq!(
            IoCounter::fleet().len(),
            IoCounter::FLEET.split(',').count()
        );
        assert_eq!(IoCounter::named("iops"), None);
    }
}
