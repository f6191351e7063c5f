//! The culprit account's totals by series keys: the drain's totals name
//! victims and culprits by slot; each read names them by the series keys
//! the same read found in those slots and adds the changes up, so a slot
//! reused by another series starts its pairs from zero.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use iowarden_exporters::{CgroupRef, CulpritSeries, Op, Stage, OTHER_CGROUP, OTHER_CGROUP_ID};

use super::accumulate::SeriesKey;
use super::culprits::RawPair;
use crate::culprits::Culprit;
use crate::host::devices::DeviceNames;

/// Whom a pair's victim waited behind, by series key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum CulpritKey {
    Service,
    Series(u64),
    Other(Op),
}

/// A pair named by series keys: victim, culprit, stage.
type PairKey = (u64, CulpritKey, Stage);

/// The pairs' nanoseconds since start, by series keys.
#[derive(Default)]
pub struct CulpritTotals {
    /// Each slot pair's keys and value at the last read.
    prev: HashMap<(u32, Culprit, Stage), (PairKey, u64)>,
    totals: BTreeMap<PairKey, u64>,
    dev_of_idx: HashMap<u32, u32>,
}

impl CulpritTotals {
    /// Adds the pairs' changes since the last read; `key_of` names the
    /// slots, `devs` the device indices (index, dev_t).
    pub fn add(&mut self, pairs: &[RawPair], key_of: &HashMap<u32, u64>, devs: &[(u32, u32)]) {
        self.dev_of_idx.extend(devs.iter().copied());
        for p in pairs {
            let Some(&victim) = key_of.get(&p.victim) else {
                continue;
            };
            let culprit = match p.culprit {
                Culprit::Service => CulpritKey::Service,
                Culprit::Other(op) => CulpritKey::Other(op),
                Culprit::Series(c) => match key_of.get(&c) {
                    Some(&k) => CulpritKey::Series(k),
                    None => continue,
                },
            };
            let key = (victim, culprit, p.stage);
            let slots = (p.victim, p.culprit, p.stage);
            let before = match self.prev.get(&slots) {
                // The same pair of series, not one that reused the slots.
                Some(&(k, ns)) if k == key && ns <= p.ns => ns,
                _ => 0,
            };
            *self.totals.entry(key).or_default() += p.ns - before;
            self.prev.insert(slots, (key, p.ns));
        }
    }

    /// Forgets the pairs of series whose slots were released.
    pub fn forget(&mut self, slots: &BTreeSet<u32>, keys: &BTreeSet<u64>) {
        let named = |c: &Culprit| matches!(c, Culprit::Series(s) if slots.contains(s));
        self.prev
            .retain(|(v, c, _), _| !slots.contains(v) && !named(c));
        self.totals.retain(|(v, c, _), _| {
            !keys.contains(v) && !matches!(c, CulpritKey::Series(k) if keys.contains(k))
        });
    }

