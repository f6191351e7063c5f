use super::super::plant::Plant;
use super::*;

/// A controller with the default configuration, starting at `start`.
pub(super) fn starting_at(start: f64) -> Controller {
    Controller::new(ControllerConfig {
        start,
        ..Default::default()
    })
}

/// `iowarden tune` without --start (start 100 %, --vrate-min 5 %).
pub(super) fn observing() -> Controller {
    Controller::new(ControllerConfig {
        observe_first: true,
        ..Default::default()
    })
}

/// Decides on `m` while the controller steps up (at most 11 steps): the
/// values it stepped to, and the first decision that was not a step up.
pub(super) fn climb(c: &mut Controller, m: &Measurement) -> (Vec<f64>, Decision) {
    let mut ups = Vec::new();
    loop {
        let d = c.decide(m);
        if d.action != Action::Increase || ups.len() > 10 {
            return (ups, d);
        }
        ups.push(d.to);
    }
}

pub(super) fn slo(observed: f64, target: f64, samples: u64) -> Measurement {
    Measurement {
        slos: vec![SloSample {
            name: "/lc read-p99".into(),
            target_seconds: target,
            observed_seconds: Some(observed),
            samples,
            throttle_seconds: 0.0,
            held_in_observed: false,
            throttle_tail_seconds: None,
            own_need: None,
        }],
        throughput_bytes_per_second: 1e8,
        iops: 1000.0,
        cost_rate: 0.5,
        admitted: None,
        device_saturated: false,
        model_declared: false,
        late_slos: Vec::new(),
    }
}

#[test]
fn a_protected_cgroup_throttled_by_iocost_raises_vrate() {
    let mut c = starting_at(10.0);
    // Fast in the block layer, but 3 ms per I/O in iocost's throttle.
    let mut m = slo(0.0005, 0.002, 1000);
    m.slos[0].throttle_seconds = 0.003;
    let d = c.decide(&m);
    assert_eq!((d.action, d.to), (Action::Increase, 13.0), "{d:?}");
    assert!(
        d.reason.contains("waiting in iocost's throttle"),
        "{}",
        d.reason
    );
    assert!(d.reason.contains("+ 3.000ms throttled"), "{}", d.reason);
    // A queueing miss above never sends it back below the throttled value.
    c.decide(&slo(0.0005, 0.002, 1000)); // backoff
    c.decide(&slo(0.0005, 0.002, 1000)); // backoff
                                         // 13 met twice: its first miss waits for confirmation.
    assert_eq!(c.decide(&slo(0.004, 0.002, 1000)).action, Action::Hold);
    let d = c.decide(&slo(0.004, 0.002, 1000));
    assert_eq!(d.action, Action::Decrease);
    assert!(d.to > 10.0, "{d:?}");
    // At the upper bound it says what to do instead.
    let mut c = Controller::new(ControllerConfig::default());
    let d = c.decide(&m);
    assert_eq!(d.action, Action::Hold);
    assert!(d.reason.contains("raise its io.weight"), "{}", d.reason);
}

/// m-47 at 500 requests/s (issue 56): the reader missed its 5 ms target
/// at 300-450 % with a 2-3 ms mean hold, not most of the tail, its own I/O
/// at 85-95 % of its budget; taken for queueing, the search lowered vrate
/// and iocost held the reader longer. Over its own budget, vrate rises to
/// where the reader uses `OWN_LOAD` of it, past the miss recorded below.
#[test]
fn a_cgroup_held_over_its_own_budget_raises_vrate_to_its_floor() {
    let held = |need: Option<f64>| {
        let mut m = slo(0.0164, 0.005, 225);
        m.slos[0].throttle_seconds = 0.002;
        m.slos[0].own_need = need;
        m
    };
    let mut c = starting_at(14.09);
    let d = c.decide(&held(None));
    assert_eq!(d.action, Action::Decrease, "without its need: {d:?}");
    assert_eq!(c.bracket().1, Some(14.09));
    let d = c.decide(&held(Some(11.9)));
    assert_eq!((d.action, d.to), (Action::Increase, 23.8), "{d:?}");
    assert!(
        d.reason
            .contains("held by iocost, its own I/O over 50% of its budget")
            && d.reason
                .contains("its own I/O 11.90% of vrate at its weight"),
        "{}",
        d.reason
    );
    assert_eq!(c.bracket().1, None, "the miss at 14.09 % was the hold's");
    // Within its budget at 30 %, the same hold is left to the search.
    let mut c = starting_at(30.0);
    let d = c.decide(&held(Some(11.9)));
    assert_eq!(d.action, Action::Decrease, "{d:?}");
}

