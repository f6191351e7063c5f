//! The block object (bpf/iowarden.bpf.c), always loaded: `start` loads and
//! attaches its programs, `read` copies the sharded counters (RawSample),
//! accumulate.rs sums reads over time and fills the snapshot's io and
//! queues. programs.rs chooses which programs load and attaches them (some
//! late), held.rs plans the fexit on blk-throttle, capacity.rs sizes its
//! tables, hist.rs names its buckets.

pub mod accumulate;
pub mod bench;
pub mod capacity;
pub mod culprit_totals;
pub mod culprits;
pub mod delay;
pub mod held;
pub mod hist;
pub mod latency_watch;
pub mod object;
mod programs;

pub use programs::Claims;
use programs::{traced_bio_based, Attach, PROGRAMS};

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use iowarden_exporters::{BpfProgramStats, ProbeStatus, TableFill};
use libbpf_rs::btf::types::Enum;
use libbpf_rs::btf::Btf;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags};

use crate::probes::block::capacity::Capacity;
use crate::probes::mapped::MappedArray;
use crate::probes::{
    attached_prog_stats_as, open_object, pod_bytes, slots_in_use, status, table_fill,
};
use crate::skel::types::{
    iow_const, iow_cost_class, iow_cost_coefs, iow_drops, iow_hwq_stats, iow_series, iow_tables,
};
use crate::skel::{IowardenSkel, IowardenSkelBuilder};

pub const MAX_DEVS: u32 = iow_const::IOW_MAX_DEVS.0;
pub const MAX_HWQ: u32 = iow_const::IOW_MAX_HWQ.0;
/// Cost classes per device: (read/write, sequential/random, size).
pub const COST_CLASSES_PER_DEV: u32 = iow_const::IOW_COST_CLASSES.0 / MAX_DEVS;
pub const COST_DEFAULT: u32 = iow_const::IOW_COST_DEFAULT.0;

/// What the block programs record and how big their tables are.
#[derive(Debug, Clone)]
pub struct BlockConfig {
    /// Series slots and counter shards (crate::probes::block::capacity::plan).
    pub capacity: Capacity,
    /// Trace only this device (kernel dev_t: major << 20 | minor).
    pub filter_devt: Option<u32>,
    pub measure: BlockMeasures,
    /// Devices given their cost coefficients (kernel dev_t, lcoefs) before
    /// the programs attach: their device table entries are claimed at load,
    /// so their first request is charged with their own model.
    pub cost_devices: Vec<(u32, [u64; 6])>,
}

/// What the block object measures besides counts and bytes: the command
/// line's choices, carried unchanged from crate::monitor::TraceOptions.
/// The default is the command line's.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockMeasures {
    pub latency: bool,
    /// Count the queue and device stages' histograms too (their sums are
    /// always kept): only when they are exported or shown.
    pub stage_histograms: bool,
    pub hwq: bool,
    /// Count inserted/issued per hardware queue: two more programs per request.
    pub hwq_events: bool,
    /// Time the delays iocost and io.latency put on tasks (`--task-delays`):
    /// a fentry/fexit pair on every return to user space with work pending.
    pub task_delays: bool,
    /// Charge every read/write the linear iocost model's cost.
    pub cost: bool,
    /// Split each request's time by whom it waited behind (on by default;
    /// `--no-culprits`): the completion program logs each timed request,
    /// a thread replays the log (crate::culprits).
    pub culprits: bool,
    /// The model for every device (`--cost-model`); None: each device's own
    /// (see crate::costmodel::devices).
    pub cost_model: Option<crate::costmodel::LinearModel>,
}

impl Default for BlockMeasures {
    fn default() -> Self {
        BlockMeasures {
            latency: true,
            stage_histograms: false,
            hwq: true,
            hwq_events: false,
            task_delays: false,
            cost: true,
            culprits: true,
            cost_model: None,
        }
    }
}

impl Default for BlockConfig {
    fn default() -> Self {
        BlockConfig {
            capacity: Capacity {
                slots: crate::probes::block::capacity::DEFAULT_SERIES,
                shards: crate::probes::block::capacity::auto_shards(
                    libbpf_rs::num_possible_cpus().unwrap_or(1) as u32,
                ),
            },
            filter_devt: None,
            measure: BlockMeasures::default(),
            cost_devices: Vec::new(),
        }
    }
}

