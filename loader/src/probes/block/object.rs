//! The block object as a [`Probe`]: its programs ([`BlockProbe`]), the
//! totals its reads add up to ([`Accumulator`]), the cost model each device
//! is charged with, and the watch over requests that go untimed.

use std::collections::{BTreeSet, HashMap};

use anyhow::Result;
use iowarden_exporters::{BpfProgramStats, DeviceRef, ProbeStatus, Snapshot, TableFill};

use super::accumulate::{Accumulator, SeriesKey};
use super::config::BlockConfig;
use super::culprit_totals::CulpritTotals;
use super::culprits::Drain;
use super::delay::{self, RawDelay};
use super::latency_watch::LatencyWatch;
use super::probe::BlockProbe;
use super::sample::RawSample;
use crate::costmodel::devices::CostModels;
use crate::costmodel::{lcoefs, parse_kernel_line, LinearModel, AUTOP_HDD, AUTOP_SSD_DFL};
use crate::host::devices::{cpu_queue_map, volume, DeviceNames};
use crate::host::diskstats::read_diskstats;
use crate::probes::probe::{cgroup_ref, HostNames, Probe};
use crate::skel::types::iow_drop;

pub struct Block {
    probe: BlockProbe,
    acc: Accumulator,
    /// None when cost charging is off.
    costs: Option<CostModels>,
    /// None when latency is not recorded (--no-latency).
    latency: Option<LatencyWatch>,
    /// (slot, key) of every series the last read saw.
    last_series: Vec<(u32, u64)>,
    /// The task delays' table at the last read.
    last_delays: Vec<RawDelay>,
    /// Whom requests waited behind, by series keys.
    culprits: CulpritTotals,
    /// The series table was found full once (said in the log once).
    said_table_full: bool,
    /// Drains and replays the culprit account's log (once started; None
    /// when the account is off).
    drain: Option<Drain>,
    /// Where io.cost.model is read (None: no cgroup v2, the defaults).
    cgroup2: Option<std::path::PathBuf>,
    /// io.cost.model's lines at the last poll, per MAJ:MIN.
    model_lines: HashMap<String, String>,
}

impl Block {
    /// Loads and attaches the programs.
    pub fn start(cfg: &BlockConfig) -> Result<Block> {
        let probe = BlockProbe::start(cfg)?;
        Ok(Block {
            drain: None,
            probe,
            acc: Accumulator::new(cfg.measure.hwq_events, cfg.measure.stage_histograms),
            costs: cfg
                .measure
                .cost
                .then(|| CostModels::new(cfg.measure.cost_model)),
            latency: cfg.measure.latency.then(LatencyWatch::default),
            last_series: Vec::new(),
            last_delays: Vec::new(),
            culprits: CulpritTotals::default(),
            said_table_full: false,
            cgroup2: crate::host::cgroups::cgroup2_root(),
            model_lines: HashMap::new(),
        })
    }

    /// Gives each device of this read the model the kernel charges it with
    /// now, before what it was charged is priced: io.cost.model read once
    /// a poll (`tune --model` rewrites it; iocost charges the new model
    /// from then on). A line that does not parse is said when it appears.
    fn follow_models(&mut self, raw: &RawSample, devices: &mut DeviceNames) {
        let Some(costs) = &mut self.costs else {
            return;
        };
        // --cost-model charges every device with its model: nothing to read.
        let lines = match costs.flagged() {
            true => HashMap::new(),
            false => self
                .cgroup2
                .as_deref()
                .map(|r| crate::host::cgroups::read_root_knob(r, "io.cost.model"))
                .unwrap_or_default(),
        };
        // The same lines as at the last poll: only new devices to resolve.
        let same = lines == self.model_lines;
        let devts: BTreeSet<u32> = raw
            .devs
            .iter()
            .map(|&(_, d)| d)
            .filter(|&d| !(same && costs.known(d)))
            .collect();
        for devt in devts {
            let dev = devices.get(devt);
            let (model, source, error) = host_model(&dev, lines.get(&dev.devt()));
            if costs.follow(devt, || (model, source)) {
                if let Some(e) = error {
                    crate::say!("iowarden: error: {e}");
                }
            }
        }
        self.model_lines = lines;
    }

