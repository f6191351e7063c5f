//! The nvme object (bpf/nvme.bpf.c), loaded where the nvme driver and its
//! BTF are present: per-queue commands per cgroup, head-of-line blocking,
//! submission-queue occupancy. Absent driver: one probe status saying so,
//! nothing else changes.

use anyhow::{Context, Result};
use iowarden_exporters::{HolSeries, NvmeQueue, NvmeQueueCgroup, ProbeStatus, Snapshot};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags};

use crate::nvme_skel::types::{
    nvme_iow_hol_key, nvme_iow_hol_stats, nvme_iow_q_key, nvme_iow_q_state, nvme_iow_qcg_key,
    nvme_iow_qcg_stats,
};
use crate::nvme_skel::{NvmeSkel, NvmeSkelBuilder};
use crate::probes::{attach, cgroup_ref, load_only, open_object, pod, HostNames, Probe};

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
    _links: Vec<Link>,
    last: NvmeSample,
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
            name: "nvme".into(),
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
        let mut open = NvmeSkelBuilder::default()
            .open(open_object())
            .context("opening the nvme BPF object")?;
        let ro = open
            .maps
            .rodata_data
            .as_deref_mut()
            .context("nvme BPF object has no .rodata")?;
        ro.small_bytes = cfg.small_bytes;
        ro.large_bytes = cfg.large_bytes;
        ro.sq_size = sq_size();
        load_only(open.open_object_mut(), PROGRAMS)?;
        let skel = match open.load() {
            Ok(s) => s,
            Err(e) => {
                let why = crate::probes::load_error("the nvme", e);
                return Ok((None, status(false, format!("{why}"))));
            }
        };
        let mut links = Vec::new();
        for name in PROGRAMS {
            match attach(skel.object(), name) {
                Ok(l) => links.push(l),
                Err(e) => {
                    return Ok((None, status(false, format!("attaching {name} failed: {e}"))));
                }
            }
        }
        Ok((
            Some(NvmeProbe {
                skel,
                _links: links,
                last: NvmeSample::default(),
            }),
            status(true, String::new()),
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
        Ok(())
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
    use super::missing_requirement;

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
