//! Loads and attaches the BPF programs of bpf/iowarden.bpf.c and reads their
//! maps. Everything that touches the kernel's BPF interface lives here.

use std::mem::MaybeUninit;

use anyhow::{Context, Result};
use iowarden_exporters::ProbeStatus;
use libbpf_rs::btf::types::Enum;
use libbpf_rs::btf::Btf;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject};

use std::sync::{Arc, Mutex};

use crate::skel::types::{
    iow_const, iow_cost_class, iow_cost_coefs, iow_drops, iow_hwq_stats, iow_io_stats, iow_update,
};
use crate::skel::{IowardenSkel, IowardenSkelBuilder};

pub const MAX_SLOTS: u32 = iow_const::IOW_MAX_SLOTS.0;
pub const MAX_DEVS: u32 = iow_const::IOW_MAX_DEVS.0;
pub const MAX_HWQ: u32 = iow_const::IOW_MAX_HWQ.0;
/// Cost classes per device: (read/write, sequential/random, size).
pub const COST_CLASSES_PER_DEV: u32 = iow_const::IOW_COST_CLASSES.0 / MAX_DEVS;
pub const COST_DEFAULT: u32 = iow_const::IOW_COST_DEFAULT.0;
/// IOW_NO_SLOT / IOW_NO_BUCKET of bpf/iowarden.h (macros: not in BTF).
pub const NO_SLOT: u32 = u32::MAX;
pub const NO_BUCKET: u32 = u32::MAX;

#[derive(Debug, Clone)]
pub struct TracerConfig {
    /// Capacity of the (cgroup, device, op) series table; rounded up to a power of two.
    pub max_series: u32,
    /// Trace only this device (kernel dev_t: major << 20 | minor).
    pub filter_devt: Option<u32>,
    pub latency: bool,
    pub hwq: bool,
    /// Charge every read/write the linear iocost model's cost.
    pub cost: bool,
    /// The model for every device (`--cost-model`); None: each device's own
    /// (see crate::costs).
    pub cost_model: Option<crate::costmodel::LinearModel>,
    /// Devices given their cost coefficients (kernel dev_t, lcoefs) before
    /// the programs attach: their device table entries are claimed at load,
    /// so their first request is charged with their own model.
    pub cost_devices: Vec<(u32, [u64; 6])>,
    /// NVMe queue programs (where the nvme driver is loaded).
    pub nvme: bool,
    /// iocost programs (where the kernel has iocost).
    pub iocost: bool,
    /// Lock contention programs (None: off).
    pub locks: Option<crate::locks::LockConfig>,
}

impl Default for TracerConfig {
    fn default() -> Self {
        TracerConfig {
            max_series: 1024,
            filter_devt: None,
            latency: true,
            hwq: true,
            cost: true,
            cost_model: None,
            cost_devices: Vec::new(),
            nvme: true,
            iocost: true,
            locks: Some(crate::locks::LockConfig::default()),
        }
    }
}

/// The tracepoints the programs attach to, by program name.
const TRACEPOINTS: &[(&str, &str, bool)] = &[
    // (program, tracepoint, required)
    ("block_rq_issue", "block_rq_issue", true),
    ("block_rq_complete", "block_rq_complete", true),
    ("block_rq_insert", "block_rq_insert", false),
    ("block_rq_requeue", "block_rq_requeue", false),
    ("block_rq_merge", "block_rq_merge", false),
];

/// Raw per-CPU contents of one occupied series slot.
pub struct RawSeries {
    pub slot: u32,
    pub key: u64,
    pub per_cpu: Vec<iow_io_stats>,
}

pub struct RawHwq {
    pub devt: u32,
    pub hctx: u32,
    pub per_cpu: Vec<iow_hwq_stats>,
}

/// Per-CPU samples of one cost class of one device.
pub struct RawCostClass {
    pub devt: u32,
    /// Class within the device: (op * 2 + random) * IOW_COST_SIZES + size.
    pub class: u32,
    pub per_cpu: Vec<iow_cost_class>,
}

