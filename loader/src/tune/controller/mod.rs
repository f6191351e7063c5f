//! The tuner's control logic, pure: one decision per period from what was
//! measured, no I/O.
//!
//! The controlled variable is iocost's vrate (percent of the cost model's
//! capacity), pinned by writing io.cost.qos `min=max=v`: under contention
//! iocost admits v% of the model's capacity, so v trades the protected
//! cgroups' latency against aggregate throughput, monotonically. The search:
//! - an SLO miss lowers v at once (to the highest value known to meet every
//!   SLO, else multiplicatively) and blocks increases for a few periods;
//!   a miss at a value known to meet them is taken for noise once in
//!   `excuse_periods`, and the next one within them acts;
//! - SLOs met with slack raise v (bisecting towards the lowest value known to
//!   miss, else multiplicatively), one bounded step per period;
//! - SLOs met but within the hysteresis margin hold v;
//! - once the good/bad bracket is narrower than the resolution, or v has held
//!   within the margin for a while, the search has converged; a miss
//!   reopens it, and long slack probes upwards again in steps of one
//!   resolution (the load may have changed) until a miss, which returns
//!   to the value held before the probe and bisects from there.

mod search;

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
    /// Largest change per decision, in percentage points, where one
    /// increase (decrease) factor of vrate is not more.
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
    /// A miss where the SLO held before is taken for noise once in this
    /// many periods; another within them acts.
    pub excuse_periods: u32,
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
            excuse_periods: 10,
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
    /// Mean time the cgroup's I/Os were held before a request existed:
    /// iowarden's throttle stage where it is measured (then already in
    /// `observed_seconds`, which runs from submission), else iocost's own
    /// count (io.stat cost.wait), which the histograms start after.
    pub throttle_seconds: f64,
    /// `observed_seconds` includes the hold (the throttle stage is measured).
    pub held_in_observed: bool,
}

impl SloSample {
    /// What the application sees: the quantile from submission, or (the
    /// hold not measured) the block-layer quantile plus the mean hold.
    pub fn effective(&self) -> f64 {
        let observed = self.observed_seconds.unwrap_or(0.0);
        match self.held_in_observed {
            true => observed,
            false => observed + self.throttle_seconds,
        }
    }
    /// The miss comes from iocost holding the cgroup back, not the device queue.
    pub fn throttled(&self) -> bool {
        self.throttle_seconds > self.effective() - self.throttle_seconds
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
    /// Periods judged since a miss where the SLO held before was taken for
    /// noise (None: never).
    since_excused: Option<u32>,
    /// Consecutive periods with slack while converged.
    slack: u32,
    /// The converged value a probe climbs from after long slack (steps of
    /// one resolution until a miss); the miss returns there.
    probe_base: Option<f64>,
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
            since_excused: None,
            slack: 0,
            probe_base: None,
            converged: false,
        }
    }

    pub fn vrate(&self) -> f64 {
        self.v
    }
    /// vrate at its lower bound: a miss cannot lower it further.
    pub fn at_floor(&self) -> bool {
        self.v <= self.cfg.vrate_min
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
        self.probe_base = self.probe_base.map(|b| b * factor);
        self.converged = false;
        self.tight = 0;
        self.slack = 0;
        self.v
    }

    /// A bounded move from v towards `to`, inside the bounds: at most
    /// `max_step` points, or one increase (decrease) factor where that is
    /// more. What iocost admits follows vrate's ratio, not its points: above
    /// 100 % a fixed 30 points is a small step (m-47 from a 4x pessimistic
    /// model climbed from 144 % by 30 a period, and its large writes never
    /// reached the device's saturation before the run ended).
    fn step_to(&self, to: f64) -> f64 {
        let c = &self.cfg;
        let up = c.max_step.max(self.v * (c.increase - 1.0));
        let down = c.max_step.max(self.v * (1.0 - c.decrease));
        let to = to.clamp(self.v - down, self.v + up);
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
        let why = describe(m);
        let (action, to, head) = self.judge(m, from);
        Decision {
            action,
            from,
            to,
            reason: format!("{head}: {why}"),
        }
    }

    /// The period's verdict, in order of precedence: too few samples to
    /// judge; a miss caused by iocost's own throttle; a miss where the SLO
    /// held before, to confirm; a miss; else met, while converged or while searching.
    fn judge(&mut self, m: &Measurement, from: f64) -> Verdict {
        if let Some(s) = m.slos.iter().find(|s| s.samples < self.cfg.min_samples) {
            return (
                Action::Insufficient,
                from,
                format!(
                    "{}: {} I/Os, fewer than {} needed to judge",
                    s.name, s.samples, self.cfg.min_samples
                ),
            );
        }
        self.since_excused = self.since_excused.map(|p| p + 1);
        let (worst, worst_slo) = worst_ratio(m);
        if worst > 1.0 && worst_slo.is_some_and(|s| s.throttled()) {
            let name = worst_slo.map_or("", |s| s.name.as_str());
            return self.raise_out_of_throttle(from, worst, name);
        }
        if let Some(verdict) = self.confirm_contradicting_miss(from, worst) {
            return verdict;
        }
        if worst > 1.0 {
            return self.lower_after_miss(from, worst);
        }
        self.record_met(from);
        let has_slack = worst <= 1.0 - self.cfg.margin;
        if self.converged {
            return self.hold_or_reprobe(from, worst, has_slack);
        }
        self.search_while_met(from, worst, has_slack)
    }
}

/// What one decision does: the action, the vrate it leaves, and the reason's
/// head (the measurement is appended by `decide`).
type Verdict = (Action, f64, String);

/// The measurement as the tail of every reason: each SLO, then the device.
fn describe(m: &Measurement) -> String {
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
    why
}

/// The largest effective/target ratio over the SLOs (0 without any), and the
/// SLO that has it.
fn worst_ratio(m: &Measurement) -> (f64, Option<&SloSample>) {
    let ratio = |s: &SloSample| s.effective() / s.target_seconds;
    let worst = m.slos.iter().map(ratio).fold(0.0, f64::max);
    let worst_slo = m.slos.iter().max_by(|a, b| ratio(a).total_cmp(&ratio(b)));
    (worst, worst_slo)
}

#[cfg(test)]
mod tests;
