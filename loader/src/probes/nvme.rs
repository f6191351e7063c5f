//! The nvme object (bpf/nvme.bpf.c), loaded where the nvme driver and its
//! BTF are present: per-queue commands per cgroup, head-of-line blocking,
//! submission-queue occupancy. Absent driver: one probe status saying so,
//! nothing else changes.

use std::collections::BTreeSet;

use anyhow::Result;
use iowarden_exporters::{
    BpfProgramStats, DeviceRef, HolSeries, NvmeQueue, NvmeQueueCgroup, Op, ProbeStatus, Snapshot,
    TableFill,
};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::{Link, MapCore, MapFlags};

use crate::nvme_skel::types::{
    nvme_iow_hol_key, nvme_iow_hol_stats, nvme_iow_q_key, nvme_iow_q_state, nvme_iow_qcg_key,
    nvme_iow_qcg_stats,
};
use crate::nvme_skel::{NvmeSkel, NvmeSkelBuilder};
use crate::probes::bpf_stats::attached_prog_stats;
use crate::probes::gap_watch::GapWatch;
use crate::probes::objects::{attach, load_only};
use crate::probes::probe::{cgroup_ref, HostNames, Probe};
use crate::probes::skeleton::{open_skel, rodata};
use crate::probes::tables::{delete_entries, pod, table_fill};

/// The object's name, as `iowarden_probe_active` and the statuses say it
/// and as `--nvme` switches it on.
pub const NAME: &str = "nvme";

const PROGRAMS: &[&str] = &["nvme_setup_cmd", "nvme_complete_rq", "nvme_sq"];

#[derive(Debug, Clone)]
pub struct NvmeConfig {
    pub small_bytes: u32,
    pub large_bytes: u32,
}

impl Default for NvmeConfig {
    fn default() -> Self {
        NvmeConfig {
            small_bytes: 16 * 1024,
            large_bytes: 128 * 1024,
        }
    }
}

pub struct NvmeProbe {
    skel: NvmeSkel<'static>,
    /// The attached programs, by name.
    links: Vec<(&'static str, Link)>,
    last: NvmeSample,
    /// The commands, and their bytes, against the block completions on
    /// NVMe devices: never silently empty.
    commands_watch: GapWatch,
    bytes_watch: GapWatch,
}

#[derive(Default)]
pub struct NvmeSample {
    pub qcg: Vec<(nvme_iow_qcg_key, nvme_iow_qcg_stats)>,
    pub hol: Vec<(nvme_iow_hol_key, nvme_iow_hol_stats)>,
    pub queues: Vec<(nvme_iow_q_key, nvme_iow_q_state)>,
}

/// Submission-queue size of the first NVMe namespace (nr_requests + 1:
/// blk-mq keeps one slot free), for tail - head modulo the queue size.
fn sq_size() -> u32 {
    let Ok(rd) = std::fs::read_dir("/sys/block") else {
        return 0;
    };
    for e in rd.flatten() {
        if e.file_name().to_string_lossy().starts_with("nvme") {
            if let Ok(s) = std::fs::read_to_string(e.path().join("queue/nr_requests")) {
                if let Ok(n) = s.trim().parse::<u32>() {
                    return n + 1;
                }
            }
        }
    }
    0
}

/// IOWARDEN_NVME_TABLE_ENTRIES=N shrinks the per-(queue, cgroup) table,
/// so that tests fill it and see the commands it drops reported.
fn table_entries_override() -> Option<u32> {
    std::env::var("IOWARDEN_NVME_TABLE_ENTRIES")
        .ok()?
        .parse()
        .ok()
}

/// Why the nvme programs cannot load here, if they cannot: they read the
/// driver's tracepoints through its module BTF and claim culprit entries
/// by compare-and-swap.
fn missing_requirement(
    module_loaded: bool,
    module_btf: bool,
    has_cmpxchg: impl Fn() -> bool,
) -> Option<&'static str> {
    if !module_loaded {
        Some("the nvme_core module is not loaded: no NVMe queue metrics")
    } else if !module_btf {
        Some(
            "the kernel has no BTF for modules (/sys/kernel/btf/nvme_core; \
             CONFIG_DEBUG_INFO_BTF_MODULES, Linux 5.11+): no NVMe queue metrics",
        )
    } else if !has_cmpxchg() {
        Some("the kernel's BPF has no compare-and-swap (Linux 5.12+): no NVMe queue metrics")
    } else {
        None
    }
}

