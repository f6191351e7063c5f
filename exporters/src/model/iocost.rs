//! The iocost controller's state (bpf/iocost.bpf.c, where iocost is
//! enabled): per device (vrate, QoS) and per cgroup (weights, budget,
//! debt, donation events).

use serde::{Deserialize, Serialize};

use super::core::{CgroupRef, DeviceRef};
use super::metric::metrics;

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct IocostDevice {
    pub device: DeviceRef,
    /// 1.0 = 100 %: the base vrate, as io.stat's cost.vrate prints it.
    pub vrate_ratio: f64,
    /// The rate vtime actually advances at: base plus iocost's correction
    /// of accumulated error (up to 2x base).
    #[serde(default)]
    pub vrate_effective_ratio: f64,
    /// cost.vrate from the root's io.stat at the same poll (None if absent).
    pub io_stat_vrate_ratio: Option<f64>,
    pub busy_level: i32,
    pub missed_ppm_read: u32,
    pub missed_ppm_write: u32,
    pub rq_wait_ratio: f64,
    pub nr_lagging: i32,
    pub nr_shortages: i32,
    pub vrate_adjustments: u64,
    /// The device's io.cost.qos and io.cost.model lines, verbatim.
    pub qos: Option<String>,
    pub model: Option<String>,
    pub qos_vrate_min_ratio: Option<f64>,
    pub qos_vrate_max_ratio: Option<f64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct IocostCgroup {
    pub device: DeviceRef,
    pub cgroup: CgroupRef,
    /// Active and in-use weight, as io.weight sets them (1..10000).
    pub weight: f64,
    pub inuse: f64,
    /// Hierarchical active weight share (1.0 = the whole device), computed
    /// as iocost's current_hweight() does: at each level, the weight over
    /// the sum of the active siblings' weights, with activity from the
    /// activate/idle events. (The kernel refreshes its cached copy lazily;
    /// its own tracepoints report stale values.)
    pub hweight_active_ratio: f64,
    /// The kernel's cached hweight_active / hweight_inuse at the cgroup's
    /// last event.
    #[serde(default)]
    pub hweight_active_cached_ratio: f64,
    pub hweight_inuse_ratio: f64,
    /// Active now (more activations than idle transitions seen).
    #[serde(default)]
    pub active: bool,
    /// Budget left at the last event (global vtime - the cgroup's), in
    /// device seconds at 100 % vrate; negative = running ahead.
    pub vtime_budget_seconds: f64,
    pub debt_seconds: f64,
    pub delay_seconds: f64,
    pub activations: u64,
    pub idles: u64,
    pub shortages: u64,
    pub transfers: u64,
    pub adjusts: u64,
    pub forgives: u64,
    /// cost.usage from the cgroup's io.stat (device time charged), seconds.
    pub usage_seconds: Option<f64>,
}

impl IocostDevice {
    pub fn key(&self) -> (u32, u32) {
        (self.device.major, self.device.minor)
    }
}

impl IocostCgroup {
    pub fn key(&self) -> (u32, u32, u64) {
        (self.device.major, self.device.minor, self.cgroup.id)
    }
}

// Everything else is a gauge or state at the last event or poll.
// missed_ppm_read/_write: one family with an op label (openmetrics/iocost.rs).
metrics!(IocostDevice {
    gauge vrate_ratio => "iowarden_iocost_vrate_ratio", "iocost base vrate (1.0 = 100%)";
    gauge busy_level => "iowarden_iocost_busy_level",
        "iocost busy level (> 0: missing QoS targets, < 0: underused)";
    gauge rq_wait_ratio => "iowarden_iocost_rq_wait_ratio",
        "Share of the last period requests waited for a tag";
    gauge nr_lagging => "iowarden_iocost_lagging_cgroups",
        "Cgroups lagging at the last vrate adjustment";
    gauge nr_shortages => "iowarden_iocost_shortage_cgroups",
        "Cgroups short of budget at the last vrate adjustment";
    counter vrate_adjustments => "iowarden_iocost_vrate_adjustments", "iocost vrate adjustments";
    gauge qos_vrate_min_ratio => "iowarden_iocost_qos_vrate_min_ratio", "io.cost.qos min (1.0 = 100%)";
    gauge qos_vrate_max_ratio => "iowarden_iocost_qos_vrate_max_ratio", "io.cost.qos max (1.0 = 100%)";
});

// The event counters: one family with a kind label (openmetrics/iocost.rs).
metrics!(IocostCgroup {
    gauge weight => "iowarden_iocost_weight", "iocost active weight";
    gauge inuse => "iowarden_iocost_inuse", "iocost in-use weight (after donation)";
    gauge hweight_active_ratio => "iowarden_iocost_hweight_active_ratio",
        "Hierarchical active weight share";
    gauge hweight_inuse_ratio => "iowarden_iocost_hweight_inuse_ratio",
        "Hierarchical in-use weight share";
    gauge vtime_budget_seconds => "iowarden_iocost_vtime_budget" [Seconds],
        "Budget left (global vtime - the cgroup's) at its last event, device seconds at 100% vrate";
    gauge debt_seconds => "iowarden_iocost_debt" [Seconds], "iocost debt, device seconds at 100% vrate";
    gauge delay_seconds => "iowarden_iocost_delay" [Seconds], "iocost issue delay imposed for debt";
    counter usage_seconds => "iowarden_iocost_usage" [Seconds],
        "Device time charged by iocost (io.stat cost.usage)";
    counter activations;
    counter idles;
    counter shortages;
    counter transfers;
    counter adjusts;
    counter forgives;
});

/// Fills `hweight_active_ratio` of every cgroup of every device from the
/// active weights of the hierarchy (paths give the tree). Ancestors without
/// an entry of their own weigh `weight_of(path)`.
pub fn derive_hweights(cgroups: &mut [IocostCgroup], weight_of: &dyn Fn(&str) -> f64) {
    use std::collections::{BTreeMap, BTreeSet};
    fn parent(p: &str) -> &str {
        match p.rfind('/') {
            Some(0) | None => "/",
            Some(i) => &p[..i],
        }
    }
    let devices: BTreeSet<String> = cgroups.iter().map(|c| c.device.name.clone()).collect();
    for dev in devices {
        // Active nodes (active leaves and all their ancestors) and weights.
        let mut w: BTreeMap<String, f64> = BTreeMap::new();
        for c in cgroups.iter().filter(|c| c.device.name == dev && c.active) {
            let mut p = c.cgroup.path.as_str();
            w.insert(p.to_string(), c.weight);
            while p != "/" {
                p = parent(p);
                if p != "/" && !w.contains_key(p) {
                    let own = cgroups
                        .iter()
                        .find(|x| x.device.name == dev && x.cgroup.path == p)
                        .map(|x| x.weight)
                        .unwrap_or_else(|| weight_of(p));
                    w.insert(p.to_string(), own);
                }
            }
        }
        let mut sums: BTreeMap<String, f64> = BTreeMap::new();
        for (p, v) in &w {
            if p != "/" {
                *sums.entry(parent(p).to_string()).or_default() += v;
            }
        }
        for c in cgroups.iter_mut().filter(|c| c.device.name == dev) {
            if !c.active || c.cgroup.path.is_empty() || c.cgroup.path == "/" {
                c.hweight_active_ratio = if c.cgroup.path == "/" { 1.0 } else { 0.0 };
                continue;
            }
            let mut h = 1.0;
            let mut p = c.cgroup.path.as_str();
            while p != "/" {
                let s = sums.get(parent(p)).copied().unwrap_or(0.0);
                h *= if s > 0.0 {
                    w.get(p).copied().unwrap_or(0.0) / s
                } else {
                    0.0
                };
                p = parent(p);
            }
            c.hweight_active_ratio = h;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cg(path: &str, weight: f64, active: bool) -> IocostCgroup {
        IocostCgroup {
            device: DeviceRef {
                name: "nvme0n1".into(),
                major: 259,
                minor: 0,
            },
            cgroup: CgroupRef {
                id: 1,
                path: path.into(),
            },
            weight,
            active,
            ..Default::default()
        }
    }

    #[test]
    fn hweights_follow_active_weights() {
        let mut v = vec![
            cg("/a", 100.0, true),
            cg("/b", 500.0, true),
            cg("/c", 300.0, false),
        ];
        derive_hweights(&mut v, &|_| 100.0);
        assert!((v[0].hweight_active_ratio - 1.0 / 6.0).abs() < 1e-9);
        assert!((v[1].hweight_active_ratio - 5.0 / 6.0).abs() < 1e-9);
        assert_eq!(v[2].hweight_active_ratio, 0.0);
        // Nested: /p (weight 100 from its io.weight) holds /p/x and /p/y, beside /q (300).
        let mut v = vec![
            cg("/p/x", 100.0, true),
            cg("/p/y", 300.0, true),
            cg("/q", 300.0, true),
        ];
        derive_hweights(&mut v, &|p| if p == "/p" { 100.0 } else { 0.0 });
        assert!(
            (v[0].hweight_active_ratio - 0.25 * 0.25).abs() < 1e-9,
            "{}",
            v[0].hweight_active_ratio
        );
        assert!((v[1].hweight_active_ratio - 0.25 * 0.75).abs() < 1e-9);
        assert!((v[2].hweight_active_ratio - 0.75).abs() < 1e-9);
    }
}
