//! Every configured io limit judged against the evidence: acting (it held
//! I/O), idle (set, nothing held), in effect (its hold is not measured
//! here) or not in effect, with the reason in words a user can act on.
//! Pure.

use iowarden_exporters::{LimitKnob, LimitReason, LimitState, LimitVerdict};

use super::evidence::{DeviceFacts, Evidence};
use super::latency;

/// Every knob judged on its device, or on each device its cgroup used.
pub fn judge_all(knobs: &[LimitKnob], ev: &Evidence) -> Vec<LimitVerdict> {
    knobs.iter().flat_map(|k| judge(k, ev)).collect()
}

/// A state with its reason: every verdict names both.
type Judged = (LimitState, LimitReason);

const NOT_IN_EFFECT: LimitState = LimitState::NotInEffect;

fn verdict(k: &LimitKnob, device: &str, (state, reason): Judged, why: String) -> LimitVerdict {
    LimitVerdict {
        knob: k.clone(),
        device: device.to_string(),
        state,
        reason,
        why,
    }
}

fn no_io(k: &LimitKnob, device: &str) -> LimitVerdict {
    let judged = (LimitState::Idle, LimitReason::NoIo);
    verdict(k, device, judged, "no I/O in the window".into())
}

/// One knob: on its device, or (a default) on each device its cgroup used.
pub fn judge(k: &LimitKnob, ev: &Evidence) -> Vec<LimitVerdict> {
    if k.knob == "io" {
        let why = "the io controller is not enabled for it: no io knob can act (add io to its \
                   parent's cgroup.subtree_control)"
            .to_string();
        return vec![verdict(
            k,
            "*",
            (NOT_IN_EFFECT, LimitReason::IoNotDelegated),
            why,
        )];
    }
    let Some(devnum) = &k.devnum else {
        let used = ev.used_by(&k.cgroup);
        if used.is_empty() {
            return vec![no_io(k, "*")];
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
            (NOT_IN_EFFECT, LimitReason::NoDevice),
            format!("no device {devnum} on this host (removed, or re-created with another number)"),
        )],
    }
}

/// Why a weight-based or scheduler knob cannot act on `d`; None if it can.
fn missing_policy(knob: &str, d: &DeviceFacts) -> Option<(LimitReason, String)> {
    let bfq = d.scheduler == "bfq";
    match knob {
        "io.weight" => match d.iocost {
            Some(true) => None,
            Some(false) => Some((
                LimitReason::IocostDisabled,
                format!(
                    "iocost is configured on {} but enable=0 in io.cost.qos{}",
                    d.name,
                    if bfq {
                        " (bfq reads io.bfq.weight, not io.weight)"
                    } else {
                        ""
                    }
                ),
            )),
            None => Some((
                LimitReason::NoWeightPolicy,
                format!(
                    "no weight-based policy on {}: iocost is off (io.cost.qos) and io.weight is \
                     iocost's{}",
                    d.name,
                    if bfq { "; bfq reads io.bfq.weight" } else { "" }
                ),
            )),
        },
        "io.bfq.weight" | "blkio.bfq.weight" | "blkio.weight" if !bfq => Some((
            LimitReason::NotBfq,
            format!(
                "{}'s scheduler is {}, not bfq: no weight-based policy reads it",
                d.name,
                if d.scheduler.is_empty() {
                    "none (a bio-based volume)"
                } else {
                    &d.scheduler
                }
            ),
        )),
        _ => None,
    }
}

/// Whether knob `k` limits writes: an io.max write limit, or a weight.
pub(super) fn limits_writes(k: &LimitKnob) -> bool {
    match k.knob.as_str() {
        "io.max" => k
            .value
            .split_whitespace()
            .any(|f| (f.starts_with("wbps=") || f.starts_with("wiops=")) && !f.ends_with("=max")),
        "io.weight" | "io.bfq.weight" => true,
        _ => false,
    }
}

/// Mounts on `d` whose buffered writes escape write limits, listed.
fn root_writeback_mounts(d: &DeviceFacts) -> String {
    let mounts: Vec<String> = d.root_writeback.iter().map(|m| m.describe()).collect();
    mounts.join(", ")
}

