//! `iowarden top`: cgroups sorted by device-time share per device, with IOPS,
//! bandwidth, queue/device p50/p99, the part of their latency spent held
//! before a request existed (io.max, iocost, io.latency, wbt), and a
//! verdict naming the noisy neighbour.
//! Rows, the verdict and the panels are pure functions of delta snapshots;
//! cli/top.rs runs the terminal loop, views/tui.rs draws the interactive view.

use std::collections::HashMap;

use iowarden_exporters::{Histogram, Snapshot};

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
            .entry((s.device.name.clone(), s.cgroup.path.clone()))
            .or_default();
        e.0 += s.ios;
        e.1 += s.bytes;
        e.2.add(&s.latency.queue);
        e.3.add(&s.latency.device);
        e.4.add(&s.latency.total);
        e.5 += s.latency.throttle.sum_seconds;
    }
    let mut delayed: HashMap<(&str, &str), f64> = HashMap::new();
    for t in &delta.task_delays {
        *delayed
            .entry((t.device.name.as_str(), t.cgroup.path.as_str()))
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
            let delay = delayed
                .get(&(d.as_str(), c.as_str()))
                .copied()
                .unwrap_or(0.0);
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

/// Flags the cgroup that holds most of a device's time while another
/// cgroup's p99 rises above its own baseline (the lowest p99 it showed in
/// any window with enough I/O: a cgroup's best recent latency is what it
/// gets when left alone).
pub struct NoisyNeighbourDetector {
    pub share_threshold: f64,
    pub rise_factor: f64,
    pub min_ios: u64,
    baseline: HashMap<(String, String), f64>,
    flagged: HashMap<(String, String), u32>,
    culprit: Option<String>,
}

impl Default for NoisyNeighbourDetector {
    fn default() -> Self {
        NoisyNeighbourDetector {
            share_threshold: 0.5,
            rise_factor: 1.5,
            min_ios: 20,
            baseline: HashMap::new(),
            flagged: HashMap::new(),
            culprit: None,
        }
    }
}

impl NoisyNeighbourDetector {
    /// Feeds one window's rows; returns the verdict line.
    pub fn observe(&mut self, rows: &[Row]) -> String {
        let mut verdict = None;
        for dom in rows
            .iter()
            .filter(|r| r.device_share >= self.share_threshold && r.ios >= self.min_ios)
        {
            for victim in rows.iter().filter(|r| {
                r.device == dom.device && r.cgroup != dom.cgroup && r.ios >= self.min_ios
            }) {
                let (Some(p99), Some(&base)) = (
                    victim.total_p99,
                    self.baseline
                        .get(&(victim.device.clone(), victim.cgroup.clone())),
                ) else {
                    continue;
                };
                if base > 0.0 && p99 >= base * self.rise_factor {
                    verdict = Some(format!(
                        "noisy neighbour on {}: {} holds {:.0}% of device time while {} p99 rose {:.1}x ({} -> {})",
                        dom.device,
                        dom.cgroup,
                        dom.device_share * 100.0,
                        victim.cgroup,
                        p99 / base,
                        fmt_lat(Some(base)),
                        fmt_lat(Some(p99))
                    ));
                    let n = self
                        .flagged
                        .entry((dom.device.clone(), dom.cgroup.clone()))
                        .or_default();
                    *n += 1;
                    if *n >= 2 {
                        self.culprit = verdict.clone();
                    }
                    break;
                }
            }
            if verdict.is_some() {
                break;
            }
        }
        for r in rows.iter().filter(|r| r.ios >= self.min_ios) {
            if let Some(p) = r.total_p99 {
                let b = self
                    .baseline
                    .entry((r.device.clone(), r.cgroup.clone()))
                    .or_insert(p);
                *b = b.min(p);
            }
        }
        verdict.unwrap_or_else(|| match rows.iter().max_by(|a, b| a.device_share.total_cmp(&b.device_share)) {
            Some(r) if r.ios > 0 => format!(
                "no noisy neighbour: top device-time share is {} on {} ({:.0}%), no other cgroup's p99 rose {:.1}x",
                r.cgroup,
                r.device,
                r.device_share * 100.0,
                self.rise_factor
            ),
            _ => "no noisy neighbour: no block I/O in this window".into(),
        })
    }

    /// The verdict of the last cgroup flagged in at least two windows.
    pub fn culprit(&self) -> Option<&str> {
        self.culprit.as_deref()
    }
}

pub fn fmt_lat(s: Option<f64>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s < 1e-3 => format!("{:.0}us", s * 1e6),
        Some(s) => format!("{:.2}ms", s * 1e3),
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

/// The table as plain text.
pub fn render(rows: &[Row], verdict: &str) -> String {
    let mut s = format!(
        "{:<10} {:<36} {:>6} {:>9} {:>10} {:>8} {:>8} {:>8} {:>8} {:>5}\n",
        "DEVICE", "CGROUP", "SHARE", "IOPS", "BW", "Q_P50", "Q_P99", "D_P50", "D_P99", "HELD"
    );
    for r in rows {
        s += &format!(
            "{:<10} {:<36} {:>5.0}% {:>9} {:>10} {:>8} {:>8} {:>8} {:>8} {:>5}\n",
            r.device,
            r.cgroup,
            r.device_share * 100.0,
            fmt_rate(r.iops, ""),
            fmt_rate(r.bytes_per_s, "B/s"),
            fmt_lat(r.queue_p50),
            fmt_lat(r.queue_p99),
            fmt_lat(r.device_p50),
            fmt_lat(r.device_p99),
            fmt_share(r.held_share)
        );
    }
    s + verdict + "\n"
}

/// A part of a whole as a percentage; "-" when unknown.
pub fn fmt_share(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.0}%", v * 100.0))
}

/// The iocost and NVMe panels under the table: one line per iocost device,
/// one per cgroup under it, and the head-of-line pairs of the window.
pub fn render_panels(delta: &Snapshot, device: Option<&str>) -> String {
    let mut s = String::new();
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
                c.cgroup.path,
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
            h.victim.path,
            h.culprit.as_ref().map(|c| c.path.as_str()).unwrap_or("?"),
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

    fn row(cg: &str, share: f64, p99_ms: f64) -> Row {
        Row {
            device: "loop0".into(),
            cgroup: cg.into(),
            iops: 100.0,
            bytes_per_s: 1e6,
            device_share: share,
            queue_p50: None,
            queue_p99: None,
            device_p50: None,
            device_p99: None,
            total_p99: Some(p99_ms / 1e3),
            held_share: None,
            ios: 100,
        }
    }

    #[test]
    fn names_the_hog_once_the_victim_suffers() {
        let mut d = NoisyNeighbourDetector::default();
        assert!(d
            .observe(&[row("/victim", 1.0, 0.2)])
            .starts_with("no noisy"));
        let v = d.observe(&[row("/hog", 0.9, 5.0), row("/victim", 0.1, 0.9)]);
        assert!(
            v.contains("noisy neighbour on loop0: /hog holds 90%")
                && v.contains("/victim p99 rose 4.5x"),
            "{v}"
        );
        assert_eq!(d.culprit(), None, "one window is not enough");
        d.observe(&[row("/hog", 0.9, 5.0), row("/victim", 0.1, 0.8)]);
        assert!(d.culprit().unwrap().contains("/hog"));
    }

    #[test]
    fn steady_sharing_and_dominance_without_victims_are_not_flagged() {
        let mut d = NoisyNeighbourDetector::default();
        for _ in 0..5 {
            assert!(d
                .observe(&[row("/a", 0.5, 1.0), row("/b", 0.5, 1.0)])
                .starts_with("no noisy"));
        }
        let mut d = NoisyNeighbourDetector::default();
        for _ in 0..5 {
            assert!(d
                .observe(&[row("/big", 0.95, 3.0), row("/small", 0.05, 0.3)])
                .starts_with("no noisy"));
        }
        assert_eq!(d.culprit(), None);
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
        let text = render(&r, "verdict");
        assert!(text.contains("/c2") && text.ends_with("verdict\n"));
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
