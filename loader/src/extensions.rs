//! The optional parts of a snapshot: the blk-mq CPU -> queue map, NVMe
//! queues (nvme programs) and iocost state (iocost programs + io.stat).
//! Each is absent, with a probe status saying why, where the host lacks it.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use anyhow::Result;
use iowarden_exporters::{
    CgroupRef, CpuQueueMap, HolSeries, IocostCgroup, IocostDevice, NvmeQueue, NvmeQueueCgroup,
    ProbeStatus, Snapshot, UNATTRIBUTED_CGROUP_ID,
};

use crate::host::cgroups::CgroupResolver;
use crate::host::devices::DeviceNames;
use crate::probes::block::{ProgStats, TableFill};
use crate::probes::iocost::{self, IocostTracer, VTIME_PER_SEC, VTIME_PER_USEC, WEIGHT_ONE};
use crate::probes::locks::{LockConfig, LockTracer};
use crate::probes::nvme::{NvmeConfig, NvmeTracer};

pub struct Extensions {
    nvme: Option<NvmeTracer>,
    iocost: Option<IocostTracer>,
    locks: Option<LockTracer>,
    cgroup2: Option<PathBuf>,
    pub probes: Vec<ProbeStatus>,
}

fn off(name: &str, reason: &str) -> ProbeStatus {
    ProbeStatus {
        name: name.into(),
        active: false,
        reason: reason.into(),
    }
}

/// "0-3,8" -> [0, 1, 2, 3, 8]
pub fn parse_cpu_list(s: &str) -> Vec<u32> {
    let mut out = BTreeSet::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
            out.extend(a..=b);
        }
    }
    out.into_iter().collect()
}

/// blk-mq hardware queues of a disk and their CPUs.
pub fn cpu_queue_map(device: &str) -> Vec<CpuQueueMap> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(format!("/sys/block/{device}/mq")) else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(hctx) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cpus = std::fs::read_to_string(e.path().join("cpu_list")).unwrap_or_default();
        out.push(CpuQueueMap {
            device: device.to_string(),
            hctx,
            cpus: parse_cpu_list(&cpus),
        });
    }
    out.sort_by_key(|m| m.hctx);
    out
}

pub(crate) fn cgroup_ref(resolver: &CgroupResolver, id: u64) -> CgroupRef {
    CgroupRef {
        id,
        path: if id == UNATTRIBUTED_CGROUP_ID {
            "(unattributed)".into()
        } else {
            resolver.path_of(id).unwrap_or_default().to_string()
        },
    }
}

impl Extensions {
    pub fn start(nvme: bool, iocost_on: bool, locks: Option<&LockConfig>) -> Result<Extensions> {
        let mut probes = Vec::new();
        let nvme = if nvme {
            let (t, st) = NvmeTracer::start(&NvmeConfig::default())?;
            probes.push(st);
            t
        } else {
            probes.push(off("nvme", "disabled by --no-nvme"));
            None
        };
        let iocost = if iocost_on {
            let (t, st) = IocostTracer::start()?;
            probes.push(st);
            t
        } else {
            probes.push(off("iocost", "disabled by --no-iocost"));
            None
        };
        let locks = match locks {
            Some(cfg) => {
                let (t, st) = LockTracer::start(cfg)?;
                probes.push(st);
                t
            }
            None => {
                probes.push(off(
                    "locks",
                    "off by default: --locks to load (a kernel stack walk per contention)",
                ));
                None
            }
        };
        Ok(Extensions {
            nvme,
            iocost,
            locks,
            cgroup2: iocost::cgroup2_root(),
            probes,
        })
    }

    /// The lock report (None when the lock programs are off). Mutable: it
    /// symbolizes new stacks and keeps the exported top sites.
    pub fn lock_report(
        &mut self,
        resolver: &mut CgroupResolver,
    ) -> Result<Option<iowarden_exporters::LockReport>> {
        self.locks.as_mut().map(|t| t.report(resolver)).transpose()
    }