/// A miss in the device queue while a protected cgroup is held lowers
/// vrate no further than where its own I/O would use `OWN_LOAD` of its
/// budget; not held, the floor does not bind.
#[test]
fn a_miss_lowers_no_further_than_a_held_cgroups_floor() {
    let miss = |throttle: f64| {
        let mut m = slo(0.015, 0.005, 300);
        m.slos[0].throttle_seconds = throttle;
        m.slos[0].own_need = Some(12.0);
        m
    };
    let mut c = starting_at(40.0);
    let d = c.decide(&miss(0.001));
    assert_eq!((d.action, d.to), (Action::Decrease, 24.0), "{d:?}");
    let mut c = starting_at(40.0);
    let d = c.decide(&miss(0.0));
    assert_eq!((d.action, d.to), (Action::Decrease, 20.0), "{d:?}");
}

#[test]
fn finds_the_window_between_throttling_and_queueing() {
    let mut plant = Plant {
        lc_demand_units_per_second: 2_000.0,
        ..Plant::default()
    };
    let mut c = starting_at(5.0);
    let ds = run(&mut plant, &mut c, 40);
    assert!(c.converged(), "not converged at {}: {ds:#?}", c.vrate());
    let m = plant.period_noiseless(c.vrate());
    assert!(m.slos[0].effective() <= plant.slo_target, "{m:?}");
    assert!(c.vrate() >= plant.max_vrate_meeting(plant.slo_target) * 0.75);
}

/// Runs the controller against a plant; returns (decisions, vrates).
fn run(plant: &mut Plant, c: &mut Controller, periods: usize) -> Vec<Decision> {
    (0..periods)
        .map(|_| {
            let m = plant.period(c.vrate());
            c.decide(&m)
        })
        .collect()
}

#[test]
fn converges_to_the_highest_vrate_that_meets_the_slo() {
    let mut plant = Plant::default();
    let target = plant.slo_target;
    let best = plant.max_vrate_meeting(target);
    let mut c = Controller::new(ControllerConfig::default());
    let ds = run(&mut plant, &mut c, 40);
    let at = ds
        .iter()
        .position(|d| d.action == Action::Converged)
        .expect("converges");
    // Within 60 s at the default 3 s period (issue 56's bound).
    assert!(at < 20, "converged after {at} periods: {ds:#?}");
    let v = c.vrate();
    // Meets the SLO and is within the resolution (plus the margin) of the best.
    assert!(v <= best + 1e-9, "vrate {v} above the best feasible {best}");
    assert!(v >= best * 0.75, "vrate {v} far below the best {best}");
    let m = plant.period_noiseless(v);
    assert!(m.slos[0].observed_seconds.unwrap() <= target);
    // And it keeps far more throughput than the tightest bound.
    let low = plant.period_noiseless(ControllerConfig::default().vrate_min);
    assert!(m.throughput_bytes_per_second > 2.0 * low.throughput_bytes_per_second);
    // After converging it stays put, until slack that long probes upwards.
    let until = (at + ControllerConfig::default().reprobe_periods as usize).min(ds.len());
    assert!(ds[at + 1..until].iter().all(|d| d.from == d.to), "{ds:#?}");
}

#[test]
fn never_leaves_the_bounds() {
    for seed in 1..40u64 {
        let mut plant = Plant::random(seed);
        let cfg = ControllerConfig {
            vrate_min: 10.0,
            vrate_max: 80.0,
            start: 80.0,
            ..Default::default()
        };
        let mut c = Controller::new(cfg.clone());
        for d in run(&mut plant, &mut c, 60) {
            assert!(
                (cfg.vrate_min..=cfg.vrate_max).contains(&d.to),
                "seed {seed}: {d:?}"
            );
            // At most 80 %, one factor up (x1.3) is under 30 points; down,
            // a miss far above the target halves v at most.
            let most = match d.to > d.from {
                true => cfg.max_step,
                false => cfg.max_step.max(d.from * 0.5),
            };
            assert!((d.to - d.from).abs() <= most + 1e-9, "{d:?}");
        }
    }
}

