//! Every configured io limit judged against what the probes measured over
//! a window: acting (it held I/O), idle (set, nothing held), in effect
//! (its hold is not measured here) or not in effect, with the reason in
//! words a user can act on. Pure: read.rs gathers the configuration and
//! the devices from the host, the snapshot gives the activity.

pub mod read;

use std::collections::BTreeMap;

use iowarden_exporters::Snapshot;
use serde::Serialize;

/// A device as the judge needs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceFacts {
    /// "MAJ:MIN", as the knobs name it.
    pub devnum: String,
    pub name: String,
    /// The active I/O scheduler ("none", "mq-deadline", "bfq", ...; "" for
    /// a bio-based volume).
    pub scheduler: String,
    /// iocost on this device: None when io.cost.qos does not list it,
    /// Some(enabled) when it does.
    pub iocost: Option<bool>,
}

/// One configured knob line of one cgroup.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Configured {
    pub cgroup: String,
    /// io.max, io.weight, io.bfq.weight, io.latency; blkio.throttle.* and
    /// blkio.weight on cgroup v1; "io" for a cgroup without the controller.
    pub knob: String,
    /// "MAJ:MIN", or None for a cgroup-wide default.
    pub devnum: Option<String>,
    pub value: String,
}

/// What a cgroup did on a device over the window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Activity {
    pub ios: u64,
    pub held_io_max_seconds: f64,
    /// The throttle stage's sum: io.max's hold and the rq-qos waits.
    pub held_seconds: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Acting,
    Idle,
    InEffect,
    NotInEffect,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Acting => "acting",
            State::Idle => "idle",
            State::InEffect => "in effect",
            State::NotInEffect => "not in effect",
        }
    }
}

/// A knob on one device, judged.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    #[serde(flatten)]
    pub knob: Configured,
    /// The device judged on (a default weight: each device the cgroup used).
    pub device: String,
    pub state: State,
    pub why: String,
}

/// What the judge reads: the devices, the window's activity by (cgroup,
/// device name), and whether io.max holds are timed here (else why not).
pub struct Evidence {
    pub devices: Vec<DeviceFacts>,
    pub activity: BTreeMap<(String, String), Activity>,
    pub io_max_timed: Result<(), String>,
    /// Cgroup v1: writeback is never charged to the cgroup that wrote.
    pub cgroup_v1: bool,
}

impl Evidence {
    /// The activity of every (cgroup, device) in `snap` (a window), and
    /// whether the blk-throttle program ran.
    pub fn from_snapshot(snap: &Snapshot, devices: Vec<DeviceFacts>, cgroup_v1: bool) -> Evidence {
        let mut activity: BTreeMap<(String, String), Activity> = BTreeMap::new();
        for s in &snap.io {
            let a = activity
                .entry((s.cgroup.path.clone(), s.device.name.clone()))
                .or_default();
            a.ios += s.ios;
            a.held_io_max_seconds += s.held_io_max_seconds;
            a.held_seconds += s.latency.throttle.sum_seconds;
        }
        let io_max_timed = match snap.probes.iter().find(|p| p.name == "throtl_held") {
            Some(p) if !p.active => Err(p.reason.clone()),
            _ => Ok(()),
        };
        Evidence {
            devices,
            activity,
            io_max_timed,
            cgroup_v1,
        }
    }

    fn device(&self, devnum: &str) -> Option<&DeviceFacts> {
        self.devices.iter().find(|d| d.devnum == devnum)
    }

    /// The devices `cgroup` did I/O on, with what it did.
    fn used_by(&self, cgroup: &str) -> Vec<(&str, Activity)> {
        self.activity
            .iter()
            .filter(|((c, _), a)| c == cgroup && a.ios > 0)
            .map(|((_, d), a)| (d.as_str(), *a))
            .collect()
    }
}

/// Every knob judged on its device, or on each device its cgroup used.
pub fn judge_all(knobs: &[Configured], ev: &Evidence) -> Vec<Verdict> {
    knobs.iter().flat_map(|k| judge(k, ev)).collect()
}

fn verdict(k: &Configured, device: &str, state: State, why: String) -> Verdict {
    Verdict {
        knob: k.clone(),
        device: device.to_string(),
        state,
        why,
    }
}

