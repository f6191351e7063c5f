//! The io.pressure family under the cap: the cgroups outside the top K
//! summed into one `cgroup="other"` series, as for io (credit.rs): whatever
//! a cgroup stalled while outside the top K is credited to "other" and
//! stays there; one entering the top K counts from that point, one
//! leaving it hands its count over.

use super::credit::Credited;
use crate::model::{CgroupRef, PressureSeries};

impl Credited for PressureSeries {
    type Key = u64;
    /// One "other" for the host.
    type Group = ();

    fn key(&self) -> u64 {
        PressureSeries::key(self)
    }

    fn cgroup_id(&self) -> u64 {
        self.cgroup.id
    }

    fn group(&self) {}

    fn empty_other(_: &()) -> PressureSeries {
        PressureSeries {
            cgroup: CgroupRef::other(),
            ..Default::default()
        }
    }

    fn add(&mut self, s: &PressureSeries) {
        self.some_seconds += s.some_seconds;
        self.full_seconds += s.full_seconds;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup_cap::credit::CreditFold;
    use std::collections::HashSet;

    type PressureFold = CreditFold<PressureSeries>;

    fn cg(id: u64, some_seconds: f64) -> PressureSeries {
        PressureSeries {
            cgroup: CgroupRef {
                id,
                path: format!("/c{id}"),
            },
            some_seconds,
            full_seconds: some_seconds / 2.0,
        }
    }

    fn exported(out: &[PressureSeries]) -> Vec<(String, f64, f64)> {
        let mut v: Vec<_> = out
            .iter()
            .map(|p| (p.cgroup.path.clone(), p.some_seconds, p.full_seconds))
            .collect();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v
    }

    #[test]
    fn cgroups_outside_the_top_are_summed_into_other() {
        let mut fold = PressureFold::default();
        let out = fold.apply(&[cg(1, 1.0), cg(2, 2.0), cg(3, 4.0)], &HashSet::from([1]));
        assert_eq!(
            exported(&out),
            vec![("/c1".into(), 1.0, 0.5), ("other".into(), 6.0, 3.0)]
        );
        let out = PressureFold::default().apply(&[cg(1, 1.0)], &HashSet::from([1]));
        assert_eq!(exported(&out), vec![("/c1".into(), 1.0, 0.5)], "no other");
    }

    #[test]
    fn every_exported_series_only_grows_as_the_top_changes() {
        let mut fold = PressureFold::default();
        let polls: [(&[u64], Vec<PressureSeries>); 4] = [
            (&[1], vec![cg(1, 1.0), cg(2, 2.0)]),
            // Cgroup 2 enters the top: it counts from its 2 of then.
            (&[1, 2], vec![cg(1, 2.0), cg(2, 5.0)]),
            // And leaves it: other gets its 6 of now.
            (&[1], vec![cg(1, 3.0), cg(2, 6.0)]),
            // Cgroup 2 removed: other keeps its credit.
            (&[1], vec![cg(1, 4.0)]),
        ];
        let mut seen = Vec::new();
        for (top, series) in polls {
            let top = HashSet::from_iter(top.iter().copied());
            let some: Vec<(String, f64)> = exported(&fold.apply(&series, &top))
                .into_iter()
                .map(|(c, some, _)| (c, some))
                .collect();
            seen.push(some);
        }
        let s = |c: &str, v: f64| (c.to_string(), v);
        assert_eq!(
            seen,
            vec![
                vec![s("/c1", 1.0), s("other", 2.0)],
                vec![s("/c1", 2.0), s("/c2", 3.0), s("other", 2.0)],
                vec![s("/c1", 3.0), s("other", 6.0)],
                vec![s("/c1", 4.0), s("other", 6.0)],
            ]
        );
    }
}