/// The shards of one occupied series slot.
pub struct RawSeries {
    pub slot: u32,
    pub key: u64,
    pub shards: Vec<iow_series>,
}

pub struct RawHwq {
    pub devt: u32,
    pub hctx: u32,
    pub shards: Vec<iow_hwq_stats>,
}

/// The shards of one cost class of one device.
pub struct RawCostClass {
    pub devt: u32,
    /// Class within the device: (op * 2 + random) * IOW_COST_SIZES + size.
    pub class: u32,
    pub shards: Vec<iow_cost_class>,
}

#[derive(Default)]
pub struct RawSample {
    pub series: Vec<RawSeries>,
    pub hwqs: Vec<RawHwq>,
    /// Cost classes that have samples.
    pub cost_classes: Vec<RawCostClass>,
    pub drops: iow_drops,
    /// Device table: index -> kernel dev_t, for occupied entries.
    pub devs: Vec<(u32, u32)>,
    /// The task delays' table (empty where its programs are not attached).
    pub delays: Vec<delay::RawDelay>,
    /// Requests whose time the culprit account could not (wholly) split,
    /// since start (from its drain, not the maps).
    pub culprit_untold: u64,
}

/// The sharded counter arrays, mapped into this process.
struct Counters {
    series: MappedArray<iow_series>,
    hwq: MappedArray<iow_hwq_stats>,
    classes: MappedArray<iow_cost_class>,
}

impl Counters {
    fn map(skel: &IowardenSkel<'static>, cap: Capacity) -> Result<Counters> {
        let shards = cap.shards as usize;
        Ok(Counters {
            series: MappedArray::new(&skel.maps.series, cap.slots as usize * shards)?,
            hwq: MappedArray::new(&skel.maps.hwq_stats, (MAX_DEVS * MAX_HWQ) as usize * shards)?,
            classes: MappedArray::new(
                &skel.maps.cost_classes,
                iow_const::IOW_COST_CLASSES.0 as usize * shards,
            )?,
        })
    }
}

pub struct BlockProbe {
    skel: IowardenSkel<'static>,
    links: Vec<(&'static str, Link)>,
    probes: Vec<ProbeStatus>,
    cap: Capacity,
    counters: Counters,
    hwq_events: bool,
    claims: Claims,
    filter_devt: Option<u32>,
    /// The task delay programs are attached.
    delays: bool,
    /// The completion program logs requests for the culprit account.
    culprits: bool,
}

fn write_cost_coefs(map: &dyn MapCore, idx: u32, lcoef: [u64; 6]) -> Result<()> {
    let v = iow_cost_coefs {
        lcoef,
        valid: 1,
        ..Default::default()
    };
    // SAFETY: a skeleton type, its padding spelled out and zeroed.
    let bytes = unsafe { pod_bytes(&v) };
    map.update(&idx.to_ne_bytes(), bytes, MapFlags::ANY)?;
    Ok(())
}

/// Claims `devt`'s entry in the device table before load, probing exactly
/// as the BPF side's dev_index() does, so that it finds the entry there.
fn claim_dev(table: &mut [u32], devt: u32) -> Option<u32> {
    let n = table.len() as u32;
    let start =
        ((devt as u64).wrapping_mul(0x9E3779B97F4A7C15) >> (64 - n.trailing_zeros())) as u32;
    (0..iow_const::IOW_DEV_PROBES.0)
        .map(|i| (start + i) & (n - 1))
        .find(|&i| table[i as usize] == 0 || table[i as usize] == devt)
        .inspect(|&i| table[i as usize] = devt)
}

/// Value of an enumerator in the running kernel's BTF, searching every enum
/// (QUEUE_FLAG_* live in an anonymous one).
pub(super) fn kernel_enum_value(btf: &Btf<'_>, name: &str) -> Option<i64> {
    btf.type_by_kind::<Enum<'_>>().find_map(|e| {
        e.iter()
            .find(|m| m.name.is_some_and(|n| n == name))
            .map(|m| m.value)
    })
}

type OpenSkelT = crate::skel::OpenIowardenSkel<'static>;