    /// Says once in the log that the series table filled up: from then on
    /// new series are counted in iowarden_dropped_total only.
    fn say_if_table_full(&mut self, raw: &RawSample) {
        let full = raw.drops.n[iow_drop::IOW_DROP_SLOT_FULL.0 as usize];
        if full > 0 && !self.said_table_full {
            self.said_table_full = true;
            let cap = self.probe.table_fill().first().map_or(0, |t| t.capacity);
            crate::say!(
                "iowarden: the series table is full ({cap} slots): requests of new (cgroup, device, op) \
                 series are dropped and counted in iowarden_dropped_total{{reason=\"slot_table_full\"}}; \
                 raise --max-series"
            );
        }
    }

    /// Says when reads and writes go untimed (and when they are timed
    /// again), and shows it in the snapshot's probe statuses.
    fn watch_latency(&mut self, snap: &mut Snapshot) {
        let Some(watch) = &mut self.latency else {
            return;
        };
        if let Some(line) = watch.check(snap) {
            crate::say!("iowarden: {line}");
        }
        watch.show(snap);
    }
}

impl Probe for Block {
    /// The culprit account's drain, where the account is on.
    fn start_threads(&mut self) -> Result<()> {
        if self.drain.is_none() {
            self.drain = self.probe.flight_log()?.map(Drain::start);
        }
        Ok(())
    }

    /// Gives new devices their cost model and adds the read to the totals
    /// (what the model charged priced with it); attaches the issue stamps
    /// where needed.
    fn read(&mut self, names: &mut HostNames) -> Result<()> {
        let mut raw = self.probe.read()?;
        if let Some(d) = &self.drain {
            let (pairs, untold) = d.read();
            let keys: HashMap<u32, u64> = raw.series.iter().map(|s| (s.slot, s.key)).collect();
            self.culprits.add(&pairs, &keys, &raw.devs);
            raw.culprit_untold = untold;
        }
        self.follow_models(&raw, names.devices);
        // Each device's coefficients once per read, not once per series.
        let costs = self.costs.as_ref();
        let coefs: HashMap<u32, [u64; 6]> = costs.map_or_else(HashMap::new, |c| {
            raw.devs
                .iter()
                .map(|&(_, d)| (d, lcoefs(&c.model_of(d))))
                .collect()
        });
        self.acc.add(&raw, &|devt| {
            coefs
                .get(&devt)
                .copied()
                .or_else(|| costs.map(|c| lcoefs(&c.model_of(devt))))
        });
        for line in self.probe.attach_if_needed()? {
            crate::say!("iowarden: {line}");
        }
        self.say_if_table_full(&raw);
        self.last_series = raw.series.iter().map(|s| (s.slot, s.key)).collect();
        self.last_delays = raw.delays;
        Ok(())
    }

    /// The block programs' statuses (block_rq_issue attaches later), and
    /// the throttle stage's once reads or writes were timed.
    fn statuses(&self) -> Vec<ProbeStatus> {
        let mut v = self.probe.probes().to_vec();
        v.extend(throttle_stage_status(self.acc.submission_stamped()));
        v
    }

    fn cgroup_ids(&self) -> BTreeSet<u64> {
        let delayed = self.last_delays.iter().map(|d| d.cgroup_id);
        self.acc.cgroup_ids().chain(delayed).collect()
    }

