//! The lock object's [`Probe`]: `start` loads it where the kernel has
//! lock:contention_*, `read` copies the series table, `release` frees the
//! slots of cgroups that are gone, `fill` builds the report.

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use iowarden_exporters::{BpfProgramStats, ProbeStatus, Snapshot, TableFill};
use libbpf_rs::btf::Btf;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::{Link, MapCore, MapFlags};

use super::raw::{LockKey, RawLockSample, NO_STACK};
use super::report;
use super::sites::{self, TopSites};
use super::symbols::StackNames;
use crate::locks_skel::types::{lk_const, lk_counters, lk_stack, lk_stats};
use crate::locks_skel::{LocksSkel, LocksSkelBuilder};
use crate::probes::bpf_stats::attached_prog_stats;
use crate::probes::objects::{attach, tracepoint_available};
use crate::probes::probe::{HostNames, Probe};
use crate::probes::skeleton::{open_skel, rodata};
use crate::probes::tables::{claimed_slots, free_slot, pod, slots_in_use, table_fill};

/// The object's name, as `iowarden_probe_active` and the statuses say it
/// and as `--locks` switches it.
pub const NAME: &str = "locks";

pub const MAX_SLOTS: u32 = lk_const::LK_MAX_SLOTS.0;
pub const MAX_RANGES: usize = lk_const::LK_MAX_RANGES.0 as usize;

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

pub struct LockProbe {
    skel: LocksSkel<'static>,
    /// The attached programs, by name.
    links: Vec<(&'static str, Link)>,
    block_only: bool,
    names: StackNames,
    top: TopSites,
    last: RawLockSample,
}

fn status(active: bool, reason: impl Into<String>) -> ProbeStatus {
    crate::probes::objects::status(NAME, active, reason)
}

const PROGRAMS: [&str; 2] = ["contention_begin", "contention_end"];

impl LockProbe {
    /// Ok(None) with the reason when the kernel cannot trace lock contention.
    pub fn start(cfg: &LockConfig) -> Result<(Option<LockProbe>, ProbeStatus)> {
        let btf = Btf::from_vmlinux().context("reading kernel BTF")?;
        if let Some(tp) = PROGRAMS.iter().find(|tp| !tracepoint_available(&btf, tp)) {
            return Ok((
                None,
                status(
                    false,
                    format!("kernel has no tracepoint lock:{tp}: no lock contention metrics"),
                ),
            ));
        }
        let ranges = match Self::block_ranges(cfg) {
            Ok(r) => r,
            Err(reason) => return Ok((None, status(false, reason))),
        };
        let skel = match Self::load(cfg, &ranges)? {
            Ok(s) => s,
            Err(reason) => return Ok((None, status(false, reason))),
        };
        let links = match Self::attach(&skel) {
            Ok(l) => l,
            Err(reason) => return Ok((None, status(false, reason))),
        };
        let probe = LockProbe {
            skel,
            links,
            block_only: cfg.block_only,
            names: StackNames::default(),
            top: TopSites::new(cfg.top_sites),
            last: RawLockSample::default(),
        };
        Ok((Some(probe), status(true, String::new())))
    }

    /// The kernel text ranges of the block layer (block-only mode), or why
    /// they cannot be told.
    fn block_ranges(cfg: &LockConfig) -> std::result::Result<Vec<(u64, u64)>, String> {
        if !cfg.block_only {
            return Ok(Vec::new());
        }
        let text = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
        let r = sites::block_ranges(&sites::parse_kallsyms_text(&text), MAX_RANGES);
        if r.is_empty() {
            return Err("no kernel symbol addresses in /proc/kallsyms (kptr_restrict?): cannot tell block-layer lock sites".into());
        }
        Ok(r)
    }

