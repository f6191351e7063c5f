//! Unit tests of runner.rs: what the model judges, the periods counted,
//! the QoS search rescaled with the model.

use super::*;
use crate::tune::controller::ControllerConfig;

#[test]
fn the_model_judges_the_worst_slo_or_nothing() {
    use crate::tune::controller::SloSample;
    let slo = |observed: f64, samples: u64| SloSample {
        name: "/lc read-p99=2ms".into(),
        target_seconds: 0.002,
        observed_seconds: Some(observed),
        samples,
        throttle_seconds: 0.0,
        held_in_observed: false,
        throttle_tail_seconds: None,
        own_need: None,
    };
    let m = Measurement {
        slos: vec![slo(0.001, 500), slo(0.003, 500)],
        ..Default::default()
    };
    assert_eq!(worst_slo_ratio(&m, 100), Some(1.5));
    assert_eq!(worst_slo_ratio(&m, 501), None);
}

#[test]
fn misses_after_the_first_convergence_are_counted_apart() {
    use crate::tune::controller::SloSample;
    let slo = |observed: f64| SloSample {
        name: "/lc read-p99=2ms".into(),
        target_seconds: 0.002,
        observed_seconds: Some(observed),
        samples: 500,
        throttle_seconds: 0.0,
        held_in_observed: false,
        throttle_tail_seconds: None,
        own_need: None,
    };
    let mut st = TunerSlo::default();
    // Searching: a miss, a hit; then converged: a hit, the worst miss, a
    // smaller one.
    // The first miss and the last hit ran under a model change.
    for (observed, settled, model_change) in [
        (0.004, false, true),
        (0.001, false, false),
        (0.001, true, true),
        (0.009, true, false),
        (0.003, true, false),
    ] {
        record_period(&mut st, &slo(observed), settled, model_change);
    }
    assert_eq!((st.periods, st.periods_met), (5, 2));
    assert_eq!(st.periods_after_convergence, 3);
    assert_eq!(st.periods_missed_after_convergence, 2);
    assert_eq!(st.worst_after_convergence_seconds, Some(0.009));
    assert_eq!(st.periods_missed_under_model_change, 1);
    assert!(!st.met);
}

#[test]
fn a_model_change_rescales_the_qos_search() {
    let mut c = Controller::new(ControllerConfig {
        start: 80.0,
        ..Default::default()
    });
    assert_eq!(c.rescale(0.5), 40.0);
    // Bounded like every other vrate the tuner writes.
    assert_eq!(c.rescale(10.0), 100.0);
    assert_eq!(c.rescale(0.001), 5.0);
}
