//! The search from iocost off (issue 56): the first period observed, the
//! first pin from it, and the climb bounded by what each period measured,
//! against m-47's plant.

use super::super::plant::Plant;
use super::tests::{climb, observing, slo, starting_at};
use super::*;

/// A period at `observed` against a 2 ms target, the device completing
/// `cost_rate` of the cost model's capacity.
fn found(observed: f64, cost_rate: f64) -> Measurement {
    let mut m = slo(observed, 0.002, 1000);
    m.cost_rate = cost_rate;
    m
}

/// m-47's plant (issue 56): a hog whose phases cost the device 1x and 2x
/// what the model charges (4 s each in 3 s periods), a QD1 protected reader
/// (about 6,000 reads a period unloaded), the SLO allowing at most 50 % of
/// vrate.
fn m47_plant(seed: u64, phase_cost: f64) -> Plant {
    let mut plant = Plant {
        phase_cost: vec![1.0, phase_cost],
        phase_periods: 4.0 / 3.0,
        qd1: true,
        lc_samples: 6000,
        ..Plant::random(seed)
    };
    // m-47's SLO is twice the p99 under the tightest fixed QoS: at least
    // 1.5x the unloaded p99 here (closer, its 10 % noise alone misses).
    plant.slo_target = plant.slo_target.max(1.5 * plant.base_p99_seconds);
    let allowed = plant.max_vrate_meeting(plant.slo_target);
    if allowed > 50.0 {
        plant.model_units_per_second *= allowed / 50.0;
    }
    plant
}

/// `periods` decisions of `iowarden tune` without --start, the first
/// period with iocost off: (periods missed, first convergence, a trace).
fn from_iocost_off(plant: &mut Plant, periods: usize) -> (usize, Option<usize>, String) {
    let mut c = Controller::new(ControllerConfig {
        vrate_min: 1.0,
        vrate_max: 800.0,
        start: 800.0,
        observe_first: true,
        ..Default::default()
    });
    let (mut missed, mut conv, mut trace) = (0, None, String::new());
    for i in 0..periods {
        let v = if c.observing() {
            f64::INFINITY
        } else {
            c.vrate()
        };
        let m = plant.period(v);
        let ratio = m.slos[0].effective() / plant.slo_target;
        missed += usize::from(ratio > 1.0);
        let d = c.decide(&m);
        if d.action == Action::Converged && conv.is_none() {
            conv = Some(i);
        }
        trace += &format!(
            "  {i:2} {:>4.0}% {:<10} {:7.2} -> {:7.2}\n",
            ratio * 100.0,
            d.action.as_str(),
            d.from,
            d.to
        );
    }
    (missed, conv, trace)
}

