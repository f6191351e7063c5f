//! Loads the nvme programs (bpf/nvme.bpf.c) where the nvme driver and its
//! BTF are present, and reads their maps. Absent driver: one probe status
//! saying so, nothing else changes.

use std::mem::MaybeUninit;

use anyhow::{Context, Result};
use iowarden_exporters::ProbeStatus;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject};

use crate::nvme_skel::types::{
    nvme_iow_hol_key, nvme_iow_hol_stats, nvme_iow_q_key, nvme_iow_q_state, nvme_iow_qcg_key,
    nvme_iow_qcg_stats,
};
use crate::nvme_skel::{NvmeSkel, NvmeSkelBuilder};

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

pub struct NvmeTracer {
    skel: NvmeSkel<'static>,
    _links: Vec<Link>,
}

#[derive(Default)]
pub struct NvmeSample {
    pub qcg: Vec<(nvme_iow_qcg_key, nvme_iow_qcg_stats)>,
    pub hol: Vec<(nvme_iow_hol_key, nvme_iow_hol_stats)>,
    pub queues: Vec<(nvme_iow_q_key, nvme_iow_q_state)>,
}

fn pod<T: Copy + Default>(b: &[u8]) -> T {
    if b.len() < std::mem::size_of::<T>() {
        return T::default();
    }
    // SAFETY: plain-old-data skeleton type, length checked.
    unsafe { std::ptr::read_unaligned(b.as_ptr() as *const T) }
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

impl NvmeTracer {
    /// Ok(None) with the reason when the nvme driver is not here.
    pub fn start(cfg: &NvmeConfig) -> Result<(Option<NvmeTracer>, ProbeStatus)> {
        let status = |active: bool, reason: String| ProbeStatus {
            name: "nvme".into(),
            active,
            reason,
        };
        if !std::path::Path::new("/sys/kernel/btf/nvme_core").exists() {
            return Ok((
                None,
                status(
                    false,
                    "the nvme_core module (or its BTF, /sys/kernel/btf/nvme_core) is not loaded: no NVMe queue metrics".into(),
                ),
            ));
        }
        let obj: &'static mut MaybeUninit<OpenObject> = Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = NvmeSkelBuilder::default()
            .open(obj)
            .context("opening the nvme BPF object")?;
        let ro = open
            .maps
            .rodata_data
            .as_deref_mut()
            .context("nvme BPF object has no .rodata")?;
        ro.small_bytes = cfg.small_bytes;
        ro.large_bytes = cfg.large_bytes;
        ro.sq_size = sq_size();
        let skel = match open.load() {
            Ok(s) => s,
            Err(e) => {
                return Ok((
                    None,
                    status(false, format!("loading the nvme programs failed: {e}")),
                ))
            }
        };
        let mut links = Vec::new();
        for name in PROGRAMS {
            let p = match *name {
                "nvme_setup_cmd" => &skel.progs.nvme_setup_cmd,
                "nvme_complete_rq" => &skel.progs.nvme_complete_rq,
                _ => &skel.progs.nvme_sq,
            };
            match p.attach() {
                Ok(l) => links.push(l),
                Err(e) => {
                    return Ok((None, status(false, format!("attaching {name} failed: {e}"))));
                }
            }
        }
        Ok((
            Some(NvmeTracer {
                skel,
                _links: links,
            }),
            status(true, String::new()),
        ))
    }

    pub fn read(&self) -> Result<NvmeSample> {
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
        Ok(out)
    }
}
