//! What every domain's encoder is given, and the trait it implements:
//! [`Expose`], one impl per type of a field of the Snapshot (in that
//! domain's file), called in the order model/snapshot.rs's
//! `snapshot_domains!` gives (its `exposed N`). Also the options of an
//! exposition: the I/O counters and latency stages it writes.

use prometheus_client::encoding::DescriptorEncoder;

use super::family::ClassicBuckets;
use crate::model::{Families, IoSeries, SelfMetrics, Snapshot, Stage};

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

/// Which counters and latency stages go out per series, and how coarse the classic
/// (text) buckets are: what a series costs the Prometheus that stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpositionOptions {
    pub counters: Vec<IoCounter>,
    pub stages: Vec<Stage>,
    pub classic: ClassicBuckets,
}

/// Fleet defaults: requests, bytes and device time, the total stage only,
/// classic buckets at powers of four.
impl Default for ExpositionOptions {
    fn default() -> Self {
        ExpositionOptions {
            counters: IoCounter::fleet(),
            stages: vec![Stage::Total],
            classic: ClassicBuckets::PowersOfFour,
        }
    }
}

/// What one encoding reads, borrowed from the collector.
pub(crate) struct Input<'a> {
    pub snap: &'a Snapshot,
    pub extra: &'a SelfMetrics,
    pub opts: &'a ExpositionOptions,
}

/// A snapshot domain's families, written from its field (`self`).
pub(crate) trait Expose {
    fn expose(&self, enc: &mut DescriptorEncoder, input: &Input) -> std::fmt::Result;
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
