//! The culprit family under the cap: a victim or culprit outside the top K
//! is named "other", so the pairs exported are at most those of K + 1
//! cgroups. As for io, totals add up and every exported counter only grows:
//! a series' time goes to the pair it is exported as when it is counted,
//! and stays there; a pair that stops being exported (one of its cgroups
//! left the top K) hands its total over to the pair naming that cgroup
//! "other".

use std::collections::{BTreeMap, HashMap, HashSet};

use super::absent::take_absent;
use crate::model::culprits::CulpritKey;
use crate::model::{CgroupRef, CulpritSeries, OTHER_CGROUP_ID};

#[derive(Debug, Default)]
pub(super) struct CulpritFold {
    /// Per series of the snapshot: its time given to each pair it was
    /// exported as (at most four: victim and culprit each itself or
    /// "other"), keyed by that pair.
    given: HashMap<CulpritKey, HashMap<CulpritKey, CulpritSeries>>,
    /// What series gone from the snapshot had given, per pair.
    retired: HashMap<CulpritKey, CulpritSeries>,
}

impl CulpritFold {
    /// The series to export, given the cgroups that keep their own.
    pub(super) fn apply(
        &mut self,
        series: &[CulpritSeries],
        top: &HashSet<u64>,
    ) -> Vec<CulpritSeries> {
        self.retire_vanished(series);
        for s in series {
            self.give(s, top);
        }
        self.fold_retired(top);
        let mut out: BTreeMap<CulpritKey, CulpritSeries> = BTreeMap::new();
        let given = self.given.values().flat_map(HashMap::values);
        for g in given.chain(self.retired.values()) {
            let pair = as_exported(g, top);
            out.entry(pair.key())
                .and_modify(|o| o.seconds += g.seconds)
                .or_insert(pair);
        }
        out.into_values().collect()
    }

    /// The series' time not given to another pair goes to the pair it is
    /// exported as now.
    fn give(&mut self, s: &CulpritSeries, top: &HashSet<u64>) {
        let to = as_exported(s, top);
        let to_key = to.key();
        let given = self.given.entry(s.key()).or_default();
        let elsewhere: f64 = given
            .iter()
            .filter(|(k, _)| **k != to_key)
            .map(|(_, g)| g.seconds)
            .sum();
        let seconds = (s.seconds - elsewhere).max(0.0);
        given.insert(to_key, CulpritSeries { seconds, ..to });
    }

    /// Series no longer in the snapshot (a cgroup removed) leave what they
    /// gave where it is.
    fn retire_vanished(&mut self, series: &[CulpritSeries]) {
        let present: HashSet<CulpritKey> = series.iter().map(CulpritSeries::key).collect();
        for given in take_absent(&mut self.given, &present) {
            for g in given.into_values() {
                add(&mut self.retired, g);
            }
        }
    }

    /// Retired pairs naming a cgroup outside the top K join the pair that
    /// names it "other", for good: that keeps them as few as the pairs
    /// exported (a removed cgroup never comes back).
    fn fold_retired(&mut self, top: &HashSet<u64>) {
        let outside: Vec<CulpritKey> = self
            .retired
            .iter()
            .filter(|(k, g)| **k != as_exported(g, top).key())
            .map(|(k, _)| *k)
            .collect();
        for k in outside {
            let g = self.retired.remove(&k).expect("listed key");
            add(&mut self.retired, as_exported(&g, top));
        }
    }
}

fn add(to: &mut HashMap<CulpritKey, CulpritSeries>, s: CulpritSeries) {
    to.entry(s.key())
        .and_modify(|o| o.seconds += s.seconds)
        .or_insert(s);
}

/// The series as exported: its victim and culprit named "other" where
/// they are outside the top K; "none" (its service) stays.
fn as_exported(s: &CulpritSeries, top: &HashSet<u64>) -> CulpritSeries {
    let name = |c: &CgroupRef| match top.contains(&c.id) || c.id == OTHER_CGROUP_ID {
        true => c.clone(),
        false => CgroupRef::other(),
    };
    CulpritSeries {
        victim: name(&s.victim),
        culprit: s.culprit.as_ref().map(name),
        ..s.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DeviceRef, Op, Stage};

    fn cg(id: u64) -> CgroupRef {
        CgroupRef {
            id,
            path: format!("/c{id}"),
        }
    }

    fn pair(victim: u64, culprit: Option<u64>, seconds: f64) -> CulpritSeries {
        CulpritSeries {
            device: DeviceRef {
                name: "loop0".into(),
                major: 7,
                minor: 0,
            },
            victim: cg(victim),
            op: Op::Read,
            culprit: culprit.map(cg),
            culprit_op: culprit.map(|_| Op::Write),
            stage: Stage::Device,
            seconds,
        }
    }

    fn exported(out: &[CulpritSeries]) -> Vec<(String, String, f64)> {
        let mut v: Vec<_> = out
            .iter()
            .map(|c| {
                let culprit = c.culprit.as_ref().map_or("none".into(), |c| c.path.clone());
                (
                    c.victim.path.clone(),
                    culprit,
                    (c.seconds * 1e6).round() / 1e6,
                )
            })
            .collect();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v
    }

    fn s(v: &str, c: &str, x: f64) -> (String, String, f64) {
        (v.into(), c.into(), x)
    }

    #[test]
    fn pairs_outside_the_top_are_named_other_and_add_up() {
        let mut fold = CulpritFold::default();
        let top = HashSet::from([1]);
        let out = fold.apply(
            &[
                pair(1, Some(2), 1.0),
                pair(1, Some(3), 2.0),
                pair(1, None, 0.5),
                pair(2, Some(1), 4.0),
                pair(3, Some(2), 8.0),
                pair(2, Some(2), 16.0),
            ],
            &top,
        );
        assert_eq!(
            exported(&out),
            vec![
                s("/c1", "none", 0.5),
                s("/c1", "other", 3.0),
                s("other", "/c1", 4.0),
                s("other", "other", 24.0),
            ]
        );
    }

    #[test]
    fn every_exported_pair_only_grows_as_the_top_changes() {
        let mut fold = CulpritFold::default();
        let polls: [(&[u64], Vec<CulpritSeries>); 4] = [
            (&[1], vec![pair(1, Some(2), 1.0), pair(3, Some(2), 1.0)]),
            // Cgroup 2 enters the top: /c1 behind /c2 counts from here.
            (&[1, 2], vec![pair(1, Some(2), 3.0), pair(3, Some(2), 2.0)]),
            // And leaves it: that pair hands its 2 over to /c1 behind other.
            (&[1], vec![pair(1, Some(2), 4.0), pair(3, Some(2), 2.5)]),
            // Cgroup 2 removed: its pairs leave the snapshot, not their time.
            (&[1], vec![]),
        ];
        let mut seen = Vec::new();
        for (top, snap) in polls {
            let top = HashSet::from_iter(top.iter().copied());
            seen.push(exported(&fold.apply(&snap, &top)));
        }
        assert_eq!(
            seen,
            vec![
                vec![s("/c1", "other", 1.0), s("other", "other", 1.0)],
                vec![
                    s("/c1", "/c2", 2.0),
                    s("/c1", "other", 1.0),
                    s("other", "/c2", 1.0),
                    s("other", "other", 1.0),
                ],
                vec![s("/c1", "other", 4.0), s("other", "other", 2.5)],
                vec![s("/c1", "other", 4.0), s("other", "other", 2.5)],
            ]
        );
    }
}
