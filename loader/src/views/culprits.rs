//! Whom each cgroup waited behind (the culprit account): a victim's time in one
//! window split into what its own limits held (the throttle stage), its
//! queue stage and its device time. The device time is split by whose
//! requests shared the device with it (its own: its own queue; none: its
//! own service), the queue stage by whose requests the I/O scheduler
//! issued meanwhile (the rest, before the scheduler or without one, is
//! "queued"). views/verdict.rs names the culprit that took most of a
//! victim's time. A victim or culprit may be the aggregate of the many
//! cgroups outside the top K ("other cgroups"). Pure functions of a delta
//! snapshot.

use std::collections::BTreeMap;

use iowarden_exporters::{Op, Snapshot, Stage};

use crate::views::names::{cgroup_name, OTHER_CGROUPS};

/// One part of a victim's time.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Held by its own limits before a request existed (io.max where
    /// timed, iocost, io.latency, wbt).
    OwnLimits,
    /// Allocated and not yet issued, and not split by culprit: before the
    /// I/O scheduler (plugs, tags), or without one.
    Queued,
    /// Behind another cgroup's requests, on the device or in the I/O
    /// scheduler (which issued them first): their mean size. `cgroup` is
    /// its path, or "other cgroups".
    Behind {
        cgroup: String,
        op: Op,
        mean_bytes: f64,
    },
    /// Behind its own other requests, on the device or in the scheduler.
    OwnQueue,
    /// Its own share of the device.
    Service,
}

/// A victim's time on one device in one window, by part.
#[derive(Debug, Clone, PartialEq)]
pub struct Account {
    pub device: String,
    /// The victim's path, or "other cgroups".
    pub victim: String,
    pub seconds: f64,
    /// Largest first.
    pub parts: Vec<(Part, f64)>,
}

impl Account {
    /// The part of its time behind other cgroups.
    pub fn behind_others(&self) -> f64 {
        self.share(|p| matches!(p, Part::Behind { .. }))
    }

    /// The part of its time its own limits held it.
    pub fn own_limits(&self) -> f64 {
        self.share(|p| *p == Part::OwnLimits)
    }

    fn share(&self, which: impl Fn(&Part) -> bool) -> f64 {
        let s: f64 = self
            .parts
            .iter()
            .filter(|(p, _)| which(p))
            .map(|(_, s)| s)
            .sum();
        s / self.seconds.max(1e-12)
    }

    /// The cgroup it waited behind the longest (its ops together), and
    /// that part of its time.
    pub fn main_culprit(&self) -> Option<(&str, f64)> {
        let mut by_cgroup: BTreeMap<&str, f64> = BTreeMap::new();
        for (p, s) in &self.parts {
            if let Part::Behind { cgroup, .. } = p {
                *by_cgroup.entry(cgroup).or_default() += s;
            }
        }
        by_cgroup
            .into_iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(c, s)| (c, s / self.seconds.max(1e-12)))
    }

    /// What slowed it beyond its own service: others or its own limits.
    pub fn held_up(&self) -> f64 {
        self.behind_others() + self.own_limits()
    }
}