impl NvmeProbe {
    /// Ok(None) with the reason when the nvme driver is not here.
    pub fn start(cfg: &NvmeConfig) -> Result<(Option<NvmeProbe>, ProbeStatus)> {
        let status = |active: bool, reason: String| ProbeStatus {
            name: NAME.into(),
            active,
            reason,
        };
        if let Some(why) = missing_requirement(
            std::path::Path::new("/sys/module/nvme_core").exists(),
            std::path::Path::new("/sys/kernel/btf/nvme_core").exists(),
            crate::probes::features::bpf_has_cmpxchg,
        ) {
            return Ok((None, status(false, why.into())));
        }
        let mut open = open_skel::<NvmeSkelBuilder>("nvme")?;
        let ro = rodata(&mut open.maps.rodata_data, "nvme")?;
        ro.small_bytes = cfg.small_bytes;
        ro.large_bytes = cfg.large_bytes;
        ro.sq_size = sq_size();
        // Occupancy is tail - head modulo the queue size: without it the
        // occupancy families would be wrong after every wrap.
        let caveat = if ro.sq_size == 0 {
            "no NVMe namespace at start to read the submission-queue size from \
             (/sys/block/nvme*/queue/nr_requests): no submission-queue occupancy"
        } else {
            ""
        };
        if let Some(n) = table_entries_override() {
            open.maps.qcg_stats.set_max_entries(n)?;
        }
        load_only(open.open_object_mut(), PROGRAMS)?;
        let skel = match open.load() {
            Ok(s) => s,
            Err(e) => {
                let why = crate::probes::objects::load_error("the nvme", e);
                return Ok((None, status(false, format!("{why}"))));
            }
        };
        let mut links = Vec::new();
        for name in PROGRAMS {
            match attach(skel.object(), name) {
                Ok(l) => links.push((*name, l)),
                Err(e) => {
                    return Ok((None, status(false, format!("attaching {name} failed: {e}"))));
                }
            }
        }
        Ok((
            Some(NvmeProbe {
                skel,
                links,
                last: NvmeSample::default(),
                commands_watch: GapWatch::new(NAME),
                bytes_watch: GapWatch::new(NAME),
            }),
            status(true, caveat.into()),
        ))
    }
}

impl Probe for NvmeProbe {
    fn read(&mut self, _names: &mut HostNames) -> Result<()> {
        let mut out = NvmeSample::default();
        let m = &self.skel.maps;
        for k in m.qcg_stats.keys() {
            if let Some(v) = m.qcg_stats.lookup(&k, MapFlags::ANY)? {
                out.qcg.push((pod(&k), pod(&v)));
            }
        }
        for k in m.hol_stats.keys() {
            if let Some(v) = m.hol_stats.lookup(&k, MapFlags::ANY)? {
                out.hol.push((pod(&k), pod(&v)));
            }
        }
        for k in m.q_state.keys() {
            if let Some(v) = m.q_state.lookup(&k, MapFlags::ANY)? {
                out.queues.push((pod(&k), pod(&v)));
            }
        }
        self.last = out;
        Ok(())
    }

    fn cgroup_ids(&self) -> BTreeSet<u64> {
        let qcg = self.last.qcg.iter().map(|(k, _)| k.cgid);
        let hol = self
            .last
            .hol
            .iter()
            .flat_map(|(k, _)| [k.victim, k.culprit]);
        qcg.chain(hol).filter(|&id| id != 0).collect()
    }

    /// Deletes the entries of cgroups that are gone (as victim or culprit),
    /// so a host with short-lived cgroups does not fill the tables.
    fn release(&mut self, gone: &BTreeSet<u64>) -> Result<()> {
        if gone.is_empty() {
            return Ok(());
        }
        let m = &self.skel.maps;
        delete_entries(&m.qcg_stats, |k: &nvme_iow_qcg_key| gone.contains(&k.cgid))?;
        let of_gone = |k: &nvme_iow_hol_key| gone.contains(&k.victim) || gone.contains(&k.culprit);
        delete_entries(&m.hol_stats, of_gone)?;
        self.last.qcg.retain(|(k, _)| !gone.contains(&k.cgid));
        self.last.hol.retain(|(k, _)| !of_gone(k));
        Ok(())
    }

