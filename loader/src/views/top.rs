//! `iowarden top`'s data: cgroups sorted by device-time share per device,
//! with IOPS, bandwidth, queue/device p50/p99 and the part of their latency
//! spent held before a request existed (io.max, iocost, io.latency, wbt),
//! and the panels under the table (the culprit account, iocost, NVMe
//! head-of-line pairs, locks). Pure functions of delta snapshots:
//! views/columns.rs lays the rows out, views/verdict.rs judges them,
//! views/tui.rs draws them on a terminal, cli/top.rs runs the loop.

use std::collections::HashMap;

use iowarden_exporters::{Histogram, Snapshot};

use crate::views::culprits;
use crate::views::names::cgroup_name;

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub device: String,
    pub cgroup: String,
    pub iops: f64,
    pub bytes_per_s: f64,
    /// This cgroup's part of the device time of all cgroups on the device.
    pub device_share: f64,
    pub queue_p50: Option<f64>,
    pub queue_p99: Option<f64>,
    pub device_p50: Option<f64>,
    pub device_p99: Option<f64>,
    pub total_p99: Option<f64>,
    /// The part of what the cgroup's I/O waited that its limits held it:
    /// the throttle stage (io.max, iocost's share, io.latency, wbt) and the
    /// task delays io.latency and iocost put between its I/Os, over the
    /// total plus those delays; None without a total.
    pub held_share: Option<f64>,
    pub ios: u64,
}

/// Rows of one delta snapshot, ops merged, sorted by device then share.
/// Shares are per device: a loop device's I/O reappears on its backing disk.
pub fn rows(delta: &Snapshot, device: Option<&str>) -> Vec<Row> {
    let w = delta.window_seconds.max(1e-9);
    let b = &delta.hist_lower_bounds_seconds;
    // (device, cgroup) -> (ios, bytes, queue, device, total histograms,
    // throttle stage's sum)
    type Merged = (u64, u64, Histogram, Histogram, Histogram, f64);
    let mut acc: HashMap<(String, String), Merged> = HashMap::new();
    for s in &delta.io {
        if device.is_some_and(|d| d != s.device.name) {
            continue;
        }
        let e = acc
            .entry((s.device.name.clone(), cgroup_name(&s.cgroup)))
            .or_default();
        e.0 += s.ios;
        e.1 += s.bytes;
        e.2.add(&s.latency.queue);
        e.3.add(&s.latency.device);
        e.4.add(&s.latency.total);
        e.5 += s.latency.throttle.sum_seconds;
    }
    let mut delayed: HashMap<(String, String), f64> = HashMap::new();
    for t in &delta.task_delays {
        *delayed
            .entry((t.device.name.clone(), cgroup_name(&t.cgroup)))
            .or_default() += t.seconds;
    }
    let mut dev_time: HashMap<String, f64> = HashMap::new();
    for ((d, _), v) in &acc {
        *dev_time.entry(d.clone()).or_default() += v.3.sum_seconds;
    }
    let mut out: Vec<Row> = acc
        .into_iter()
        .filter(|(_, v)| v.0 > 0)
        .map(|((d, c), v)| {
            let total = dev_time[&d];
            let delay = delayed.get(&(d.clone(), c.clone())).copied().unwrap_or(0.0);
            let waited = v.4.sum_seconds + delay;
            Row {
                device_share: if total > 0.0 {
                    v.3.sum_seconds / total
                } else {
                    0.0
                },
                iops: v.0 as f64 / w,
                bytes_per_s: v.1 as f64 / w,
                queue_p50: v.2.quantile(b, 0.5),
                queue_p99: v.2.quantile(b, 0.99),
                device_p50: v.3.quantile(b, 0.5),
                device_p99: v.3.quantile(b, 0.99),
                total_p99: v.4.quantile(b, 0.99),
                held_share: (v.4.sum_seconds > 0.0).then(|| (v.5 + delay) / waited),
                ios: v.0,
                device: d,
                cgroup: c,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        a.device
            .cmp(&b.device)
            .then(b.device_share.total_cmp(&a.device_share))
    });
    out
}

/// A latency in three significant digits (at most six characters but
/// at a rounding edge: "999us", "4.20ms", "12.2ms", "1.25s").
pub fn fmt_lat(s: Option<f64>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s < 1e-3 => format!("{:.0}us", s * 1e6),
        Some(s) if s < 1e-2 => format!("{:.2}ms", s * 1e3),
        Some(s) if s < 1e-1 => format!("{:.1}ms", s * 1e3),
        Some(s) if s < 1.0 => format!("{:.0}ms", s * 1e3),
        Some(s) if s < 10.0 => format!("{s:.2}s"),
        Some(s) if s < 100.0 => format!("{s:.1}s"),
        Some(s) => format!("{s:.0}s"),
    }
}