/// Above 100 % the bound is the factor, not the points: from 144 % with
/// all the slack there is (no latency at all: the whole factor) a period is
/// x1.3 (187.2 %), not +30; below it the factor's target stands as before
/// (from 20 %, 26 %).
#[test]
fn steps_follow_the_factor_where_it_is_more_than_the_points() {
    let mut c = Controller::new(ControllerConfig {
        start: 144.0,
        vrate_max: 800.0,
        ..Default::default()
    });
    let d = c.decide(&slo(0.0, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Increase, 187.2), "{d:?}");
    let d = c.decide(&slo(0.0, 0.002, 1000));
    assert_eq!(d.to, 243.36, "{d:?}");
    // A miss there returns to the good value below in one period, 56
    // points down, not 30.
    let d = c.decide(&slo(0.004, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Decrease, 187.2), "{d:?}");
    // Where 30 points is more than the factor, the factor's target stands.
    let mut c = starting_at(20.0);
    assert_eq!(c.decide(&slo(0.0, 0.002, 1000)).to, 26.0);
}

/// The step up shrinks with the headroom left: x1.3 with none of the
/// target used, x1.15 at half the aim (85 % of the target), and above half
/// the aim only after a second period; at least a resolution step.
#[test]
fn the_step_up_shrinks_with_the_headroom() {
    let mut c = starting_at(40.0);
    let d = c.decide(&slo(0.0010, 0.002, 1000)); // 50 %
    assert_eq!((d.action, d.to), (Action::Hold, 40.0), "{d:?}");
    assert!(d.reason.contains("a second period"), "{}", d.reason);
    let d = c.decide(&slo(0.0008, 0.002, 1000)); // 40 %: the worse counts
    assert_eq!((d.action, d.to), (Action::Increase, 44.94), "{d:?}");
    assert!(d.reason.contains("x1.12"), "{}", d.reason);
    // Under half the aim one period is enough: x1.15 at 42.5 %.
    let mut c = starting_at(40.0);
    let d = c.decide(&slo(0.00085, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Increase, 46.0), "{d:?}");
}

#[test]
fn a_miss_lowers_at_once_and_blocks_increases_while_backing_off() {
    let mut c = Controller::new(ControllerConfig::default());
    // 200 % of the target: down in proportion (to 85 % of it), at most
    // halved.
    let d = c.decide(&slo(0.004, 0.002, 1000));
    assert_eq!(d.action, Action::Decrease);
    assert_eq!(d.to, 50.0);
    // A small miss: x0.7 at least.
    let mut small = Controller::new(ControllerConfig::default());
    assert_eq!(small.decide(&slo(0.0021, 0.002, 1000)).to, 70.0);
    assert!(
        d.reason.contains("SLO missed (200% of target)"),
        "{}",
        d.reason
    );
    assert!(d.reason.contains("/lc read-p99 4.000ms"), "{}", d.reason);
    // Plenty of slack, but backing off: hold for two periods.
    for _ in 0..2 {
        let d = c.decide(&slo(0.0005, 0.002, 1000));
        assert_eq!(d.action, Action::Hold, "{d:?}");
        assert!(d.reason.contains("backing off"));
    }
    // 25 % of the target, under a third of the aim: no second period.
    let d = c.decide(&slo(0.0005, 0.002, 1000));
    assert_eq!(d.action, Action::Increase);
    // Towards the known-bad 100, where the line through it and this period
    // in 1/ratio puts the aim (85.29), at most the headroom's x1.21.
    assert_eq!(d.to, 60.59, "{d:?}");
    assert!(
        d.reason.contains("the aim predicted at 85.29%"),
        "{}",
        d.reason
    );
}