#[derive(Default)]
pub struct RawSample {
    pub series: Vec<RawSeries>,
    pub hwqs: Vec<RawHwq>,
    /// Cost classes that have samples.
    pub cost_classes: Vec<RawCostClass>,
    pub drops: Vec<iow_drops>,
    /// Device table: index -> kernel dev_t, for occupied entries.
    pub devs: Vec<(u32, u32)>,
    /// Updates delivered through the nested_updates ring buffer since the last read.
    pub nested: Vec<iow_update>,
}

pub struct Tracer {
    skel: IowardenSkel<'static>,
    _links: Vec<Link>,
    probes: Vec<ProbeStatus>,
    slots: u32,
    nested_rb: libbpf_rs::RingBuffer<'static>,
    nested: Arc<Mutex<Vec<iow_update>>>,
}

fn from_bytes<T: Copy + Default>(b: &[u8]) -> T {
    if b.len() < std::mem::size_of::<T>() {
        return T::default();
    }
    // SAFETY: T is a plain-old-data skeleton type; the length was checked.
    unsafe { std::ptr::read_unaligned(b.as_ptr() as *const T) }
}

fn write_cost_coefs(map: &dyn MapCore, idx: u32, lcoef: [u64; 6]) -> Result<()> {
    let v = iow_cost_coefs {
        lcoef,
        valid: 1,
        ..Default::default()
    };
    // SAFETY: plain-old-data skeleton type viewed as bytes.
    let bytes = unsafe {
        std::slice::from_raw_parts(
            &v as *const iow_cost_coefs as *const u8,
            std::mem::size_of::<iow_cost_coefs>(),
        )
    };
    map.update(&idx.to_ne_bytes(), bytes, MapFlags::ANY)?;
    Ok(())
}

/// Claims `devt`'s entry in the device table before load, probing exactly
/// as the BPF side's dev_index() does, so that it finds the entry there.
fn claim_dev(table: &mut [u32], devt: u32) -> Option<u32> {
    let n = table.len() as u32;
    let start =
        ((devt as u64).wrapping_mul(0x9E3779B97F4A7C15) >> (64 - n.trailing_zeros())) as u32;
    (0..iow_const::IOW_SLOT_PROBES.0)
        .map(|i| (start + i) & (n - 1))
        .find(|&i| table[i as usize] == 0 || table[i as usize] == devt)
        .inspect(|&i| table[i as usize] = devt)
}

/// Value of an enumerator in the running kernel's BTF, searching every enum
/// (QUEUE_FLAG_* live in an anonymous one).
fn kernel_enum_value(btf: &Btf<'_>, name: &str) -> Option<i64> {
    btf.type_by_kind::<Enum<'_>>().find_map(|e| {
        e.iter()
            .find(|m| m.name.is_some_and(|n| n == name))
            .map(|m| m.value)
    })
}

fn tracepoint_exists(btf: &Btf<'_>, tp: &str) -> bool {
    btf.type_by_name::<libbpf_rs::btf::types::Typedef<'_>>(&format!("btf_trace_{tp}"))
        .is_some()
}

