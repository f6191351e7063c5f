//! The cap itself: which cgroups keep their own series, and what "other"
//! has been credited with (see mod.rs).

use std::collections::{BTreeMap, HashSet};
use std::num::NonZeroUsize;

use super::credit::{CreditFold, Credited};
use super::culprits;
use crate::model::{CgroupRef, DeviceRef, IoSeries, Op, PressureSeries, Snapshot};

/// Keeps the top-K cgroups by device time since start, sums the rest.
#[derive(Debug)]
pub struct CgroupCap {
    max: NonZeroUsize,
    /// Cgroups of the last snapshot outside the top K.
    folded: usize,
    io: CreditFold<IoSeries>,
    culprits: culprits::CulpritFold,
    pressure: CreditFold<PressureSeries>,
}

impl CgroupCap {
    pub fn new(max: NonZeroUsize) -> CgroupCap {
        CgroupCap {
            max,
            folded: 0,
            io: CreditFold::default(),
            culprits: culprits::CulpritFold::default(),
            pressure: CreditFold::default(),
        }
    }

    /// K.
    pub fn max(&self) -> usize {
        self.max.get()
    }

    /// How many cgroups of the last snapshot applied were summed into "other".
    pub fn folded(&self) -> usize {
        self.folded
    }

    /// The cgroups that keep their own series: the K with the most device
    /// time (the device stage's sum), then requests, then id for ties.
    fn top(&self, snap: &Snapshot) -> HashSet<u64> {
        let mut per_cgroup: BTreeMap<u64, (f64, u64)> = BTreeMap::new();
        for s in &snap.io {
            let e = per_cgroup.entry(s.cgroup.id).or_default();
            e.0 += s.latency.device.sum_seconds;
            e.1 += s.ios;
        }
        let mut ranked: Vec<(u64, (f64, u64))> = per_cgroup.into_iter().collect();
        ranked.sort_by(|a, b| {
            b.1 .0
                .total_cmp(&a.1 .0)
                .then(b.1 .1.cmp(&a.1 .1))
                .then(a.0.cmp(&b.0))
        });
        ranked
            .into_iter()
            .take(self.max.get())
            .map(|(id, _)| id)
            .collect()
    }

    /// The snapshot to export: the top-K cgroups' series less their credit
    /// to "other", then "other" per (device, op).
    pub fn apply(&mut self, snap: &Snapshot) -> Snapshot {
        let top = self.top(snap);
        let cgroups: HashSet<u64> = snap.io.iter().map(|s| s.cgroup.id).collect();
        self.folded = cgroups.len() - top.len();
        let mut capped = snap.with_io(self.io.apply(&snap.io, &top));
        capped.culprits = self.culprits.apply(&snap.culprits, &top);
        capped.io_pressure = self.pressure.apply(&snap.io_pressure, &top);
        capped
    }
}

impl Credited for IoSeries {
    type Key = (u64, u32, u32, Op);
    type Group = (DeviceRef, Op);

    fn key(&self) -> Self::Key {
        IoSeries::key(self)
    }

    fn cgroup_id(&self) -> u64 {
        self.cgroup.id
    }

    fn group(&self) -> (DeviceRef, Op) {
        (self.device.clone(), self.op)
    }

    fn empty_other((device, op): &(DeviceRef, Op)) -> IoSeries {
        IoSeries::empty(CgroupRef::other(), device.clone(), *op)
    }

