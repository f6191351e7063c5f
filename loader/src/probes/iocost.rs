//! The iocost object (bpf/iocost.bpf.c): vrate and per-cgroup weights,
//! debt and delays from iocost's tracepoints, completed by the controller's
//! files: io.cost.qos / io.cost.model at the cgroup2 root and io.stat's
//! cost.* fields (steady state fires no events).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use iowarden_exporters::{
    BpfProgramStats, IocostCgroup, IocostDevice, ProbeStatus, Snapshot, TableFill,
};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::{Link, MapCore, MapFlags};

use crate::host::cgroups::{cgroup2_root, read_root_knob};
use crate::iocost_skel::types::{iocost_iow_cg, iocost_iow_cg_key, iocost_iow_dev};
use crate::iocost_skel::{IocostSkel, IocostSkelBuilder};
use crate::knobs::lines::{device_line, field};
use crate::probes::bpf_stats::attached_prog_stats;
use crate::probes::gap_watch::GapWatch;
use crate::probes::objects::{attach, load_only, tracepoint_available};
use crate::probes::probe::{cgroup_ref, HostNames, Probe};
use crate::probes::skeleton::open_skel;
use crate::probes::tables::{delete_entries, pod, table_fill};

/// The object's name, as `iowarden_probe_active` and the statuses say it
/// and as `--no-iocost` switches it.
pub const NAME: &str = "iocost";

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

pub struct IocostProbe {
    skel: IocostSkel<'static>,
    /// The attached programs, by name.
    links: Vec<(&'static str, Link)>,
    /// The cgroup2 mount, where the controller's files are.
    cgroup2: Option<PathBuf>,
    last: IocostSample,
    /// Fields read as 0 that the kernel never leaves 0: never silently wrong.
    watch: GapWatch,
    /// The latest event time the watch has judged (bpf_ktime_get_ns).
    judged_until_ns: u64,
}

#[derive(Default)]
pub struct IocostSample {
    pub devs: Vec<(u32, iocost_iow_dev)>,
    pub cgroups: Vec<(iocost_iow_cg_key, iocost_iow_cg)>,
}

impl IocostProbe {
    pub fn start() -> Result<(Option<IocostProbe>, ProbeStatus)> {
        let status = |active: bool, reason: String| ProbeStatus {
            name: NAME.into(),
            active,
            reason,
        };
        let btf = libbpf_rs::btf::Btf::from_vmlinux().context("reading kernel BTF")?;
        let missing: Vec<&str> = PROGRAMS
            .iter()
            .copied()
            .filter(|p| !tracepoint_available(&btf, p))
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
        let mut open = open_skel::<IocostSkelBuilder>("iocost")?;
        let present: Vec<&str> = PROGRAMS
            .iter()
            .copied()
            .filter(|p| !missing.contains(p))
            .collect();
        load_only(open.open_object_mut(), &present)?;
        let skel = match open.load() {
            Ok(s) => s,
            Err(e) => {
                return Ok((
                    None,
                    status(
                        false,
                        format!("{}", crate::probes::objects::load_error("the iocost", e)),
                    ),
                ))
            }
        };
        let mut links = Vec::new();
        for name in &present {
            match attach(skel.object(), name) {
                Ok(l) => links.push((*name, l)),
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
            Some(IocostProbe {
                skel,
                links,
                cgroup2: cgroup2_root(),
                last: IocostSample::default(),
                watch: GapWatch::new(NAME),
                judged_until_ns: 0,
            }),
            status(true, reason),
        ))
    }
}

impl Probe for IocostProbe {
    fn read(&mut self, _names: &mut HostNames) -> Result<()> {
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
        self.last = out;
        Ok(())
    }

    fn fill(&mut self, snap: &mut Snapshot, names: &mut HostNames) -> Result<()> {
        let files = ControllerFiles::read(self.cgroup2.as_deref());
        for (devt, d) in &self.last.devs {
            let device = names.devices.get(*devt);
            snap.iocost_devices.push(files.device(device, Some(d)));
        }
        // Devices with iocost on that raised no event since we attached
        // (steady state fires none): what the files say.
        for (majmin, line) in &files.qos {
            let Some((ma, mi)) = crate::host::devices::parse_majmin(majmin) else {
                continue;
            };
            let devt = crate::host::devices::kernel_devt(ma, mi);
            if field(line, "enable") != Some("1") || self.last.devs.iter().any(|(d, _)| *d == devt)
            {
                continue;
            }
            snap.iocost_devices
                .push(files.device(names.devices.get(devt), None));
        }
        let mut io_stats = CgroupIoStats::new(self.cgroup2.as_deref());
        for (k, c) in &self.last.cgroups {
            let device = names.devices.get(k.devt);
            let cgroup = cgroup_ref(names.resolver, k.cgid);
            let usage = io_stats.usage_seconds(&cgroup.path, &device);
            snap.iocost_cgroups
                .push(cgroup_row(device, cgroup, c, usage));
        }
        let root = self.cgroup2.as_deref();
        iowarden_exporters::derive_hweights(&mut snap.iocost_cgroups, &|rel| {
            default_weight(root, rel)
        });
        snap.iocost_cgroups
            .sort_by(|a, b| (&a.device, a.cgroup.id).cmp(&(&b.device, b.cgroup.id)));
        self.watch_fields(snap);
        Ok(())
    }

