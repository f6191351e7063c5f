//! The search from a QoS already configured on a cost model the user set
//! (issue 56: from the tightest fixed QoS, m-47 converged after 61-117 s).

use super::tests::{climb, observing, slo};
use super::*;

/// The first period under a QoS admitting `admitted` %: the SLO at
/// `ratio` of its 2 ms target, the device completing `cost_rate` of the
/// capacity of a model set by the user (`declared`) or not.
fn as_found(ratio: f64, cost_rate: f64, declared: bool) -> Measurement {
    let mut m = slo(0.002 * ratio, 0.002, 1000);
    m.cost_rate = cost_rate;
    m.admitted = Some(20.0);
    m.model_declared = declared;
    m
}

/// Met with slack at m-47's tightest fixed QoS (vrate 20 %, 21.1 % of the
/// model's capacity completed) on a model the user set: the start is where
/// that model says the device is loaded 40 %, the climb goes at least
/// halfway to its knee each step and stops there, and says why; no probe
/// passes it later.
#[test]
fn a_model_the_user_set_bounds_the_climb_at_its_knee() {
    let mut c = observing();
    let d = c.decide(&as_found(0.3, 0.211, true));
    assert_eq!((d.action, d.to), (Action::Start, 40.0), "{d:?}");
    assert!(
        d.reason.contains("start at 40% of that capacity, where a queue's waits double, and the climb to at most 80% of the capacity of the cost model the user set (ctrl=user)"),
        "{}",
        d.reason
    );
    let (ups, d) = climb(&mut c, &slo(0.0002, 0.002, 1000));
    assert_eq!(ups, [56.57, 71.54, 80.0]);
    assert_eq!((d.action, d.to), (Action::Converged, 80.0), "{d:?}");
    assert!(
        d.reason
            .contains("at most 80% of 100.00%, the capacity of the cost model the user set"),
        "{}",
        d.reason
    );
    for _ in 0..30 {
        let d = c.decide(&slo(0.0002, 0.002, 1000));
        assert_eq!((d.action, d.to), (Action::Hold, 80.0), "{d:?}");
    }
}

/// The halfway step is taken only with the SLO at most half its aim: above
/// it, the headroom's step (x1.10 at 60 % of the target), two periods each.
#[test]
fn near_its_aim_the_climb_to_the_knee_takes_the_headroom_step() {
    let mut c = observing();
    let d = c.decide(&as_found(0.6, 0.211, true));
    // 21.1 % up x1.09 for the headroom: below 40 %, but the SLO too close.
    assert_eq!((d.action, d.to), (Action::Start, 22.96), "{d:?}");
    assert!(
        d.reason.contains("up for the headroom (22.96%)"),
        "{}",
        d.reason
    );
    assert_eq!(c.decide(&slo(0.0012, 0.002, 1000)).action, Action::Hold);
    let d = c.decide(&slo(0.0012, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Increase, 25.26), "{d:?}");
    assert!(
        d.reason.contains("up x1.10 for that headroom"),
        "{}",
        d.reason
    );
}

/// Without a model the user set (the kernel's own, ctrl=auto: its capacity
/// says nothing of the device), or where the device already completed
/// more than the knee with the SLO met, the start is as before: the rate
/// completed up by the headroom, the climb bounded only by a miss.
#[test]
fn the_models_capacity_counts_only_where_the_user_set_it() {
    let d = observing().decide(&as_found(0.3, 0.211, false));
    assert_eq!((d.action, d.to), (Action::Start, 25.2), "{d:?}");
    assert!(d.reason.ends_with("met, start there, up x1.19 for the headroom: /lc read-p99 0.600ms + 0.000ms throttled (target 2.000ms, 1000 I/Os); device 100.0 MB/s 1000 IOPS, 21.1% of the cost model's capacity"), "{}", d.reason);
    let mut c = observing();
    let d = c.decide(&as_found(0.3, 0.85, true));
    assert_eq!((d.action, d.to), (Action::Start, 100.0), "{d:?}");
    let d = c.decide(&slo(0.0002, 0.002, 1000));
    assert!(!d.reason.contains("user set"), "{}", d.reason);
    // Missed as found: the rate measured is the pace, not the capacity.
    let mut c = observing();
    assert_eq!(c.decide(&as_found(5.0, 1.0, true)).to, 40.0);
    let (_, d) = climb(&mut c, &slo(0.0002, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Converged, 80.0), "{d:?}");
    assert!(
        d.reason
            .contains("the device completed with iocost as found"),
        "{}",
        d.reason
    );
}

/// Above a QoS that was the limit, the period after the first pin drains
/// what iocost held back (m-47's 50 reads/s reader, held at the tightest
/// QoS, sent 275 reads there and missed at 119-156 %): a miss whose later
/// part met holds the pin; otherwise it lowers v by x0.7 without marking
/// the pin a known miss, so the climb may return to it.
#[test]
fn the_period_after_leaving_a_limiting_qos_drains_what_it_held() {
    let released = |late_observed: f64| {
        let mut m = slo(0.0024, 0.002, 275);
        m.late_slos = slo(late_observed, 0.002, 125).slos;
        m
    };
    for declared in [true, false] {
        let mut c = observing();
        let start = c.decide(&as_found(0.3, 0.211, declared)).to;
        assert!(c.draining(), "{declared}");
        let d = c.decide(&released(0.001));
        assert_eq!((d.action, d.to), (Action::Hold, start), "{d:?}");
        assert!(
            d.reason
                .contains("after the first pin, met after its first 1 s (50%): what queued or was held before the pin draining"),
            "{}",
            d.reason
        );
    }
    let mut c = observing();
    c.decide(&as_found(0.3, 0.211, true));
    let d = c.decide(&released(0.0024));
    assert_eq!((d.action, d.to), (Action::Decrease, 28.0), "{d:?}");
    assert_eq!(c.bracket(), (None, None));
    // Below what was found (a QoS that met with room), nothing was held.
    let mut c = observing();
    c.decide(&as_found(0.9, 0.211, false));
    assert!(!c.draining());
}
