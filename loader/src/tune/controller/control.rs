//! The controller: its search's state (the vrates known to meet or miss
//! the SLOs) and one decision per period; search.rs holds the search's
//! steps.

use std::fmt::Write;

use super::config::ControllerConfig;
use super::decision::{Action, Decision, Verdict};
use super::measurement::{Measurement, SloSample};

/// The vrate search, one decision per period (see mod.rs).
pub struct Controller {
    pub(super) cfg: ControllerConfig,
    pub(super) v: f64,
    /// Highest vrate at which every SLO held.
    pub(super) good: Option<f64>,
    /// The vrates at which an SLO was missed (device queueing) and no
    /// period met since at or above them, lowest first: the lowest bounds
    /// the climb; where a period meets at it (the miss was a queue built
    /// above it draining), the next one up bounds it again (m-47 at 500
    /// requests/s, issue 56: with only the lowest kept, a drain's miss at
    /// 23.64 % erased the miss at 26.46 %, and the search stepped there
    /// again every 27 s, three misses each time).
    pub(super) misses: Vec<f64>,
    /// Highest vrate at which a protected cgroup was throttled by iocost.
    pub(super) low_bad: Option<f64>,
    pub(super) backoff: u32,
    /// Consecutive periods met within the margin at the current v.
    pub(super) tight: u32,
    /// The worst SLO ratio of the last periods at the current v (reset
    /// when v moves): an increase needs two with slack, so that a load
    /// whose phases outlast a period is seen whole (issue 56).
    pub(super) here: Vec<f64>,
    /// Periods the SLOs held at the current v since it last moved.
    pub(super) met_here: u32,
    /// Periods judged since a miss where the SLO held before was taken for
    /// noise (None: never).
    pub(super) since_excused: Option<u32>,
    /// Consecutive periods with slack while converged.
    pub(super) slack: u32,
    /// The converged value a probe climbs from after long slack (steps of
    /// one resolution until a miss); the miss returns there.
    pub(super) probe_base: Option<f64>,
    pub(super) converged: bool,
    /// Nothing written yet: the first judged period decides where to start.
    pub(super) observing: bool,
    /// The last decision was the first pin, below a load the SLOs missed
    /// at, or above a QoS that was the limit: the next period drains the
    /// queue built before it, or the I/O iocost held back.
    pub(super) draining: bool,
    /// The device's pace as found: the vrate that admits what it
    /// completed with iocost as found, where the SLOs were missed there or
    /// the device saturated with iocost not the limit.
    pub(super) found: Option<f64>,
    /// `found` is the capacity of the cost model the user set, not a rate
    /// measured: no period has measured the device's pace.
    pub(super) declared: bool,
    /// The value the last step up left, held with slack there: where a
    /// miss above returns when `good` was the value missed at.
    pub(super) left: Option<f64>,
}

/// The smallest factor one decrease applies (a miss far above the target).
pub(super) const MOST_DOWN: f64 = 0.5;

/// The share of the cost rate the device completed with iocost as found
/// that the first pin admits, where the SLOs were missed there: the load at
/// which a queue's waits double (M/M/1), from which the search climbs by
/// what each period measures. Pinning the found load itself missed in
/// m-47 by 4-50x (issue 56).
pub(super) const FIRST_SHARE: f64 = 0.4;

/// The room the first pin needs above --vrate-min: two halvings. m-47 at
/// 500 requests/s on the kernel's default SSD model started at 1.76 %,
/// and 1 %, io.cost.qos's floor, still missed by 3-4x (issue 56).
pub(super) const FLOOR_ROOM: f64 = 4.0;

/// The share of that found rate the search climbs to at most: near the
/// rate a device completed saturated, its queue tips a period after a step
/// that met (m-47 at 2000 requests/s converged at 89 % of it with the SLO
/// at 26-35 % of the target, then missed at 2152 %: QEMU's throttle keeps
/// the reader's p99 flat up to the cap).
pub(super) const KNEE_SHARE: f64 = 0.8;

