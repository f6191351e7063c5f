//! Loads the lock-contention programs (bpf/locks.bpf.c), reads their maps
//! and symbolizes the kernel stacks of the lock sites (blazesym, kallsyms).
//! Where the kernel lacks the lock tracepoints: one probe status saying so.

pub mod sites;

use std::collections::{BTreeMap, HashMap};
use std::mem::MaybeUninit;

use anyhow::{Context, Result};
use blazesym::symbolize::source::{Kernel, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::MaybeDefault;
use iowarden_exporters::{CgroupRef, LockReport, LockSeries, LockStack, ProbeStatus};
use libbpf_rs::btf::Btf;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject};

use crate::host::cgroups::CgroupResolver;
use crate::locks_skel::types::{lk_const, lk_counter, lk_counters, lk_stack, lk_stats};
use crate::locks_skel::{LocksSkel, LocksSkelBuilder};
use crate::probes::block::ProgStats;
use sites::TopSites;

pub const MAX_SLOTS: u32 = lk_const::LK_MAX_SLOTS.0;
pub const MAX_RANGES: usize = lk_const::LK_MAX_RANGES.0 as usize;
pub const NO_STACK: u32 = lk_const::LK_NO_STACK.0;
const KEY_CGID_SHIFT: u32 = 22; // LK_KEY_*_SHIFT of bpf/locks.h (macros: not in BTF)
const KEY_STACK_SHIFT: u32 = 7;
const KEY_KIND_SHIFT: u32 = 1;

/// (series, drop reason) names of enum lk_counter, by index.
const COUNTERS: &[(lk_counter, &str)] = &[
    (lk_counter::LK_DROP_SLOT_FULL, "slot_full"),
    (lk_counter::LK_DROP_STACK, "stack"),
    (lk_counter::LK_DROP_NEST, "nest"),
    (lk_counter::LK_DROP_STORAGE, "storage"),
    (lk_counter::LK_DROP_UNMATCHED, "unmatched"),
];

#[derive(Debug, Clone)]
pub struct LockConfig {
    /// Record only contentions whose stack passes through the block layer.
    pub block_only: bool,
    /// Sites exported by name in metrics; the rest is "other".
    pub top_sites: usize,
    /// Kernel frames unwound per contention (1..=32): the unwind is most of
    /// an event's cost.
    pub stack_depth: u32,
}

impl Default for LockConfig {
    fn default() -> Self {
        LockConfig {
            block_only: true,
            top_sites: 10,
            stack_depth: std::env::var("IOWARDEN_LOCK_STACK_DEPTH")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(lk_const::LK_STACK_DEPTH.0),
        }
    }
}

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
            flags: ((k >> KEY_KIND_SHIFT) & 0x3f) as u32,
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

/// Kernel symbolizer over kallsyms: one frame name per address.
pub struct KernelSymbolizer {
    sym: Symbolizer,
}

impl Default for KernelSymbolizer {
    fn default() -> Self {
        KernelSymbolizer {
            sym: Symbolizer::new(),
        }
    }
}

impl KernelSymbolizer {
    /// "func+0x1f" per address (None where unknown). Return addresses
    /// (every frame but the first of a stack) are looked up one byte
    /// earlier: a call at the end of a function returns past its end.
    pub fn symbolize(
        &self,
        addrs: &[u64],
        return_addrs: bool,
    ) -> Result<Vec<Option<(String, u64)>>> {
        let src = Source::Kernel(Kernel {
            kallsyms: MaybeDefault::Default,
            vmlinux: MaybeDefault::None,
            debug_syms: false,
            ..Default::default()
        });
        let look: Vec<u64> = addrs
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                if return_addrs && i > 0 {
                    a.saturating_sub(1)
                } else {
                    a
                }
            })
            .collect();
        let syms = self
            .sym
            .symbolize(&src, Input::AbsAddr(&look))
            .context("symbolizing kernel addresses (kallsyms)")?;
        Ok(syms
            .into_iter()
            .zip(addrs)
            .map(|(s, &a)| match s {
                Symbolized::Sym(s) => Some((s.name.to_string(), a.saturating_sub(s.addr))),
                Symbolized::Unknown(_) => None,
            })
            .collect())
    }
}

