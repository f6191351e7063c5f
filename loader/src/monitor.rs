//! Ties the probes, the accumulator and the cgroup resolver together: one
//! `poll` reads every BPF object and returns a cumulative snapshot. The one
//! configuration of what is loaded ([`MonitorConfig`]) and the one policy
//! for releasing the table entries of removed cgroups live here.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use anyhow::Result;
use iowarden_exporters::{DeviceRef, ProbeStatus, RuntimeMetrics, Snapshot};

use crate::costmodel::lcoefs;
use crate::costs::CostModels;
use crate::host::cgroups::CgroupResolver;
use crate::host::devices::{cpu_queue_map, DeviceNames};
use crate::host::diskstats::read_diskstats;
use crate::probes::block::accumulate::{Accumulator, SeriesKey};
use crate::probes::block::latency_watch::LatencyWatch;
use crate::probes::block::{BlockConfig, BlockProbe, RawSample};
use crate::probes::iocost::IocostProbe;
use crate::probes::locks::{LockConfig, LockProbe};
use crate::probes::nvme::{NvmeConfig, NvmeProbe};
use crate::probes::{cgroup_ref, status, FillContext, Probe};

/// Which BPF objects are loaded, and how.
#[derive(Debug, Clone)]
pub struct MonitorConfig {
    /// The block programs (always loaded).
    pub block: BlockConfig,
    /// NVMe queue programs (where the nvme driver is loaded).
    pub nvme: bool,
    /// iocost programs (where the kernel has iocost).
    pub iocost: bool,
    /// Lock contention programs (None: off).
    pub locks: Option<LockConfig>,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            block: BlockConfig::default(),
            nvme: true,
            iocost: true,
            locks: Some(LockConfig::default()),
        }
    }
}

/// Polls a cgroup must stay gone before the table entries of its series
/// are released (in every BPF object): seen gone at two polls in a row, so
/// a completion still in flight when it was removed is counted, and a burst
/// of short-lived cgroups frees its entries within two poll intervals.
const RELEASE_AFTER_POLLS: u32 = 1;

/// The release policy: counts, per cgroup, the consecutive polls it was
/// found gone.
#[derive(Default)]
struct ReleasePolicy {
    /// cgroup id -> consecutive polls it could not be resolved
    missing: HashMap<u64, u32>,
}

impl ReleasePolicy {
    /// The cgroups among `ids` (seen in this poll's reads) to release now.
    fn due(&mut self, ids: &BTreeSet<u64>, resolver: &mut CgroupResolver) -> BTreeSet<u64> {
        let mut due = BTreeSet::new();
        for &id in ids.iter().filter(|&&id| id != 0) {
            if !resolver.is_gone(id) {
                self.missing.remove(&id);
                continue;
            }
            let n = self.missing.entry(id).or_default();
            *n += 1;
            if *n > RELEASE_AFTER_POLLS {
                due.insert(id);
            }
        }
        self.missing.retain(|_, n| *n <= RELEASE_AFTER_POLLS);
        due
    }
}

pub struct Monitor {
    block: BlockProbe,
    acc: Accumulator,
    optional: Optional,
    resolver: CgroupResolver,
    devices: DeviceNames,
    started: Instant,
    release: ReleasePolicy,
    probes: Vec<ProbeStatus>,
    /// None when cost charging is off.
    costs: Option<CostModels>,
    /// The series table was found full once (said in the log once).
    said_table_full: bool,
    latency: LatencyWatch,
    /// Latency is recorded (not --no-latency).
    latency_on: bool,
}

/// The optional BPF objects: those that loaded, and every one's status.
#[derive(Default)]
struct Optional {
    loaded: Vec<Box<dyn Probe>>,
    status: Vec<ProbeStatus>,
}