    /// Run count and time of the attached programs (BPF stats).
    fn prog_stats(&self) -> Vec<BpfProgramStats> {
        attached_prog_stats(self.skel.object(), &self.links)
    }

    fn cgroup_ids(&self) -> BTreeSet<u64> {
        self.last.cgroups.iter().map(|(k, _)| k.cgid).collect()
    }

    /// Deletes the records of cgroups that are gone: iocost forgets their
    /// iocg, and a host with short-lived cgroups would fill the table.
    fn release(&mut self, gone: &BTreeSet<u64>) -> Result<()> {
        if gone.is_empty() {
            return Ok(());
        }
        delete_entries(&self.skel.maps.cgs, |k: &iocost_iow_cg_key| {
            gone.contains(&k.cgid)
        })?;
        self.last.cgroups.retain(|(k, _)| !gone.contains(&k.cgid));
        Ok(())
    }

    /// Entries of the per-(device, cgroup) and per-device tables: a full
    /// one leaves new cgroups' (devices') events unrecorded.
    fn table_fill(&self) -> Vec<TableFill> {
        let m = &self.skel.maps;
        vec![
            table_fill(
                "iocost_cgroups",
                self.last.cgroups.len() as u64,
                m.cgs.max_entries().into(),
            ),
            table_fill(
                "iocost_devices",
                self.last.devs.len() as u64,
                m.devs.max_entries().into(),
            ),
        ]
    }
}

impl IocostProbe {
    /// Judges the records the events since the last poll updated (none: the
    /// state stands), says when that changes, and shows a gap in the
    /// snapshot's iocost status.
    fn watch_fields(&mut self, snap: &mut Snapshot) {
        let fresh = self.last.updated_after(self.judged_until_ns);
        self.judged_until_ns = self.judged_until_ns.max(fresh.latest_ns());
        if !fresh.devs.is_empty() || !fresh.cgroups.is_empty() {
            if let Some(line) = self.watch.set(fresh.unreadable_fields()) {
                crate::say!("iowarden: {line}");
            }
        }
        self.watch.show(snap);
    }
}

impl IocostSample {
    /// The records updated by events after `t_ns`.
    fn updated_after(&self, t_ns: u64) -> IocostSample {
        IocostSample {
            devs: self
                .devs
                .iter()
                .filter(|(_, d)| d.updated_ns > t_ns)
                .cloned()
                .collect(),
            cgroups: self
                .cgroups
                .iter()
                .filter(|(_, c)| c.updated_ns > t_ns)
                .cloned()
                .collect(),
        }
    }

    /// The time of the latest event in the sample (0: none).
    fn latest_ns(&self) -> u64 {
        let devs = self.devs.iter().map(|(_, d)| d.updated_ns);
        let cgroups = self.cgroups.iter().map(|(_, c)| c.updated_ns);
        devs.chain(cgroups).max().unwrap_or(0)
    }

