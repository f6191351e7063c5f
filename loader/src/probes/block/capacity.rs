//! How big the I/O tables are and what they cost in kernel memory: the
//! series capacity, the number of counter shards, and the bytes of BPF map
//! memory they take. Pure arithmetic on the sizes the skeleton gives.

use crate::skel::types::{iow_const, iow_cost_class, iow_hwq_stats, iow_series, iow_stamp};

pub const MAX_SLOTS: u32 = iow_const::IOW_MAX_SLOTS.0;
pub const MAX_SHARDS: u32 = iow_const::IOW_MAX_SHARDS.0;
/// Series capacity by default: a fleet host's thousands of cgroups, each on
/// a device or two.
pub const DEFAULT_SERIES: u32 = 4096;
/// Shards by default, at most: CPUs completing one series' I/O at once
/// contend on a quarter of the cache lines a single copy would have, for
/// 4x the memory.
pub const DEFAULT_MAX_SHARDS: u32 = 4;
/// BPF map memory the I/O tables may take unless told otherwise.
pub const DEFAULT_BUDGET_BYTES: u64 = 64 << 20;

/// Entries of the device table.
pub const MAX_DEVS: u32 = iow_const::IOW_MAX_DEVS.0;
/// Hardware queues counted per device.
pub const MAX_HWQ: u32 = iow_const::IOW_MAX_HWQ.0;
/// Cost classes per device: (read/write, sequential/random, size).
pub const COST_CLASSES_PER_DEV: u32 = iow_const::IOW_COST_CLASSES.0 / MAX_DEVS;
const COST_CLASSES: u64 = iow_const::IOW_COST_CLASSES.0 as u64;
const STAMP_SLOTS: u64 = iow_const::IOW_STAMP_SLOTS.0 as u64;
const PAGE: u64 = 4096;

/// The sizes the tracer is loaded with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    /// Series slots (a power of two).
    pub slots: u32,
    /// Counter shards (a power of two).
    pub shards: u32,
}

/// Shards for a host with `possible_cpus` CPUs: one per CPU up to
/// DEFAULT_MAX_SHARDS (more CPUs than shards share them).
pub fn auto_shards(possible_cpus: u32) -> u32 {
    possible_cpus
        .max(1)
        .next_power_of_two()
        .min(DEFAULT_MAX_SHARDS)
}

fn page_up(b: u64) -> u64 {
    b.div_ceil(PAGE) * PAGE
}

/// Bytes of one series' counters in one shard.
pub fn series_bytes() -> u64 {
    std::mem::size_of::<iow_series>() as u64
}

/// Bytes that do not depend on the series capacity, for `shards` shards:
/// hardware queues, cost classes, issue stamps and the key tables.
pub fn fixed_bytes(shards: u32) -> u64 {
    let s = shards as u64;
    let hwq =
        page_up(MAX_DEVS as u64 * MAX_HWQ as u64 * s * std::mem::size_of::<iow_hwq_stats>() as u64);
    let classes = page_up(COST_CLASSES * s * std::mem::size_of::<iow_cost_class>() as u64);
    let stamps = STAMP_SLOTS * std::mem::size_of::<iow_stamp>() as u64;
    let keys = MAX_SLOTS as u64 * 8 + MAX_DEVS as u64 * 4;
    hwq + classes + stamps + keys
}

/// BPF map memory of the I/O tables at this capacity, independent of the
/// number of CPUs.
pub fn map_bytes(c: Capacity) -> u64 {
    page_up(c.slots as u64 * c.shards as u64 * series_bytes()) + fixed_bytes(c.shards)
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
}

/// The capacity for a requested series count and shard count (None: auto
/// for `possible_cpus`), checked against a memory budget; the error says
/// what it would take.
pub fn plan(
    max_series: u32,
    shards: Option<u32>,
    possible_cpus: u32,
    budget_bytes: u64,
) -> Result<Capacity, String> {
    if max_series == 0 || max_series > MAX_SLOTS {
        return Err(format!(
            "--max-series {max_series}: must be between 1 and {MAX_SLOTS}"
        ));
    }
    let shards = match shards {
        None => auto_shards(possible_cpus),
        Some(s) if s == 0 || !s.is_power_of_two() || s > MAX_SHARDS => {
            return Err(format!(
                "--shards {s}: must be a power of two between 1 and {MAX_SHARDS}"
            ))
        }
        Some(s) => s,
    };
    let c = Capacity {
        slots: max_series.next_power_of_two().max(64),
        shards,
    };
    let need = map_bytes(c);
    if need > budget_bytes {
        return Err(format!(
            "--max-series {max_series} needs {} of BPF map memory ({} slots x {} shards x {} B + {} fixed), \
             above the {} budget: lower --max-series or --shards, or raise --max-map-memory",
            mib(need),
            c.slots,
            c.shards,
            series_bytes(),
            mib(fixed_bytes(c.shards)),
            mib(budget_bytes)
        ));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_follow_cpus_up_to_the_default_cap() {
        assert_eq!(auto_shards(1), 1);
        assert_eq!(auto_shards(2), 2);
        assert_eq!(auto_shards(3), 4);
        assert_eq!(auto_shards(192), DEFAULT_MAX_SHARDS);
        assert_eq!(auto_shards(0), 1);
    }

    #[test]
    fn defaults_fit_32_mib_whatever_the_cpu_count() {
        for cpus in [2, 64, 192, 384, 4096] {
            let c = plan(DEFAULT_SERIES, None, cpus, DEFAULT_BUDGET_BYTES).unwrap();
            assert_eq!(c.slots, DEFAULT_SERIES);
            assert!(map_bytes(c) <= 32 << 20, "{cpus} CPUs: {}", map_bytes(c));
        }
    }

    #[test]
    fn memory_is_series_times_shards_plus_fixed() {
        let c = Capacity {
            slots: 1024,
            shards: 2,
        };
        let one = Capacity {
            slots: 2048,
            shards: 2,
        };
        assert_eq!(
            map_bytes(one) - map_bytes(c),
            page_up(2048 * 2 * series_bytes()) - page_up(1024 * 2 * series_bytes())
        );
    }

    #[test]
    fn over_budget_is_refused_with_the_numbers() {
        let e = plan(16384, Some(16), 192, DEFAULT_BUDGET_BYTES).unwrap_err();
        assert!(e.contains("--max-series 16384 needs"), "{e}");
        assert!(e.contains("16384 slots x 16 shards"), "{e}");
        assert!(e.contains("64.0 MiB budget"), "{e}");
    }

    #[test]
    fn bad_counts_are_refused() {
        assert!(plan(0, None, 2, DEFAULT_BUDGET_BYTES).is_err());
        assert!(plan(MAX_SLOTS + 1, None, 2, DEFAULT_BUDGET_BYTES).is_err());
        for s in [0, 3, 128] {
            let e = plan(1024, Some(s), 2, DEFAULT_BUDGET_BYTES).unwrap_err();
            assert!(e.contains("--shards"), "{e}");
        }
        assert_eq!(
            plan(1000, Some(8), 2, DEFAULT_BUDGET_BYTES).unwrap(),
            Capacity {
                slots: 1024,
                shards: 8
            }
        );
    }
}
