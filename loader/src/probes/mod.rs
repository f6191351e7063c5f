//! One module per BPF object, each with the same shape: `start` loads and
//! attaches its programs (or says in a ProbeStatus why it cannot), `read`
//! copies its maps, `fill` writes its part of the Snapshot; every object
//! implements [`Probe`]. block is always loaded; the optional objects are
//! described once in [`optional::ALL`], from which the command line's
//! switches, the monitor's configuration and the statuses of probes left
//! off follow. `pressure` is a [`Probe`] too, with no BPF: it reads the
//! kernel's io.pressure of the cgroups the block programs report.
//! This file holds what they share: opening objects, tracepoint checks,
//! series-table slots, program statistics, cgroup names.

use std::collections::BTreeSet;
use std::mem::MaybeUninit;

use anyhow::Result;
use iowarden_exporters::{
    BpfProgramStats, CgroupRef, ProbeStatus, Snapshot, TableFill, UNATTRIBUTED_CGROUP_ID,
};
use libbpf_rs::btf::Btf;
use libbpf_rs::{MapCore, MapFlags, OpenObject};

use crate::host::cgroups::CgroupResolver;
use crate::host::devices::DeviceNames;

pub mod block;
pub mod bpf_stats;
pub mod features;
pub mod gap_watch;
pub mod iocost;
pub mod locks;
pub mod mapped;
pub mod nvme;
pub mod optional;
pub mod pressure;
mod skeleton;

/// What probes name cgroups and devices with.
pub struct HostNames<'a> {
    pub resolver: &'a CgroupResolver,
    pub devices: &'a mut DeviceNames,
}

/// A loaded BPF object. The optional ones are loaded where the host has
/// what they trace, and absent (with a ProbeStatus saying why) elsewhere.
pub trait Probe {
    /// Starts the threads it runs beside the programs, if any: called once
    /// the command has settled its privileges (a thread keeps the
    /// capabilities it was started with).
    fn start_threads(&mut self) -> Result<()> {
        Ok(())
    }
    /// Copies the maps; the copy is what `cgroup_ids`, `release` and `fill`
    /// see until the next read.
    fn read(&mut self, names: &mut HostNames) -> Result<()>;
    /// Statuses that change while it runs (those at start are returned by
    /// its start).
    fn statuses(&self) -> Vec<ProbeStatus> {
        Vec::new()
    }
    /// Cgroups the last read has series for (input of the release policy).
    /// Required, as are release, prog_stats and table_fill: a probe that
    /// forgot one would silently keep gone cgroups or report no cost.
    fn cgroup_ids(&self) -> BTreeSet<u64>;
    /// Frees the table entries of cgroups that are gone and drops them from
    /// the last read.
    fn release(&mut self, gone: &BTreeSet<u64>) -> Result<()>;
    /// Writes this object's part of `snap` from the last read.
    fn fill(&mut self, snap: &mut Snapshot, names: &mut HostNames) -> Result<()>;
    /// Run count and time of the attached programs.
    fn prog_stats(&self) -> Vec<BpfProgramStats>;
    /// How full the tables the BPF side claims entries in are.
    fn table_fill(&self) -> Vec<TableFill>;
}

/// The open object a skeleton borrows: it must outlive the skeleton, which
/// lives as long as the process.
pub(crate) fn open_object() -> &'static mut MaybeUninit<OpenObject> {
    Box::leak(Box::new(MaybeUninit::uninit()))
}

/// Loads exactly the programs named in `wanted` (autoload switching, as
/// libbpf-tools does): a name the object lacks is an error, never some
/// other program.
pub(crate) fn load_only(obj: &mut OpenObject, wanted: &[&str]) -> Result<()> {
    if let Some(w) = wanted
        .iter()
        .find(|w| !obj.progs().any(|p| p.name() == **w))
    {
        anyhow::bail!("the BPF object has no program {w}");
    }
    for mut p in obj.progs_mut() {
        let load = wanted.iter().any(|w| p.name() == *w);
        p.set_autoload(load);
    }
    Ok(())
}

/// Attaches the loaded program `name` of `obj`.
pub(crate) fn attach(obj: &libbpf_rs::Object, name: &str) -> Result<libbpf_rs::Link> {
    let prog = obj
        .progs_mut()
        .find(|p| p.name() == name)
        .ok_or_else(|| anyhow::anyhow!("the BPF object has no program {name}"))?;
    Ok(prog.attach()?)
}

/// Whether the running kernel has tracepoint `tp` (a btf_trace_ typedef)
/// and IOWARDEN_HIDE_TRACEPOINTS does not hide it (how tests exercise the
/// degraded modes on a kernel that has every tracepoint).
pub(crate) fn tracepoint_available(btf: &Btf<'_>, tp: &str) -> bool {
    let hidden = std::env::var("IOWARDEN_HIDE_TRACEPOINTS").unwrap_or_default();
    btf.type_by_name::<libbpf_rs::btf::types::Typedef<'_>>(&format!("btf_trace_{tp}"))
        .is_some()
        && !hidden.split(',').any(|h| h.trim() == tp)
}

/// The error for a BPF object the kernel refused to load. Privileges are
/// checked before (host::preflight), so the cause is the kernel: its
/// verifier or a feature it lacks, which libbpf's log above names.
pub(crate) fn load_error(object: &str, e: libbpf_rs::Error) -> anyhow::Error {
    // EPERM (not the verifier's EACCES): the memory limit of old kernels.
    let memlock = if e.to_string().contains("(os error 1)") {
        " (before 5.11 BPF memory counts against RLIMIT_MEMLOCK: raise it, e.g. LimitMEMLOCK=infinity)"
    } else {
        ""
    };
    anyhow::anyhow!(
        "the kernel refused {object} BPF programs: {e}{memlock}; libbpf's log above names the program and the instruction"
    )
}