pub fn fmt_rate(v: f64, unit: &str) -> String {
    if v >= 1e9 {
        format!("{:.1}G{unit}", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.1}M{unit}", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k{unit}", v / 1e3)
    } else {
        format!("{v:.0}{unit}")
    }
}

/// A part of a whole as a percentage; "-" when unknown.
pub fn fmt_share(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.0}%", v * 100.0))
}

/// The panels under the table: the culprit account of the victims most
/// held up (the one place it is printed), one line per iocost device and
/// one per cgroup under it, the head-of-line pairs and the lock sites of
/// the window.
pub fn render_panels(delta: &Snapshot, device: Option<&str>) -> String {
    let mut s = culprits::render_panel(delta, device, 5);
    let on = |d: &str| device.is_none_or(|x| x == d);
    for d in delta.iocost_devices.iter().filter(|d| on(&d.device.name)) {
        let range = match (d.qos_vrate_min_ratio, d.qos_vrate_max_ratio) {
            (Some(a), Some(b)) => format!(" [{:.0}%..{:.0}%]", a * 100.0, b * 100.0),
            _ => String::new(),
        };
        s += &format!(
            "iocost {}: vrate {:.1}%{range} busy {} missed r/w {}/{} ppm\n",
            d.device.name,
            d.vrate_ratio * 100.0,
            d.busy_level,
            d.missed_ppm_read,
            d.missed_ppm_write
        );
        for c in delta.iocost_cgroups.iter().filter(|c| c.device == d.device) {
            s += &format!(
                "  {:<36} weight {:>5.0} hweight {:>5.1}% inuse {:>5.1}% debt {} delay {}{}\n",
                cgroup_name(&c.cgroup),
                c.weight,
                c.hweight_active_ratio * 100.0,
                c.hweight_inuse_ratio * 100.0,
                fmt_lat(Some(c.debt_seconds)),
                fmt_lat(Some(c.delay_seconds)),
                if c.active { "" } else { " (idle)" }
            );
        }
    }
    let mut hol: Vec<_> = delta
        .nvme_hol
        .iter()
        .filter(|h| h.culprit.is_some() && h.count > 0 && on(&h.device.name))
        .collect();
    hol.sort_by_key(|h| std::cmp::Reverse(h.count));
    for h in hol.iter().take(5) {
        s += &format!(
            "nvme {} q{}: {} small requests of {} queued behind large ones of {} (mean {})\n",
            h.device.name,
            h.qid,
            h.count,
            cgroup_name(&h.victim),
            h.culprit.as_ref().map_or("?".into(), cgroup_name),
            fmt_lat(Some(h.latency_sum_seconds / h.count as f64))
        );
    }
    s += &crate::views::locks::render_panel(delta, device, 5);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panels_show_iocost_and_hol() {
        use iowarden_exporters::{CgroupRef, DeviceRef, HolSeries, IocostCgroup, IocostDevice};
        let dev = DeviceRef {
            name: "nvme0n1".into(),
            major: 259,
            minor: 0,
        };
        let mut d = Snapshot::default();
        d.iocost_devices.push(IocostDevice {
            device: dev.clone(),
            vrate_ratio: 1.0,
            qos_vrate_min_ratio: Some(0.5),
            qos_vrate_max_ratio: Some(1.5),
            ..Default::default()
        });
        d.iocost_cgroups.push(IocostCgroup {
            device: dev.clone(),
            cgroup: CgroupRef {
                id: 3,
                path: "/b".into(),
            },
            weight: 500.0,
            hweight_active_ratio: 5.0 / 6.0,
            active: true,
            ..Default::default()
        });
        d.nvme_hol.push(HolSeries {
            device: dev,
            qid: 1,
            victim: CgroupRef {
                id: 4,
                path: "/vic".into(),
            },
            culprit: Some(CgroupRef {
                id: 5,
                path: "/hog".into(),
            }),
            count: 10,
            latency_sum_seconds: 0.3,
        });
        let p = render_panels(&d, None);
        assert!(
            p.contains("iocost nvme0n1: vrate 100.0% [50%..150%]"),
            "{p}"
        );
        assert!(p.contains("/b") && p.contains("hweight  83.3%"), "{p}");
        assert!(
            p.contains("10 small requests of /vic queued behind large ones of /hog"),
            "{p}"
        );
        assert!(render_panels(&d, Some("loop0")).is_empty());
    }

    #[test]
    fn shares_are_per_device() {
        use iowarden_exporters::*;
        let series = |dev: &str, cg: u64, dev_s: f64| IoSeries {
            cgroup: CgroupRef {
                id: cg,
                path: format!("/c{cg}"),
            },
            device: DeviceRef {
                name: dev.into(),
                major: 7,
                minor: if dev == "loop0" { 0 } else { 1 },
            },
            op: Op::Read,
            ios: 10,
            bytes: 40960,
            latency: StageHistograms {
                device: Histogram {
                    counts: vec![10],
                    sum_seconds: dev_s,
                },
                ..Default::default()
            },
            ..Default::default()
        };
        let snap = Snapshot {
            window_seconds: 2.0,
            hist_lower_bounds_seconds: vec![0.0],
            io: vec![
                series("loop0", 1, 3.0),
                series("loop0", 2, 1.0),
                series("vda", 1, 8.0),
            ],
            ..Default::default()
        };
        let r = rows(&snap, None);
        let get = |d: &str, c: &str| {
            r.iter()
                .find(|x| x.device == d && x.cgroup == c)
                .unwrap()
                .device_share
        };
        assert_eq!(get("loop0", "/c1"), 0.75);
        assert_eq!(get("vda", "/c1"), 1.0);
        assert_eq!(
            r.iter()
                .find(|x| x.device == "loop0" && x.cgroup == "/c1")
                .unwrap()
                .iops,
            5.0
        );
    }

    #[test]
    fn fmt_lat_keeps_three_digits() {
        let f = |s| fmt_lat(Some(s));
        assert_eq!(
            [
                f(4.2e-5),
                f(4.2e-3),
                f(0.0122),
                f(0.5),
                f(1.25),
                f(42.0),
                f(420.0)
            ],
            ["42us", "4.20ms", "12.2ms", "500ms", "1.25s", "42.0s", "420s"]
        );
        assert_eq!(fmt_lat(None), "-");
    }

    #[test]
    fn the_aggregate_row_is_named_other_cgroups() {
        use iowarden_exporters::*;
        let snap = Snapshot {
            window_seconds: 1.0,
            hist_lower_bounds_seconds: vec![0.0],
            io: vec![IoSeries {
                cgroup: CgroupRef {
                    id: OTHER_CGROUP_ID,
                    path: OTHER_CGROUP.into(),
                },
                ios: 10,
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(rows(&snap, None)[0].cgroup, "other cgroups");
    }

    #[test]
    fn held_counts_the_throttle_stage_and_the_task_delays() {
        use iowarden_exporters::*;
        let dev = DeviceRef {
            name: "nvme0n1".into(),
            major: 259,
            minor: 0,
        };
        let cgroup = CgroupRef {
            id: 5,
            path: "/l".into(),
        };
        let hist = |s| Histogram {
            counts: vec![10],
            sum_seconds: s,
        };
        let snap = Snapshot {
            window_seconds: 1.0,
            hist_lower_bounds_seconds: vec![0.0],
            io: vec![IoSeries {
                cgroup: cgroup.clone(),
                device: dev.clone(),
                ios: 10,
                latency: StageHistograms {
                    throttle: hist(0.01),
                    device: hist(0.01),
                    total: hist(0.02),
                    ..Default::default()
                },
                ..Default::default()
            }],
            task_delays: vec![TaskDelay {
                cgroup,
                device: dev,
                delays: 10,
                seconds: 0.02,
            }],
            ..Default::default()
        };
        // (0.01 held + 0.02 delayed) of (0.02 total + 0.02 delayed).
        assert_eq!(rows(&snap, None)[0].held_share, Some(0.75));
    }
}