/// What BlockProbe::load gives: the loaded object and the statuses of the
/// programs left out.
type Loaded = (IowardenSkel<'static>, Vec<ProbeStatus>);

impl BlockProbe {
    /// Opens, configures, loads and attaches the programs. Optional
    /// tracepoints missing from the kernel are skipped and reported in
    /// [`BlockProbe::probes`]; a missing required one is an error.
    pub fn start(cfg: &BlockConfig) -> Result<BlockProbe> {
        let claims = Claims::probe();
        let (skel, mut probes) = Self::load(cfg, claims)?;
        let culprits = cfg.measure.culprits;
        let counters = Counters::map(&skel, cfg.capacity)?;
        let mut probe = BlockProbe {
            skel,
            links: Vec::new(),
            probes: Vec::new(),
            cap: cfg.capacity,
            counters,
            hwq_events: cfg.measure.hwq_events,
            claims,
            filter_devt: cfg.filter_devt,
            delays: false,
            culprits,
        };
        for &(prog, _, when) in PROGRAMS {
            let wanted = match when {
                Attach::Required | Attach::Optional => true,
                Attach::Inserts | Attach::IssueStamps => cfg.measure.hwq_events,
                Attach::BioBased => traced_bio_based(cfg.filter_devt),
            };
            if wanted && !probes.iter().any(|p| p.name == prog) {
                probe.attach(prog, when == Attach::Required, &mut probes)?;
            }
        }
        if !probes.iter().any(|p| p.name == held::PROGRAM) {
            probe.attach(held::PROGRAM, false, &mut probes)?;
        }
        if !probes.iter().any(|p| p.name == delay::STATUS) {
            probes.push(probe.attach_delays());
        }
        probes.extend(Self::switched_off(cfg));
        probes.extend(culprits::plan(culprits));
        if claims == Claims::MapInsert {
            if let Some(p) = probes.iter_mut().find(|p| p.name == "block_rq_complete") {
                p.reason = "series claimed through a hash map: the kernel's BPF has no \
                            compare-and-swap (Linux 5.12+)"
                    .into();
            }
        }
        probe.probes = probes;
        Ok(probe)
    }

    /// Opens, configures and loads the object, and gives the default cost
    /// model and the preclaimed devices their coefficients. Returns the
    /// statuses of the programs left out.
    fn load(cfg: &BlockConfig, claims: Claims) -> Result<Loaded> {
        let btf = Btf::from_vmlinux().context(
            "cannot read kernel BTF (/sys/kernel/btf/vmlinux): iowarden needs a kernel built with CONFIG_DEBUG_INFO_BTF=y",
        )?;
        let mut open = IowardenSkelBuilder::default()
            .open(open_object())
            .context("opening the BPF object")?;
        let held = held::plan(&btf);
        let delays = delay::plan(&btf, cfg.measure.task_delays);
        Self::configure(&mut open, cfg, &btf, claims)?;
        Self::configure_culprits(&mut open, cfg.measure.culprits)?;
        let preclaimed = Self::preclaim_devices(&mut open, cfg)?;
        let mut probes =
            Self::select_programs(&mut open, &btf, claims, held.is_ok(), delays.is_ok())?;
        match held {
            Ok(func) => Self::aim_held(&mut open, func)?,
            Err(status) => probes.push(status),
        }
        probes.extend(delays.err());
        let skel = open
            .load()
            .map_err(|e| crate::probes::load_error("the block", e))?;
        let default =
            crate::costmodel::lcoefs(&crate::costmodel::default_model(cfg.measure.cost_model));
        for &(idx, lcoef) in preclaimed.iter().chain([&(COST_DEFAULT, default)]) {
            write_cost_coefs(&skel.maps.cost_coefs, idx, lcoef)?;
        }
        Ok((skel, probes))
    }

    /// The statuses of what the options switched off.
    fn switched_off(cfg: &BlockConfig) -> Vec<ProbeStatus> {
        [
            (cfg.measure.latency, "latency", "--no-latency"),
            (cfg.measure.hwq, "hwq", "--no-hwq"),
            (cfg.measure.cost, "cost", "--no-cost"),
        ]
        .into_iter()
        .filter(|(on, _, _)| !on)
        .map(|(_, name, flag)| status(name, false, format!("disabled by {flag}")))
        .collect()
    }

    /// Load-time switches and the sizes of the sharded arrays.
    fn configure(
        open: &mut OpenSkelT,
        cfg: &BlockConfig,
        btf: &Btf<'_>,
        claims: Claims,
    ) -> Result<()> {
        let cap = cfg.capacity;
        let rodata = open
            .maps
            .rodata_data
            .as_deref_mut()
            .context("BPF object has no .rodata")?;
        rodata.enable_latency = cfg.measure.latency;
        rodata.enable_stage_hists = cfg.measure.stage_histograms;
        rodata.enable_hwq = cfg.measure.hwq;
        rodata.enable_hwq_events = cfg.measure.hwq_events;
        rodata.enable_cost = cfg.measure.cost;
        rodata.filter_devt = cfg.filter_devt.unwrap_or(0);
        rodata.slot_mask = cap.slots - 1;
        rodata.shard_mask = cap.shards - 1;
        rodata.exclusive_shards = cap.shards as usize >= libbpf_rs::num_possible_cpus()?;
        // How tests exercise the fallback issue stamps on a kernel whose
        // queues all stamp requests themselves.
        rodata.use_kernel_issue_stamps =
            std::env::var_os("IOWARDEN_IGNORE_KERNEL_ISSUE_STAMPS").is_none();
        rodata.queue_flag_stats_bit = kernel_enum_value(btf, "QUEUE_FLAG_STATS")
            .and_then(|v| u32::try_from(v).ok())
            .filter(|&v| v < 64)
            .unwrap_or(64);
        rodata.rq_after_queue_arg =
            crate::probes::features::tracepoint_arg_count(btf, "block_rq_issue") == Some(2);
        if claims == Claims::CompareAndSwap {
            open.maps.claims.set_max_entries(1)?;
        }
        open.maps.series.set_max_entries(cap.slots * cap.shards)?;
        open.maps
            .hwq_stats
            .set_max_entries(MAX_DEVS * MAX_HWQ * cap.shards)?;
        open.maps
            .cost_classes
            .set_max_entries(iow_const::IOW_COST_CLASSES.0 * cap.shards)?;
        Ok(())
    }

    /// The culprits' switch, and their log's rings: one per possible CPU
    /// (one entry when off).
    fn configure_culprits(open: &mut OpenSkelT, on: bool) -> Result<()> {
        let cpus = libbpf_rs::num_possible_cpus()? as u32;
        let bits = culprits::ring_bits(cpus);
        let rodata = open
            .maps
            .rodata_data
            .as_deref_mut()
            .context("BPF object has no .rodata")?;
        rodata.enable_culprits = on;
        rodata.flight_ring_bits = bits;
        if on {
            open.maps.flight_log.set_max_entries(cpus << bits)?;
            open.maps.flight_heads.set_max_entries(cpus)?;
        }
        Ok(())
    }

    /// Claims the device entries of the devices with their own cost model.
    fn preclaim_devices(open: &mut OpenSkelT, cfg: &BlockConfig) -> Result<Vec<(u32, [u64; 6])>> {
        let bss = open
            .maps
            .bss_data
            .as_deref_mut()
            .context("BPF object has no .bss")?;
        Ok(cfg
            .cost_devices
            .iter()
            .filter_map(|&(devt, c)| claim_dev(&mut bss.tables.dev_devt, devt).map(|i| (i, c)))
            .collect())
    }

    /// How the programs claim table entries on this kernel.
    pub fn claims(&self) -> Claims {
        self.claims
    }

    pub fn probes(&self) -> &[ProbeStatus] {
        &self.probes
    }

    /// Whether inserted/issued are counted per hardware queue.
    pub fn hwq_events(&self) -> bool {
        self.hwq_events
    }

    /// Reads every occupied slot, device, hardware queue, cost class and the
    /// drop counters.
    pub fn read(&self) -> Result<RawSample> {
        let tables = self.tables()?;
        let shards = self.cap.shards as usize;
        let mut out = RawSample::default();
        for (slot, k) in tables.slot_key[..self.cap.slots as usize]
            .iter()
            .enumerate()
        {
            // The BPF side claims keys concurrently: a volatile read of an
            // aligned u64, never torn.
            let key = unsafe { std::ptr::read_volatile(k) };
            if key != 0 {
                out.series.push(RawSeries {
                    slot: slot as u32,
                    key,
                    shards: self.counters.series.range(slot * shards, shards),
                });
            }
        }
        for idx in 0..MAX_DEVS {
            let devt = unsafe { std::ptr::read_volatile(&tables.dev_devt[idx as usize]) };
            if devt != 0 {
                out.devs.push((idx, devt));
                self.read_device(idx, devt, &mut out);
            }
        }
        if self.delays {
            out.delays = delay::read(&self.skel.maps.task_delays)?;
        }
        if let Some(v) = self
            .skel
            .maps
            .drops
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)?
        {
            // SAFETY: the map's value is an iow_drops; the length is checked.
            if v.len() >= std::mem::size_of::<iow_drops>() {
                out.drops = unsafe { std::ptr::read_unaligned(v.as_ptr() as *const iow_drops) };
            }
        }
        Ok(out)
    }

    /// The cost classes and hardware queues of device `idx` that have data.
    fn read_device(&self, idx: u32, devt: u32, out: &mut RawSample) {
        let shards = self.cap.shards as usize;
        for class in 0..COST_CLASSES_PER_DEV {
            let i = (idx * COST_CLASSES_PER_DEV + class) as usize;
            let v = self.counters.classes.range(i * shards, shards);
            if v.iter().any(|c| c.bytes_ios != 0) {
                out.cost_classes.push(RawCostClass {
                    devt,
                    class,
                    shards: v,
                });
            }
        }
        for hctx in 0..MAX_HWQ {
            let i = (idx * MAX_HWQ + hctx) as usize;
            let v = self.counters.hwq.range(i * shards, shards);
            if v.iter()
                .any(|h| h.issued != 0 || h.inserted != 0 || h.busy_completed != 0)
            {
                out.hwqs.push(RawHwq {
                    devt,
                    hctx,
                    shards: v,
                });
            }
        }
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
        let shards = self.cap.shards as usize;
        self.counters.series.zero(slot as usize * shards, shards);
        let tables = self.tables_mut()?;
        // SAFETY: an aligned u64 in the mmapped .bss, also read and
        // compare-and-swapped by the BPF side: a volatile store, never torn.
        unsafe { std::ptr::write_volatile(&mut tables.slot_key[slot as usize], 0) };
        if self.claims == Claims::MapInsert {
            // After the key: a claim racing with the release then finds
            // the slot taken, never a key it would overwrite.
            let _ = self.skel.maps.claims.delete(&slot.to_ne_bytes());
        }
        Ok(())
    }

    /// The culprit account's log, mapped for its draining thread (None
    /// when the account is off).
    pub fn flight_log(&self) -> Result<Option<culprits::FlightLog>> {
        if !self.culprits {
            return Ok(None);
        }
        let m = &self.skel.maps;
        let cpus = libbpf_rs::num_possible_cpus()?;
        let bits = self
            .skel
            .maps
            .rodata_data
            .as_ref()
            .context("BPF object has no .rodata")?
            .flight_ring_bits;
        Ok(Some(culprits::FlightLog::map(
            &m.flight_log,
            &m.flight_heads,
            &m.bss,
            cpus,
            bits,
        )?))
    }

    /// Deletes the task delays of cgroups that are gone.
    pub fn release_delays(&self, raw: &mut Vec<delay::RawDelay>, gone: &BTreeSet<u64>) {
        delay::release(&self.skel.maps.task_delays, raw, gone);
    }

    /// The tables in the mmapped .bss that the BPF side claims entries in.
    fn tables(&self) -> Result<&iow_tables> {
        let bss = self.skel.maps.bss_data.as_deref();
        Ok(&bss.context("BPF object has no .bss")?.tables)
    }

    fn tables_mut(&mut self) -> Result<&mut iow_tables> {
        let bss = self.skel.maps.bss_data.as_deref_mut();
        Ok(&mut bss.context("BPF object has no .bss")?.tables)
    }
}

// Self-observation, kept apart from the data path above.
impl BlockProbe {
    /// Run count and time of every attached program.
    pub fn prog_stats(&self) -> Vec<BpfProgramStats> {
        attached_prog_stats_as(self.skel.object(), &self.links, |name| {
            self.program_name(name)
        })
    }

    /// How full the tables the BPF side claims entries in are: a full series
    /// table drops new (cgroup, device, op) series (iowarden_dropped_total).
    pub fn table_fill(&self) -> Vec<TableFill> {
        let Ok(t) = self.tables() else {
            return Vec::new();
        };
        vec![
            table_fill(
                "series",
                slots_in_use(&t.slot_key[..self.cap.slots as usize]),
                self.cap.slots as u64,
            ),
            table_fill("devices", slots_in_use(&t.dev_devt), MAX_DEVS as u64),
        ]
    }
}