impl Optional {
    /// Starts the optional objects the config asks for.
    fn start(cfg: &MonitorConfig) -> Result<Optional> {
        let mut o = Optional::default();
        if cfg.nvme {
            o.keep(NvmeProbe::start(&NvmeConfig::default())?);
        } else {
            o.status
                .push(status("nvme", false, "disabled by --no-nvme"));
        }
        if cfg.iocost {
            o.keep(IocostProbe::start()?);
        } else {
            o.status
                .push(status("iocost", false, "disabled by --no-iocost"));
        }
        match &cfg.locks {
            Some(l) => o.keep(LockProbe::start(l)?),
            None => o.status.push(status(
                "locks",
                false,
                "off by default: --locks to load (a kernel stack walk per contention)",
            )),
        }
        Ok(o)
    }

    fn keep<P: Probe + 'static>(&mut self, (probe, status): (Option<P>, ProbeStatus)) {
        self.status.push(status);
        if let Some(p) = probe {
            self.loaded.push(Box::new(p));
        }
    }
}

impl Monitor {
    pub fn start(cfg: &MonitorConfig) -> Result<Monitor> {
        let resolver = CgroupResolver::for_host()?;
        let mut costs = cfg
            .block
            .cost
            .then(|| CostModels::new(cfg.block.cost_model));
        let mut block_cfg = cfg.block.clone();
        let mut devices = DeviceNames::default();
        if let Some(c) = &mut costs {
            block_cfg.cost_devices = crate::costs::devices_to_preload(block_cfg.filter_devt)
                .into_iter()
                .map(|devt| (devt, lcoefs(&c.resolve(devt, &devices.get(devt)))))
                .collect();
        }
        let block = BlockProbe::start(&block_cfg)?;
        let optional = Optional::start(cfg)?;
        let mut probes = block.probes().to_vec();
        probes.extend(optional.status.iter().cloned());
        Ok(Monitor {
            block,
            acc: Accumulator::new(block_cfg.hwq_events, block_cfg.stage_histograms),
            optional,
            resolver,
            devices,
            started: Instant::now(),
            release: ReleasePolicy::default(),
            probes,
            costs,
            said_table_full: false,
            latency: LatencyWatch::default(),
            latency_on: block_cfg.latency,
        })
    }

    pub fn resolver(&self) -> &CgroupResolver {
        &self.resolver
    }

    /// Reads the maps and returns the cumulative snapshot.
    pub fn poll(&mut self) -> Result<Snapshot> {
        let raw = self.read_block()?;
        for p in &mut self.optional.loaded {
            p.read()?;
        }
        self.release_gone(&raw)?;
        self.say_if_table_full(&raw);
        let mut snap = self.fill()?;
        self.watch_latency(&mut snap);
        Ok(snap)
    }

    /// Reads the block object into the accumulator; attaches the issue
    /// stamps and gives new devices their cost model where needed.
    fn read_block(&mut self) -> Result<RawSample> {
        let raw = self.block.read()?;
        self.acc.add(&raw);
        if let Some(line) = self.block.attach_issue_stamps_if_needed()? {
            crate::say!("iowarden: {line}");
            self.probes = self.block.probes().to_vec();
            self.probes.extend(self.optional.status.iter().cloned());
        }
        if let Some(costs) = &mut self.costs {
            for &(idx, devt) in &raw.devs {
                if !costs.known(devt) {
                    let m = costs.resolve(devt, &self.devices.get(devt));
                    self.block.set_cost_coefs(idx, lcoefs(&m))?;
                }
            }
        }
        Ok(raw)
    }

    /// Releases the table entries of cgroups that stay gone, so a host with
    /// short-lived cgroups does not fill the tables.
    fn release_gone(&mut self, raw: &RawSample) -> Result<()> {
        // The accumulator has every series of this read (and no released one).
        let mut ids: BTreeSet<u64> = self.acc.cgroup_ids().collect();
        for p in &self.optional.loaded {
            ids.extend(p.cgroup_ids());
        }
        // New cgroups appear between polls: walk the hierarchy again when an
        // id is unknown (at most once per poll).
        if ids
            .iter()
            .any(|&id| id != 0 && self.resolver.path_of(id).is_none())
        {
            self.resolver.refresh();
        }
        let gone = self.release.due(&ids, &mut self.resolver);
        for s in &raw.series {
            if gone.contains(&SeriesKey::decode(s.key).cgroup_id) {
                self.block.release_slot(s.slot)?;
                self.acc.forget(s.slot, s.key);
            }
        }
        for p in &mut self.optional.loaded {
            p.release(&gone)?;
        }
        Ok(())
    }