    fn add(&mut self, s: &IoSeries) {
        IoSeries::add(self, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Histogram, PressureSeries, StageHistograms, OTHER_CGROUP, OTHER_CGROUP_ID};

    fn series(id: u64, dev: &str, ios: u64, device_s: f64) -> IoSeries {
        let mut counts = vec![0u64; 8];
        counts[3] = ios;
        let h = Histogram {
            counts,
            sum_seconds: device_s,
        };
        IoSeries {
            cgroup: CgroupRef {
                id,
                path: format!("/c{id}"),
            },
            device: DeviceRef {
                name: dev.into(),
                major: 7,
                minor: if dev == "loop0" { 0 } else { 1 },
            },
            op: Op::Read,
            ios,
            bytes: ios * 4096,
            latency: StageHistograms {
                device: h.clone(),
                total: h,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn snap(io: Vec<IoSeries>) -> Snapshot {
        Snapshot {
            io,
            ..Default::default()
        }
    }

    fn total(s: &Snapshot, f: impl Fn(&IoSeries) -> u64) -> u64 {
        s.io.iter().map(f).sum()
    }

    fn other_ios(s: &Snapshot, dev: &str) -> u64 {
        s.io.iter()
            .find(|x| x.cgroup.path == OTHER_CGROUP && x.device.name == dev)
            .map_or(0, |x| x.ios)
    }

    #[test]
    fn keeps_top_k_by_device_time_and_sums_the_rest() {
        let mut cap = CgroupCap::new(NonZeroUsize::new(2).unwrap());
        let s = snap(vec![
            series(1, "loop0", 10, 0.1),
            series(2, "loop0", 1, 5.0),
            series(3, "loop0", 100, 1.0),
            series(4, "loop0", 7, 0.2),
            series(4, "loop1", 3, 0.2),
        ]);
        let out = cap.apply(&s);
        let ids: HashSet<u64> = out.io.iter().map(|x| x.cgroup.id).collect();
        assert_eq!(ids, HashSet::from([2, 3, OTHER_CGROUP_ID]));
        // Totals add up, per device too.
        assert_eq!(total(&out, |x| x.ios), total(&s, |x| x.ios));
        assert_eq!(total(&out, |x| x.bytes), total(&s, |x| x.bytes));
        assert_eq!(total(&out, |x| x.latency.total.count()), 121);
        assert_eq!(other_ios(&out, "loop0"), 17);
        assert_eq!(other_ios(&out, "loop1"), 3);
        assert_eq!(cap.folded(), 2, "cgroups 1 and 4 summed into other");
        let sum_device: f64 = out.io.iter().map(|x| x.latency.device.sum_seconds).sum();
        assert!((sum_device - 6.5).abs() < 1e-9);
    }

    #[test]
    fn totals_add_up_and_other_only_grows_when_the_top_changes() {
        let mut cap = CgroupCap::new(NonZeroUsize::new(1).unwrap());
        let polls = [
            vec![series(1, "loop0", 10, 1.0), series(2, "loop0", 5, 0.5)],
            // Cgroup 2 overtakes cgroup 1.
            vec![series(1, "loop0", 12, 1.2), series(2, "loop0", 20, 3.0)],
            vec![series(1, "loop0", 13, 1.3), series(2, "loop0", 30, 4.0)],
            // Cgroup 2 removed: its series leaves the table.
            vec![series(1, "loop0", 14, 1.4)],
        ];
        let mut other_seen = Vec::new();
        let mut totals = Vec::new();
        let mut own_seen = Vec::new();
        for p in polls {
            let s = snap(p);
            let out = cap.apply(&s);
            // The snapshot's total, plus what removed series had credited
            // to "other" (cgroup 2's 5 in the last poll), which it keeps.
            totals.push((total(&out, |x| x.ios), total(&s, |x| x.ios)));
            assert!(out.io.len() <= 2);
            other_seen.push(other_ios(&out, "loop0"));
            own_seen.push(
                out.io
                    .iter()
                    .filter(|x| x.cgroup.path != OTHER_CGROUP)
                    .map(|x| (x.cgroup.id, x.ios))
                    .collect::<Vec<_>>(),
            );
        }
        // c2 in other | c1 hands 12 over, c2 counts from its 5 | c1 13 | c2
        // gone with its own 25, c1 top again from its credit of 13.
        assert_eq!(other_seen, vec![5, 17, 18, 18]);
        assert_eq!(totals, vec![(15, 15), (32, 32), (43, 43), (19, 14)]);
        assert_eq!(
            own_seen,
            vec![vec![(1, 10)], vec![(2, 15)], vec![(2, 25)], vec![(1, 1)]]
        );
    }

    #[test]
    fn other_is_labelled_other_in_the_exposition() {
        let mut cap = CgroupCap::new(NonZeroUsize::new(1).unwrap());
        let pressure = |id| PressureSeries {
            cgroup: CgroupRef {
                id,
                path: format!("/c{id}"),
            },
            some_seconds: 0.25,
            full_seconds: 0.125,
        };
        let out = cap.apply(&Snapshot {
            io_pressure: vec![pressure(1), pressure(2)],
            ..snap(vec![
                series(1, "loop0", 10, 1.0),
                series(2, "loop0", 5, 0.5),
            ])
        });
        let text = crate::openmetrics::test_text::text_of(out);
        assert!(
            text.contains(
                r#"iowarden_io_requests_total{cgroup="other",cgroup_id="other",device="loop0",op="read"} 5"#
            ),
            "{text}"
        );
        for line in [
            r#"iowarden_io_pressure_seconds_total{cgroup="/c1",cgroup_id="1",kind="some"} 0.25"#,
            r#"iowarden_io_pressure_seconds_total{cgroup="other",cgroup_id="other",kind="full"} 0.125"#,
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }
}