    /// The snapshot's records, by device, victim and culprit.
    pub fn fill(
        &self,
        cgroup: &dyn Fn(u64) -> CgroupRef,
        devices: &mut DeviceNames,
    ) -> Vec<CulpritSeries> {
        let mut out: Vec<CulpritSeries> = self
            .totals
            .iter()
            .filter_map(|(&(victim, culprit, stage), &ns)| {
                let v = SeriesKey::decode(victim);
                let devt = *self.dev_of_idx.get(&v.dev_idx)?;
                let (culprit, culprit_op) = match culprit {
                    CulpritKey::Service => (None, None),
                    CulpritKey::Series(k) => {
                        let c = SeriesKey::decode(k);
                        (Some(cgroup(c.cgroup_id)), Some(c.op))
                    }
                    CulpritKey::Other(op) => (
                        Some(CgroupRef {
                            id: OTHER_CGROUP_ID,
                            path: OTHER_CGROUP.into(),
                        }),
                        Some(op),
                    ),
                };
                Some(CulpritSeries {
                    device: devices.get(devt),
                    victim: cgroup(v.cgroup_id),
                    op: v.op,
                    culprit,
                    culprit_op,
                    stage,
                    seconds: ns as f64 / 1e9,
                })
            })
            .collect();
        out.sort_by_key(CulpritSeries::key);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skel::types::iow_key_layout;

    fn key(cgroup: u64, op: u64) -> u64 {
        (cgroup << iow_key_layout::IOW_KEY_CGID_SHIFT.0)
            | (op << iow_key_layout::IOW_KEY_OP_SHIFT.0)
            | 1
    }

    fn keys(slots: &[(u32, u64)]) -> HashMap<u32, u64> {
        slots.iter().copied().collect()
    }

    const DEVS: &[(u32, u32)] = &[(0, 7 << 20)];

    fn pair(victim: u32, culprit: Culprit, ns: u64) -> RawPair {
        RawPair {
            victim,
            culprit,
            stage: Stage::Device,
            ns,
        }
    }

    fn seconds(t: &CulpritTotals) -> Vec<(u64, Option<u64>, f64)> {
        let cgroup = |id| CgroupRef {
            id,
            path: format!("/c{id}"),
        };
        t.fill(&cgroup, &mut DeviceNames::default())
            .iter()
            .map(|c| (c.victim.id, c.culprit.as_ref().map(|c| c.id), c.seconds))
            .collect()
    }

    #[test]
    fn adds_changes_names_slots_and_skips_unknown_ones() {
        let k = keys(&[(1, key(10, 0)), (2, key(20, 1))]);
        let mut t = CulpritTotals::default();
        t.add(
            &[
                pair(1, Culprit::Series(2), 3_000),
                pair(1, Culprit::Service, 1_000),
                pair(1, Culprit::Series(9), 5),
            ],
            &k,
            DEVS,
        );
        t.add(
            &[
                pair(1, Culprit::Series(2), 7_000),
                pair(1, Culprit::Service, 1_000),
            ],
            &k,
            DEVS,
        );
        assert_eq!(
            seconds(&t),
            [(10, None, 1e-6), (10, Some(20), 7e-6)],
            "the pair with an unknown slot is left out"
        );
    }

    #[test]
    fn a_reused_slot_starts_from_zero_and_gone_series_are_forgotten() {
        let mut t = CulpritTotals::default();
        let k = keys(&[(1, key(10, 0)), (2, key(20, 1))]);
        t.add(&[pair(1, Culprit::Series(2), 5_000)], &k, DEVS);
        t.forget(&BTreeSet::from([2]), &BTreeSet::from([key(20, 1)]));
        assert_eq!(seconds(&t), []);
        let k = keys(&[(1, key(10, 0)), (2, key(30, 1))]);
        t.add(&[pair(1, Culprit::Series(2), 2_000)], &k, DEVS);
        assert_eq!(seconds(&t), [(10, Some(30), 2e-6)]);
    }

    #[test]
    fn stages_are_apart_and_other_cgroups_are_named_other_by_op() {
        let k = keys(&[(1, key(10, 0)), (2, key(20, 1))]);
        let queued = RawPair {
            stage: Stage::Queue,
            ..pair(1, Culprit::Series(2), 4_000)
        };
        let mut t = CulpritTotals::default();
        t.add(
            &[
                pair(1, Culprit::Series(2), 3_000),
                queued,
                pair(1, Culprit::Other(Op::Write), 9_000),
            ],
            &k,
            DEVS,
        );
        let cgroup = |id| CgroupRef {
            id,
            path: format!("/c{id}"),
        };
        let got: Vec<(Stage, String, Option<Op>, f64)> = t
            .fill(&cgroup, &mut DeviceNames::default())
            .iter()
            .map(|c| {
                let who = c.culprit.as_ref().map(|c| c.path.clone()).unwrap();
                (c.stage, who, c.culprit_op, c.seconds)
            })
            .collect();
        assert_eq!(
            got,
            [
                (Stage::Queue, "/c20".into(), Some(Op::Write), 4e-6),
                (Stage::Device, "/c20".into(), Some(Op::Write), 3e-6),
                (Stage::Device, OTHER_CGROUP.into(), Some(Op::Write), 9e-6),
            ]
        );
    }
}