    fn fill(&mut self, snap: &mut Snapshot, names: &mut HostNames) -> Result<()> {
        let s = &self.last;
        for (k, v) in &s.qcg {
            snap.nvme_queue_cgroups.push(NvmeQueueCgroup {
                device: names.devices.get(k.devt),
                qid: k.qid,
                cgroup: cgroup_ref(names.resolver, k.cgid),
                commands: v.commands,
                completions: v.completions,
                bytes: v.bytes,
                inflight: v.inflight.max(0),
                small_commands: v.small,
                large_commands: v.large,
            });
        }
        for (k, v) in &s.hol {
            snap.nvme_hol.push(HolSeries {
                device: names.devices.get(k.devt),
                qid: k.qid,
                victim: cgroup_ref(names.resolver, k.victim),
                culprit: (k.culprit != 0).then(|| cgroup_ref(names.resolver, k.culprit)),
                count: v.count,
                latency_sum_seconds: v.lat_sum_ns as f64 / 1e9,
            });
        }
        for (k, v) in &s.queues {
            let queue = queue_of(snap, names.devices.get(k.devt), k.qid, v);
            snap.nvme_queues.push(queue);
        }
        snap.nvme_queue_cgroups
            .sort_by(|a, b| (&a.device, a.qid, a.cgroup.id).cmp(&(&b.device, b.qid, b.cgroup.id)));
        snap.nvme_queues
            .sort_by(|a, b| (&a.device, a.qid).cmp(&(&b.device, b.qid)));
        self.watch(snap);
        Ok(())
    }

    /// Run count and time of the three programs (BPF stats): on NVMe they
    /// run per command beside the block programs.
    fn prog_stats(&self) -> Vec<BpfProgramStats> {
        attached_prog_stats(self.skel.object(), &self.links)
    }

    /// Entries of the per-(queue, cgroup) and head-of-line tables: a full
    /// one leaves new cgroups' commands uncounted.
    fn table_fill(&self) -> Vec<TableFill> {
        let m = &self.skel.maps;
        vec![
            table_fill(
                "nvme_queue_cgroups",
                self.last.qcg.len() as u64,
                m.qcg_stats.max_entries().into(),
            ),
            table_fill(
                "nvme_hol",
                self.last.hol.len() as u64,
                m.hol_stats.max_entries().into(),
            ),
        ]
    }
}

impl NvmeProbe {
    /// Says when the NVMe commands (or their bytes) fall short of the reads
    /// and writes the block programs completed on NVMe devices, and shows it
    /// in the snapshot's nvme status. Block fills first, so its series are
    /// in `snap`.
    fn watch(&mut self, snap: &mut Snapshot) {
        let c = NvmeCounts::of(snap);
        let (in_use, capacity) = (self.last.qcg.len(), self.skel.maps.qcg_stats.max_entries());
        // Commands set up and completed: the setups less the growth of
        // those in flight, free of the skew of a burst that ends between
        // setup and completion.
        let seen = c.commands.saturating_sub(c.inflight);
        let commands = self.commands_watch.check(c.block_ios, seen, |ios, seen| {
            format!(
                "the nvme programs saw {seen} commands for {ios} reads and writes the block \
                 programs completed on NVMe devices since the last check (set up and completed; \
                 {in_use} of {capacity} entries of the per-(queue, cgroup) table in use): NVMe \
                 queue metrics incomplete on this kernel"
            )
        });
        let bytes = self.bytes_watch.judge(
            [seen, c.bytes, c.block_bytes],
            |[commands, bytes, block_bytes]| {
                (bytes == 0 && block_bytes > 0).then(|| {
                    format!(
                        "the nvme programs read 0 bytes in {commands} commands for {block_bytes} \
                         bytes the block programs completed on NVMe devices since the last check: \
                         command sizes (bytes, small and large commands, head-of-line) unknown \
                         on this kernel"
                    )
                })
            },
        );
        // Missing commands miss their bytes too: that one line says it.
        let bytes = bytes.filter(|_| self.commands_watch.status().is_none());
        for line in [commands, bytes].into_iter().flatten() {
            crate::say!("iowarden: {line}");
        }
        // The commands' gap, where there is one, is the status shown.
        self.bytes_watch.show(snap);
        self.commands_watch.show(snap);
    }
}