pub(crate) fn status(name: &str, active: bool, reason: impl Into<String>) -> ProbeStatus {
    ProbeStatus {
        name: name.into(),
        active,
        reason: reason.into(),
    }
}

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

/// A cgroup id as the snapshot names it: its path on the hierarchy, or
/// "(unattributed)" for requests that carry no cgroup.
pub fn cgroup_ref(resolver: &CgroupResolver, id: u64) -> CgroupRef {
    CgroupRef {
        id,
        path: if id == UNATTRIBUTED_CGROUP_ID {
            "(unattributed)".into()
        } else {
            resolver.path_of(id).unwrap_or_default().to_string()
        },
    }
}

/// One claimed slot of a series table: slot, key, per-CPU values.
pub(crate) type ClaimedSlot = (u32, u64, Vec<Vec<u8>>);

/// The claimed slots of a series table (bpf/table.bpf.h claim_slot) and the
/// per-CPU values `stats` holds for each.
pub(crate) fn claimed_slots<M: MapCore>(keys: &[u64], stats: &M) -> Result<Vec<ClaimedSlot>> {
    let mut out = Vec::new();
    for (slot, k) in keys.iter().enumerate() {
        // The BPF side claims keys concurrently: a volatile read of an
        // aligned u64, never torn.
        let key = unsafe { std::ptr::read_volatile(k) };
        if key == 0 {
            continue;
        }
        let slot = slot as u32;
        if let Some(vals) = stats.lookup_percpu(&slot.to_ne_bytes(), MapFlags::ANY)? {
            out.push((slot, key, vals));
        }
    }
    Ok(out)
}

/// Entries of a table in use (keys the BPF side claimed: non-zero).
pub(crate) fn slots_in_use<K: Copy + Default + PartialEq>(keys: &[K]) -> u64 {
    // Volatile reads of aligned words: the BPF side claims entries
    // concurrently.
    keys.iter()
        .filter(|k| unsafe { std::ptr::read_volatile(*k) } != K::default())
        .count() as u64
}

/// Frees one slot of a series table whose keys the BPF side claims with a
/// compare-and-swap (0 = free): the per-CPU values first, then the key, so
/// the next claim starts from zero. Only for keys nothing can hit any more
/// (their cgroup is gone).
pub(crate) fn free_slot<M: MapCore>(
    stats: &M,
    value_size: usize,
    slot: u32,
    key: &mut u64,
) -> Result<()> {
    let ncpu = libbpf_rs::num_possible_cpus()?;
    let zero = vec![vec![0u8; value_size]; ncpu];
    stats.update_percpu(&slot.to_ne_bytes(), &zero, MapFlags::ANY)?;
    // SAFETY: an aligned u64 in the mmapped .bss, also read and
    // compare-and-swapped by the BPF side: a volatile store, never torn.
    unsafe { std::ptr::write_volatile(key, 0) };
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

/// Run count and time of one loaded program from the kernel's
/// `bpf_prog_info`; None when the kernel does not answer. Both stay 0
/// unless BPF run-time stats are enabled (see crate::host::selfstats).
fn prog_stats_of(name: &str, prog: &impl std::os::fd::AsFd) -> Option<BpfProgramStats> {
    prog_info(prog).map(|info| BpfProgramStats {
        program: name.to_string(),
        run_time_seconds: info.run_time_ns as f64 / 1e9,
        run_count: info.run_cnt,
        recursion_misses: info.recursion_misses,
    })
}

/// Run count and time of the programs `links` attached from `obj`, by name:
/// every program of an object that runs per request or per event counts
/// in what iowarden reports it costs.
pub(crate) fn attached_prog_stats(
    obj: &libbpf_rs::Object,
    links: &[(&'static str, libbpf_rs::Link)],
) -> Vec<BpfProgramStats> {
    attached_prog_stats_as(obj, links, str::to_string)
}

/// [`attached_prog_stats`] for an object whose programs load under
/// another name than the one they are linked and reported by (the block
/// object's variants per claim method): `loaded_as` maps the one to the
/// other.
pub(crate) fn attached_prog_stats_as(
    obj: &libbpf_rs::Object,
    links: &[(&'static str, libbpf_rs::Link)],
    loaded_as: impl Fn(&str) -> String,
) -> Vec<BpfProgramStats> {
    links
        .iter()
        .filter_map(|&(name, _)| {
            let loaded = loaded_as(name);
            prog_stats_of(name, &obj.progs().find(|p| p.name() == loaded.as_str())?)
        })
        .collect()
}

/// The scalar fields of a loaded program's `bpf_prog_info` (name, run
/// count, ...); None when the kernel does not answer.
pub fn prog_info(prog: &impl std::os::fd::AsFd) -> Option<libbpf_rs::libbpf_sys::bpf_prog_info> {
    use std::os::fd::AsRawFd;
    let fd = prog.as_fd().as_raw_fd();
    let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a zeroed bpf_prog_info and len its size; with no
    // array pointers set the kernel fills only the scalar fields.
    let rc = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    (rc == 0).then_some(info)
}

pub(crate) fn table_fill(table: &str, entries: u64, capacity: u64) -> TableFill {
    TableFill {
        table: table.into(),
        entries,
        capacity,
    }
}