    fn release(&mut self, gone: &BTreeSet<u64>) -> Result<()> {
        let of_gone = |key: u64| gone.contains(&SeriesKey::decode(key).cgroup_id);
        let released: Vec<(u32, u64)> = self
            .last_series
            .iter()
            .copied()
            .filter(|&(_, k)| of_gone(k))
            .collect();
        let slots: BTreeSet<u32> = released.iter().map(|&(s, _)| s).collect();
        let keys: BTreeSet<u64> = released.iter().map(|&(_, k)| k).collect();
        // Before the slots: a slot claimed again must find no pairs of old.
        if let Some(d) = &self.drain {
            d.forget(&slots);
        }
        self.culprits.forget(&slots, &keys);
        for &(slot, key) in &released {
            self.probe.release_slot(slot)?;
            self.acc.forget(slot, key);
        }
        self.last_series.retain(|(_, k)| !of_gone(*k));
        self.probe.release_delays(&mut self.last_delays, gone);
        Ok(())
    }

    /// io, queues and drops; the host's CPU -> queue map and the kernel's
    /// own counts of the devices with series (the NVMe queues take their
    /// CPUs from that map); the cost models; latency's status.
    fn fill(&mut self, snap: &mut Snapshot, names: &mut HostNames) -> Result<()> {
        let resolver = names.resolver;
        self.acc
            .fill(snap, &|id| cgroup_ref(resolver, id), names.devices);
        snap.task_delays = delay::fill(
            &self.last_delays,
            &|id| cgroup_ref(resolver, id),
            names.devices,
        );
        snap.culprits = self
            .culprits
            .fill(&|id| cgroup_ref(resolver, id), names.devices);
        let mut disks: BTreeSet<&str> = snap.io.iter().map(|s| s.device.name.as_str()).collect();
        disks.extend(snap.queues.iter().map(|q| q.device.name.as_str()));
        snap.cpu_queue_map = disks.iter().flat_map(|d| cpu_queue_map(d)).collect();
        let traced: BTreeSet<DeviceRef> = snap.io.iter().map(|s| s.device.clone()).collect();
        snap.volumes = traced.iter().filter_map(volume).collect();
        snap.kernel_diskstats = read_diskstats(&traced);
        if let Some(costs) = &self.costs {
            let devices = &mut *names.devices;
            snap.cost_models = costs.report(&self.acc.cost_classes(), &mut |d| devices.get(d));
        }
        self.watch_latency(snap);
        Ok(())
    }

    fn prog_stats(&self) -> Vec<BpfProgramStats> {
        self.probe.prog_stats()
    }

    fn table_fill(&self) -> Vec<TableFill> {
        self.probe.table_fill()
    }
}

/// Whether the throttle stage is measured: reads and writes whose bio
/// carries the kernel's submission stamp. None before any was timed.
fn throttle_stage_status((stamped, timed): (u64, u64)) -> Option<ProbeStatus> {
    if timed == 0 {
        return None;
    }
    let reason = match stamped {
        0 => "no timed read or write carried a bio submission stamp (kernels that stamp \
              bios only for io.latency, or without CONFIG_BLK_CGROUP): no throttle stage, \
              total starts at the request's allocation"
            .to_string(),
        s if s < timed => format!(
            "{} of {timed} timed reads and writes carried a bio submission stamp",
            s
        ),
        _ => String::new(),
    };
    Some(crate::probes::objects::status(
        "throttle_stage",
        stamped > 0,
        reason,
    ))
}

/// The model the host's kernel charges on this device, given its
/// io.cost.model line (None: iocost not configured there), and why a line
/// was not taken.
fn host_model(
    dev: &DeviceRef,
    line: Option<&String>,
) -> (LinearModel, &'static str, Option<String>) {
    let error = match line.map(|l| (l, parse_kernel_line(l))) {
        Some((_, Ok(m))) => return (m, "io.cost.model", None),
        Some((l, Err(e))) => Some(format!(
            "io.cost.model of {} does not parse ({e}): '{l}'; charging it with the kernel's default model instead",
            dev.name
        )),
        None => None,
    };
    let rotational = std::fs::read_to_string(format!("/sys/block/{}/queue/rotational", dev.name))
        .is_ok_and(|s| s.trim() == "1");
    match rotational {
        true => (AUTOP_HDD, "default-hdd", error),
        false => (AUTOP_SSD_DFL, "default-ssd", error),
    }
}