/// On cgroup v2, for a write limit `k` on `d` under which the cgroup did
/// no I/O in the window while it holds dirty page cache: why its buffered
/// writes may escape, through a mount on `d` without cgroup writeback.
/// None without such a mount or dirty pages (v1 has its own reason).
fn escaping_writeback(k: &LimitKnob, d: &DeviceFacts, ev: &Evidence) -> Option<String> {
    if ev.cgroup_v1 || d.root_writeback.is_empty() || !limits_writes(k) {
        return None;
    }
    let dirty = *ev.dirty_bytes.get(&k.cgroup)?;
    (dirty > 0).then(|| {
        format!(
            "no I/O charged to it on {} while it holds {:.1} MiB of dirty page cache: buffered \
             writes through {} escape it (no cgroup writeback there: the flusher writes them \
             back charged to the root cgroup); only direct writes are limited",
            d.name,
            dirty as f64 / (1 << 20) as f64,
            root_writeback_mounts(d)
        )
    })
}

/// A knob on a device that exists.
fn judge_on(k: &LimitKnob, d: &DeviceFacts, ev: &Evidence) -> LimitVerdict {
    if let Some((reason, why)) = missing_policy(&k.knob, d) {
        return verdict(k, &d.name, (NOT_IN_EFFECT, reason), why);
    }
    let here = ev
        .activity
        .get(&(k.cgroup.clone(), d.name.clone()))
        .copied()
        .unwrap_or_default();
    if here.ios == 0 {
        // Buffered writes that escape the limit show as no I/O.
        if let Some(why) = escaping_writeback(k, d, ev) {
            let judged = (LimitState::InEffect, LimitReason::WritebackToRoot);
            return verdict(k, &d.name, judged, why);
        }
        let elsewhere: Vec<&str> = ev.used_by(&k.cgroup).iter().map(|(n, _)| *n).collect();
        if elsewhere.is_empty() {
            return no_io(k, &d.name);
        }
        let why = format!(
            "its I/O in the window went to {}, none of it charged to it on {}",
            elsewhere.join(", "),
            d.name
        );
        return verdict(k, &d.name, (NOT_IN_EFFECT, LimitReason::IoElsewhere), why);
    }
    if k.knob == "io.latency" {
        let (state, reason, why) = latency::judge_target(k, d, ev, &here);
        return verdict(k, &d.name, (state, reason), why);
    }
    let throttle = k.knob == "io.max" || k.knob.starts_with("blkio.throttle.");
    let in_effect = LimitState::InEffect;
    if throttle && ev.cgroup_v1 && k.knob.contains("write") {
        // Direct writes are limited; buffered ones are written back later
        // by the flusher threads, charged to the root on cgroup v1.
        let why = "cgroup v1: only direct writes are limited; buffered writes are written back \
                   by the flusher threads, charged to the root cgroup";
        return verdict(
            k,
            &d.name,
            (in_effect, LimitReason::V1BufferedWrites),
            why.into(),
        );
    }
    let held = if throttle {
        if let Err(why) = &ev.io_max_timed {
            let why = format!("{} I/Os; its holds are not timed here: {why}", here.ios);
            return verdict(k, &d.name, (in_effect, LimitReason::HoldsNotTimed), why);
        }
        here.held_io_max_seconds
    } else {
        (here.held_seconds - here.held_io_max_seconds).max(0.0)
    };
    // Measured: the verdict stands, and says what it cannot see.
    let unseen = if !ev.cgroup_v1 && limits_writes(k) && !d.root_writeback.is_empty() {
        format!(
            "; buffered writes through {} would escape it (no cgroup writeback)",
            root_writeback_mounts(d)
        )
    } else {
        String::new()
    };
    if held > 0.0 {
        let why = format!(
            "held its {} I/Os {:.3} s in all, {:.3} ms each on average{unseen}",
            here.ios,
            held,
            held * 1e3 / here.ios as f64
        );
        return verdict(k, &d.name, (LimitState::Acting, LimitReason::Held), why);
    }
    let why = format!("{} I/Os, none held{unseen}", here.ios);
    verdict(k, &d.name, (LimitState::Idle, LimitReason::NoneHeld), why)
}
