//! What a fold keeps of series gone from the snapshot.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// Takes out of `map` the entries whose key is not in `present` (series
/// gone from the snapshot).
pub(super) fn take_absent<K: Eq + Hash + Copy, V>(
    map: &mut HashMap<K, V>,
    present: &HashSet<K>,
) -> Vec<V> {
    let gone: Vec<K> = map
        .keys()
        .filter(|k| !present.contains(k))
        .copied()
        .collect();
    gone.into_iter()
        .map(|k| map.remove(&k).expect("listed key"))
        .collect()
}
