//! The lock report of a snapshot, built from one read of the series table:
//! series by site and cgroup, their stacks, and the bounded top-N rows.

use std::collections::BTreeMap;

use iowarden_exporters::{CgroupRef, LockReport, LockSeries, LockStack};

use super::raw::{RawLockSample, COUNTERS};
use super::sites::{self, TopSites};
use crate::host::cgroups::CgroupResolver;
use crate::locks_skel::types::lk_counter;
use crate::probes::probe::cgroup_ref;

/// The cumulative report of `raw`; `stack_names` gives a stack id's site
/// and frames, `top` keeps the exported top sites across reports.
pub fn build(
    raw: &RawLockSample,
    block_only: bool,
    resolver: &CgroupResolver,
    mut stack_names: impl FnMut(u32) -> (String, Vec<String>),
    top: &mut TopSites,
) -> LockReport {
    let mut series = Vec::new();
    let mut stacks: BTreeMap<u32, LockStack> = BTreeMap::new();
    for (k, (count, wait_ns, hist)) in &raw.series {
        let (site, frames) = stack_names(k.stack_id);
        stacks.entry(k.stack_id).or_insert_with(|| LockStack {
            id: k.stack_id,
            frames,
        });
        series.push(LockSeries {
            site,
            stack_id: k.stack_id,
            cgroup: cgroup_ref(resolver, k.cgroup_id),
            kind: sites::kind_name(k.flags),
            count: *count,
            wait_seconds: *wait_ns as f64 / 1e9,
            hist_log2_ns: hist.clone(),
        });
    }
    let rows: Vec<(String, CgroupRef, u64, f64)> = series
        .iter()
        .map(|s| (s.site.clone(), s.cgroup.clone(), s.count, s.wait_seconds))
        .collect();
    let top = top.update(&rows);
    series.sort_by(|a, b| b.wait_seconds.total_cmp(&a.wait_seconds));
    LockReport {
        mode: if block_only { "block" } else { "all" }.into(),
        series,
        stacks: stacks.into_values().collect(),
        top,
        filtered: raw.counters[lk_counter::LK_FILTERED.0 as usize],
        dropped: COUNTERS
            .iter()
            .map(|(c, n)| (n.to_string(), raw.counters[c.0 as usize]))
            .collect(),
    }
}