impl Tracer {
    /// Opens, configures, loads and attaches the programs. Optional
    /// tracepoints missing from the kernel are skipped and reported in
    /// [`Tracer::probes`]; a missing required one is an error.
    pub fn start(cfg: &TracerConfig) -> Result<Tracer> {
        let btf = Btf::from_vmlinux().context(
            "cannot read kernel BTF (/sys/kernel/btf/vmlinux): iowarden needs a kernel built with CONFIG_DEBUG_INFO_BTF=y",
        )?;
        let slots = cfg
            .max_series
            .clamp(64, MAX_SLOTS)
            .next_power_of_two()
            .min(MAX_SLOTS);
        // The open object must outlive the skeleton, which lives as long as the process.
        let obj: &'static mut MaybeUninit<OpenObject> = Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = IowardenSkelBuilder::default()
            .open(obj)
            .context("opening the BPF object")?;

        let rodata = open
            .maps
            .rodata_data
            .as_deref_mut()
            .context("BPF object has no .rodata")?;
        rodata.enable_latency = cfg.latency;
        rodata.enable_hwq = cfg.hwq;
        rodata.enable_cost = cfg.cost;
        rodata.filter_devt = cfg.filter_devt.unwrap_or(0);
        rodata.slot_mask = slots - 1;
        rodata.queue_flag_stats_bit = kernel_enum_value(&btf, "QUEUE_FLAG_STATS")
            .and_then(|v| u32::try_from(v).ok())
            .filter(|&v| v < 64)
            .unwrap_or(64);
        open.maps.io_stats.set_max_entries(slots)?;
        let bss = open
            .maps
            .bss_data
            .as_deref_mut()
            .context("BPF object has no .bss")?;
        let preclaimed: Vec<(u32, [u64; 6])> = cfg
            .cost_devices
            .iter()
            .filter_map(|&(devt, c)| claim_dev(&mut bss.tables.dev_devt, devt).map(|i| (i, c)))
            .collect();

        let mut probes = Vec::new();
        open.progs.hist_bucket_selftest.set_autoload(false);
        // Tracepoints to treat as absent: how the tests (and a user checking
        // a deployment plan) exercise the degraded mode on a kernel that has
        // them all.
        let hidden = std::env::var("IOWARDEN_HIDE_TRACEPOINTS").unwrap_or_default();
        let hidden: Vec<&str> = hidden.split(',').map(str::trim).collect();
        for &(prog, tp, required) in TRACEPOINTS {
            let exists = tracepoint_exists(&btf, tp) && !hidden.contains(&tp);
            if !exists && required {
                anyhow::bail!("the kernel has no {tp} tracepoint in its BTF; iowarden cannot account block I/O on it");
            }
            if !exists {
                probes.push(ProbeStatus {
                    name: prog.into(),
                    active: false,
                    reason: format!("kernel has no tracepoint {tp}"),
                });
                Self::prog_mut(&mut open, prog).set_autoload(false);
            }
        }
        let skel = open.load().map_err(|e| {
            anyhow::anyhow!(
                "loading the BPF programs failed: {e}. Run as root (or with CAP_BPF, CAP_PERFMON and CAP_SYS_RESOURCE)"
            )
        })?;

        let tracer_maps = &skel.maps;
        let default = crate::costmodel::default_model(cfg.cost_model).lcoefs();
        for &(idx, lcoef) in preclaimed.iter().chain([&(COST_DEFAULT, default)]) {
            write_cost_coefs(&tracer_maps.cost_coefs, idx, lcoef)?;
        }
        let mut links = Vec::new();
        for &(prog, _, required) in TRACEPOINTS {
            if probes.iter().any(|p| p.name == prog) {
                continue;
            }
            match Self::prog(&skel, prog).attach() {
                Ok(l) => {
                    links.push(l);
                    probes.push(ProbeStatus {
                        name: prog.into(),
                        active: true,
                        reason: String::new(),
                    });
                }
                Err(e) if !required => probes.push(ProbeStatus {
                    name: prog.into(),
                    active: false,
                    reason: format!("attach failed: {e}"),
                }),
                Err(e) => return Err(e).with_context(|| format!("attaching {prog}")),
            }
        }
        if !cfg.latency {
            probes.push(ProbeStatus {
                name: "latency".into(),
                active: false,
                reason: "disabled by --no-latency".into(),
            });
        }
        if !cfg.hwq {
            probes.push(ProbeStatus {
                name: "hwq".into(),
                active: false,
                reason: "disabled by --no-hwq".into(),
            });
        }
        if !cfg.cost {
            probes.push(ProbeStatus {
                name: "cost".into(),
                active: false,
                reason: "disabled by --no-cost".into(),
            });
        }
        // The ring buffer reader needs a map that lives as long as it does:
        // an owned handle on the same map, kept for the process lifetime.
        let rb_map: &'static libbpf_rs::MapHandle = Box::leak(Box::new(
            libbpf_rs::MapHandle::try_from(&skel.maps.nested_updates)
                .context("opening the nested_updates ring buffer")?,
        ));
        let nested = Arc::new(Mutex::new(Vec::new()));
        let sink = nested.clone();
        let mut rb = libbpf_rs::RingBufferBuilder::new();
        rb.add(rb_map, move |b: &[u8]| {
            if let Ok(mut v) = sink.lock() {
                v.push(from_bytes::<iow_update>(b));
            }
            0
        })?;
        let nested_rb = rb.build()?;
        Ok(Tracer {
            skel,
            _links: links,
            probes,
            slots,
            nested_rb,
            nested,
        })
    }

    fn prog_mut<'a>(
        open: &'a mut crate::skel::OpenIowardenSkel<'static>,
        name: &str,
    ) -> &'a mut libbpf_rs::OpenProgramMut<'static> {
        let p = &mut open.progs;
        match name {
            "block_rq_issue" => &mut p.block_rq_issue,
            "block_rq_complete" => &mut p.block_rq_complete,
            "block_rq_insert" => &mut p.block_rq_insert,
            "block_rq_requeue" => &mut p.block_rq_requeue,
            _ => &mut p.block_rq_merge,
        }
    }

    fn prog<'a>(skel: &'a IowardenSkel<'static>, name: &str) -> &'a libbpf_rs::ProgramMut<'static> {
        let p = &skel.progs;
        match name {
            "block_rq_issue" => &p.block_rq_issue,
            "block_rq_complete" => &p.block_rq_complete,
            "block_rq_insert" => &p.block_rq_insert,
            "block_rq_requeue" => &p.block_rq_requeue,
            _ => &p.block_rq_merge,
        }
    }

    pub fn probes(&self) -> &[ProbeStatus] {
        &self.probes
    }

    /// Reads every occupied slot, hardware queue and the drop counters.
    pub fn read(&self) -> Result<RawSample> {
        let bss = self
            .skel
            .maps
            .bss_data
            .as_deref()
            .context("BPF object has no .bss")?;
        let mut out = RawSample::default();
        // Drain nested updates first: one that lands after this drain but
        // references a slot read below is simply counted at the next read.
        self.nested_rb.consume()?;
        if let Ok(mut v) = self.nested.lock() {
            out.nested = std::mem::take(&mut *v);
        }
        for (slot, key, vals) in claimed_slots(
            &bss.tables.slot_key[..self.slots as usize],
            &self.skel.maps.io_stats,
        )? {
            out.series.push(RawSeries {
                slot,
                key,
                per_cpu: vals.iter().map(|b| from_bytes(b)).collect(),
            });
        }
        for idx in 0..MAX_DEVS {
            let devt = unsafe { std::ptr::read_volatile(&bss.tables.dev_devt[idx as usize]) };
            if devt == 0 {
                continue;
            }
            out.devs.push((idx, devt));
            for class in 0..COST_CLASSES_PER_DEV {
                let i = idx * COST_CLASSES_PER_DEV + class;
                let Some(vals) = self
                    .skel
                    .maps
                    .cost_classes
                    .lookup_percpu(&i.to_ne_bytes(), MapFlags::ANY)?
                else {
                    continue;
                };
                let per_cpu: Vec<iow_cost_class> = vals.iter().map(|b| from_bytes(b)).collect();
                if per_cpu.iter().any(|c| c.ios != 0) {
                    out.cost_classes.push(RawCostClass {
                        devt,
                        class,
                        per_cpu,
                    });
                }
            }
            for hctx in 0..MAX_HWQ {
                let i = idx * MAX_HWQ + hctx;
                let Some(vals) = self
                    .skel
                    .maps
                    .hwq_stats
                    .lookup_percpu(&i.to_ne_bytes(), MapFlags::ANY)?
                else {
                    continue;
                };
                let per_cpu: Vec<iow_hwq_stats> = vals.iter().map(|b| from_bytes(b)).collect();
                if per_cpu
                    .iter()
                    .any(|h| h.issued != 0 || h.inserted != 0 || h.completed != 0)
                {
                    out.hwqs.push(RawHwq {
                        devt,
                        hctx,
                        per_cpu,
                    });
                }
            }
        }
        if let Some(vals) = self
            .skel
            .maps
            .drops
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)?
        {
            out.drops = vals.iter().map(|b| from_bytes(b)).collect();
        }
        Ok(out)
    }

    /// Sets the cost model coefficients (iocost's lcoefs, vtime units) of
    /// the device at `idx`, or of [`COST_DEFAULT`], the entry used for
    /// devices without one.
    pub fn set_cost_coefs(&self, idx: u32, lcoef: [u64; 6]) -> Result<()> {
        write_cost_coefs(&self.skel.maps.cost_coefs, idx, lcoef)
    }

    /// Frees a series slot whose cgroup is gone: zeroes its counters, then
    /// releases the key so the BPF side can claim it again.
    pub fn release_slot(&mut self, slot: u32) -> Result<()> {
        let maps = &mut self.skel.maps;
        let bss = maps
            .bss_data
            .as_deref_mut()
            .context("BPF object has no .bss")?;
        free_slot(
            &maps.io_stats,
            std::mem::size_of::<iow_io_stats>(),
            slot,
            &mut bss.tables.slot_key[slot as usize],
        )
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

/// Run count and time of one loaded program from the kernel's
/// `bpf_prog_info`; None when the kernel does not answer.
pub(crate) fn prog_stats_of(name: &str, prog: &impl std::os::fd::AsFd) -> Option<ProgStats> {
    use std::os::fd::AsRawFd;
    let fd = prog.as_fd().as_raw_fd();
    let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a zeroed bpf_prog_info and len its size; with no
    // array pointers set the kernel fills only the scalar fields.
    let rc = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    (rc == 0).then(|| ProgStats {
        name: name.to_string(),
        run_time_ns: info.run_time_ns,
        run_cnt: info.run_cnt,
        recursion_misses: info.recursion_misses,
    })
}

/// Kernel-side statistics of one loaded program (`bpf_prog_info`).
#[derive(Debug, Clone, Default)]
pub struct ProgStats {
    pub name: String,
    /// Both stay 0 unless BPF run-time stats are enabled (see crate::selfstats).
    pub run_time_ns: u64,
    pub run_cnt: u64,
    /// Runs skipped because the program was already running on the CPU.
    pub recursion_misses: u64,
}

/// Occupancy of one fixed-size table: (name, used entries, capacity).
pub type TableFill = (&'static str, u64, u64);

// Self-observation, kept apart from the data path above.
impl Tracer {
    /// Run count and time of every loaded tracepoint program.
    pub fn prog_stats(&self) -> Vec<ProgStats> {
        let mut out = Vec::new();
        for &(name, _, _) in TRACEPOINTS {
            // Programs left unloaded (tracepoint missing) have no fd.
            if self.probes.iter().any(|p| p.name == name && !p.active) {
                continue;
            }
            out.extend(prog_stats_of(name, Self::prog(&self.skel, name)));
        }
        out
    }

    /// How full the tables the BPF side claims entries in are: a full series
    /// table drops new (cgroup, device, op) series (iowarden_dropped_total).
    pub fn table_fill(&self) -> Vec<TableFill> {
        let Some(bss) = self.skel.maps.bss_data.as_deref() else {
            return Vec::new();
        };
        let t = &bss.tables;
        let count = |n: u32, used: &dyn Fn(usize) -> bool| {
            (0..n as usize).filter(|&i| used(i)).count() as u64
        };
        // Volatile reads: the BPF side claims entries concurrently.
        let series = count(
            self.slots,
            &|i| unsafe { std::ptr::read_volatile(&t.slot_key[i]) } != 0,
        );
        let devs = count(
            MAX_DEVS,
            &|i| unsafe { std::ptr::read_volatile(&t.dev_devt[i]) } != 0,
        );
        vec![
            ("series", series, self.slots as u64),
            ("devices", devs, MAX_DEVS as u64),
        ]
    }
}