    /// The snapshot: the block object's part, the host's CPU -> queue map
    /// and the kernel's own counts of the devices with series, each
    /// optional object's part, the cost models.
    fn fill(&mut self) -> Result<Snapshot> {
        let resolver = &self.resolver;
        let mut snap = self.acc.snapshot(
            &|id| cgroup_ref(resolver, id),
            &mut self.devices,
            &self.probes,
            self.started.elapsed().as_secs_f64(),
        );
        let mut names: BTreeSet<String> = snap.io.iter().map(|s| s.device.name.clone()).collect();
        names.extend(snap.queues.iter().map(|q| q.device.name.clone()));
        snap.cpu_queue_map = names.iter().flat_map(|d| cpu_queue_map(d)).collect();
        let traced: BTreeSet<DeviceRef> = snap.io.iter().map(|s| s.device.clone()).collect();
        snap.kernel_diskstats = read_diskstats(&traced);
        let mut ctx = FillContext {
            resolver: &self.resolver,
            devices: &mut self.devices,
        };
        for p in &mut self.optional.loaded {
            p.fill(&mut snap, &mut ctx)?;
        }
        if let Some(costs) = &self.costs {
            let devices = &mut self.devices;
            snap.cost_models = costs.report(&self.acc.cost_classes(), &mut |d| devices.get(d));
        }
        Ok(snap)
    }
}

impl Monitor {
    /// Says once in the log that the series table filled up: from then on
    /// new series are counted in iowarden_dropped_total only.
    fn say_if_table_full(&mut self, raw: &RawSample) {
        let full = raw.drops.n[crate::skel::types::iow_drop::IOW_DROP_SLOT_FULL.0 as usize];
        if full > 0 && !self.said_table_full {
            self.said_table_full = true;
            let cap = self.block.table_fill().first().map_or(0, |t| t.capacity);
            crate::say!(
                "iowarden: the series table is full ({cap} slots): requests of new (cgroup, device, op) \
                 series are dropped and counted in iowarden_dropped_total{{reason=\"slot_table_full\"}}; \
                 raise --max-series"
            );
        }
    }

    /// Every probe's status (block programs, optional objects).
    pub fn probes(&self) -> &[ProbeStatus] {
        &self.probes
    }

    /// Says when reads and writes go untimed (and when they are timed
    /// again), and shows it in the snapshot's probe statuses.
    fn watch_latency(&mut self, snap: &mut Snapshot) {
        if !self.latency_on {
            return;
        }
        if let Some(line) = self.latency.check(snap) {
            crate::say!("iowarden: {line}");
        }
        snap.probes.extend(self.latency.status());
    }

    /// One line per optional probe that is not active, saying why.
    pub fn probe_report(&self) -> Vec<String> {
        self.probes
            .iter()
            .filter(|p| !p.active)
            .map(|p| format!("{} inactive: {}", p.name, p.reason))
            .collect()
    }

    /// What iowarden costs and how full its tables are, for the self-metrics.
    pub fn runtime_stats(&self, bpf_stats_enabled: bool) -> RuntimeMetrics {
        RuntimeMetrics {
            bpf_stats_enabled,
            programs: self
                .block
                .prog_stats()
                .into_iter()
                .chain(self.optional.loaded.iter().flat_map(|p| p.prog_stats()))
                .collect(),
            tables: self
                .block
                .table_fill()
                .into_iter()
                .chain(self.optional.loaded.iter().flat_map(|p| p.table_fill()))
                .collect(),
            ..Default::default()
        }
    }
}