    /// Opens, configures and loads the object; Ok(Err) when the kernel
    /// refuses it.
    fn load(
        cfg: &LockConfig,
        ranges: &[(u64, u64)],
    ) -> Result<std::result::Result<LocksSkel<'static>, String>> {
        let mut open = open_skel::<LocksSkelBuilder>("locks")?;
        let ro = rodata(&mut open.maps.rodata_data, "locks")?;
        ro.block_only = cfg.block_only;
        ro.stack_depth = cfg.stack_depth.clamp(1, lk_const::LK_STACK_DEPTH.0);
        ro.nr_block_ranges = ranges.len() as u32;
        for (i, (s, e)) in ranges.iter().enumerate() {
            ro.block_start[i] = *s;
            ro.block_end[i] = *e;
        }
        Ok(open
            .load()
            .map_err(|e| format!("loading the lock programs failed: {e}")))
    }

    fn attach(skel: &LocksSkel<'static>) -> std::result::Result<Vec<(&'static str, Link)>, String> {
        PROGRAMS
            .into_iter()
            .map(|name| match attach(skel.object(), name) {
                Ok(link) => Ok((name, link)),
                Err(e) => Err(format!("attaching {name} failed: {e}")),
            })
            .collect()
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
        for (slot, key, vals) in claimed_slots(keys, &self.skel.maps.lock_stats)? {
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

    /// Frees a series slot whose cgroup is gone: zeroes its counters, then
    /// the key, so the BPF side can claim it again. No task can contend in a
    /// removed cgroup, so nothing races the zeroing.
    fn release_slot(&mut self, slot: u32) -> Result<()> {
        let maps = &mut self.skel.maps;
        let bss = maps
            .bss_data
            .as_deref_mut()
            .context("locks BPF object has no .bss")?;
        free_slot(
            &maps.lock_stats,
            std::mem::size_of::<lk_stats>(),
            slot,
            &mut bss.tables.slot_key[slot as usize],
        )
    }
}

/// The addresses of a stack id, innermost first (None: not written yet).
fn stack_addrs(skel: &LocksSkel<'static>, id: u32) -> Option<Vec<u64>> {
    if id == NO_STACK {
        return None;
    }
    let st: lk_stack = skel
        .maps
        .stacks
        .lookup(&id.to_ne_bytes(), MapFlags::ANY)
        .ok()
        .flatten()
        .map(|b| pod(&b))
        .unwrap_or_default();
    Some(st.ips.iter().take(st.n as usize).copied().collect())
}

impl Probe for LockProbe {
    fn read(&mut self, _names: &mut HostNames) -> Result<()> {
        self.last = self.read_raw()?;
        Ok(())
    }

    fn cgroup_ids(&self) -> BTreeSet<u64> {
        self.last.series.keys().map(|k| k.cgroup_id).collect()
    }

    /// Frees every slot of the cgroups that are gone, so short-lived
    /// cgroups do not fill the table; their series leave the report and the
    /// metrics together.
    fn release(&mut self, gone: &BTreeSet<u64>) -> Result<()> {
        let keys: Vec<LockKey> = self
            .last
            .series
            .keys()
            .filter(|k| gone.contains(&k.cgroup_id))
            .copied()
            .collect();
        for k in keys {
            for slot in self.last.slots.remove(&k).unwrap_or_default() {
                self.release_slot(slot)?;
            }
            self.last.series.remove(&k);
        }
        for &id in gone {
            self.top.forget_cgroup(id);
        }
        Ok(())
    }

    fn fill(&mut self, snap: &mut Snapshot, names: &mut HostNames) -> Result<()> {
        let (skel, stacks) = (&self.skel, &mut self.names);
        let stack_names = |id: u32| stacks.get(id, || stack_addrs(skel, id));
        snap.locks = Some(report::build(
            &self.last,
            self.block_only,
            names.resolver,
            stack_names,
            &mut self.top,
        ));
        Ok(())
    }

    fn prog_stats(&self) -> Vec<BpfProgramStats> {
        attached_prog_stats(self.skel.object(), &self.links)
    }

    /// Series slots in use, for iowarden_map_entries.
    fn table_fill(&self) -> Vec<TableFill> {
        let Some(bss) = self.skel.maps.bss_data.as_deref() else {
            return Vec::new();
        };
        let used = slots_in_use(&bss.tables.slot_key[..MAX_SLOTS as usize]);
        vec![table_fill("lock_series", used, MAX_SLOTS as u64)]
    }
}
