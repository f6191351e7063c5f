//! Ties the tracer, the accumulator and the cgroup resolver together: one
//! `poll` reads the maps and returns a cumulative snapshot.

use std::collections::HashMap;
use std::time::Instant;

use anyhow::Result;
use iowarden_exporters::Snapshot;

use crate::costs::CostModels;
use crate::extensions::Extensions;
use crate::host::cgroups::CgroupResolver;
use crate::host::devices::DeviceNames;
use crate::probes::block::accumulate::{Accumulator, SeriesKey};
use crate::probes::block::{Tracer, TracerConfig};

/// Polls a cgroup must stay gone before its slots are released: seen gone
/// at two polls in a row, so a completion still in flight when it was
/// removed is counted, and a burst of short-lived cgroups frees its slots
/// within two poll intervals.
const RELEASE_AFTER_POLLS: u32 = 1;

pub struct Monitor {
    tracer: Tracer,
    acc: Accumulator,
    resolver: CgroupResolver,
    devices: DeviceNames,
    started: Instant,
    /// cgroup id -> consecutive polls it could not be resolved
    missing: HashMap<u64, u32>,
    ext: Extensions,
    probes: Vec<iowarden_exporters::ProbeStatus>,
    /// None when cost charging is off.
    costs: Option<CostModels>,
    /// The series table was found full once (said in the log once).
    said_table_full: bool,
}

impl Monitor {
    pub fn start(cfg: &TracerConfig) -> Result<Monitor> {
        let resolver = CgroupResolver::for_host()?;
        let mut costs = cfg.cost.then(|| CostModels::new(cfg.cost_model));
        let mut cfg = cfg.clone();
        let mut devices = DeviceNames::default();
        if let Some(c) = &mut costs {
            cfg.cost_devices = crate::costs::devices_to_preload(cfg.filter_devt)
                .into_iter()
                .map(|devt| (devt, c.resolve(devt, &devices.get(devt)).lcoefs()))
                .collect();
        }
        let tracer = Tracer::start(&cfg)?;
        let ext = Extensions::start(cfg.nvme, cfg.iocost, cfg.locks.as_ref())?;
        let mut probes = tracer.probes().to_vec();
        probes.extend(ext.probes.iter().cloned());
        Ok(Monitor {
            tracer,
            acc: Accumulator::new(cfg.hwq_events),
            resolver,
            devices,
            started: Instant::now(),
            missing: HashMap::new(),
            ext,
            probes,
            costs,
            said_table_full: false,
        })
    }

    pub fn resolver(&self) -> &CgroupResolver {
        &self.resolver
    }

    /// Reads the maps and returns the cumulative snapshot.
    pub fn poll(&mut self) -> Result<Snapshot> {
        let raw = self.tracer.read()?;
        self.acc.add(&raw);
        if let Some(line) = self.tracer.attach_issue_stamps_if_needed()? {
            eprintln!("iowarden: {line}");
            self.probes = self.tracer.probes().to_vec();
            self.probes.extend(self.ext.probes.iter().cloned());
        }
        if let Some(costs) = &mut self.costs {
            for &(idx, devt) in &raw.devs {
                if !costs.known(devt) {
                    let m = costs.resolve(devt, &self.devices.get(devt));
                    self.tracer.set_cost_coefs(idx, m.lcoefs())?;
                }
            }
        }

        // New cgroups appear between polls: walk the hierarchy again when an
        // id is unknown (at most once per poll).
        let unknown: Vec<u64> = self
            .acc
            .cgroup_ids()
            .filter(|&id| id != 0 && self.resolver.path_of(id).is_none())
            .collect();
        if !unknown.is_empty() {
            self.resolver.refresh();
        }
        // Release the slots of cgroups that stay gone, so a host with
        // short-lived cgroups does not fill the table.
        let mut seen: HashMap<u64, bool> = HashMap::new();
        for s in &raw.series {
            let id = SeriesKey::decode(s.key).cgroup_id;
            if id == 0 {
                continue;
            }
            let release = *seen.entry(id).or_insert_with(|| {
                if !self.resolver.is_gone(id) {
                    self.missing.remove(&id);
                    return false;
                }
                let n = self.missing.entry(id).or_default();
                *n += 1;
                *n > RELEASE_AFTER_POLLS
            });
            if release {
                self.tracer.release_slot(s.slot)?;
                self.acc.forget(s.slot, s.key);
            }
        }
        self.missing.retain(|_, n| *n <= RELEASE_AFTER_POLLS);

        self.say_if_table_full(&raw);

        let resolver = &self.resolver;
        let path = |id: u64| resolver.path_of(id).map(str::to_string);
        let mut snap = self.acc.snapshot(
            &path,
            &mut self.devices,
            &self.probes,
            self.started.elapsed().as_secs_f64(),
        );
        self.ext
            .fill(&mut snap, &self.resolver, &mut self.devices)?;
        snap.locks = self.ext.lock_report(&mut self.resolver)?;
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
    fn say_if_table_full(&mut self, raw: &crate::probes::block::RawSample) {
        let full = raw.drops.n[crate::skel::types::iow_drop::IOW_DROP_SLOT_FULL.0 as usize];
        if full > 0 && !self.said_table_full {
            self.said_table_full = true;
            let cap = self.tracer.table_fill().first().map_or(0, |t| t.2);
            eprintln!(
                "iowarden: the series table is full ({cap} slots): requests of new (cgroup, device, op) \
                 series are dropped and counted in iowarden_dropped_total{{reason=\"slot_table_full\"}}; \
                 raise --max-series"
            );
        }
    }

    /// One line per optional probe that is not active, saying why.
    pub fn probe_report(&self) -> Vec<String> {
        self.probes
            .iter()
            .filter(|p| !p.active)
            .map(|p| format!("{} inactive: {}", p.name, p.reason))
            .collect()
    }
}

impl Monitor {
    /// What iowarden costs and how full its tables are, for the self-metrics.
    pub fn runtime_stats(&self, bpf_stats_enabled: bool) -> iowarden_exporters::RuntimeMetrics {
        iowarden_exporters::RuntimeMetrics {
            bpf_stats_enabled,
            programs: self
                .tracer
                .prog_stats()
                .into_iter()
                .chain(self.ext.lock_prog_stats())
                .map(|p| iowarden_exporters::BpfProgramStats {
                    program: p.name,
                    run_time_seconds: p.run_time_ns as f64 / 1e9,
                    run_count: p.run_cnt,
                    recursion_misses: p.recursion_misses,
                })
                .collect(),
            tables: self
                .tracer
                .table_fill()
                .into_iter()
                .chain(self.ext.lock_table_fill())
                .map(|(t, entries, capacity)| iowarden_exporters::TableFill {
                    table: t.to_string(),
                    entries,
                    capacity,
                })
                .collect(),
            ..Default::default()
        }
    }
}