/// The accounts of every victim with culprits in the window (ops merged),
/// the one most held up (behind others or by its own limits) first.
pub fn accounts(delta: &Snapshot, device: Option<&str>) -> Vec<Account> {
    let on = |d: &str| device.is_none_or(|x| x == d);
    // (device, cgroup, op) -> (ios, bytes): the culprits' mean sizes.
    let mut sizes: BTreeMap<(&str, &str, Op), (u64, u64)> = BTreeMap::new();
    let mut own: BTreeMap<(&str, &str), (f64, f64)> = BTreeMap::new();
    for s in delta.io.iter().filter(|s| on(&s.device.name)) {
        let e = sizes
            .entry((&s.device.name, &s.cgroup.path, s.op))
            .or_default();
        e.0 += s.ios;
        e.1 += s.bytes;
        let o = own.entry((&s.device.name, &s.cgroup.path)).or_default();
        o.0 += s.latency.throttle.sum_seconds;
        o.1 += s.latency.queue.sum_seconds;
    }
    // (device, victim's path) -> parts, and the victim's name.
    let mut parts: BTreeMap<(&str, &str), Vec<(Part, f64)>> = BTreeMap::new();
    let mut names: BTreeMap<&str, String> = BTreeMap::new();
    // The part of each victim's queue stage split by culprit.
    let mut split: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    for c in delta.culprits.iter().filter(|c| on(&c.device.name)) {
        if c.stage == Stage::Queue {
            *split.entry((&c.device.name, &c.victim.path)).or_default() += c.seconds;
        }
        let part = match (&c.culprit, c.culprit_op) {
            (None, _) | (_, None) => Part::Service,
            (Some(p), _) if p.id == c.victim.id => Part::OwnQueue,
            (Some(p), Some(op)) => {
                let (ios, bytes) = sizes
                    .get(&(c.device.name.as_str(), p.path.as_str(), op))
                    .copied()
                    .unwrap_or_default();
                Part::Behind {
                    cgroup: cgroup_name(p),
                    op,
                    mean_bytes: if ios > 0 {
                        bytes as f64 / ios as f64
                    } else {
                        0.0
                    },
                }
            }
        };
        names
            .entry(&c.victim.path)
            .or_insert_with(|| cgroup_name(&c.victim));
        add(
            parts.entry((&c.device.name, &c.victim.path)).or_default(),
            part,
            c.seconds,
        );
    }
    let mut out: Vec<Account> = parts
        .into_iter()
        .map(|((d, v), mut p)| {
            let (limits, queued) = own.get(&(d, v)).copied().unwrap_or_default();
            let unsplit = queued - split.get(&(d, v)).copied().unwrap_or_default();
            add(&mut p, Part::OwnLimits, limits);
            add(&mut p, Part::Queued, unsplit.max(0.0));
            p.retain(|(_, s)| *s > 0.0);
            p.sort_by(|a, b| b.1.total_cmp(&a.1));
            Account {
                device: d.to_string(),
                victim: names[v].clone(),
                seconds: p.iter().map(|(_, s)| s).sum(),
                parts: p,
            }
        })
        .filter(|a| a.seconds > 0.0)
        .collect();
    out.sort_by(|a, b| b.held_up().total_cmp(&a.held_up()));
    out
}

/// Adds `s` to `part` (the same part twice: ops of one culprit merge only
/// when they are the same op).
fn add(parts: &mut Vec<(Part, f64)>, part: Part, s: f64) {
    match parts.iter_mut().find(|(p, _)| *p == part) {
        Some(e) => e.1 += s,
        None => parts.push((part, s)),
    }
}

fn fmt_time(s: f64) -> String {
    match s {
        s if s >= 1.0 => format!("{s:.2}s"),
        s if s >= 1e-3 => format!("{:.2}ms", s * 1e3),
        s => format!("{:.0}us", s * 1e6),
    }
}

fn fmt_size(bytes: f64) -> String {
    match bytes {
        b if b >= 1024.0 * 1024.0 => format!("{:.0} MiB", b / 1024.0 / 1024.0),
        b if b >= 1024.0 => format!("{:.0} KiB", b / 1024.0),
        b => format!("{b:.0} B"),
    }
}

/// "/hog's", "other cgroups'".
fn possessive(cgroup: &str) -> String {
    if cgroup == OTHER_CGROUPS {
        format!("{cgroup}'")
    } else {
        format!("{cgroup}'s")
    }
}

/// A part as the account line says it; the aggregate victim's own queue
/// is a queue of many cgroups.
fn describe(part: &Part, victim: &str) -> String {
    match part {
        Part::OwnQueue if victim == OTHER_CGROUPS => "behind requests of other cgroups".into(),
        Part::OwnLimits => "held by its own limits".into(),
        Part::Queued => "queued before issue".into(),
        Part::Behind {
            cgroup,
            op,
            mean_bytes,
        } => format!(
            "behind {} {} {}s",
            possessive(cgroup),
            fmt_size(*mean_bytes),
            op.as_str()
        ),
        Part::OwnQueue => "behind its own requests".into(),
        Part::Service => "its own service".into(),
    }
}