/// What the block and the nvme programs counted on the NVMe devices the
/// block programs trace.
#[derive(Debug, Default, PartialEq)]
struct NvmeCounts {
    block_ios: u64,
    block_bytes: u64,
    commands: u64,
    /// Of those, set up and not completed.
    inflight: u64,
    bytes: u64,
}

impl NvmeCounts {
    fn of(snap: &Snapshot) -> NvmeCounts {
        let nvme: BTreeSet<&DeviceRef> = snap
            .io
            .iter()
            .map(|s| &s.device)
            .filter(|d| d.name.starts_with("nvme"))
            .collect();
        let mut c = NvmeCounts::default();
        for s in snap.io.iter().filter(|s| nvme.contains(&s.device)) {
            if matches!(s.op, Op::Read | Op::Write) {
                c.block_ios += s.ios;
                c.block_bytes += s.bytes;
            }
        }
        for q in snap
            .nvme_queue_cgroups
            .iter()
            .filter(|q| nvme.contains(&q.device))
        {
            c.commands += q.commands;
            c.inflight += q.inflight.max(0) as u64;
            c.bytes += q.bytes;
        }
        c
    }
}

/// One submission queue, with the CPUs of its blk-mq hardware queue (NVMe
/// queue ids start at 1 where the admin queue is 0).
fn queue_of(
    snap: &Snapshot,
    device: iowarden_exporters::DeviceRef,
    qid: u32,
    v: &nvme_iow_q_state,
) -> NvmeQueue {
    let cpus = snap
        .cpu_queue_map
        .iter()
        .find(|m| m.device == device.name && m.hctx + 1 == qid)
        .map(|m| m.cpus.clone())
        .unwrap_or_default();
    NvmeQueue {
        device,
        qid,
        cpus,
        sq_samples: v.sq_samples,
        sq_occupancy_mean: if v.sq_samples > 0 {
            v.sq_occupancy_sum as f64 / v.sq_samples as f64
        } else {
            0.0
        },
        sq_occupancy_last: v.sq_occupancy_last,
        sq_occupancy_max: v.sq_occupancy_max,
    }
}

#[cfg(test)]
mod tests {
    use super::{missing_requirement, NvmeCounts};
    use iowarden_exporters::{DeviceRef, IoSeries, NvmeQueueCgroup, Op, Snapshot};

    fn dev(name: &str, minor: u32) -> DeviceRef {
        DeviceRef {
            name: name.into(),
            major: 259,
            minor,
        }
    }

    #[test]
    fn counts_reads_and_writes_of_nvme_devices_against_their_commands() {
        let io = |d: &DeviceRef, op, ios, bytes| IoSeries {
            device: d.clone(),
            op,
            ios,
            bytes,
            ..Default::default()
        };
        let (nvme, other) = (dev("nvme0n1", 0), dev("vdb", 16));
        let qcg = |d: &DeviceRef, qid, commands, bytes| NvmeQueueCgroup {
            device: d.clone(),
            qid,
            commands,
            bytes,
            inflight: 2,
            ..Default::default()
        };
        let snap = Snapshot {
            io: vec![
                io(&nvme, Op::Read, 100, 409600),
                io(&nvme, Op::Write, 10, 40960),
                io(&nvme, Op::Flush, 7, 0),
                io(&other, Op::Read, 5000, 1 << 30),
            ],
            nvme_queue_cgroups: vec![
                qcg(&nvme, 1, 60, 245760),
                qcg(&nvme, 2, 57, 204800),
                // A device the block programs do not trace (--device).
                qcg(&dev("nvme1n1", 1), 1, 999, 999),
            ],
            ..Default::default()
        };
        assert_eq!(
            NvmeCounts::of(&snap),
            NvmeCounts {
                block_ios: 110,
                block_bytes: 450560,
                commands: 117,
                inflight: 4,
                bytes: 450560,
            }
        );
    }

    #[test]
    fn names_the_first_missing_requirement() {
        assert!(missing_requirement(false, false, || true)
            .unwrap()
            .contains("not loaded"));
        assert!(missing_requirement(true, false, || true)
            .unwrap()
            .contains("BTF for modules"));
        assert!(missing_requirement(true, true, || false)
            .unwrap()
            .contains("compare-and-swap"));
        assert_eq!(missing_requirement(true, true, || true), None);
    }
}
