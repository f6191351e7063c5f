//! What one read of the lock object's maps holds: series keys decoded, the
//! sums per key, the drop counters by name. probes/locks/probe.rs reads them,
//! report.rs builds the snapshot's report from them.

use std::collections::BTreeMap;

use crate::locks_skel::types::{lk_const, lk_counter, lk_flag};

pub const NO_STACK: u32 = lk_const::LK_NO_STACK.0;
use crate::bpf_consts::{
    LK_KEY_CGID_SHIFT as KEY_CGID_SHIFT, LK_KEY_KIND_SHIFT as KEY_KIND_SHIFT,
    LK_KEY_STACK_SHIFT as KEY_STACK_SHIFT,
};

/// (series, drop reason) names of enum lk_counter, by index.
pub(super) const COUNTERS: &[(lk_counter, &str)] = &[
    (lk_counter::LK_DROP_SLOT_FULL, "slot_full"),
    (lk_counter::LK_DROP_STACK, "stack"),
    (lk_counter::LK_DROP_NEST, "nest"),
    (lk_counter::LK_DROP_STORAGE, "storage"),
    (lk_counter::LK_DROP_UNMATCHED, "unmatched"),
];

/// Decoded series key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockKey {
    pub cgroup_id: u64,
    pub stack_id: u32,
    pub flags: u32,
}

impl LockKey {
    pub fn decode(k: u64) -> LockKey {
        LockKey {
            cgroup_id: k >> KEY_CGID_SHIFT,
            stack_id: ((k >> KEY_STACK_SHIFT) & NO_STACK as u64) as u32,
            flags: ((k >> KEY_KIND_SHIFT) & lk_flag::LK_F_MASK.0 as u64) as u32,
        }
    }
}

/// Sums over CPUs (and over duplicate slots of one key).
#[derive(Debug, Clone, Default)]
pub struct RawLockSample {
    pub series: BTreeMap<LockKey, (u64, u64, Vec<u64>)>,
    /// The table slots each key was read from (two CPUs racing on a new key
    /// can claim two).
    pub slots: BTreeMap<LockKey, Vec<u32>>,
    pub counters: [u64; lk_counter::LK_NR_COUNTERS.0 as usize],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf_consts::{
        LK_KEY_CGID_SHIFT as KEY_CGID_SHIFT, LK_KEY_KIND_SHIFT as KEY_KIND_SHIFT,
        LK_KEY_STACK_SHIFT as KEY_STACK_SHIFT,
    };

    #[test]
    fn keys_decode_as_the_bpf_side_packs_them() {
        let k = (12345u64 << KEY_CGID_SHIFT)
            | (77u64 << KEY_STACK_SHIFT)
            | (32u64 << KEY_KIND_SHIFT)
            | 1;
        assert_eq!(
            LockKey::decode(k),
            LockKey {
                cgroup_id: 12345,
                stack_id: 77,
                flags: 32
            }
        );
        let k =
            (1u64 << 33 | 5) << KEY_CGID_SHIFT | (NO_STACK as u64) << KEY_STACK_SHIFT | 3 << 1 | 1;
        assert_eq!(LockKey::decode(k).stack_id, NO_STACK);
        assert_eq!(LockKey::decode(k).cgroup_id, 1 << 33 | 5);
    }
}