/// Issue 56: from iocost off, the SLO is missed in at most 10 % of all
/// periods from the first (the observed one included) on at least 36 of 40
/// plants and in at most 4 of 36 on any, and the search converges within
/// 20 periods (60 s at 3 s) on every one. The phases differ by 1.25x: the
/// kernel's default SSD model against m-47's caps errs by 17-20x (500/s),
/// 4.3-5.2x (2000/s) and 1.06-1.3x (8000/s) between its 4 KiB and 128 KiB
/// reads.
#[test]
fn from_iocost_off_few_misses_from_the_first_period() {
    let periods = 36;
    let (mut within, mut bad) = (0, Vec::new());
    for seed in 1..41u64 {
        let mut plant = m47_plant(seed, 1.25);
        let (missed, conv, trace) = from_iocost_off(&mut plant, periods);
        within += usize::from(missed * 10 <= periods);
        if missed > 4 || conv.is_none_or(|p| p >= 20) {
            bad.push(format!(
                "seed {seed}: SLO allows {:.1} %, missed {missed} of {periods}, converged at {conv:?}\n{trace}",
                plant.max_vrate_meeting(plant.slo_target)
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of 40 plants fail:\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert!(within >= 36, "{within} of 40 plants within 10 %");
}

/// Without --start the first period writes nothing: missed with iocost as
/// found, the search starts at 40 % of the cost rate the device completed
/// (all of it is a known miss); met, at `start`; a period too thin to
/// judge waits for the next.
#[test]
fn without_start_the_first_period_observes_the_device_as_found() {
    let mut c = observing();
    assert!(c.observing());
    let d = c.decide(&slo(0.006, 0.002, 50));
    assert_eq!(d.action, Action::Insufficient);
    assert!(c.observing());
    let d = c.decide(&found(0.006, 0.5));
    assert_eq!(
        (d.action, d.from, d.to),
        (Action::Start, 20.0, 20.0),
        "{d:?}"
    );
    assert!(
        d.reason
            .contains("completing 50.0% of the cost model's capacity"),
        "{}",
        d.reason
    );
    assert_eq!(c.bracket(), (None, Some(50.0)));
    assert!(!c.observing());
    // Met as found (at 50 % of the target): what the device did, up x1.12
    // for the headroom; with nothing charged, the configured start.
    let d = observing().decide(&found(0.001, 0.5));
    assert_eq!((d.action, d.to), (Action::Start, 56.18), "{d:?}");
    let d = observing().decide(&found(0.001, 0.0));
    assert_eq!((d.action, d.to), (Action::Start, 100.0), "{d:?}");
    // Missed, but held in iocost's throttle as found: raising is the way
    // out, so the start too.
    let mut m = slo(0.001, 0.002, 1000);
    m.slos[0].throttle_seconds = 0.003;
    let d = observing().decide(&m);
    assert_eq!((d.action, d.to), (Action::Start, 100.0), "{d:?}");
    assert!(d.reason.contains("throttle"), "{}", d.reason);
}

/// Met with iocost not the limit (off, or admitting over a resolution more
/// than the device completed) and the device saturated: that rate is the
/// device's pace, the start
/// is its knee, where the search converges at once and stays, a probe
/// after long slack included (m-47 at 8000/s from iocost off met at
/// 88.6 %, started at 96.61 % and missed at once, then again at 87 %).
/// Met with iocost the limit, the start is that rate up for the headroom.
#[test]
fn met_with_iocost_not_the_limit_starts_at_the_knee_and_climbs_no_further() {
    let met = |admitted: f64, cost_rate: f64| {
        let mut m = found(0.001, cost_rate);
        m.admitted = Some(admitted);
        m.device_saturated = true;
        m
    };
    let mut c = observing();
    let d = c.decide(&met(f64::INFINITY, 0.886));
    assert_eq!((d.action, d.to), (Action::Start, 70.88), "{d:?}");
    assert!(
        d.reason
            .contains("met, iocost off, the device saturated: start at the knee, 80%"),
        "{}",
        d.reason
    );
    let d = c.decide(&slo(0.0002, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Converged, 70.88), "{d:?}");
    for _ in 0..30 {
        let d = c.decide(&slo(0.0002, 0.002, 1000));
        assert_eq!((d.action, d.to), (Action::Hold, 70.88), "{d:?}");
    }
    let d = observing().decide(&met(80.0, 0.6));
    assert_eq!((d.action, d.to), (Action::Start, 48.0), "{d:?}");
    assert!(d.reason.contains("iocost admitting 80.0%"), "{}", d.reason);
    // Within a resolution of what iocost admitted: iocost was the limit.
    let d = observing().decide(&met(61.2, 0.6));
    assert_eq!((d.action, d.to), (Action::Start, 67.41), "{d:?}");
    // Not known, or the device not saturated (the load lighter than it):
    // as with iocost the limit.
    let d = observing().decide(&found(0.001, 0.6));
    assert_eq!((d.action, d.to), (Action::Start, 67.41), "{d:?}");
    let mut light = met(f64::INFINITY, 0.6);
    light.device_saturated = false;
    let d = observing().decide(&light);
    assert_eq!((d.action, d.to), (Action::Start, 67.41), "{d:?}");
    // Nothing charged: the configured start.
    let d = observing().decide(&met(f64::INFINITY, 0.0));
    assert_eq!((d.action, d.to), (Action::Start, 100.0), "{d:?}");
}

/// Where iowarden measures the hold, the hold's own tail decides whether a
/// miss is iocost's doing: a 5 ms mean hold in a 15 ms p99 whose holds
/// reach 12 ms is (m-47 at 500 requests/s took it for queueing, and
/// lowering vrate held the reader longer); with holds of 2 ms it is not.
#[test]
fn a_miss_is_the_throttles_when_the_holds_are_most_of_the_tail() {
    let mut s = slo(0.015, 0.005, 1000).slos.remove(0);
    s.held_in_observed = true;
    s.throttle_seconds = 0.005;
    s.throttle_tail_seconds = Some(0.012);
    assert!(s.throttled());
    s.throttle_tail_seconds = Some(0.002);
    assert!(!s.throttled());
    // The mean alone (io.stat's cost.wait) still judges where the hold is
    // not measured.
    s.held_in_observed = false;
    s.throttle_tail_seconds = None;
    s.observed_seconds = Some(0.004);
    assert!(s.throttled());
}

/// Held in iocost's throttle at one vrate and queued a resolution above
/// it: no vrate meets the SLO at this load, and the tuner says so instead
/// of bisecting in ever smaller steps (m-47 at 2000 requests/s with a
/// reader filling half the device held 3.91 % for 30 periods saying "at
/// the lower bound", which was 1 %).
#[test]
fn queued_just_above_where_it_was_throttled_says_no_vrate_meets_it() {
    let mut c = starting_at(10.0);
    let mut held = slo(0.0005, 0.002, 1000);
    held.slos[0].throttle_seconds = 0.003;
    assert_eq!(c.decide(&held).to, 13.0);
    let queued = slo(0.004, 0.002, 1000);
    assert_eq!(c.decide(&queued).to, 11.5);
    assert_eq!(c.decide(&queued).to, 10.75);
    let d = c.decide(&queued);
    assert_eq!((d.action, d.to), (Action::Hold, 10.75), "{d:?}");
    assert!(
        d.reason.contains("no vrate meets it at this load"),
        "{}",
        d.reason
    );
}

/// The period after the first pin drains the queue iocost off built: a
/// miss there lowers v by the plain factor, not in proportion to its size
/// (m-47 at 500 requests/s: 4669 % of the target, 32 reads of 128 KiB
/// draining, halved v to the floor); the next miss is proportional again.
#[test]
fn the_period_after_the_first_pin_lowers_by_the_plain_factor() {
    let mut c = observing();
    assert_eq!(c.decide(&found(0.1, 1.0)).to, 40.0);
    let d = c.decide(&slo(0.1, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Decrease, 28.0), "{d:?}");
    let d = c.decide(&slo(0.1, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Decrease, 14.0), "{d:?}");
}

/// Nor does that miss mark the pin bad: met with slack after it, the climb
/// passes the pin, up to the knee of the rate found (m-47 at 2000
/// requests/s: a drain at 102 % of the target held the climb below the
/// pin, 9.44 %, for the rest of the run).
#[test]
fn the_period_after_the_first_pin_does_not_bound_the_climb() {
    let mut c = observing();
    assert_eq!(c.decide(&found(0.1, 0.5)).to, 20.0);
    let d = c.decide(&slo(0.00205, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Decrease, 14.0), "{d:?}");
    assert_eq!(c.bracket(), (None, Some(50.0)));
    let mut top = 0.0_f64;
    for _ in 0..20 {
        top = top.max(c.decide(&slo(0.0006, 0.002, 1000)).to);
    }
    assert_eq!(top, 40.0);
}

/// A model so optimistic that the first pin comes within 4x of
/// --vrate-min (the kernel's default SSD model on a 500 requests/s device:
/// the device completed 4.5 % of its capacity): the runner scales the
/// model's rates by that cost rate and the start follows, 40 % of the
/// device's capacity in the new model; without a scale the reason says
/// what to do. A start with room below asks for nothing.
#[test]
fn a_start_below_the_floor_asks_for_the_model_to_be_scaled() {
    let mut c = observing();
    let d = c.decide(&found(0.1, 0.045));
    assert_eq!((d.action, d.to), (Action::Start, 5.0), "{d:?}");
    assert!(
        d.reason.contains("within 4x of --vrate-min 5%"),
        "{}",
        d.reason
    );
    let factor = c.start_below_floor().expect("below the floor");
    assert!((factor - 0.045).abs() < 1e-12);
    assert_eq!(c.rescale(1.0 / factor), 40.0);
    assert_eq!(c.bracket(), (None, Some(100.0)));
    // Only right after the first pin.
    c.decide(&slo(0.001, 0.002, 1000));
    assert_eq!(c.start_below_floor(), None);
    let mut c = observing();
    assert_eq!(c.decide(&found(0.1, 0.6)).to, 24.0);
    assert_eq!(c.start_below_floor(), None);
}

/// A miss at the value a step up reached, met there once: back to the
/// value the step left, not down in proportion from the miss (m-47 at
/// 8000/s: 84 % met at 99 % of the target, then missed at 407 %, and the
/// search halved to 42 % where 75 % had held with slack).
#[test]
fn a_miss_after_a_step_up_returns_to_the_value_it_left() {
    let mut c = starting_at(50.0);
    let d = c.decide(&slo(0.0006, 0.002, 1000)); // 30 %: up x1.19
    assert_eq!((d.action, d.to), (Action::Increase, 59.71), "{d:?}");
    c.decide(&slo(0.0019, 0.002, 1000)); // met once, within the margin
    let d = c.decide(&slo(0.008, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Decrease, 50.0), "{d:?}");
}

/// Missed with iocost as found at 100 %: the climb from the first pin stops
/// at 80 % of it, and says why, and no probe passes it later (m-47 at 2000 requests/s converged at 89 %
/// of the found rate with the SLO at a third of its target, and the device
/// tipped a period later, at 2152 %).
#[test]
fn the_climb_stops_short_of_the_rate_found_saturated() {
    let mut c = observing();
    assert_eq!(c.decide(&found(0.1, 1.0)).to, 40.0);
    let (ups, d) = climb(&mut c, &slo(0.0002, 0.002, 1000));
    assert!(
        ups.iter().chain([&d.to]).all(|&v| v <= 80.0),
        "{ups:?} {d:?}"
    );
    assert_eq!(ups, [50.59, 63.98, 80.0]);
    assert_eq!((d.action, d.to), (Action::Converged, 80.0), "{d:?}");
    assert!(
        d.reason
            .contains("at most 80% of the 100.00% the device completed with iocost as found"),
        "{}",
        d.reason
    );
    // Nor does a probe after long slack.
    for _ in 0..30 {
        let d = c.decide(&slo(0.0002, 0.002, 1000));
        assert_eq!((d.action, d.to), (Action::Hold, 80.0), "{d:?}");
    }
}

/// Met within the margin at the knee: no step up is left, so it converges
/// at once instead of after `settle_periods` (m-47 at 2000/s from the
/// kernel's default QoS spent 10 s there).
#[test]
fn met_within_the_margin_at_the_knee_converges_at_once() {
    let mut c = observing();
    assert_eq!(c.decide(&found(0.1, 1.0)).to, 40.0);
    while c.vrate() < 80.0 {
        assert_eq!(c.decide(&slo(0.0002, 0.002, 1000)).action, Action::Increase);
    }
    let d = c.decide(&slo(0.0018, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Converged, 80.0), "{d:?}");
    assert!(
        d.reason.contains("within 10% of at most 80%"),
        "{}",
        d.reason
    );
    // Short of it, a period within the margin holds as before.
    let mut c = observing();
    c.decide(&found(0.1, 1.0));
    let d = c.decide(&slo(0.0018, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Hold, 40.0), "{d:?}");
}

/// Held in iocost's throttle a resolution below a miss taken for queueing:
/// that miss is contradicted, and v climbs past it (m-47 at 500
/// requests/s bisected up to 13.99 % under a miss at 14 % and held there,
/// the reader waiting 19 ms in the throttle, for the rest of the run).
#[test]
fn held_just_below_a_queueing_miss_climbs_past_it() {
    let mut c = starting_at(14.0);
    assert_eq!(c.decide(&slo(0.004, 0.002, 1000)).to, 7.0);
    let mut held = slo(0.0005, 0.002, 1000);
    held.slos[0].throttle_seconds = 0.003;
    let tos: Vec<f64> = (0..4).map(|_| c.decide(&held).to).collect();
    assert_eq!(tos, [10.5, 12.25, 13.13, 17.07]);
    assert_eq!(c.bracket(), (None, None));
}

/// The period after the first pin missed while the queue iocost off built
/// drained, and met after its first second: the pin holds. Missed in its
/// later part too, or on too few samples there to judge, v goes down by the
/// plain factor as before (m-47's write point lowered x0.7 at 137 % of the
/// target and climbed back to the pin for 30 s).
#[test]
fn a_drain_that_met_after_its_first_second_holds_the_pin() {
    let drain = |late_observed: f64, late_samples: u64| {
        let mut m = slo(0.00274, 0.002, 1400);
        m.late_slos = slo(late_observed, 0.002, late_samples).slos;
        m
    };
    let mut c = observing();
    assert_eq!(c.decide(&found(0.008, 0.5)).to, 20.0);
    assert!(c.draining());
    let d = c.decide(&drain(0.0012, 1000));
    assert_eq!((d.action, d.to), (Action::Hold, 20.0), "{d:?}");
    assert!(
        d.reason.contains("met after its first 1 s (60%)"),
        "{}",
        d.reason
    );
    assert!(!c.draining());
    // Later, without a later part (no settling step), the miss lowers v.
    assert_eq!(
        c.decide(&slo(0.00274, 0.002, 1400)).action,
        Action::Decrease
    );
    for (late, n) in [(0.0025, 1000), (0.0012, 50)] {
        let mut c = observing();
        c.decide(&found(0.008, 0.5));
        let d = c.decide(&drain(late, n));
        assert_eq!((d.action, d.to), (Action::Decrease, 14.0), "{d:?}");
    }
}

/// A decrease iocost did not follow within 1 s took the settling step,
/// which holds every cgroup while it lasts: a miss in the period after it
/// whose later part met holds the pin; one without a later part (no
/// settling step) lowers v (m-47 at 500 requests/s: from 44 % to 26.57,
/// the reader held 1.1 ms on average, then 22.23 and 20.40 %, three
/// periods missed, issue 56).
#[test]
fn a_miss_after_a_settling_pin_whose_later_part_met_holds_the_pin() {
    let mut c = starting_at(44.0);
    let d = c.decide(&slo(0.00284, 0.002, 175));
    assert_eq!((d.action, d.to), (Action::Decrease, 26.34), "{d:?}");
    let mut settled = slo(0.005, 0.002, 275);
    settled.slos[0].throttle_seconds = 0.0011;
    settled.late_slos = slo(0.0012, 0.002, 125).slos;
    let d = c.decide(&settled);
    assert_eq!((d.action, d.to), (Action::Hold, 26.34), "{d:?}");
    assert!(
        d.reason.contains("after a pin iocost reached only through the settling step, met after its first 1 s (60%)"),
        "{}",
        d.reason
    );
    // Its later part missed too: the vrate's, lowered.
    let mut c = starting_at(44.0);
    c.decide(&slo(0.00284, 0.002, 175));
    settled.late_slos = slo(0.0025, 0.002, 125).slos;
    assert_eq!(c.decide(&settled).action, Action::Decrease);
}

/// A miss in the periods after a decrease, at a value a period later met,
/// was the queue from above draining: the miss above it bounds the climb
/// again, the search converges between them, and a later miss above
/// returns to the value that met, not to the midpoint towards iocost's
/// hold below it (m-47 at 500 requests/s with a 5 ms SLO: the drain's miss
/// at 23.64 % erased the miss at 26.46 %, and the search stepped up there
/// again every 27 s, missing three periods each time; 19 of 34 missed).
#[test]
fn a_drains_miss_does_not_erase_the_miss_above_it() {
    let mut c = starting_at(21.88);
    let mut held = slo(0.0005, 0.002, 1000);
    held.slos[0].throttle_seconds = 0.003;
    let queued = slo(0.004, 0.002, 1000);
    let slack = slo(0.0006, 0.002, 1000);
    assert_eq!(c.decide(&held).to, 28.44);
    assert_eq!(c.decide(&queued).to, 25.16);
    assert_eq!(c.decide(&queued).to, 23.52);
    let d = c.decide(&queued);
    assert_eq!((d.action, d.to), (Action::Hold, 23.52), "{d:?}");
    let d = c.decide(&slack);
    assert_eq!((d.action, d.to), (Action::Converged, 23.52), "{d:?}");
    assert_eq!(c.bracket(), (Some(23.52), Some(25.16)));
    // Long slack probes a resolution up; its miss returns to 23.52.
    let probe = (0..25)
        .map(|_| c.decide(&slack))
        .find(|d| d.action == Action::Increase)
        .expect("a probe after long slack");
    assert_eq!(probe.to, 25.87);
    let d = c.decide(&queued);
    assert_eq!((d.action, d.to), (Action::Decrease, 23.52), "{d:?}");
    // Its drain misses where 23.52 met: down to the midpoint to the hold,
    // with no claim that nothing between meets the SLO.
    let d = c.decide(&queued);
    assert_eq!((d.action, d.to), (Action::Decrease, 22.7), "{d:?}");
    let d = c.decide(&slack);
    assert_eq!((d.action, d.to), (Action::Converged, 22.7), "{d:?}");
    assert_eq!(c.bracket(), (Some(22.7), Some(23.52)));
}
