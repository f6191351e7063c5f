//! The tuner's control logic, pure: one decision per period from what was
//! measured, no I/O.
//!
//! The controlled variable is iocost's vrate (percent of the cost model's
//! capacity), pinned by writing io.cost.qos `min=max=v`: under contention
//! iocost admits v% of the model's capacity, so v trades the protected
//! cgroups' latency against aggregate throughput, monotonically. The search:
//! - an SLO miss lowers v at once (to the highest value known to meet every
//!   SLO, else multiplicatively) and blocks increases for a few periods;
//! - SLOs met with slack raise v (bisecting towards the lowest value known to
//!   miss, else multiplicatively), one bounded step per period;
//! - SLOs met but within the hysteresis margin hold v;
//! - once the good/bad bracket is narrower than the resolution, or v has held
//!   within the margin for a while, the search has converged; a miss
//!   reopens it, and long slack probes upwards again (the load may have
//!   changed).

use std::fmt::Write;

#[derive(Clone, Debug, PartialEq)]
pub struct ControllerConfig {
    /// vrate bounds in percent; the tuner never writes outside them.
    pub vrate_min: f64,
    pub vrate_max: f64,
    /// First vrate written.
    pub start: f64,
    /// Factor applied on an SLO miss when no lower good value is known.
    pub decrease: f64,
    /// Factor applied on slack when no higher bad value is known.
    pub increase: f64,
    /// Largest change per decision, in percentage points.
    pub max_step: f64,
    /// Slack needed to raise v: every observed quantile ≤ target × (1 − margin).
    pub margin: f64,
    /// Converged when (bad − good) ≤ resolution × good.
    pub resolution: f64,
    /// Periods after a miss during which v is not raised.
    pub backoff_periods: u32,
    /// Periods held within the margin that count as converged.
    pub settle_periods: u32,
    /// Periods of slack after convergence before probing upwards again.
    pub reprobe_periods: u32,
    /// Fewer I/Os than this in a period for any SLO: no decision.
    pub min_samples: u64,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            vrate_min: 5.0,
            vrate_max: 100.0,
            start: 100.0,
            decrease: 0.7,
            increase: 1.3,
            max_step: 30.0,
            margin: 0.15,
            resolution: 0.1,
            backoff_periods: 2,
            settle_periods: 3,
            reprobe_periods: 20,
            min_samples: 100,
        }
    }
}

impl ControllerConfig {
    /// Checks the configuration; the message names the offending option.
    pub fn validate(&self) -> Result<(), String> {
        let in_range = |v: f64| (1.0..=10000.0).contains(&v);
        if !(in_range(self.vrate_min) && in_range(self.vrate_max)) {
            return Err(format!(
                "vrate bounds {}..{} outside what io.cost.qos accepts (1 to 10000 percent)",
                self.vrate_min, self.vrate_max
            ));
        }
        if self.vrate_min > self.vrate_max {
            return Err(format!(
                "--vrate-min {} is above --vrate-max {}",
                self.vrate_min, self.vrate_max
            ));
        }
        if !(self.vrate_min..=self.vrate_max).contains(&self.start) {
            return Err(format!(
                "--start {} outside the bounds {}..{}",
                self.start, self.vrate_min, self.vrate_max
            ));
        }
        // clamp() in step() panics on a NaN or negative width.
        if !(self.max_step.is_finite() && self.max_step > 0.0) {
            return Err(format!(
                "--max-step {} must be a positive number of percentage points",
                self.max_step
            ));
        }
        if !(0.0..1.0).contains(&self.margin) {
            return Err(format!("margin {} must be in [0, 1)", self.margin));
        }
        if !(self.decrease > 0.0 && self.decrease < 1.0 && self.increase > 1.0) {
            return Err("decrease must be in (0, 1) and increase above 1".into());
        }
        Ok(())
    }
}

