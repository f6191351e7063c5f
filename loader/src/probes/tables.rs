//! The maps probes share the shape of: plain-old-data values, and the key
//! tables in the mmapped .bss whose entries the BPF side claims with a
//! compare-and-swap (0 = free) while this process reads and frees them.

use anyhow::Result;
use iowarden_exporters::TableFill;
use libbpf_rs::{MapCore, MapFlags};

/// A plain-old-data skeleton type from a map value's bytes (default when
/// the value is short).
pub(crate) fn pod<T: Copy + Default>(b: &[u8]) -> T {
    if b.len() < std::mem::size_of::<T>() {
        return T::default();
    }
    // SAFETY: plain-old-data skeleton type, length checked.
    unsafe { std::ptr::read_unaligned(b.as_ptr() as *const T) }
}

/// A skeleton value's bytes, as a map key or value.
///
/// # Safety
/// `T` has no padding bytes: the skeleton's types spell theirs out as
/// fields, which `..Default::default()` zeroes.
pub(crate) unsafe fn pod_bytes<T: Copy>(v: &T) -> &[u8] {
    std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>())
}

/// A word of a key table in the mmapped .bss, which the BPF side claims
/// (compare-and-swap from 0) while this process reads and frees it: a u32
/// or u64, whose aligned loads and stores are never torn.
pub(crate) trait SharedWord: Copy + Default + PartialEq {}
impl SharedWord for u32 {}
impl SharedWord for u64 {}

/// `word` as the BPF side last stored it.
pub(crate) fn read_shared<W: SharedWord>(word: &W) -> W {
    // SAFETY: a reference is aligned and valid for reads, and a u32 or u64
    // load is one instruction, never torn by the BPF side's concurrent
    // store; volatile so the compiler neither caches nor elides it.
    unsafe { std::ptr::read_volatile(word) }
}

/// The claimed entries of a key table: (index, key) for every key not 0.
pub(crate) fn claimed<W: SharedWord>(keys: &[W]) -> impl Iterator<Item = (u32, W)> + '_ {
    keys.iter().enumerate().filter_map(|(i, k)| {
        let key = read_shared(k);
        (key != W::default()).then_some((i as u32, key))
    })
}

/// Frees a key table's entry (0): the BPF side may claim it again. Only
/// for keys nothing can hit any more (their cgroup is gone).
pub(crate) fn release<W: SharedWord>(key: &mut W) {
    // SAFETY: a reference is aligned and valid for writes, and a u32 or
    // u64 store is one instruction, which the BPF side's compare-and-swap
    // sees whole; volatile so the compiler keeps it.
    unsafe { std::ptr::write_volatile(key, W::default()) }
}

/// Entries of a key table in use.
pub(crate) fn slots_in_use<W: SharedWord>(keys: &[W]) -> u64 {
    claimed(keys).count() as u64
}

/// One claimed slot of a series table: slot, key, per-CPU values.
pub(crate) type ClaimedSlot = (u32, u64, Vec<Vec<u8>>);

/// The claimed slots of a series table (bpf/table.bpf.h claim_slot) and the
/// per-CPU values `stats` holds for each.
pub(crate) fn claimed_slots<M: MapCore>(keys: &[u64], stats: &M) -> Result<Vec<ClaimedSlot>> {
    let mut out = Vec::new();
    for (slot, key) in claimed(keys) {
        if let Some(vals) = stats.lookup_percpu(&slot.to_ne_bytes(), MapFlags::ANY)? {
            out.push((slot, key, vals));
        }
    }
    Ok(out)
}

/// Frees one slot of a series table: the per-CPU values first, then the
/// key, so the next claim starts from zero.
pub(crate) fn free_slot<M: MapCore>(
    stats: &M,
    value_size: usize,
    slot: u32,
    key: &mut u64,
) -> Result<()> {
    let ncpu = libbpf_rs::num_possible_cpus()?;
    let zero = vec![vec![0u8; value_size]; ncpu];
    stats.update_percpu(&slot.to_ne_bytes(), &zero, MapFlags::ANY)?;
    release(key);
    Ok(())
}

/// Deletes the entries of `map` whose key (a skeleton type) `gone` picks
/// (one deleted meanwhile: nothing to do).
pub(crate) fn delete_entries<K: Copy + Default>(
    map: &impl MapCore,
    gone: impl Fn(&K) -> bool,
) -> Result<()> {
    for k in map.keys() {
        if gone(&pod::<K>(&k)) {
            match map.delete(&k) {
                Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => {}
                r => r?,
            }
        }
    }
    Ok(())
}

pub(crate) fn table_fill(table: &str, entries: u64, capacity: u64) -> TableFill {
    TableFill {
        table: table.into(),
        entries,
        capacity,
    }
}