pub struct LockTracer {
    skel: LocksSkel<'static>,
    _links: Vec<Link>,
    block_only: bool,
    symbolizer: KernelSymbolizer,
    /// stack id -> (site, frames "func+0xoff", function names)
    stacks: HashMap<u32, (String, Vec<String>)>,
    top: TopSites,
    /// cgroup id -> consecutive reports it was not in the hierarchy.
    missing: HashMap<u64, u32>,
}

/// Reports a cgroup must stay gone before its slots are freed (as the I/O
/// series: a cgroup created between a walk and a read is not freed early).
const RELEASE_AFTER_REPORTS: u32 = 3;

fn pod<T: Copy + Default>(b: &[u8]) -> T {
    if b.len() < std::mem::size_of::<T>() {
        return T::default();
    }
    // SAFETY: plain-old-data skeleton type, length checked.
    unsafe { std::ptr::read_unaligned(b.as_ptr() as *const T) }
}

fn status(active: bool, reason: String) -> ProbeStatus {
    ProbeStatus {
        name: "locks".into(),
        active,
        reason,
    }
}

impl LockTracer {
    /// Ok(None) with the reason when the kernel cannot trace lock contention.
    pub fn start(cfg: &LockConfig) -> Result<(Option<LockTracer>, ProbeStatus)> {
        let btf = Btf::from_vmlinux().context("reading kernel BTF")?;
        let hidden = std::env::var("IOWARDEN_HIDE_TRACEPOINTS").unwrap_or_default();
        for tp in ["contention_begin", "contention_end"] {
            let exists = btf
                .type_by_name::<libbpf_rs::btf::types::Typedef<'_>>(&format!("btf_trace_{tp}"))
                .is_some()
                && !hidden.split(',').any(|h| h.trim() == tp);
            if !exists {
                return Ok((
                    None,
                    status(
                        false,
                        format!("kernel has no tracepoint lock:{tp}: no lock contention metrics"),
                    ),
                ));
            }
        }
        let ranges = if cfg.block_only {
            let text = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
            let r = sites::block_ranges(&sites::parse_kallsyms_text(&text), MAX_RANGES);
            if r.is_empty() {
                return Ok((
                    None,
                    status(false, "no kernel symbol addresses in /proc/kallsyms (kptr_restrict?): cannot tell block-layer lock sites".into()),
                ));
            }
            r
        } else {
            Vec::new()
        };
        let obj: &'static mut MaybeUninit<OpenObject> = Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = LocksSkelBuilder::default()
            .open(obj)
            .context("opening the locks BPF object")?;
        let ro = open
            .maps
            .rodata_data
            .as_deref_mut()
            .context("locks BPF object has no .rodata")?;
        ro.block_only = cfg.block_only;
        ro.stack_depth = cfg.stack_depth.clamp(1, lk_const::LK_STACK_DEPTH.0);
        ro.nr_block_ranges = ranges.len() as u32;
        for (i, (s, e)) in ranges.iter().enumerate() {
            ro.block_start[i] = *s;
            ro.block_end[i] = *e;
        }
        let skel = match open.load() {
            Ok(s) => s,
            Err(e) => {
                return Ok((
                    None,
                    status(false, format!("loading the lock programs failed: {e}")),
                ))
            }
        };
        let mut links = Vec::new();
        for (name, p) in [
            ("contention_begin", &skel.progs.contention_begin),
            ("contention_end", &skel.progs.contention_end),
        ] {
            match p.attach() {
                Ok(l) => links.push(l),
                Err(e) => {
                    return Ok((None, status(false, format!("attaching {name} failed: {e}"))))
                }
            }
        }
        Ok((
            Some(LockTracer {
                skel,
                _links: links,
                block_only: cfg.block_only,
                symbolizer: KernelSymbolizer::default(),
                stacks: HashMap::new(),
                top: TopSites::new(cfg.top_sites),
                missing: HashMap::new(),
            }),
            status(true, String::new()),
        ))
    }