/// One knob: on its device, or (a default) on each device its cgroup used.
pub fn judge(k: &Configured, ev: &Evidence) -> Vec<Verdict> {
    if k.knob == "io" {
        let why = "the io controller is not enabled for it: no io knob can act (add io to its \
                   parent's cgroup.subtree_control)"
            .to_string();
        return vec![verdict(k, "*", State::NotInEffect, why)];
    }
    let Some(devnum) = &k.devnum else {
        let used = ev.used_by(&k.cgroup);
        if used.is_empty() {
            return vec![verdict(k, "*", State::Idle, "no I/O in the window".into())];
        }
        return used
            .iter()
            .filter_map(|(name, _)| ev.devices.iter().find(|d| d.name == *name))
            .map(|d| judge_on(k, d, ev))
            .collect();
    };
    match ev.device(devnum) {
        Some(d) => vec![judge_on(k, d, ev)],
        None => vec![verdict(
            k,
            devnum,
            State::NotInEffect,
            format!("no device {devnum} on this host (removed, or re-created with another number)"),
        )],
    }
}

/// Why a weight-based or scheduler knob cannot act on `d`; None if it can.
fn missing_policy(knob: &str, d: &DeviceFacts) -> Option<String> {
    let bfq = d.scheduler == "bfq";
    match knob {
        "io.weight" => match d.iocost {
            Some(true) => None,
            Some(false) => Some(format!(
                "iocost is configured on {} but enable=0 in io.cost.qos{}",
                d.name,
                if bfq {
                    " (bfq reads io.bfq.weight, not io.weight)"
                } else {
                    ""
                }
            )),
            None => Some(format!(
                "no weight-based policy on {}: iocost is off (io.cost.qos) and io.weight is \
                 iocost's{}",
                d.name,
                if bfq { "; bfq reads io.bfq.weight" } else { "" }
            )),
        },
        "io.bfq.weight" | "blkio.bfq.weight" | "blkio.weight" if !bfq => Some(format!(
            "{}'s scheduler is {}, not bfq: no weight-based policy reads it",
            d.name,
            if d.scheduler.is_empty() {
                "none (a bio-based volume)"
            } else {
                &d.scheduler
            }
        )),
        _ => None,
    }
}

/// A knob on a device that exists.
fn judge_on(k: &Configured, d: &DeviceFacts, ev: &Evidence) -> Verdict {
    if let Some(why) = missing_policy(&k.knob, d) {
        return verdict(k, &d.name, State::NotInEffect, why);
    }
    let here = ev
        .activity
        .get(&(k.cgroup.clone(), d.name.clone()))
        .copied()
        .unwrap_or_default();
    if here.ios == 0 {
        let elsewhere: Vec<&str> = ev.used_by(&k.cgroup).iter().map(|(n, _)| *n).collect();
        return match elsewhere.is_empty() {
            true => verdict(k, &d.name, State::Idle, "no I/O in the window".into()),
            false => verdict(
                k,
                &d.name,
                State::NotInEffect,
                format!(
                    "its I/O in the window went to {}, none of it charged to it on {}",
                    elsewhere.join(", "),
                    d.name
                ),
            ),
        };
    }
    let throttle = k.knob == "io.max" || k.knob.starts_with("blkio.throttle.");
    if throttle && ev.cgroup_v1 && k.knob.contains("write") {
        // Direct writes are limited; buffered ones are written back later
        // by the flusher threads, charged to the root on cgroup v1.
        return verdict(
            k,
            &d.name,
            State::InEffect,
            "cgroup v1: only direct writes are limited; buffered writes are written back by the \
             flusher threads, charged to the root cgroup"
                .into(),
        );
    }
    let per_io = |s: f64| s * 1e3 / here.ios as f64;
    let held = if throttle {
        if let Err(why) = &ev.io_max_timed {
            return verdict(
                k,
                &d.name,
                State::InEffect,
                format!("{} I/Os; its holds are not timed here: {why}", here.ios),
            );
        }
        here.held_io_max_seconds
    } else {
        (here.held_seconds - here.held_io_max_seconds).max(0.0)
    };
    match held > 0.0 {
        true => verdict(
            k,
            &d.name,
            State::Acting,
            format!(
                "held its {} I/Os {:.3} s in all, {:.3} ms each on average",
                here.ios,
                held,
                per_io(held)
            ),
        ),
        false => verdict(
            k,
            &d.name,
            State::Idle,
            format!("{} I/Os, none held", here.ios),
        ),
    }
}

#[cfg(test)]
mod tests;
