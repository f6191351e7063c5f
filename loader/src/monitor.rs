//! Ties the BPF objects and the cgroup resolver together: one `poll` reads
//! every object, releases the entries of removed cgroups and returns the
//! cumulative snapshot each object fills its part of, without naming any.
//! The one configuration of what is loaded ([`MonitorConfig`], made from a
//! command's [`TraceOptions`] in one place) and the one policy for releasing
//! the table entries of removed cgroups live here.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use anyhow::{Context, Result};
use iowarden_exporters::{ProbeStatus, RuntimeMetrics, Snapshot, SCHEMA_VERSION};

use crate::host::cgroups::CgroupResolver;
use crate::host::devices::{kernel_devt, resolve_device, DeviceNames};
use crate::probes::block::capacity::{self, DEFAULT_BUDGET_BYTES, DEFAULT_SERIES};
use crate::probes::block::object::Block;
use crate::probes::block::{BlockConfig, BlockMeasures};
use crate::probes::locks::{self, LockConfig};
use crate::probes::optional::{start_optional, OptionalConfig};
use crate::probes::pressure::PressureProbe;
use crate::probes::{HostNames, Probe};

/// Which BPF objects are loaded, and how: made by [`MonitorConfig::new`].
#[derive(Debug, Clone)]
pub struct MonitorConfig {
    /// The block programs (always loaded).
    pub block: BlockConfig,
    pub optional: OptionalConfig,
}

/// What a command asks of the BPF objects, in the command line's terms
/// (`run`'s flags, cli/trace.rs); the default is the command line's. Every
/// command, the bench and the tests make their [`MonitorConfig`] from one.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// Only this whole disk: a name (nvme0n1) or MAJ:MIN.
    pub device: Option<String>,
    pub max_series: u32,
    /// Counter shards; None: one per CPU up to the plan's limit.
    pub shards: Option<u32>,
    pub max_map_memory_bytes: u64,
    pub measure: BlockMeasures,
    /// The optional objects switched on (names from
    /// [`crate::probes::optional::ALL`]).
    pub probes: BTreeSet<&'static str>,
    /// Lock contention anywhere in the kernel (loads the lock object).
    pub locks_all: bool,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            device: None,
            max_series: DEFAULT_SERIES,
            shards: None,
            max_map_memory_bytes: DEFAULT_BUDGET_BYTES,
            measure: BlockMeasures::default(),
            probes: OptionalConfig::default().enabled,
            locks_all: false,
        }
    }
}

impl TraceOptions {
    /// The optional objects to load (`locks_all` loads the lock object).
    pub fn enabled_probes(&self) -> BTreeSet<&'static str> {
        let mut on = self.probes.clone();
        if self.locks_all {
            on.insert(locks::NAME);
        }
        on
    }
}

impl MonitorConfig {
    /// Resolves the device and plans the tables for this host's CPUs.
    pub fn new(o: &TraceOptions) -> Result<MonitorConfig> {
        let filter_devt = match &o.device {
            Some(spec) => {
                let d = resolve_device(spec)?;
                Some(kernel_devt(d.major, d.minor))
            }
            None => None,
        };
        let cpus = libbpf_rs::num_possible_cpus().context("counting possible CPUs")? as u32;
        let capacity = capacity::plan(o.max_series, o.shards, cpus, o.max_map_memory_bytes)
            .map_err(anyhow::Error::msg)?;
        Ok(MonitorConfig {
            block: BlockConfig {
                capacity,
                filter_devt,
                measure: o.measure.clone(),
            },
            optional: OptionalConfig {
                enabled: o.enabled_probes(),
                locks: LockConfig {
                    block_only: !o.locks_all,
                    ..Default::default()
                },
            },
        })
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
    /// Every loaded BPF object, block first.
    loaded: Vec<Box<dyn Probe>>,
    /// The optional objects' statuses at start (loaded or not, and why).
    optional: Vec<ProbeStatus>,
    resolver: CgroupResolver,
    devices: DeviceNames,
    started: Instant,
    release: ReleasePolicy,
}

impl Monitor {
    /// Loads and attaches every object and starts their threads.
    pub fn start(cfg: &MonitorConfig) -> Result<Monitor> {
        let mut m = Self::load(cfg)?;
        m.start_threads()?;
        Ok(m)
    }

