//! The block object while it runs: started (loaded, then its programs
//! attached, some of them late once the host shows it needs them), read
//! (RawSample), its series slots released, its own cost reported.

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use iowarden_exporters::{BpfProgramStats, ProbeStatus, TableFill};
use libbpf_rs::skel::Skel;
use libbpf_rs::{Link, MapCore, MapFlags};

use super::capacity::{Capacity, COST_CLASSES_PER_DEV, MAX_DEVS, MAX_HWQ};
use super::config::BlockConfig;
use super::load;
use super::programs::{self, traced_bio_based, Attach, Claims, PROGRAMS};
use super::sample::{RawCostClass, RawHwq, RawSample, RawSeries};
use super::{culprits, delay, held};
use crate::probes::bpf_stats::attached_prog_stats_as;
use crate::probes::mapped::MappedArray;
use crate::probes::objects::status;
use crate::probes::tables::{claimed, pod, read_shared, release, slots_in_use, table_fill};
use crate::skel::types::{
    iow_const, iow_cost_class, iow_drops, iow_hwq_stats, iow_series, iow_tables,
};
use crate::skel::IowardenSkel;

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

/// The block object, loaded, its programs attached and its counters mapped.
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

impl BlockProbe {
    /// Opens, configures, loads and attaches the programs. Optional
    /// tracepoints missing from the kernel are skipped and reported in
    /// [`BlockProbe::probes`]; a missing required one is an error.
    pub fn start(cfg: &BlockConfig) -> Result<BlockProbe> {
        let claims = Claims::probe();
        let (skel, mut probes) = load::load(cfg, claims)?;
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
        probes.extend(load::switched_off(cfg));
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
        for (slot, key) in claimed(&tables.slot_key[..self.cap.slots as usize]) {
            out.series.push(RawSeries {
                slot,
                key,
                shards: self.counters.series.range(slot as usize * shards, shards),
            });
        }
        for (idx, devt) in claimed(&tables.dev_devt) {
            out.devs.push((idx, devt));
            self.read_device(idx, devt, &mut out);
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
            out.drops = pod::<iow_drops>(&v);
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

    /// Frees a series slot whose cgroup is gone: zeroes its counters, then
    /// releases the key so the BPF side can claim it again.
    pub fn release_slot(&mut self, slot: u32) -> Result<()> {
        let shards = self.cap.shards as usize;
        self.counters.series.zero(slot as usize * shards, shards);
        let tables = self.tables_mut()?;
        release(&mut tables.slot_key[slot as usize]);
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

// Attaching, at start and late.
impl BlockProbe {
    /// Attaches the task delay pair, both or neither: its status.
    fn attach_delays(&mut self) -> ProbeStatus {
        let mut links = Vec::new();
        for prog in delay::PROGRAMS {
            match crate::probes::objects::attach(self.skel.object(), prog) {
                Ok(l) => links.push((prog, l)),
                Err(e) => return status(delay::STATUS, false, format!("attach failed: {e}")),
            }
        }
        self.links.extend(links);
        self.delays = true;
        status(delay::STATUS, true, "")
    }

    fn attach(
        &mut self,
        prog: &'static str,
        required: bool,
        probes: &mut Vec<ProbeStatus>,
    ) -> Result<()> {
        match crate::probes::objects::attach(self.skel.object(), &self.program_name(prog)) {
            Ok(l) => {
                self.links.push((prog, l));
                probes.push(ProbeStatus {
                    name: prog.into(),
                    active: true,
                    reason: String::new(),
                });
            }
            Err(e) if !required => probes.push(status(prog, false, format!("attach failed: {e}"))),
            Err(e) => return Err(e).with_context(|| format!("attaching {prog}")),
        }
        Ok(())
    }

    /// Whether `prog` is attached, or has a status saying why not.
    fn settled(&self, prog: &str) -> bool {
        self.links.iter().any(|(n, _)| *n == prog) || self.probes.iter().any(|p| p.name == prog)
    }

    /// Attaches `prog` late (a program wanted only once the host shows it
    /// is needed), its status with the others'.
    fn attach_late(&mut self, prog: &'static str) -> Result<()> {
        let mut probes = std::mem::take(&mut self.probes);
        let r = self.attach(prog, false, &mut probes);
        self.probes = probes;
        r
    }

    /// Attaches the programs the host turned out to need since start: a
    /// line to log for each.
    pub fn attach_if_needed(&mut self) -> Result<Vec<String>> {
        let mut lines = Vec::new();
        lines.extend(self.attach_issue_stamps_if_needed()?);
        if !self.settled("block_bio_complete") && traced_bio_based(self.filter_devt) {
            self.attach_late("block_bio_complete")?;
            lines.push(
                "a bio-based disk (device-mapper, md) appeared: attached block_bio_complete to \
                 count its bios"
                    .into(),
            );
        }
        Ok(lines)
    }

    /// Attaches block_rq_issue once the completion program has seen a
    /// request its queue did not stamp with an issue time. Returns a line
    /// to log when it did.
    fn attach_issue_stamps_if_needed(&mut self) -> Result<Option<String>> {
        const PROG: &str = "block_rq_issue";
        if self.settled(PROG) {
            return Ok(None);
        }
        let tables = self.tables()?;
        if read_shared(&tables.need_issue_stamps) == 0 {
            return Ok(None);
        }
        self.attach_late(PROG)?;
        Ok(Some(
            "a traced request completed without the kernel's issue stamp (its queue collects no \
             stats: bfq, or wbt and iocost off; or the kernel does not say whether it does, \
             before 6.11); attached block_rq_issue to stamp requests"
                .into(),
        ))
    }

    /// The name `prog` loads under: its claim method's variant (the
    /// blk-throttle and task delay programs claim nothing and have one).
    fn program_name(&self, prog: &str) -> String {
        programs::loaded_name(self.claims, prog)
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