/// "/a on nvme0n1: 1.2s waited, 71% behind /hog's 128 KiB writes, ..."
/// (parts of at least 1 %, at most four).
pub fn line(a: &Account) -> String {
    let parts: Vec<String> = a
        .parts
        .iter()
        .filter(|(_, s)| *s >= 0.01 * a.seconds)
        .take(4)
        .map(|(p, s)| {
            let share = 100.0 * s / a.seconds;
            format!("{share:.0}% {}", describe(p, &a.victim))
        })
        .collect();
    format!(
        "{} on {}: {} of request time, {}",
        a.victim,
        a.device,
        fmt_time(a.seconds),
        parts.join(", ")
    )
}

/// The panel under `top`'s table, the one place `top` prints the account:
/// the victims most held up (at least a tenth of their time), each with
/// its I/O pressure where the kernel reports it.
pub fn render_panel(delta: &Snapshot, device: Option<&str>, n: usize) -> String {
    accounts(delta, device)
        .iter()
        .filter(|a| a.held_up() >= 0.1)
        .take(n)
        .map(|a| match super::pressure::pressure_text(delta, &a.victim) {
            // What its tasks felt of it, beside behind whom: PSI.
            Some(p) => format!("culprits {}; {p}\n", line(a)),
            None => format!("culprits {}\n", line(a)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use iowarden_exporters::{CgroupRef, CulpritSeries, DeviceRef, IoSeries};

    fn cg(id: u64, path: &str) -> CgroupRef {
        CgroupRef {
            id,
            path: path.into(),
        }
    }

    fn culprit(victim: &CgroupRef, c: Option<&CgroupRef>, op: Op, s: f64) -> CulpritSeries {
        queued_behind(victim, c, op, s, Stage::Device)
    }

    fn queued_behind(
        victim: &CgroupRef,
        c: Option<&CgroupRef>,
        op: Op,
        s: f64,
        stage: Stage,
    ) -> CulpritSeries {
        CulpritSeries {
            device: DeviceRef {
                name: "nvme0n1".into(),
                major: 259,
                minor: 0,
            },
            victim: victim.clone(),
            op: Op::Read,
            culprit: c.cloned(),
            culprit_op: c.map(|_| op),
            stage,
            seconds: s,
        }
    }

    fn io(c: &CgroupRef, op: Op, ios: u64, bytes: u64, throttle: f64) -> IoSeries {
        io_queued(c, op, ios, bytes, throttle, 0.0)
    }

    fn io_queued(
        c: &CgroupRef,
        op: Op,
        ios: u64,
        bytes: u64,
        throttle: f64,
        queue: f64,
    ) -> IoSeries {
        let mut s = IoSeries {
            cgroup: c.clone(),
            device: DeviceRef {
                name: "nvme0n1".into(),
                major: 259,
                minor: 0,
            },
            op,
            ios,
            bytes,
            ..Default::default()
        };
        s.latency.throttle.sum_seconds = throttle;
        s.latency.queue.sum_seconds = queue;
        s
    }

    #[test]
    fn names_the_culprit_its_size_and_the_victims_own_limits() {
        let (v, hog) = (cg(1, "/a"), cg(2, "/hog"));
        let delta = Snapshot {
            io: vec![
                io(&v, Op::Read, 100, 409_600, 2.0),
                io(&hog, Op::Write, 10, 1_310_720, 0.0),
            ],
            culprits: vec![
                culprit(&v, Some(&hog), Op::Write, 7.1),
                culprit(&v, None, Op::Read, 0.9),
                culprit(&v, Some(&v), Op::Read, 0.0),
            ],
            ..Default::default()
        };
        let a = &accounts(&delta, None)[0];
        assert_eq!(a.seconds, 10.0);
        assert_eq!(
            line(a),
            "/a on nvme0n1: 10.00s of request time, 71% behind /hog's 128 KiB writes, \
             20% held by its own limits, 9% its own service"
        );
        assert_eq!(a.main_culprit(), Some(("/hog", 0.71)));
        assert_eq!(a.behind_others(), 0.71);
        assert!(accounts(&delta, Some("sda")).is_empty(), "another device");
    }

    #[test]
    fn a_victim_held_by_its_own_limits_is_said_so() {
        let v = cg(1, "/a");
        let delta = Snapshot {
            io: vec![io(&v, Op::Read, 100, 409_600, 3.0)],
            culprits: vec![culprit(&v, None, Op::Read, 1.0)],
            ..Default::default()
        };
        let a = &accounts(&delta, None)[0];
        assert_eq!(
            line(a),
            "/a on nvme0n1: 4.00s of request time, 75% held by its own limits, 25% its own service"
        );
        assert_eq!((a.own_limits(), a.main_culprit()), (0.75, None));
    }

    #[test]
    fn a_victim_that_mostly_served_itself_is_in_the_panel_while_held_a_tenth() {
        let (v, hog) = (cg(1, "/a"), cg(2, "/hog"));
        let delta = Snapshot {
            culprits: vec![
                culprit(&v, Some(&hog), Op::Write, 0.2),
                culprit(&v, None, Op::Read, 0.8),
            ],
            ..Default::default()
        };
        assert!(render_panel(&delta, None, 5).contains("20% behind /hog's 0 B writes"));
        let mostly_own = Snapshot {
            culprits: vec![
                culprit(&v, Some(&hog), Op::Write, 0.05),
                culprit(&v, None, Op::Read, 0.95),
            ],
            ..Default::default()
        };
        assert_eq!(render_panel(&mostly_own, None, 5), "");
    }

    #[test]
    fn the_account_says_the_victims_io_pressure_beside_it() {
        let (v, hog) = (cg(1, "/a"), cg(2, "/hog"));
        let delta = Snapshot {
            window_seconds: 2.0,
            culprits: vec![
                culprit(&v, Some(&hog), Op::Write, 0.6),
                culprit(&v, None, Op::Read, 0.4),
            ],
            io_pressure: vec![iowarden_exporters::PressureSeries {
                cgroup: v.clone(),
                some_seconds: 1.5,
                full_seconds: 1.0,
            }],
            ..Default::default()
        };
        let panel = render_panel(&delta, None, 5);
        assert!(
            panel.ends_with("; io pressure: some 75% full 50%\n"),
            "{panel}"
        );
    }

    #[test]
    fn the_schedulers_wait_behind_a_culprit_joins_its_device_wait() {
        let (v, hog) = (cg(1, "/a"), cg(2, "/hog"));
        let delta = Snapshot {
            io: vec![
                // 5 s queued: 4 s behind the hog's writes in the scheduler,
                // 0.4 s behind its own, the rest before the scheduler.
                io_queued(&v, Op::Read, 100, 409_600, 0.0, 5.0),
                io(&hog, Op::Write, 10, 1_310_720, 0.0),
            ],
            culprits: vec![
                queued_behind(&v, Some(&hog), Op::Write, 4.0, Stage::Queue),
                queued_behind(&v, Some(&v), Op::Read, 0.4, Stage::Queue),
                culprit(&v, Some(&hog), Op::Write, 3.0),
                culprit(&v, None, Op::Read, 2.0),
            ],
            ..Default::default()
        };
        let a = &accounts(&delta, None)[0];
        assert_eq!(a.seconds, 10.0, "queue stage 5 s and device time 5 s");
        assert_eq!(
            line(a),
            "/a on nvme0n1: 10.00s of request time, 70% behind /hog's 128 KiB writes, \
             20% its own service, 6% queued before issue, 4% behind its own requests"
        );
    }

    #[test]
    fn the_aggregate_is_named_other_cgroups_as_victim_and_culprit() {
        use iowarden_exporters::{OTHER_CGROUP, OTHER_CGROUP_ID};
        let (v, other) = (cg(1, "/a"), cg(OTHER_CGROUP_ID, OTHER_CGROUP));
        let delta = Snapshot {
            io: vec![io(&other, Op::Write, 10, 40_960, 0.0)],
            culprits: vec![
                culprit(&v, Some(&other), Op::Write, 3.0),
                culprit(&v, None, Op::Read, 1.0),
                culprit(&other, Some(&other), Op::Write, 1.0),
                culprit(&other, None, Op::Write, 1.0),
            ],
            ..Default::default()
        };
        let lines: Vec<String> = accounts(&delta, None).iter().map(line).collect();
        assert_eq!(
            lines,
            [
                "/a on nvme0n1: 4.00s of request time, 75% behind other cgroups' 4 KiB writes, \
                 25% its own service",
                "other cgroups on nvme0n1: 2.00s of request time, 50% behind requests of other \
                 cgroups, 50% its own service"
            ]
        );
    }
}