    pub fn read_raw(&self) -> Result<RawLockSample> {
        let bss = self
            .skel
            .maps
            .bss_data
            .as_deref()
            .context("locks BPF object has no .bss")?;
        let mut out = RawLockSample::default();
        let keys = &bss.tables.slot_key[..MAX_SLOTS as usize];
        for (slot, key, vals) in
            crate::probes::block::claimed_slots(keys, &self.skel.maps.lock_stats)?
        {
            out.slots
                .entry(LockKey::decode(key))
                .or_default()
                .push(slot);
            let e = out
                .series
                .entry(LockKey::decode(key))
                .or_insert_with(|| (0, 0, vec![0; lk_const::LK_HIST_BUCKETS.0 as usize]));
            for b in &vals {
                let s: lk_stats = pod(b);
                e.0 += s.count;
                e.1 += s.wait_ns;
                for (h, v) in e.2.iter_mut().zip(s.hist.iter()) {
                    *h += *v as u64;
                }
            }
        }
        if let Some(vals) = self
            .skel
            .maps
            .counters
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)?
        {
            for b in &vals {
                let c: lk_counters = pod(b);
                for (o, v) in out.counters.iter_mut().zip(c.n.iter()) {
                    *o += v;
                }
            }
        }
        Ok(out)
    }

    /// Frames of a stack id, innermost first, symbolized once and cached.
    fn stack(&mut self, id: u32) -> (String, Vec<String>) {
        if id == NO_STACK {
            return ("(no stack)".into(), Vec::new());
        }
        if let Some(s) = self.stacks.get(&id) {
            return s.clone();
        }
        let st: lk_stack = self
            .skel
            .maps
            .stacks
            .lookup(&id.to_ne_bytes(), MapFlags::ANY)
            .ok()
            .flatten()
            .map(|b| pod(&b))
            .unwrap_or_default();
        if st.n == 0 {
            // Still being written by the BPF side: not cached, read next poll.
            return ("(no stack)".into(), Vec::new());
        }
        let addrs: Vec<u64> = st.ips.iter().take(st.n as usize).copied().collect();
        let syms = self.symbolizer.symbolize(&addrs, true).unwrap_or_default();
        let mut names = Vec::new();
        let mut frames = Vec::new();
        for (i, a) in addrs.iter().enumerate() {
            match syms.get(i).cloned().flatten() {
                Some((n, off)) => {
                    frames.push(format!("{n}+{off:#x}"));
                    names.push(n);
                }
                None => {
                    frames.push(format!("{a:#x}"));
                    names.push(format!("{a:#x}"));
                }
            }
        }
        let site = sites::site_name(&names);
        let v = (site, frames);
        self.stacks.insert(id, v.clone());
        v
    }

    /// Frees a series slot whose cgroup is gone: zeroes its counters, then
    /// the key, so the BPF side can claim it again. No task can contend in a
    /// removed cgroup, so nothing races the zeroing.
    fn release_slot(&mut self, slot: u32) -> Result<()> {
        let maps = &mut self.skel.maps;
        let bss = maps
            .bss_data
            .as_deref_mut()
            .context("locks BPF object has no .bss")?;
        crate::probes::block::free_slot(
            &maps.lock_stats,
            std::mem::size_of::<lk_stats>(),
            slot,
            &mut bss.tables.slot_key[slot as usize],
        )
    }

    /// Frees every slot of cgroups that stayed out of the hierarchy for
    /// RELEASE_AFTER_REPORTS reports, so short-lived cgroups do not fill
    /// the table; their series leave the report and the metrics together.
    /// Returns the sample without them.
    fn release_gone(
        &mut self,
        mut raw: RawLockSample,
        resolver: &mut CgroupResolver,
    ) -> Result<RawLockSample> {
        let ids: std::collections::BTreeSet<u64> = raw.series.keys().map(|k| k.cgroup_id).collect();
        let mut gone = Vec::new();
        for id in ids {
            if id == 0 || !resolver.is_gone(id) {
                self.missing.remove(&id);
                continue;
            }
            let n = self.missing.entry(id).or_default();
            *n += 1;
            if *n > RELEASE_AFTER_REPORTS {
                gone.push(id);
            }
        }
        for id in gone {
            let keys: Vec<LockKey> = raw
                .series
                .keys()
                .filter(|k| k.cgroup_id == id)
                .copied()
                .collect();
            for k in keys {
                for slot in raw.slots.remove(&k).unwrap_or_default() {
                    self.release_slot(slot)?;
                }
                raw.series.remove(&k);
            }
            self.missing.remove(&id);
            self.top.forget_cgroup(id);
        }
        Ok(raw)
    }

    /// The cumulative lock report: series by site, stacks, top-N rows.
    pub fn report(&mut self, resolver: &mut CgroupResolver) -> Result<LockReport> {
        let raw = self.read_raw()?;
        // A cgroup can contend on locks before it does any I/O of its own.
        if raw
            .series
            .keys()
            .any(|k| k.cgroup_id != 0 && resolver.path_of(k.cgroup_id).is_none())
        {
            resolver.refresh();
        }
        let raw = self.release_gone(raw, resolver)?;
        let resolver = &*resolver;
        let mut series = Vec::new();
        let mut stacks: BTreeMap<u32, LockStack> = BTreeMap::new();
        for (k, (count, wait_ns, hist)) in &raw.series {
            let (site, frames) = self.stack(k.stack_id);
            stacks.entry(k.stack_id).or_insert_with(|| LockStack {
                id: k.stack_id,
                frames,
            });
            series.push(LockSeries {
                site,
                stack_id: k.stack_id,
                cgroup: crate::extensions::cgroup_ref(resolver, k.cgroup_id),
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
        let top = self.top.update(&rows);
        series.sort_by(|a, b| b.wait_seconds.total_cmp(&a.wait_seconds));
        Ok(LockReport {
            mode: if self.block_only { "block" } else { "all" }.into(),
            series,
            stacks: stacks.into_values().collect(),
            top,
            filtered: raw.counters[lk_counter::LK_FILTERED.0 as usize],
            dropped: COUNTERS
                .iter()
                .map(|(c, n)| (n.to_string(), raw.counters[c.0 as usize]))
                .collect(),
        })
    }

    /// Run count and time of the two programs (BPF stats).
    pub fn prog_stats(&self) -> Vec<ProgStats> {
        [
            ("contention_begin", &self.skel.progs.contention_begin),
            ("contention_end", &self.skel.progs.contention_end),
        ]
        .into_iter()
        .filter_map(|(name, p)| crate::probes::block::prog_stats_of(name, p))
        .collect()
    }

    /// Series slots in use, for iowarden_map_entries.
    pub fn slots_used(&self) -> u64 {
        let Some(bss) = self.skel.maps.bss_data.as_deref() else {
            return 0;
        };
        (0..MAX_SLOTS as usize)
            .filter(|&i| unsafe { std::ptr::read_volatile(&bss.tables.slot_key[i]) } != 0)
            .count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Resolves a known kernel function's address from /proc/kallsyms (as
    /// root: addresses read as 0 otherwise) through blazesym.
    #[test]
    fn symbolizes_a_kallsyms_address() {
        let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
        let syms = sites::parse_kallsyms_text(&text);
        assert!(
            !syms.is_empty(),
            "no addresses in /proc/kallsyms: run as root"
        );
        let mut checked = 0;
        for want in ["_raw_spin_lock", "dd_dispatch_request", "blk_mq_submit_bio"] {
            let Some(s) = syms.iter().find(|s| s.name == want) else {
                continue;
            };
            let got = KernelSymbolizer::default()
                .symbolize(&[s.addr + 4], false)
                .unwrap();
            assert_eq!(
                got[0],
                Some((want.to_string(), 4)),
                "{want} at {:#x}",
                s.addr
            );
            // As a return address (not first frame): one byte earlier, same function.
            let got = KernelSymbolizer::default()
                .symbolize(&[0, s.addr + 1], true)
                .unwrap();
            assert_eq!(got[1].as_ref().map(|g| g.0.as_str()), Some(want));
            checked += 1;
        }
        assert!(checked > 0, "none of the known functions is in kallsyms");
    }
}