#[test]
fn a_miss_where_it_held_before_is_excused_once_in_a_window() {
    let mut c = starting_at(50.0);
    // Met twice: 50 is good (once is not enough: the period after a
    // step that overshot meets as often as not).
    c.decide(&slo(0.0018, 0.002, 1000));
    c.decide(&slo(0.0018, 0.002, 1000));
    let d = c.decide(&slo(0.0022, 0.002, 1000)); // 110%: maybe noise
    assert_eq!((d.action, d.to), (Action::Hold, 50.0), "{d:?}");
    assert!(d.reason.contains("taken for noise"), "{}", d.reason);
    let d = c.decide(&slo(0.0018, 0.002, 1000)); // met again
    assert_eq!(d.to, 50.0);
    let d = c.decide(&slo(0.0022, 0.002, 1000)); // a second within 10: acts
    assert_eq!(d.action, Action::Decrease, "{d:?}");
    // A large miss where it held before is excused too (a TCG guest's
    // per-period p99 swings 4x at one vrate), and the next one acts.
    let mut c = starting_at(50.0);
    c.decide(&slo(0.0018, 0.002, 1000));
    c.decide(&slo(0.0018, 0.002, 1000));
    assert_eq!(c.decide(&slo(0.008, 0.002, 1000)).action, Action::Hold);
    assert_eq!(c.decide(&slo(0.008, 0.002, 1000)).action, Action::Decrease);
    // Met once only: the miss acts.
    let mut c = starting_at(50.0);
    c.decide(&slo(0.0018, 0.002, 1000));
    assert_eq!(c.decide(&slo(0.0022, 0.002, 1000)).action, Action::Decrease);
}

/// m-47 from iocost off at 3,000/s: converged at a vrate where a hog
/// cycling 4 KiB and 128 KiB reads every 4 s missed every third 3.5 s
/// period (270 %, 272 %, 266 % of the target, met between); waiting for two
/// misses in a row held the vrate there, missing a third of the periods.
/// Now the second miss lowers it; isolated misses, ten periods apart or
/// more, are still taken for noise.
#[test]
fn a_miss_every_few_periods_is_not_noise() {
    let mut c = starting_at(50.0);
    for _ in 0..3 {
        c.decide(&slo(0.0018, 0.002, 1000)); // within the margin
    }
    assert!(c.converged());
    let pattern = [0.0054, 0.0018, 0.0018];
    let ds: Vec<Decision> = (0..4)
        .map(|i| c.decide(&slo(pattern[i % 3], 0.002, 1000)))
        .collect();
    assert_eq!(
        (ds[0].action, ds[0].to),
        (Action::Hold, 50.0),
        "{:?}",
        ds[0]
    );
    assert_eq!(ds[3].action, Action::Decrease, "{:?}", ds[3]);
    assert!(c.vrate() < 50.0, "{ds:#?}");
    // One miss in ten periods at a good value: held every time.
    let mut c = starting_at(50.0);
    for i in 0..40 {
        let d = c.decide(&slo(if i % 10 == 5 { 0.005 } else { 0.0018 }, 0.002, 1000));
        assert_eq!(d.to, 50.0, "period {i}: {d:?}");
    }
}

#[test]
fn a_miss_where_it_never_held_acts_at_once() {
    let mut c = starting_at(50.0);
    c.decide(&slo(0.0005, 0.002, 1000)); // slack: up to 65
    let d = c.decide(&slo(0.003, 0.002, 1000)); // 65 never met
    assert_eq!((d.action, d.to), (Action::Decrease, 50.0), "{d:?}");
}

