//! The credit fold the io and io.pressure families share: series of
//! cgroups outside the top K are credited to one "other" series per group
//! (per device and op for io, one for io.pressure), and stay credited; a
//! cgroup entering the top K counts from that point, one leaving it hands
//! its count over (see mod.rs).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Debug;
use std::hash::Hash;

use super::absent::take_absent;
use crate::model::Delta;

/// A cumulative series the cap can fold into "other".
pub(super) trait Credited: Clone + Debug + Delta {
    type Key: Eq + Hash + Copy + Debug;
    /// What one "other" series sums (per device and op for io).
    type Group: Ord + Clone + Debug;
    fn key(&self) -> Self::Key;
    fn cgroup_id(&self) -> u64;
    fn group(&self) -> Self::Group;
    /// The group's "other" series, before anything is added to it.
    fn empty_other(group: &Self::Group) -> Self;
    fn add(&mut self, s: &Self);
}

#[derive(Debug)]
pub(super) struct CreditFold<S: Credited> {
    /// Per series: its totals credited to "other" (all of them while its
    /// cgroup is outside the top K, frozen while inside).
    credited: HashMap<S::Key, S>,
    /// The credit of series gone from the snapshot, per group.
    retired: BTreeMap<S::Group, S>,
}

impl<S: Credited> Default for CreditFold<S> {
    fn default() -> Self {
        CreditFold {
            credited: HashMap::new(),
            retired: BTreeMap::new(),
        }
    }
}

impl<S: Credited> CreditFold<S> {
    /// The series to export, given the cgroups that keep their own: theirs
    /// less their credit, then "other" per group.
    pub(super) fn apply(&mut self, series: &[S], top: &HashSet<u64>) -> Vec<S> {
        self.retire_vanished(series);
        for s in series.iter().filter(|s| !top.contains(&s.cgroup_id())) {
            self.credited.insert(s.key(), s.clone());
        }
        let mut out: Vec<S> = series
            .iter()
            .filter(|s| top.contains(&s.cgroup_id()))
            .map(|s| match self.credited.get(&s.key()) {
                Some(credit) => s.delta(credit),
                None => s.clone(),
            })
            .collect();
        out.extend(self.other().into_values());
        out
    }

    /// "other" per group: the credit of removed series plus that of every
    /// series in the snapshot; no group while no cgroup was ever outside
    /// the top K.
    fn other(&self) -> BTreeMap<S::Group, S> {
        let mut other = self.retired.clone();
        for c in self.credited.values() {
            add_to(&mut other, c);
        }
        other
    }

    /// Moves the credit of series no longer in the snapshot (their cgroup
    /// removed) into their group's remainder, so "other" keeps it.
    fn retire_vanished(&mut self, series: &[S]) {
        let present: HashSet<S::Key> = series.iter().map(S::key).collect();
        for c in take_absent(&mut self.credited, &present) {
            add_to(&mut self.retired, &c);
        }
    }
}

fn add_to<S: Credited>(sums: &mut BTreeMap<S::Group, S>, s: &S) {
    let group = s.group();
    sums.entry(group.clone())
        .or_insert_with(|| S::empty_other(&group))
        .add(s);
}