    /// What the programs read as 0 although the kernel never leaves it 0
    /// once iocost is on (a layout this build cannot read): a device's
    /// dev_t or base vrate, a cgroup's id or weight (set from io.weight or
    /// the default, 1..10000, before the first event).
    fn unreadable_fields(&self) -> Option<String> {
        let zero = |what: &str, n: usize, of: usize, unit: &str| {
            (n > 0).then(|| format!("{what} reads 0 for {n} of {of} {unit}"))
        };
        let (devs, cgs) = (self.devs.len(), self.cgroups.len());
        let count =
            |f: &dyn Fn(&(u32, iocost_iow_dev)) -> bool| self.devs.iter().filter(|d| f(d)).count();
        let count_cg = |f: &dyn Fn(&(iocost_iow_cg_key, iocost_iow_cg)) -> bool| {
            self.cgroups.iter().filter(|c| f(c)).count()
        };
        let found: Vec<String> = [
            zero("the dev_t", count(&|(devt, _)| *devt == 0), devs, "devices"),
            zero(
                "the base vrate",
                count(&|(_, d)| d.vrate == 0),
                devs,
                "devices",
            ),
            zero("the dev_t", count_cg(&|(k, _)| k.devt == 0), cgs, "cgroups"),
            zero(
                "the cgroup id",
                count_cg(&|(k, _)| k.cgid == 0),
                cgs,
                "cgroups",
            ),
            zero(
                "the weight",
                count_cg(&|(_, c)| c.weight == 0),
                cgs,
                "cgroups",
            ),
        ]
        .into_iter()
        .flatten()
        .collect();
        (!found.is_empty()).then(|| {
            format!(
                "in the iocost events {}: iocost metrics wrong on this kernel",
                found.join("; ")
            )
        })
    }
}

/// The controller's files at the cgroup2 root, read once per fill.
#[derive(Default)]
struct ControllerFiles {
    /// MAJ:MIN -> io.cost.qos line.
    qos: HashMap<String, String>,
    /// MAJ:MIN -> io.cost.model line.
    model: HashMap<String, String>,
    /// The root's io.stat.
    root_stat: String,
}

/// "12.5" (percent) -> 0.125.
fn pct(v: Option<&str>) -> Option<f64> {
    v.and_then(|v| v.parse::<f64>().ok()).map(|p| p / 100.0)
}

impl ControllerFiles {
    fn read(root: Option<&Path>) -> ControllerFiles {
        let Some(r) = root else {
            return ControllerFiles::default();
        };
        ControllerFiles {
            qos: read_root_knob(r, "io.cost.qos"),
            model: read_root_knob(r, "io.cost.model"),
            root_stat: std::fs::read_to_string(r.join("io.stat")).unwrap_or_default(),
        }
    }

    /// A device's row: from its last event where it raised one, else from
    /// the files alone (vrate from io.stat).
    fn device(
        &self,
        device: iowarden_exporters::DeviceRef,
        ev: Option<&iocost_iow_dev>,
    ) -> IocostDevice {
        let majmin = format!("{}:{}", device.major, device.minor);
        let q = self.qos.get(&majmin).cloned();
        let stat_vrate =
            pct(device_line(&self.root_stat, &majmin).and_then(|l| field(l, "cost.vrate")));
        let from_files = IocostDevice {
            vrate_ratio: stat_vrate.unwrap_or(0.0),
            io_stat_vrate_ratio: stat_vrate,
            qos_vrate_min_ratio: pct(q.as_deref().and_then(|l| field(l, "min"))),
            qos_vrate_max_ratio: pct(q.as_deref().and_then(|l| field(l, "max"))),
            qos: q,
            model: self.model.get(&majmin).cloned(),
            device,
            ..Default::default()
        };
        let Some(d) = ev else {
            return from_files;
        };
        IocostDevice {
            vrate_ratio: d.vrate as f64 / VTIME_PER_USEC,
            vrate_effective_ratio: d.vrate_effective as f64 / VTIME_PER_USEC,
            busy_level: d.busy_level,
            missed_ppm_read: d.missed_ppm[0],
            missed_ppm_write: d.missed_ppm[1],
            rq_wait_ratio: d.rq_wait_pct as f64 / 100.0,
            nr_lagging: d.nr_lagging,
            nr_shortages: d.nr_shortages,
            vrate_adjustments: d.vrate_adjusts,
            ..from_files
        }
    }
}

/// The io.stat of each cgroup, read once per fill.
struct CgroupIoStats<'a> {
    root: Option<&'a Path>,
    /// Relative cgroup path -> its io.stat.
    text: HashMap<String, String>,
}

impl<'a> CgroupIoStats<'a> {
    fn new(root: Option<&'a Path>) -> Self {
        CgroupIoStats {
            root,
            text: HashMap::new(),
        }
    }

    /// cost.usage of `cgroup` on `device`, in seconds.
    fn usage_seconds(
        &mut self,
        cgroup: &str,
        device: &iowarden_exporters::DeviceRef,
    ) -> Option<f64> {
        let r = self.root?;
        let rel = cgroup.trim_start_matches('/');
        let text = self.text.entry(rel.to_string()).or_insert_with(|| {
            std::fs::read_to_string(r.join(rel).join("io.stat")).unwrap_or_default()
        });
        let majmin = format!("{}:{}", device.major, device.minor);
        device_line(text, &majmin)
            .and_then(|l| field(l, "cost.usage"))
            .and_then(|v| v.parse::<f64>().ok())
            .map(|us| us / 1e6)
    }
}