#[test]
fn a_noisy_miss_after_leaving_a_bad_value_converges_on_the_good_one() {
    // The CI run that asked for it: missed at 89 (404 %), then met, then a
    // 218 % miss where it had held, then met.
    let mut c = starting_at(89.0);
    // Far above the target: halved at once.
    assert_eq!(c.decide(&slo(0.0202, 0.005, 410)).to, 44.5);
    for _ in 0..2 {
        assert_eq!(c.decide(&slo(0.0035, 0.005, 8000)).action, Action::Hold);
    }
    // Within the margin three periods: converged where it is.
    for _ in 0..2 {
        assert_eq!(c.decide(&slo(0.0045, 0.005, 8000)).action, Action::Hold);
    }
    let d = c.decide(&slo(0.0045, 0.005, 8000));
    assert_eq!((d.action, d.to), (Action::Converged, 44.5), "{d:?}");
    // A miss where it held five periods: noise, once.
    let d = c.decide(&slo(0.0109, 0.005, 8412));
    assert_eq!((d.action, d.to), (Action::Hold, 44.5), "{d:?}");
    let d = c.decide(&slo(0.0035, 0.005, 8000));
    assert_eq!((d.action, d.to), (Action::Hold, 44.5), "{d:?}");
    assert!(c.converged());
}

#[test]
fn long_slack_probes_one_resolution_step_and_a_missed_probe_reconverges() {
    let mut c = starting_at(50.0);
    for _ in 0..3 {
        c.decide(&slo(0.0018, 0.002, 1000)); // within the margin: converges
    }
    assert!(c.converged());
    for _ in 1..c.cfg.reprobe_periods {
        assert_eq!(c.decide(&slo(0.0005, 0.002, 1000)).action, Action::Hold);
    }
    // The CI run that asked for it probed from 78 to 100 (x1.3, capped)
    // and missed by 308%; a probe is one resolution step.
    let d = c.decide(&slo(0.0005, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Increase, 55.0), "{d:?}");
    let d = c.decide(&slo(0.006, 0.002, 1000)); // 55 never held: acts at once
    assert_eq!((d.action, d.to), (Action::Decrease, 50.0), "{d:?}");
    // The bracket (50, 55) is closed: converged again at the next period.
    let d = c.decide(&slo(0.0005, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Converged, 50.0), "{d:?}");
}

#[test]
fn a_probe_that_meets_climbs_on_in_resolution_steps_without_a_stale_backoff() {
    let mut c = starting_at(50.0);
    // 60 % of the target twice: up x1.088 for that headroom, at least
    // one resolution step: 55.
    c.decide(&slo(0.0012, 0.002, 1000));
    assert_eq!(c.decide(&slo(0.0012, 0.002, 1000)).to, 55.0);
    // 55 never held: back to 50, backing off; the bracket (50, 55)
    // is closed, so the next period converges at once, with its backoff
    // still counted.
    assert_eq!(c.decide(&slo(0.006, 0.002, 1000)).to, 50.0);
    let d = c.decide(&slo(0.0005, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Converged, 50.0), "{d:?}");
    for _ in 1..c.cfg.reprobe_periods {
        c.decide(&slo(0.0005, 0.002, 1000));
    }
    assert_eq!(c.decide(&slo(0.0005, 0.002, 1000)).to, 55.0);
    // Met at 55: the climb goes on by 10 % (not x1.3 to 71.5), at once
    // (the backoff from before converging does not hold it).
    let d = c.decide(&slo(0.0005, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Increase, 60.5), "{d:?}");
    // The miss at 60.5 returns to 50, where it held before the probe, not
    // to 55, met once; after the backoff bisection re-tests the way up.
    let d = c.decide(&slo(0.006, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Decrease, 50.0), "{d:?}");
    assert!(d.reason.contains("back to 50%"), "{d:?}");
    assert_eq!(c.bracket(), (Some(50.0), Some(60.5)));
    assert_eq!(c.decide(&slo(0.0005, 0.002, 1000)).action, Action::Hold);
    assert_eq!(c.decide(&slo(0.0005, 0.002, 1000)).action, Action::Hold);
    assert_eq!(c.decide(&slo(0.0005, 0.002, 1000)).to, 55.25);
    let d = c.decide(&slo(0.0005, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Converged, 55.25), "{d:?}");
}

#[test]
fn hysteresis_holds_within_the_margin() {
    let mut c = starting_at(50.0);
    // 90% of target: met, but not with the 15% slack needed to raise.
    let d = c.decide(&slo(0.0018, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Hold, 50.0));
    c.decide(&slo(0.0018, 0.002, 1000));
    let d = c.decide(&slo(0.0018, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Converged, 50.0));
    assert!(c.converged());
}