    /// Starts the threads the objects run beside their programs (the
    /// culprit account's drain): after [`Monitor::load`], once the
    /// command has settled its privileges.
    pub fn start_threads(&mut self) -> Result<()> {
        for p in &mut self.loaded {
            p.start_threads()?;
        }
        Ok(())
    }

    /// Loads and attaches every object, starting no thread (`run` drops its
    /// privileges before: a thread keeps the capabilities it starts with).
    pub fn load(cfg: &MonitorConfig) -> Result<Monitor> {
        let resolver = CgroupResolver::for_host()?;
        let devices = DeviceNames::default();
        let block = Block::start(&cfg.block)?;
        // The block programs' part first: io.pressure is read for its cgroups.
        let pressure = PressureProbe::start(&resolver);
        let mut loaded: Vec<Box<dyn Probe>> = vec![Box::new(block), Box::new(pressure)];
        let mut optional = Vec::new();
        for (probe, status) in start_optional(&cfg.optional)? {
            loaded.extend(probe);
            optional.push(status);
        }
        Ok(Monitor {
            loaded,
            optional,
            resolver,
            devices,
            started: Instant::now(),
            release: ReleasePolicy::default(),
        })
    }

    pub fn resolver(&self) -> &CgroupResolver {
        &self.resolver
    }

    /// Reads the maps and returns the cumulative snapshot.
    pub fn poll(&mut self) -> Result<Snapshot> {
        let mut names = HostNames {
            resolver: &self.resolver,
            devices: &mut self.devices,
        };
        for p in &mut self.loaded {
            p.read(&mut names)?;
        }
        self.release_gone()?;
        self.fill()
    }

    /// Releases the table entries of cgroups that stay gone, so a host with
    /// short-lived cgroups does not fill the tables.
    fn release_gone(&mut self) -> Result<()> {
        let ids: BTreeSet<u64> = self.loaded.iter().flat_map(|p| p.cgroup_ids()).collect();
        // New cgroups appear between polls: walk the hierarchy again when an
        // id is unknown (at most once per poll).
        if ids
            .iter()
            .any(|&id| id != 0 && self.resolver.path_of(id).is_none())
        {
            self.resolver.refresh();
        }
        let gone = self.release.due(&ids, &mut self.resolver);
        for p in &mut self.loaded {
            p.release(&gone)?;
        }
        Ok(())
    }

    /// The snapshot: every object's part, in load order.
    fn fill(&mut self) -> Result<Snapshot> {
        let mut snap = Snapshot {
            schema: SCHEMA_VERSION,
            taken_at_unix_seconds: crate::host::clock::since_epoch().as_secs_f64(),
            window_seconds: self.started.elapsed().as_secs_f64(),
            hostname: crate::host::sysinfo::hostname(),
            kernel: crate::host::sysinfo::kernel_release(),
            probes: self.probes(),
            ..Default::default()
        };
        let mut names = HostNames {
            resolver: &self.resolver,
            devices: &mut self.devices,
        };
        // Block first: the others' parts refer to its devices and queues.
        for p in &mut self.loaded {
            p.fill(&mut snap, &mut names)?;
        }
        Ok(snap)
    }
}

impl Monitor {
    /// Every probe's status: the loaded objects' (the block programs'
    /// change as they run), then the optional objects' at start.
    pub fn probes(&self) -> Vec<ProbeStatus> {
        let mut all: Vec<ProbeStatus> = self.loaded.iter().flat_map(|p| p.statuses()).collect();
        all.extend(self.optional.iter().cloned());
        all
    }

    /// One line per optional probe that is not active, saying why.
    pub fn probe_report(&self) -> Vec<String> {
        self.probes()
            .iter()
            .filter(|p| !p.active)
            .map(|p| format!("{} inactive: {}", p.name, p.reason))
            .collect()
    }

    /// What iowarden costs and how full its tables are, for the self-metrics.
    pub fn runtime_stats(&self, bpf_stats_enabled: bool) -> RuntimeMetrics {
        RuntimeMetrics {
            bpf_stats_enabled,
            programs: self.loaded.iter().flat_map(|p| p.prog_stats()).collect(),
            tables: self.loaded.iter().flat_map(|p| p.table_fill()).collect(),
            ..Default::default()
        }
    }
}
