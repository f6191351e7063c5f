//! Whom each cgroup waited behind (`--culprits`): a victim's time in one
//! window split into what its own limits held (the throttle stage), its
//! queue stage and its device time. The device time is split by whose
//! requests shared the device with it (its own: its own queue; none: its
//! own service), the queue stage by whose requests the I/O scheduler
//! issued meanwhile (the rest, before the scheduler or without one, is
//! "queued"). The verdict names the culprit that took most of a victim's
//! time. Pure functions of a delta snapshot.

use std::collections::BTreeMap;

use iowarden_exporters::{Op, Snapshot, Stage};

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
    /// scheduler (which issued them first): their mean size.
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

    /// What slowed it beyond its own service: others or its own limits.
    fn held_up(&self) -> f64 {
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
    let mut parts: BTreeMap<(&str, &str), Vec<(Part, f64)>> = BTreeMap::new();
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
                    cgroup: p.path.clone(),
                    op,
                    mean_bytes: if ios > 0 {
                        bytes as f64 / ios as f64
                    } else {
                        0.0
                    },
                }
            }
        };
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
                victim: v.to_string(),
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

fn describe(part: &Part) -> String {
    match part {
        Part::OwnLimits => "held by its own limits".into(),
        Part::Queued => "queued before issue".into(),
        Part::Behind {
            cgroup,
            op,
            mean_bytes,
        } => format!(
            "behind {cgroup}'s {} {}s",
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
        .map(|(p, s)| format!("{:.0}% {}", 100.0 * s / a.seconds, describe(p)))
        .collect();
    format!(
        "{} on {}: {} of request time, {}",
        a.victim,
        a.device,
        fmt_time(a.seconds),
        parts.join(", ")
    )
}

/// The verdict when a victim spent at least half its time behind other
/// cgroups, or held by its own limits: measured, it replaces the inferred
/// one.
pub fn verdict(delta: &Snapshot, device: Option<&str>) -> Option<String> {
    let all = accounts(delta, device);
    let max_by = |f: fn(&Account) -> f64| {
        all.iter()
            .max_by(|a, b| f(a).total_cmp(&f(b)))
            .filter(|a| f(a) >= 0.5)
    };
    if let Some(a) = max_by(Account::behind_others) {
        return Some(format!("waited behind others: {}", line(a)));
    }
    max_by(Account::own_limits).map(|a| format!("held by its own limits: {}", line(a)))
}

/// The panel under `top`'s table: the victims most held up.
pub fn render_panel(delta: &Snapshot, device: Option<&str>, n: usize) -> String {
    accounts(delta, device)
        .iter()
        .filter(|a| a.held_up() >= 0.1)
        .take(n)
        .map(|a| format!("culprits {}\n", line(a)))
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
        assert!(verdict(&delta, None).unwrap().contains("71% behind /hog's"));
        assert_eq!(verdict(&delta, Some("sda")), None, "another device");
    }

    #[test]
    fn a_victim_held_by_its_own_limits_is_said_so() {
        let v = cg(1, "/a");
        let delta = Snapshot {
            io: vec![io(&v, Op::Read, 100, 409_600, 3.0)],
            culprits: vec![culprit(&v, None, Op::Read, 1.0)],
            ..Default::default()
        };
        assert_eq!(
            verdict(&delta, None).unwrap(),
            "held by its own limits: /a on nvme0n1: 4.00s of request time, 75% held by its own \
             limits, 25% its own service"
        );
    }

    #[test]
    fn no_verdict_when_the_victim_mostly_served_itself() {
        let (v, hog) = (cg(1, "/a"), cg(2, "/hog"));
        let delta = Snapshot {
            culprits: vec![
                culprit(&v, Some(&hog), Op::Write, 0.2),
                culprit(&v, None, Op::Read, 0.8),
            ],
            ..Default::default()
        };
        assert_eq!(verdict(&delta, None), None);
        assert!(render_panel(&delta, None, 5).contains("20% behind /hog's 0 B writes"));
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
}