#[test]
fn too_few_samples_change_nothing() {
    let mut c = Controller::new(ControllerConfig::default());
    let d = c.decide(&slo(0.1, 0.002, 10));
    assert_eq!(
        (d.action, d.from, d.to),
        (Action::Insufficient, 100.0, 100.0)
    );
    assert!(d.reason.contains("10 I/Os, fewer than 100"), "{}", d.reason);
    assert_eq!(c.bracket(), (None, None));
}

#[test]
fn an_infeasible_slo_parks_at_the_lower_bound_and_says_so() {
    let mut c = starting_at(6.0);
    let d = c.decide(&slo(0.01, 0.002, 1000));
    assert_eq!(d.to, 5.0);
    let d = c.decide(&slo(0.01, 0.002, 1000));
    assert_eq!((d.action, d.to), (Action::Hold, 5.0));
    assert!(
        d.reason.contains("cannot be met within the bounds"),
        "{}",
        d.reason
    );
}

#[test]
fn follows_a_load_change_both_ways() {
    let mut plant = Plant::default();
    let mut c = Controller::new(ControllerConfig::default());
    let ds = run(&mut plant, &mut c, 30);
    // Converged (slack since may have started a probe upwards).
    assert!(ds.iter().any(|d| d.action == Action::Converged), "{ds:#?}");
    let before = c.vrate();
    // The device gets slower: the converged value now misses.
    plant.capacity_units_per_second *= 0.6;
    let ds = run(&mut plant, &mut c, 30);
    assert!(ds.iter().any(|d| d.action == Action::Decrease));
    let at = ds.iter().rposition(|d| d.action == Action::Converged);
    assert!(at.is_some() && c.vrate() < before, "{ds:#?}");
    let slow = c.vrate();
    assert!(
        plant.period_noiseless(slow).slos[0]
            .observed_seconds
            .unwrap()
            <= plant.slo_target
    );
    // And faster again: slack after converging probes upwards.
    plant.capacity_units_per_second /= 0.6;
    run(&mut plant, &mut c, 60);
    assert!(
        c.vrate() > slow * 1.2,
        "stayed at {} (was {slow})",
        c.vrate()
    );
}

#[test]
fn noise_does_not_make_it_oscillate_after_converging() {
    let mut plant = Plant {
        noise: 0.08,
        ..Plant::default()
    };
    let mut c = Controller::new(ControllerConfig::default());
    let ds = run(&mut plant, &mut c, 80);
    let first = ds
        .iter()
        .position(|d| d.action == Action::Converged)
        .unwrap();
    let changes = ds[first + 1..].iter().filter(|d| d.from != d.to).count();
    assert!(
        changes <= 6,
        "{changes} changes in {} periods",
        ds.len() - first - 1
    );
    let misses = ds[first + 1..]
        .iter()
        .filter(|d| d.action == Action::Decrease)
        .count();
    assert!(misses <= 3, "{misses} misses after converging");
}

#[test]
fn validation_names_the_bad_option() {
    let bad = |c: ControllerConfig| c.validate().unwrap_err();
    assert!(bad(ControllerConfig {
        vrate_min: 50.0,
        vrate_max: 20.0,
        start: 20.0,
        ..Default::default()
    })
    .contains("--vrate-min 50 is above --vrate-max 20"));
    assert!(bad(ControllerConfig {
        vrate_max: 20000.0,
        ..Default::default()
    })
    .contains("1 to 10000"));
    assert!(bad(ControllerConfig {
        start: 200.0,
        ..Default::default()
    })
    .contains("--start 200"));
    for step in [f64::NAN, -5.0, 0.0, f64::INFINITY] {
        assert!(bad(ControllerConfig {
            max_step: step,
            ..Default::default()
        })
        .contains(&format!("--max-step {step} must be a positive")));
    }
    assert!(bad(ControllerConfig {
        margin: f64::NAN,
        ..Default::default()
    })
    .contains("margin NaN"));
    assert!(bad(ControllerConfig {
        start: f64::NAN,
        ..Default::default()
    })
    .contains("--start NaN"));
    assert!(ControllerConfig::default().validate().is_ok());
}
