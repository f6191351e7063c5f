//! Loads the iocost programs (bpf/iocost.bpf.c) and reads their maps, plus
//! the controller's files: io.cost.qos / io.cost.model at the cgroup2 root
//! and io.stat's cost.* fields (steady state fires no events).

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use iowarden_exporters::ProbeStatus;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject};

use crate::iocost_skel::types::{iocost_iow_cg, iocost_iow_cg_key, iocost_iow_dev};
use crate::iocost_skel::{IocostSkel, IocostSkelBuilder};

const PROGRAMS: &[&str] = &[
    "iocost_iocg_activate",
    "iocost_iocg_idle",
    "iocost_inuse_shortage",
    "iocost_inuse_transfer",
    "iocost_inuse_adjust",
    "iocost_iocg_forgive_debt",
    "iocost_ioc_vrate_adj",
];

/// iocost's units (block/blk-iocost.c).
pub const WEIGHT_ONE: f64 = 65536.0;
pub const VTIME_PER_SEC: f64 = (1u64 << 37) as f64;
pub const VTIME_PER_USEC: f64 = (VTIME_PER_SEC as u64 / 1_000_000) as f64;

pub struct IocostTracer {
    skel: IocostSkel<'static>,
    _links: Vec<Link>,
}

#[derive(Default)]
pub struct IocostSample {
    pub devs: Vec<(u32, iocost_iow_dev)>,
    pub cgroups: Vec<(iocost_iow_cg_key, iocost_iow_cg)>,
}

fn pod<T: Copy + Default>(b: &[u8]) -> T {
    if b.len() < std::mem::size_of::<T>() {
        return T::default();
    }
    // SAFETY: plain-old-data skeleton type, length checked.
    unsafe { std::ptr::read_unaligned(b.as_ptr() as *const T) }
}

fn has_tracepoint(btf: &libbpf_rs::btf::Btf<'_>, tp: &str) -> bool {
    btf.type_by_name::<libbpf_rs::btf::types::Typedef<'_>>(&format!("btf_trace_{tp}"))
        .is_some()
}

impl IocostTracer {
    pub fn start() -> Result<(Option<IocostTracer>, ProbeStatus)> {
        let status = |active: bool, reason: String| ProbeStatus {
            name: "iocost".into(),
            active,
            reason,
        };
        let btf = libbpf_rs::btf::Btf::from_vmlinux().context("reading kernel BTF")?;
        let missing: Vec<&str> = PROGRAMS
            .iter()
            .copied()
            .filter(|p| !has_tracepoint(&btf, p))
            .collect();
        if missing.len() == PROGRAMS.len() {
            return Ok((
                None,
                status(
                    false,
                    "the kernel has no iocost tracepoints (CONFIG_BLK_CGROUP_IOCOST off)".into(),
                ),
            ));
        }
        let obj: &'static mut MaybeUninit<OpenObject> = Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = IocostSkelBuilder::default()
            .open(obj)
            .context("opening the iocost BPF object")?;
        for name in &missing {
            Self::open_prog(&mut open, name).set_autoload(false);
        }
        let skel = match open.load() {
            Ok(s) => s,
            Err(e) => {
                return Ok((
                    None,
                    status(false, format!("loading the iocost programs failed: {e}")),
                ))
            }
        };
        let mut links = Vec::new();
        for name in PROGRAMS.iter().filter(|p| !missing.contains(p)) {
            match Self::prog(&skel, name).attach() {
                Ok(l) => links.push(l),
                Err(e) => {
                    return Ok((None, status(false, format!("attaching {name} failed: {e}"))))
                }
            }
        }
        let reason = if missing.is_empty() {
            String::new()
        } else {
            format!("kernel lacks {}", missing.join(", "))
        };
        Ok((
            Some(IocostTracer {
                skel,
                _links: links,
            }),
            status(true, reason),
        ))
    }