fn cgroup_row(
    device: iowarden_exporters::DeviceRef,
    cgroup: iowarden_exporters::CgroupRef,
    c: &iocost_iow_cg,
    usage_seconds: Option<f64>,
) -> IocostCgroup {
    IocostCgroup {
        device,
        cgroup,
        weight: c.weight as f64 / WEIGHT_ONE,
        inuse: c.inuse as f64 / WEIGHT_ONE,
        hweight_active_ratio: 0.0, // derived by derive_hweights
        hweight_active_cached_ratio: c.hweight_active as f64 / WEIGHT_ONE,
        active: c.activations > c.idles,
        hweight_inuse_ratio: c.hweight_inuse as f64 / WEIGHT_ONE,
        vtime_budget_seconds: c.vtime_budget as f64 / VTIME_PER_SEC,
        debt_seconds: c.abs_vdebt as f64 / VTIME_PER_SEC,
        delay_seconds: c.delay_ns as f64 / 1e9,
        activations: c.activations,
        idles: c.idles,
        shortages: c.shortages,
        transfers: c.transfers,
        adjusts: c.adjusts,
        forgives: c.forgives,
        usage_seconds,
    }
}

/// io.weight's default of a cgroup (100 where unreadable).
fn default_weight(root: Option<&Path>, rel: &str) -> f64 {
    root.and_then(|r| {
        std::fs::read_to_string(r.join(rel.trim_start_matches('/')).join("io.weight")).ok()
    })
    .and_then(|t| {
        t.lines().find_map(|l| {
            l.strip_prefix("default ")
                .and_then(|v| v.trim().parse().ok())
        })
    })
    .unwrap_or(100.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::devices::kernel_devt;

    #[test]
    fn only_records_events_updated_since_are_judged_again() {
        let cg = |cgid, weight, updated_ns| {
            let k = iocost_iow_cg_key {
                devt: kernel_devt(259, 0),
                cgid,
                ..Default::default()
            };
            let c = iocost_iow_cg {
                weight,
                updated_ns,
                ..Default::default()
            };
            (k, c)
        };
        // A cgroup read wrong once (weight 0 at t=5), sound since.
        let s = IocostSample {
            devs: vec![],
            cgroups: vec![cg(7, 0, 5), cg(8, 100, 10)],
        };
        assert!(s.updated_after(0).unreadable_fields().is_some());
        let fresh = s.updated_after(5);
        assert_eq!(fresh.cgroups.len(), 1);
        assert_eq!(fresh.unreadable_fields(), None);
        assert_eq!(fresh.latest_ns(), 10);
        assert_eq!(s.updated_after(10).latest_ns(), 0, "nothing new");
    }

    #[test]
    fn fields_read_as_zero_are_named_and_a_sound_sample_passes() {
        let dev = |vrate| iocost_iow_dev {
            vrate,
            ..Default::default()
        };
        let key = |devt, cgid| iocost_iow_cg_key {
            devt,
            cgid,
            ..Default::default()
        };
        let cg = |weight| iocost_iow_cg {
            weight,
            ..Default::default()
        };
        let sound = IocostSample {
            devs: vec![(kernel_devt(259, 0), dev(1 << 20))],
            cgroups: vec![(key(kernel_devt(259, 0), 7), cg(100))],
        };
        assert_eq!(sound.unreadable_fields(), None);
        let wrong = IocostSample {
            devs: vec![(0, dev(0)), (kernel_devt(259, 0), dev(1 << 20))],
            cgroups: vec![(key(kernel_devt(259, 0), 7), cg(0)), (key(0, 8), cg(100))],
        };
        assert_eq!(
            wrong.unreadable_fields().as_deref(),
            Some(
                "in the iocost events the dev_t reads 0 for 1 of 2 devices; the base vrate reads 0 \
                 for 1 of 2 devices; the dev_t reads 0 for 1 of 2 cgroups; the weight reads 0 for 1 \
                 of 2 cgroups: iocost metrics wrong on this kernel"
            )
        );
    }

    #[test]
    fn units() {
        // 100 % vrate is VTIME_PER_USEC, as the kernel prints cost.vrate.
        assert_eq!(VTIME_PER_USEC, 137438.0);
        assert_eq!(VTIME_PER_SEC, 137438953472.0);
    }
}