    pub fn lock_prog_stats(&self) -> Vec<ProgStats> {
        self.locks
            .as_ref()
            .map(|t| t.prog_stats())
            .unwrap_or_default()
    }

    pub fn lock_table_fill(&self) -> Vec<TableFill> {
        self.locks
            .as_ref()
            .map(|t| {
                vec![(
                    "lock_series",
                    t.slots_used(),
                    crate::probes::locks::MAX_SLOTS as u64,
                )]
            })
            .unwrap_or_default()
    }

    /// Fills the optional parts of `snap`.
    pub fn fill(
        &self,
        snap: &mut Snapshot,
        resolver: &CgroupResolver,
        devices: &mut DeviceNames,
    ) -> Result<()> {
        let mut names: BTreeSet<String> = snap.io.iter().map(|s| s.device.name.clone()).collect();
        names.extend(snap.queues.iter().map(|q| q.device.name.clone()));
        snap.cpu_queue_map = names.iter().flat_map(|d| cpu_queue_map(d)).collect();

        if let Some(t) = &self.nvme {
            let s = t.read()?;
            for (k, v) in &s.qcg {
                snap.nvme_queue_cgroups.push(NvmeQueueCgroup {
                    device: devices.get(k.devt),
                    qid: k.qid,
                    cgroup: cgroup_ref(resolver, k.cgid),
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
                    device: devices.get(k.devt),
                    qid: k.qid,
                    victim: cgroup_ref(resolver, k.victim),
                    culprit: (k.culprit != 0).then(|| cgroup_ref(resolver, k.culprit)),
                    count: v.count,
                    latency_sum_seconds: v.lat_sum_ns as f64 / 1e9,
                });
            }
            for (k, v) in &s.queues {
                let device = devices.get(k.devt);
                let cpus = snap
                    .cpu_queue_map
                    .iter()
                    .find(|m| m.device == device.name && m.hctx + 1 == k.qid)
                    .map(|m| m.cpus.clone())
                    .unwrap_or_default();
                snap.nvme_queues.push(NvmeQueue {
                    device,
                    qid: k.qid,
                    cpus,
                    sq_samples: v.sq_samples,
                    sq_occupancy_mean: if v.sq_samples > 0 {
                        v.sq_occupancy_sum as f64 / v.sq_samples as f64
                    } else {
                        0.0
                    },
                    sq_occupancy_last: v.sq_occupancy_last,
                    sq_occupancy_max: v.sq_occupancy_max,
                });
            }
            snap.nvme_queue_cgroups.sort_by(|a, b| {
                (&a.device, a.qid, a.cgroup.id).cmp(&(&b.device, b.qid, b.cgroup.id))
            });
            snap.nvme_queues
                .sort_by(|a, b| (&a.device, a.qid).cmp(&(&b.device, b.qid)));
        }

        if let Some(t) = &self.iocost {
            let s = t.read()?;
            let root = self.cgroup2.clone();
            let qos = root
                .as_deref()
                .map(|r| iocost::read_root_knob(r, "io.cost.qos"))
                .unwrap_or_default();
            let model = root
                .as_deref()
                .map(|r| iocost::read_root_knob(r, "io.cost.model"))
                .unwrap_or_default();
            let root_stat = root
                .as_deref()
                .and_then(|r| std::fs::read_to_string(r.join("io.stat")).ok())
                .unwrap_or_default();
            let pct = |v: Option<&str>| v.and_then(|v| v.parse::<f64>().ok()).map(|p| p / 100.0);
            for (devt, d) in &s.devs {
                let device = devices.get(*devt);
                let majmin = format!("{}:{}", device.major, device.minor);
                let q = qos.get(&majmin).cloned();
                snap.iocost_devices.push(IocostDevice {
                    vrate_ratio: d.vrate as f64 / VTIME_PER_USEC,
                    vrate_effective_ratio: d.vrate_effective as f64 / VTIME_PER_USEC,
                    io_stat_vrate_ratio: pct(iocost::device_line(&root_stat, &majmin)
                        .and_then(|l| iocost::field(l, "cost.vrate"))),
                    busy_level: d.busy_level,
                    missed_ppm_read: d.missed_ppm[0],
                    missed_ppm_write: d.missed_ppm[1],
                    rq_wait_ratio: d.rq_wait_pct as f64 / 100.0,
                    nr_lagging: d.nr_lagging,
                    nr_shortages: d.nr_shortages,
                    vrate_adjustments: d.vrate_adjusts,
                    qos_vrate_min_ratio: pct(q.as_deref().and_then(|l| iocost::field(l, "min"))),
                    qos_vrate_max_ratio: pct(q.as_deref().and_then(|l| iocost::field(l, "max"))),
                    qos: q,
                    model: model.get(&majmin).cloned(),
                    device,
                });
            }
            // Devices with iocost on that raised no event since we attached
            // (steady state fires none): what the files say.
            for (majmin, line) in &qos {
                let Some((ma, mi)) = crate::host::devices::parse_majmin(majmin) else {
                    continue;
                };
                let devt = crate::host::devices::kernel_devt(ma, mi);
                if iocost::field(line, "enable") != Some("1")
                    || s.devs.iter().any(|(d, _)| *d == devt)
                {
                    continue;
                }
                let vrate = pct(iocost::device_line(&root_stat, majmin)
                    .and_then(|l| iocost::field(l, "cost.vrate")));
                snap.iocost_devices.push(IocostDevice {
                    device: devices.get(devt),
                    vrate_ratio: vrate.unwrap_or(0.0),
                    io_stat_vrate_ratio: vrate,
                    qos_vrate_min_ratio: pct(iocost::field(line, "min")),
                    qos_vrate_max_ratio: pct(iocost::field(line, "max")),
                    qos: Some(line.clone()),
                    model: model.get(majmin).cloned(),
                    ..Default::default()
                });
            }
            let mut stats: HashMap<String, String> = HashMap::new();
            for (k, c) in &s.cgroups {
                let device = devices.get(k.devt);
                let majmin = format!("{}:{}", device.major, device.minor);
                let cgroup = cgroup_ref(resolver, k.cgid);
                let usage = root.as_deref().and_then(|r| {
                    let rel = cgroup.path.trim_start_matches('/');
                    let text = stats
                        .entry(rel.to_string())
                        .or_insert_with(|| {
                            std::fs::read_to_string(r.join(rel).join("io.stat")).unwrap_or_default()
                        })
                        .clone();
                    iocost::device_line(&text, &majmin)
                        .and_then(|l| iocost::field(l, "cost.usage"))
                        .and_then(|v| v.parse::<f64>().ok())
                        .map(|us| us / 1e6)
                });
                snap.iocost_cgroups.push(IocostCgroup {
                    device,
                    cgroup,
                    weight: c.weight as f64 / WEIGHT_ONE,
                    inuse: c.inuse as f64 / WEIGHT_ONE,
                    hweight_active_ratio: 0.0, // derived below
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
                    usage_seconds: usage,
                });
            }
            let weight_of = |rel: &str| -> f64 {
                root.as_deref()
                    .and_then(|r| {
                        std::fs::read_to_string(
                            r.join(rel.trim_start_matches('/')).join("io.weight"),
                        )
                        .ok()
                    })
                    .and_then(|t| {
                        t.lines().find_map(|l| {
                            l.strip_prefix("default ")
                                .and_then(|v| v.trim().parse().ok())
                        })
                    })
                    .unwrap_or(100.0)
            };
            iowarden_exporters::derive_hweights(&mut snap.iocost_cgroups, &weight_of);
            snap.iocost_cgroups
                .sort_by(|a, b| (&a.device, a.cgroup.id).cmp(&(&b.device, b.cgroup.id)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8\n"), vec![0, 1, 2, 3, 8]);
        assert_eq!(parse_cpu_list("1"), vec![1]);
        assert_eq!(parse_cpu_list(""), Vec::<u32>::new());
    }
}