/// Misses kept, the lowest: a descent's few steps (m-47 at 500
/// requests/s: 49.97, 35.92, 28.90, 25.39, 23.64 %).
const MISSES_KEPT: usize = 8;

/// Rounds to the two decimals io.cost.qos keeps, so the value written is the
/// value remembered.
pub(super) fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

impl Controller {
    pub fn new(cfg: ControllerConfig) -> Controller {
        let v = round2(cfg.start);
        Controller {
            v,
            good: None,
            misses: Vec::new(),
            low_bad: None,
            backoff: 0,
            tight: 0,
            here: Vec::new(),
            met_here: 0,
            since_excused: None,
            slack: 0,
            probe_base: None,
            converged: false,
            observing: cfg.observe_first,
            draining: false,
            found: None,
            declared: false,
            left: None,
            cfg,
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
    /// The first period is being measured with iocost as found: nothing
    /// written yet.
    pub fn observing(&self) -> bool {
        self.observing
    }
    /// The period under way is the one after the first pin: its later part
    /// is judged apart (`Measurement::late_slos`).
    pub fn draining(&self) -> bool {
        self.draining
    }
    pub fn bracket(&self) -> (Option<f64>, Option<f64>) {
        (self.good, self.bad())
    }

    /// Lowest vrate at which an SLO was missed (device queueing).
    pub(super) fn bad(&self) -> Option<f64> {
        self.misses.first().copied()
    }

    /// A miss at `v` (kept sorted, without repeats, the lowest
    /// `MISSES_KEPT`: one miss a period would grow it without end).
    pub(super) fn mark_bad(&mut self, v: f64) {
        if let Err(i) = self.misses.binary_search_by(|b| b.total_cmp(&v)) {
            self.misses.insert(i, v);
            self.misses.truncate(MISSES_KEPT);
        }
    }

    /// Misses at or below `v` contradicted (met there, or the hold's): the
    /// lowest above it bounds the climb now.
    pub(super) fn clear_bad_through(&mut self, v: f64) {
        self.misses.retain(|&b| b > v);
    }

    /// Follows a change of the cost model's scale: every vrate known so far
    /// is multiplied by `factor` (the change in cost of the device's work),
    /// so the search continues from the same admitted load. Returns the new v.
    pub fn rescale(&mut self, factor: f64) -> f64 {
        let c = &self.cfg;
        self.v = round2((self.v * factor).clamp(c.vrate_min, c.vrate_max));
        self.good = self.good.map(|g| g * factor);
        self.misses.iter_mut().for_each(|b| *b *= factor);
        self.low_bad = self.low_bad.map(|b| b * factor);
        self.probe_base = self.probe_base.map(|b| b * factor);
        self.left = self.left.map(|b| b * factor);
        self.converged = false;
        self.tight = 0;
        self.slack = 0;
        self.here.clear();
        self.met_here = 0;
        self.found = self.found.map(|f| f * factor);
        // Right after the first pin, the start follows the found load.
        if let Some(found) = self.found.filter(|_| self.draining) {
            self.v = round2((found * FIRST_SHARE).clamp(c.vrate_min, c.vrate_max));
        }
        self.v
    }

    /// Right after the first pin: the cost rate the device completed as
    /// found (seconds of the model's device time per second) where the
    /// first pin came within `FLOOR_ROOM` of --vrate-min: the model in
    /// force is so optimistic that the search has no room below.
    pub fn start_below_floor(&self) -> Option<f64> {
        let found = self.found.filter(|_| self.draining)?;
        (found * FIRST_SHARE < FLOOR_ROOM * self.cfg.vrate_min).then_some(found / 100.0)
    }

    /// A bounded move from v towards `to`, inside the bounds: at most
    /// `max_step` points, or one increase (decrease) factor where that is
    /// more. What iocost admits follows vrate's ratio, not its points: above
    /// 100 % a fixed 30 points is a small step (m-47 from a 4x pessimistic
    /// model climbed from 144 % by 30 a period, and its large writes never
    /// reached the device's saturation before the run ended).
    pub(super) fn step_to(&self, to: f64) -> f64 {
        let c = &self.cfg;
        let up = c.max_step.max(self.v * (c.increase - 1.0));
        let down = c.max_step.max(self.v * (1.0 - MOST_DOWN));
        let to = to.clamp(self.v - down, self.v + up);
        round2(to.clamp(c.vrate_min, c.vrate_max))
    }

    pub(super) fn bracket_closed(&self) -> bool {
        match (self.good, self.bad()) {
            (Some(g), Some(b)) => b - g <= self.cfg.resolution * g || b - g <= 0.02,
            _ => false,
        }
    }

    pub fn decide(&mut self, m: &Measurement) -> Decision {
        let from = self.v;
        let why = describe(m);
        let (action, to, head) = self.judge(m, from);
        // Nothing was pinned before the first pin.
        let from = if action == Action::Start { to } else { from };
        if to != from {
            self.here.clear();
            self.met_here = 0;
        }
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
        if self.observing {
            let throttled = worst_slo.is_some_and(|s| s.throttled());
            return self.start_from_observation(m, worst, throttled);
        }
        // The queue iocost off left (m-47 at 500 requests/s: 32 reads of
        // 128 KiB, 250 ms) drains in the period after the first pin, and
        // a pin's settling step holds every cgroup while it lasts: the
        // size of a miss there says little of the vrate pinned.
        let draining = std::mem::take(&mut self.draining);
        if !m.late_slos.is_empty() {
            if let Some(verdict) = self.hold_if_later_part_met(from, worst, m, draining) {
                return verdict;
            }
        }
        // Held by iocost: the hold is most of the tail, or the cgroup's own
        // I/O uses more of its budget than OWN_LOAD (then up to where it
        // uses that much).
        let own_floor = m.held_floor().filter(|&f| f > from);
        if worst > 1.0 && (worst_slo.is_some_and(|s| s.throttled()) || own_floor.is_some()) {
            let held = m.slos.iter().find(|s| s.over_own_budget(from));
            let name = held.or(worst_slo).map_or("", |s| s.name.as_str());
            return self.raise_out_of_throttle(from, worst, name, own_floor);
        }
        if let Some(verdict) = self.confirm_contradicting_miss(from, worst) {
            return verdict;
        }
        if worst > 1.0 {
            return self.lower_after_miss(from, worst, draining, m.held_floor());
        }
        self.record_met(from);
        let has_slack = worst <= 1.0 - self.cfg.margin;
        if self.converged {
            return self.hold_or_reprobe(from, worst, has_slack);
        }
        self.search_while_met(from, worst, has_slack)
    }
}

/// The measurement as the tail of every reason: each SLO, then the device.
fn describe(m: &Measurement) -> String {
    let mut why = String::new();
    for s in &m.slos {
        let _ = write!(
            why,
            "{} {} + {:.3}ms throttled{}{} (target {}, {} I/Os); ",
            s.name,
            s.observed_seconds
                .map_or("-".to_string(), |o| format!("{:.3}ms", o * 1e3)),
            s.throttle_seconds * 1e3,
            s.throttle_tail_seconds
                .map_or(String::new(), |t| format!(", its tail {:.3}ms", t * 1e3)),
            s.own_need.map_or(String::new(), |n| format!(
                ", its own I/O {n:.2}% of vrate at its weight"
            )),
            format_args!("{:.3}ms", s.target_seconds * 1e3),
            s.samples
        );
    }
    let _ = write!(
        why,
        "device {:.1} MB/s {:.0} IOPS, {:.1}% of the cost model's capacity",
        m.throughput_bytes_per_second / 1e6,
        m.iops,
        m.cost_rate * 100.0
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