/// One SLO's measurement over a decision period.
#[derive(Clone, Debug, PartialEq)]
pub struct SloSample {
    /// "cgroup SLO", for reasons.
    pub name: String,
    pub target_seconds: f64,
    /// None when the period had no I/O of the SLO's class.
    pub observed_seconds: Option<f64>,
    pub samples: u64,
    /// Mean time the cgroup's I/Os waited in iocost's own throttle before
    /// reaching the block layer (io.stat cost.wait); the histograms behind
    /// `observed_seconds` start after it.
    pub throttle_seconds: f64,
}

impl SloSample {
    /// What the application sees, approximately: the block-layer quantile
    /// plus the mean throttle wait.
    pub fn effective(&self) -> f64 {
        self.observed_seconds.unwrap_or(0.0) + self.throttle_seconds
    }
    /// The miss comes from iocost holding the cgroup back, not the device queue.
    pub fn throttled(&self) -> bool {
        self.throttle_seconds > self.observed_seconds.unwrap_or(0.0)
    }
}

/// What the controller sees each period.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measurement {
    pub slos: Vec<SloSample>,
    pub throughput_bytes_per_second: f64,
    pub iops: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Hold,
    Decrease,
    Increase,
    /// The search converged this period (v may have moved to the good value).
    Converged,
    /// Too few I/Os to judge; nothing changes.
    Insufficient,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Hold => "hold",
            Action::Decrease => "decrease",
            Action::Increase => "increase",
            Action::Converged => "converged",
            Action::Insufficient => "insufficient",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub action: Action,
    pub from: f64,
    pub to: f64,
    pub reason: String,
}

pub struct Controller {
    cfg: ControllerConfig,
    v: f64,
    /// Highest vrate at which every SLO held.
    good: Option<f64>,
    /// Lowest vrate at which an SLO was missed (device queueing).
    bad: Option<f64>,
    /// Highest vrate at which a protected cgroup was throttled by iocost.
    low_bad: Option<f64>,
    backoff: u32,
    /// Consecutive periods met within the margin at the current v.
    tight: u32,
    /// The last period was a marginal miss waiting for confirmation.
    unconfirmed: bool,
    /// Consecutive periods with slack while converged.
    slack: u32,
    converged: bool,
}

/// Rounds to the two decimals io.cost.qos keeps, so the value written is the
/// value remembered.
fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

impl Controller {
    pub fn new(cfg: ControllerConfig) -> Controller {
        let v = round2(cfg.start);
        Controller {
            cfg,
            v,
            good: None,
            bad: None,
            low_bad: None,
            backoff: 0,
            tight: 0,
            unconfirmed: false,
            slack: 0,
            converged: false,
        }
    }

    pub fn vrate(&self) -> f64 {
        self.v
    }
    pub fn converged(&self) -> bool {
        self.converged
    }
    pub fn bracket(&self) -> (Option<f64>, Option<f64>) {
        (self.good, self.bad)
    }

    /// Follows a change of the cost model's scale: every vrate known so far
    /// is multiplied by `factor` (the change in cost of the device's work),
    /// so the search continues from the same admitted load. Returns the new v.
    pub fn rescale(&mut self, factor: f64) -> f64 {
        let c = &self.cfg;
        self.v = round2((self.v * factor).clamp(c.vrate_min, c.vrate_max));
        self.good = self.good.map(|g| g * factor);
        self.bad = self.bad.map(|b| b * factor);
        self.low_bad = self.low_bad.map(|b| b * factor);
        self.converged = false;
        self.tight = 0;
        self.slack = 0;
        self.v
    }

    /// A bounded move from v towards `to`, inside the bounds.
    fn step_to(&self, to: f64) -> f64 {
        let c = &self.cfg;
        let to = to.clamp(self.v - c.max_step, self.v + c.max_step);
        round2(to.clamp(c.vrate_min, c.vrate_max))
    }

    fn bracket_closed(&self) -> bool {
        match (self.good, self.bad) {
            (Some(g), Some(b)) => b - g <= self.cfg.resolution * g || b - g <= 0.02,
            _ => false,
        }
    }

