//! io.latency judged by what it does: a cgroup's target holds the cgroups
//! beside it (its siblings and their subtrees, whose queue depth the kernel
//! scales down while the target is missed, and whose tasks it may delay),
//! not the cgroup itself. Pure.

use iowarden_exporters::{LimitKnob, LimitReason, LimitState};

use super::evidence::{Activity, DeviceFacts, Evidence};

/// The part of the read time of the cgroups beside it spent in rq-qos
/// waits from which a target is acting. Unheld, a read spends the
/// allocation path there (microseconds, well under 1 % of its time); a
/// depth scaled down makes reads wait for each other's completions.
const ACTING_WAIT_SHARE: f64 = 0.05;

/// Whether `path` is beside `cgroup`: below its parent, not `cgroup` or
/// below it. A top-level cgroup's parent is the root, whose own I/O
/// io.latency never holds.
fn is_beside(cgroup: &str, path: &str) -> bool {
    let parent = cgroup.rsplit_once('/').map_or("", |(p, _)| p);
    let below = |p: &str, top: &str| p.strip_prefix(top).is_some_and(|r| r.starts_with('/'));
    path != "/" && below(path, parent) && path != cgroup && !below(path, cgroup)
}

/// The io.latency line `k` on device `d`, where its cgroup did `own` I/O.
pub(super) fn judge_target(
    k: &LimitKnob,
    d: &DeviceFacts,
    ev: &Evidence,
    own: &Activity,
) -> (LimitState, LimitReason, String) {
    let (beside, who) = ev.on_device_where(&d.name, |p| is_beside(&k.cgroup, p));
    if d.iocost == Some(true) {
        let why = format!(
            "iocost is enabled on {}: the waits of the cgroups beside it are iocost's and \
             io.latency's together, not told apart",
            d.name
        );
        return (LimitState::InEffect, LimitReason::HoldsNotTimed, why);
    }
    if beside.reads == 0 {
        let why = format!(
            "{} I/Os of its own, no reads beside it on {}: nothing to hold",
            own.ios, d.name
        );
        return (LimitState::Idle, LimitReason::NoneHeld, why);
    }
    let share = beside.read_waits_seconds / beside.read_seconds.max(1e-12);
    let named = match who.as_slice() {
        [] => String::new(),
        [one] => one.to_string(),
        [first, rest @ ..] => format!("{first} and {} more", rest.len()),
    };
    if share >= ACTING_WAIT_SHARE {
        let why = format!(
            "held the {} reads beside it ({named}) {:.3} s in all, {:.0} % of their time \
             (io.latency scales their depth down while its target is missed; writes not \
             counted: wbt's waits are not told apart)",
            beside.reads,
            beside.read_waits_seconds,
            share * 100.0
        );
        return (LimitState::Acting, LimitReason::Held, why);
    }
    let why = format!(
        "{} I/Os of its own; the {} reads beside it ({named}) waited {:.1} % of their time \
         before a request existed: none held",
        own.ios,
        beside.reads,
        share * 100.0
    );
    (LimitState::Idle, LimitReason::NoneHeld, why)
}

#[cfg(test)]
mod tests {
    use super::is_beside;

    #[test]
    fn beside_is_the_siblings_and_their_subtrees() {
        assert!(is_beside("/p/a", "/p/b"));
        assert!(is_beside("/p/a", "/p/b/c"));
        assert!(is_beside("/a", "/b"));
        assert!(!is_beside("/p/a", "/p/a"));
        assert!(!is_beside("/p/a", "/p/a/c"));
        assert!(!is_beside("/p/a", "/p"));
        assert!(!is_beside("/p/a", "/q/b"));
        assert!(
            is_beside("/p/a", "/p/ab"),
            "a sibling whose name starts with a's"
        );
        assert!(!is_beside("/a", "/"));
    }
}