    fn open_prog<'a>(
        open: &'a mut crate::iocost_skel::OpenIocostSkel<'static>,
        name: &str,
    ) -> &'a mut libbpf_rs::OpenProgramMut<'static> {
        let p = &mut open.progs;
        match name {
            "iocost_iocg_activate" => &mut p.iocost_iocg_activate,
            "iocost_iocg_idle" => &mut p.iocost_iocg_idle,
            "iocost_inuse_shortage" => &mut p.iocost_inuse_shortage,
            "iocost_inuse_transfer" => &mut p.iocost_inuse_transfer,
            "iocost_inuse_adjust" => &mut p.iocost_inuse_adjust,
            "iocost_iocg_forgive_debt" => &mut p.iocost_iocg_forgive_debt,
            _ => &mut p.iocost_ioc_vrate_adj,
        }
    }

    fn prog<'a>(skel: &'a IocostSkel<'static>, name: &str) -> &'a libbpf_rs::ProgramMut<'static> {
        let p = &skel.progs;
        match name {
            "iocost_iocg_activate" => &p.iocost_iocg_activate,
            "iocost_iocg_idle" => &p.iocost_iocg_idle,
            "iocost_inuse_shortage" => &p.iocost_inuse_shortage,
            "iocost_inuse_transfer" => &p.iocost_inuse_transfer,
            "iocost_inuse_adjust" => &p.iocost_inuse_adjust,
            "iocost_iocg_forgive_debt" => &p.iocost_iocg_forgive_debt,
            _ => &p.iocost_ioc_vrate_adj,
        }
    }

    pub fn read(&self) -> Result<IocostSample> {
        let mut out = IocostSample::default();
        let m = &self.skel.maps;
        for k in m.devs.keys() {
            if let Some(v) = m.devs.lookup(&k, MapFlags::ANY)? {
                out.devs.push((pod(&k), pod(&v)));
            }
        }
        for k in m.cgs.keys() {
            if let Some(v) = m.cgs.lookup(&k, MapFlags::ANY)? {
                out.cgroups.push((pod(&k), pod(&v)));
            }
        }
        Ok(out)
    }
}

/// The line of a per-device cgroup file (io.cost.qos, io.stat, ...) for
/// MAJ:MIN, without the device prefix.
pub fn device_line<'a>(text: &'a str, majmin: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let (dev, rest) = l.split_once(' ')?;
        (dev == majmin).then_some(rest.trim())
    })
}

/// Value of `key=value` in a knob line.
pub fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// The cgroup2 root, where io.cost.qos and io.cost.model live.
pub fn cgroup2_root() -> Option<PathBuf> {
    let mi = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mi.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        post.starts_with("cgroup2 ")
            .then(|| PathBuf::from(pre.split_whitespace().nth(4).unwrap_or("")))
    })
}

/// io.cost.qos / io.cost.model lines per MAJ:MIN (empty without iocost).
pub fn read_root_knob(root: &Path, file: &str) -> HashMap<String, String> {
    std::fs::read_to_string(root.join(file))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (dev, rest) = l.split_once(' ')?;
            Some((dev.to_string(), rest.trim().to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_device_lines_and_fields() {
        let stat = "8:0 rbytes=1 wbytes=2\n259:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0 cost.vrate=135.29 cost.usage=1735 cost.wait=0 cost.indebt=0 cost.indelay=0\n";
        let l = device_line(stat, "259:0").unwrap();
        assert_eq!(field(l, "cost.vrate"), Some("135.29"));
        assert_eq!(field(l, "cost.usage"), Some("1735"));
        assert_eq!(field(l, "cost.wait"), Some("0"));
        assert_eq!(field(l, "rbytes"), Some("4096"));
        assert_eq!(device_line(stat, "7:0"), None);
        assert_eq!(
            field("enable=1 ctrl=user min=50.00 max=150.00", "min"),
            Some("50.00")
        );
    }

    #[test]
    fn units() {
        // 100 % vrate is VTIME_PER_USEC, as the kernel prints cost.vrate.
        assert_eq!(VTIME_PER_USEC, 137438.0);
        assert_eq!(VTIME_PER_SEC, 137438953472.0);
    }
}