    pub fn decide(&mut self, m: &Measurement) -> Decision {
        let from = self.v;
        let mut why = String::new();
        for s in &m.slos {
            let _ = write!(
                why,
                "{} {} + {:.3}ms throttled (target {}, {} I/Os); ",
                s.name,
                s.observed_seconds
                    .map_or("-".to_string(), |o| format!("{:.3}ms", o * 1e3)),
                s.throttle_seconds * 1e3,
                format_args!("{:.3}ms", s.target_seconds * 1e3),
                s.samples
            );
        }
        let _ = write!(
            why,
            "device {:.1} MB/s {:.0} IOPS",
            m.throughput_bytes_per_second / 1e6,
            m.iops
        );
        let decision = |action, to, head: String| Decision {
            action,
            from,
            to,
            reason: format!("{head}: {why}"),
        };

        if let Some(s) = m.slos.iter().find(|s| s.samples < self.cfg.min_samples) {
            return decision(
                Action::Insufficient,
                from,
                format!(
                    "{}: {} I/Os, fewer than {} needed to judge",
                    s.name, s.samples, self.cfg.min_samples
                ),
            );
        }
        let ratio = |s: &SloSample| s.effective() / s.target_seconds;
        let worst = m.slos.iter().map(ratio).fold(0.0, f64::max);
        let worst_slo = m.slos.iter().max_by(|a, b| ratio(a).total_cmp(&ratio(b)));

        if worst > 1.0 && worst_slo.is_some_and(|s| s.throttled()) {
            // iocost itself holds the protected cgroup back: vrate is too low
            // for its own I/O. Lowering it would make that worse.
            self.low_bad = Some(self.low_bad.map_or(from, |b| b.max(from)));
            if self.good.is_some_and(|g| g <= from) {
                self.good = None;
            }
            self.converged = false;
            self.tight = 0;
            self.slack = 0;
            self.backoff = self.cfg.backoff_periods;
            let target = match (self.good, self.bad) {
                (Some(g), _) => g,
                (None, Some(b)) => (from + b) / 2.0,
                (None, None) => from * self.cfg.increase,
            };
            self.v = self.step_to(target);
            let name = worst_slo.map_or("", |s| s.name.as_str());
            if self.v <= from {
                return decision(
                    Action::Hold,
                    from,
                    format!(
                        "SLO missed ({:.0}% of target), {name} mostly waiting in iocost's throttle, at the upper bound {}%: raise its io.weight (--protect-weight)",
                        worst * 100.0,
                        self.cfg.vrate_max
                    ),
                );
            }
            return decision(
                Action::Increase,
                self.v,
                format!(
                    "SLO missed ({:.0}% of target), {name} mostly waiting in iocost's throttle: vrate too low for its own I/O",
                    worst * 100.0
                ),
            );
        }

        // A marginal miss (within the margin) at a value that met before may
        // be noise: it is acted on only when the next period misses too.
        // Large misses act at once.
        let marginal = worst <= 1.0 + self.cfg.margin;
        if worst > 1.0 && marginal && !self.unconfirmed && self.good.is_some_and(|g| g >= from) {
            self.unconfirmed = true;
            return decision(
                Action::Hold,
                from,
                format!(
                    "SLO missed by a margin ({:.0}% of target) where it held before: confirming next period",
                    worst * 100.0
                ),
            );
        }
        self.unconfirmed = false;

        if worst > 1.0 {
            // Missed: v is bad; a good value above it is stale (load changed).
            self.bad = Some(self.bad.map_or(from, |b| b.min(from)));
            if self.good.is_some_and(|g| g >= from) {
                self.good = None;
            }
            self.converged = false;
            self.tight = 0;
            self.slack = 0;
            self.backoff = self.cfg.backoff_periods;
            let mut target = match self.good {
                Some(g) => g,
                None => from * self.cfg.decrease,
            };
            // Not into the region where the protected cgroups were throttled.
            if let Some(lb) = self.low_bad.filter(|&lb| lb < from) {
                target = target.max((from + lb) / 2.0);
            }
            self.v = self.step_to(target);
            if self.v >= from {
                return decision(
                    Action::Hold,
                    from,
                    format!(
                        "SLO missed ({:.0}% of target) at the lower bound {}%: cannot be met within the bounds",
                        worst * 100.0,
                        self.cfg.vrate_min
                    ),
                );
            }
            return decision(
                Action::Decrease,
                self.v,
                format!("SLO missed ({:.0}% of target)", worst * 100.0),
            );
        }

        // Met: v is good.
        self.good = Some(self.good.map_or(from, |g| g.max(from)));
        if self.bad.is_some_and(|b| b <= from) {
            self.bad = None;
        }
        if self.low_bad.is_some_and(|b| b >= from) {
            self.low_bad = None;
        }
        let has_slack = worst <= 1.0 - self.cfg.margin;

        if self.converged {
            if has_slack {
                self.slack += 1;
                if self.slack >= self.cfg.reprobe_periods && from < self.cfg.vrate_max {
                    // Slack for long: the load may be lighter now; search again.
                    self.converged = false;
                    self.bad = None;
                    self.slack = 0;
                    self.v = self.step_to(from * self.cfg.increase);
                    return decision(
                        Action::Increase,
                        self.v,
                        format!(
                            "slack for {} periods since converging ({:.0}% of target): probing upwards",
                            self.cfg.reprobe_periods,
                            worst * 100.0
                        ),
                    );
                }
            } else {
                self.slack = 0;
            }
            return decision(
                Action::Hold,
                from,
                format!("converged, SLO met ({:.0}% of target)", worst * 100.0),
            );
        }

        if self.bracket_closed() {
            self.converged = true;
            self.v = self.good.expect("bracket has a good value");
            return decision(
                Action::Converged,
                self.v,
                format!(
                    "converged: met at {}%, missed at {}%",
                    self.v,
                    self.bad.unwrap_or(f64::NAN)
                ),
            );
        }
        if self.backoff > 0 {
            self.backoff -= 1;
            return decision(
                Action::Hold,
                from,
                format!(
                    "backing off after a miss ({} periods left), SLO met ({:.0}% of target)",
                    self.backoff,
                    worst * 100.0
                ),
            );
        }
        if !has_slack || from >= self.cfg.vrate_max {
            self.tight += 1;
            if self.tight >= self.cfg.settle_periods {
                self.converged = true;
                return decision(
                    Action::Converged,
                    from,
                    if from >= self.cfg.vrate_max {
                        format!(
                            "converged at the upper bound: SLO met ({:.0}% of target)",
                            worst * 100.0
                        )
                    } else {
                        format!(
                            "converged: held within the margin for {} periods ({:.0}% of target)",
                            self.tight,
                            worst * 100.0
                        )
                    },
                );
            }
            return decision(
                Action::Hold,
                from,
                format!(
                    "SLO met within the {:.0}% margin ({:.0}% of target)",
                    self.cfg.margin * 100.0,
                    worst * 100.0
                ),
            );
        }
        self.tight = 0;
        let target = match self.bad {
            Some(b) => (from + b) / 2.0,
            None => from * self.cfg.increase,
        };
        self.v = self.step_to(target);
        decision(
            Action::Increase,
            self.v,
            format!("SLO met with slack ({:.0}% of target)", worst * 100.0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::plant::Plant;
    use super::*;

    fn slo(observed: f64, target: f64, samples: u64) -> Measurement {
        Measurement {
            slos: vec![SloSample {
                name: "/lc read-p99".into(),
                target_seconds: target,
                observed_seconds: Some(observed),
                samples,
                throttle_seconds: 0.0,
            }],
            throughput_bytes_per_second: 1e8,
            iops: 1000.0,
        }
    }

    #[test]
    fn a_protected_cgroup_throttled_by_iocost_raises_vrate() {
        let mut c = Controller::new(ControllerConfig {
            start: 10.0,
            ..Default::default()
        });
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
        let d = c.decide(&slo(0.004, 0.002, 1000));
        assert_eq!(d.action, Action::Decrease);
        assert!(d.to > 10.0, "{d:?}");
        // At the upper bound it says what to do instead.
        let mut c = Controller::new(ControllerConfig::default());
        let d = c.decide(&m);
        assert_eq!(d.action, Action::Hold);
        assert!(d.reason.contains("raise its io.weight"), "{}", d.reason);
    }

    #[test]
    fn finds_the_window_between_throttling_and_queueing() {
        let mut plant = Plant {
            lc_demand_units_per_second: 2_000.0,
            ..Plant::default()
        };
        let mut c = Controller::new(ControllerConfig {
            start: 5.0,
            ..Default::default()
        });
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
        assert!(at <= 12, "converged after {at} periods: {ds:#?}");
        let v = c.vrate();
        // Meets the SLO and is within the resolution (plus the margin) of the best.
        assert!(v <= best + 1e-9, "vrate {v} above the best feasible {best}");
        assert!(v >= best * 0.75, "vrate {v} far below the best {best}");
        let m = plant.period_noiseless(v);
        assert!(m.slos[0].observed_seconds.unwrap() <= target);
        // And it keeps far more throughput than the tightest bound.
        let low = plant.period_noiseless(ControllerConfig::default().vrate_min);
        assert!(m.throughput_bytes_per_second > 2.0 * low.throughput_bytes_per_second);
        // After converging it stays put.
        assert!(ds[at + 1..].iter().all(|d| d.from == d.to), "{ds:#?}");
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
                assert!((d.to - d.from).abs() <= cfg.max_step + 1e-9, "{d:?}");
            }
        }
    }

    #[test]
    fn a_miss_lowers_at_once_and_blocks_increases_while_backing_off() {
        let mut c = Controller::new(ControllerConfig::default());
        let d = c.decide(&slo(0.004, 0.002, 1000));
        assert_eq!(d.action, Action::Decrease);
        assert_eq!(d.to, 70.0);
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
        let d = c.decide(&slo(0.0005, 0.002, 1000));
        assert_eq!(d.action, Action::Increase);
        // Bisects towards the known-bad 100.
        assert_eq!(d.to, 85.0);
    }

    #[test]
    fn a_marginal_miss_where_it_held_before_needs_confirmation() {
        let mut c = Controller::new(ControllerConfig {
            start: 50.0,
            ..Default::default()
        });
        c.decide(&slo(0.0018, 0.002, 1000)); // met: 50 is good
        let d = c.decide(&slo(0.0022, 0.002, 1000)); // 110%: maybe noise
        assert_eq!((d.action, d.to), (Action::Hold, 50.0), "{d:?}");
        assert!(d.reason.contains("confirming"), "{}", d.reason);
        let d = c.decide(&slo(0.0018, 0.002, 1000)); // met again: it was noise
        assert_eq!(d.to, 50.0);
        c.decide(&slo(0.0022, 0.002, 1000));
        let d = c.decide(&slo(0.0022, 0.002, 1000)); // confirmed
        assert_eq!(d.action, Action::Decrease, "{d:?}");
        // A large miss acts at once.
        let mut c = Controller::new(ControllerConfig {
            start: 50.0,
            ..Default::default()
        });
        c.decide(&slo(0.0018, 0.002, 1000));
        assert_eq!(c.decide(&slo(0.003, 0.002, 1000)).action, Action::Decrease);
    }

    #[test]
    fn hysteresis_holds_within_the_margin() {
        let mut c = Controller::new(ControllerConfig {
            start: 50.0,
            ..Default::default()
        });
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
        let mut c = Controller::new(ControllerConfig {
            start: 6.0,
            ..Default::default()
        });
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
        run(&mut plant, &mut c, 30);
        assert!(c.converged());
        let before = c.vrate();
        // The device gets slower: the converged value now misses.
        plant.capacity_units_per_second *= 0.6;
        let ds = run(&mut plant, &mut c, 30);
        assert!(ds.iter().any(|d| d.action == Action::Decrease));
        assert!(c.converged() && c.vrate() < before, "{ds:#?}");
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
}
