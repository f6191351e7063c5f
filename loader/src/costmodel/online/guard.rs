//! Guard rails of the io.cost.model write-back, pure: whether a fit may
//! change the model this period, by how much, and whether the last change
//! is kept or rolled back.
//!
//! - only parameters the fit determined (enough samples, small relative
//!   error) move; the others keep their value;
//! - a parameter moves only when the fit differs from it by more than the
//!   hysteresis, and by at most a factor `max_step` per change;
//! - after a change the model is held for `judge_periods` periods while the
//!   protected cgroups' SLOs are watched (the QoS controller holds too, so a
//!   change of the SLOs is the model's doing); if the SLOs got worse by more
//!   than `worse_by` and missed, the previous model is put back and no
//!   change is tried for `cooldown_periods`.
//!
//! With the QoS controller: the model sets the scale (vrate 100% = the
//! device's measured capacity) and vrate the margin. A model change rescales
//! vrate by the smallest change in cost over the mixes the device has been
//! serving (its saturated windows), so that at the moment of the change
//! iocost admits no more of any of them than before, and the QoS search
//! continues from there.

use crate::costmodel::LinearModel;

use super::solve::NAMES;
use super::windows::{unit_costs, Fit, PARAMS};

#[derive(Clone, Debug, PartialEq)]
pub struct GuardConfig {
    /// Largest factor by which one change moves a parameter.
    pub max_step: f64,
    /// Relative difference between fit and model below which nothing moves.
    pub hysteresis: f64,
    /// Periods a change is watched before it is kept.
    pub judge_periods: u32,
    /// Worst SLO ratio (observed / target) worse by more than this fraction
    /// after a change, and above 1 (a miss): the change is rolled back.
    pub worse_by: f64,
    /// Periods without changes after a rollback.
    pub cooldown_periods: u32,
}

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            max_step: 2.0,
            hysteresis: 0.10,
            judge_periods: 2,
            worse_by: 0.2,
            cooldown_periods: 10,
        }
    }
}

impl GuardConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.max_step.is_nan() || self.max_step <= 1.0 || self.max_step > 10.0 {
            return Err(format!(
                "model max step {} must be a factor above 1 and at most 10",
                self.max_step
            ));
        }
        if self.hysteresis.is_nan() || self.hysteresis < 0.0 || self.hysteresis >= 1.0 {
            return Err(format!(
                "model hysteresis {} outside [0, 1)",
                self.hysteresis
            ));
        }
        if self.judge_periods == 0 {
            return Err("a model change must be judged over at least 1 period".into());
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelAction {
    /// The fit determines nothing yet: nothing changes.
    Insufficient,
    /// Every determined parameter is within the hysteresis.
    Converged,
    /// A bounded step towards the fit.
    Step,
    /// Watching the last step.
    Judging,
    /// The last step held the SLOs: kept.
    Keep,
    /// The last step made the SLOs worse: the previous model is back.
    Rollback,
    /// No change for a while after a rollback.
    Cooldown,
    /// A step is due, but the period just measured missed an SLO: the QoS
    /// controller acts on the miss first.
    Deferred,
}

impl ModelAction {
    pub fn as_str(self) -> &'static str {
        match self {
            ModelAction::Insufficient => "insufficient",
            ModelAction::Converged => "converged",
            ModelAction::Step => "step",
            ModelAction::Judging => "judging",
            ModelAction::Keep => "keep",
            ModelAction::Rollback => "rollback",
            ModelAction::Cooldown => "cooldown",
            ModelAction::Deferred => "deferred",
        }
    }

    /// Whether the period just measured ran under a model change not yet
    /// judged when it started (the decision judges it or watches it).
    pub fn measured_a_change(self) -> bool {
        matches!(
            self,
            ModelAction::Judging | ModelAction::Keep | ModelAction::Rollback
        )
    }

    /// Whether the QoS controller must hold vrate this period.
    pub fn holds_qos(self) -> bool {
        matches!(
            self,
            ModelAction::Step | ModelAction::Judging | ModelAction::Rollback
        )
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ModelDecision {
    pub action: ModelAction,
    pub reason: String,
    pub from: LinearModel,
    pub to: LinearModel,
    /// Factor to apply to vrate with the new model (1: unchanged).
    pub vrate_factor: f64,
}

struct Judged {
    previous: LinearModel,
    factor: f64,
    before: Option<f64>,
    after: Vec<f64>,
    left: u32,
}

pub struct Guard {
    cfg: GuardConfig,
    judging: Option<Judged>,
    cooldown: u32,
}

/// Cost of `work` (per column: requests or pages) under `m`, seconds.
fn cost_of(work: &[f64; PARAMS], m: &LinearModel) -> f64 {
    work.iter().zip(unit_costs(m)).map(|(w, u)| w * u).sum()
}

/// The factor vrate follows a model change from `from` to `to` by: the
/// smallest ratio of new to old cost over the windows' mixes, so that iocost
/// admits no more of any mix the device served than before (the budget
/// scales by it, each mix's cost by its own ratio, at least it). With the
/// ratio of the windows' total work instead, a step that made pages dearer
/// (rbps 122 -> 61 MB/s, vrate x1.25 at m-47's 3,000/s point) admitted 25 %
/// more of the 4 KiB phase of a hog cycling 4 KiB and 128 KiB reads, whose
/// cost had not changed (a 4 KiB request costs 1/rrandiops whatever the
/// page cost), and the protected reader missed at 275 % of its target
/// until the step was rolled back (twice in two runs). 1 without any work.
fn vrate_factor(fit: &Fit, from: &LinearModel, to: &LinearModel) -> f64 {
    let ratio = |work: &[f64; PARAMS]| {
        let old = cost_of(work, from);
        (old > 0.0).then(|| cost_of(work, to) / old)
    };
    fit.window_work
        .iter()
        .filter_map(ratio)
        .reduce(f64::min)
        .or_else(|| ratio(&fit.work))
        .unwrap_or(1.0)
}

/// Why each undetermined parameter is, as `name: reason; ...`.
fn undetermined(fit: &Fit) -> String {
    let why: Vec<String> = fit
        .params
        .iter()
        .zip(NAMES)
        .filter(|(p, _)| !p.reason.is_empty())
        .map(|(p, n)| format!("{n}: {}", p.reason))
        .collect();
    why.join("; ")
}

impl Guard {
    pub fn new(cfg: GuardConfig) -> Guard {
        Guard {
            cfg,
            judging: None,
            cooldown: 0,
        }
    }

    /// One period: `slo_ratio` is the worst observed / target of the
    /// protected cgroups' SLOs (None: too few samples to judge).
    pub fn decide(
        &mut self,
        current: LinearModel,
        fit: &Fit,
        slo_ratio: Option<f64>,
    ) -> ModelDecision {
        let hold = |action, reason: String| ModelDecision {
            action,
            reason,
            from: current,
            to: current,
            vrate_factor: 1.0,
        };
        if let Some(j) = self.judging.as_mut() {
            j.after.extend(slo_ratio);
            j.left -= 1;
            if j.left > 0 {
                return hold(
                    ModelAction::Judging,
                    format!("watching the last change: {} more period(s)", j.left),
                );
            }
            return self.judge(current);
        }
        if self.cooldown > 0 {
            self.cooldown -= 1;
            return hold(
                ModelAction::Cooldown,
                format!("{} period(s) left after a rollback", self.cooldown),
            );
        }
        if fit.determined() == 0 {
            return hold(
                ModelAction::Insufficient,
                format!(
                    "nothing determined, nothing changed ({})",
                    undetermined(fit)
                ),
            );
        }
        let (to, moved) = self.bounded_target(current, fit);
        if moved.is_empty() {
            return hold(
                ModelAction::Converged,
                format!(
                    "every determined parameter within {:.0}% of the fit",
                    self.cfg.hysteresis * 100.0
                ),
            );
        }
        // A step holds the QoS controller: in a period that missed, neither
        // would act on the miss, and the step would be judged against a
        // missed baseline (m-47 at 2,000/s: steps in periods at 271 % and
        // 221 % of the target, kept as improvements).
        if let Some(r) = slo_ratio.filter(|&r| r > 1.0) {
            return hold(
                ModelAction::Deferred,
                format!(
                    "a step is due, but the SLOs missed ({:.0}% of target): the QoS controller acts first",
                    r * 100.0
                ),
            );
        }
        self.step(current, to, &moved, fit, slo_ratio)
    }

    /// Moves the model to `to` and starts judging the move: vrate follows
    /// (`vrate_factor`), and the SLO before it is kept.
    fn step(
        &mut self,
        current: LinearModel,
        to: LinearModel,
        moved: &[String],
        fit: &Fit,
        slo_ratio: Option<f64>,
    ) -> ModelDecision {
        let factor = vrate_factor(fit, &current, &to);
        self.judging = Some(Judged {
            previous: current,
            factor,
            before: slo_ratio,
            after: Vec::new(),
            left: self.cfg.judge_periods,
        });
        ModelDecision {
            action: ModelAction::Step,
            reason: format!("towards the fit: {}", moved.join(", ")),
            from: current,
            to,
            vrate_factor: factor,
        }
    }

    /// The model one bounded step towards the fit, and what moved.
    fn bounded_target(&self, current: LinearModel, fit: &Fit) -> (LinearModel, Vec<String>) {
        let mut v = current.values();
        let mut moved = Vec::new();
        for i in 0..PARAMS {
            let Some(target) = fit.params[i].value else {
                continue;
            };
            let cur = v[i];
            let next = if cur == 0 {
                target
            } else {
                let ratio = target as f64 / cur as f64;
                if (ratio - 1.0).abs() <= self.cfg.hysteresis {
                    continue;
                }
                let r = ratio.clamp(1.0 / self.cfg.max_step, self.cfg.max_step);
                ((cur as f64 * r).round() as u64).max(1)
            };
            if next != cur {
                moved.push(format!("{} {cur} -> {next} (fit {target})", NAMES[i]));
                v[i] = next;
            }
        }
        (LinearModel::from_values(v), moved)
    }

    fn judge(&mut self, current: LinearModel) -> ModelDecision {
        let j = self.judging.take().expect("judging");
        let after =
            (!j.after.is_empty()).then(|| j.after.iter().sum::<f64>() / j.after.len() as f64);
        let before = j.before.unwrap_or(1.0);
        let worse = after.is_some_and(|a| a > 1.0 && a > before * (1.0 + self.cfg.worse_by));
        let fmt = |r: Option<f64>| r.map_or("-".into(), |r| format!("{:.0}%", r * 100.0));
        if worse {
            self.cooldown = self.cfg.cooldown_periods;
            return ModelDecision {
                action: ModelAction::Rollback,
                reason: format!(
                    "SLOs worse after the change: worst at {} of target, {} before",
                    fmt(after),
                    fmt(j.before)
                ),
                from: current,
                to: j.previous,
                vrate_factor: 1.0 / j.factor,
            };
        }
        ModelDecision {
            action: ModelAction::Keep,
            reason: format!(
                "SLOs not worse: worst at {} of target, {} before",
                fmt(after),
                fmt(j.before)
            ),
            from: current,
            to: current,
            vrate_factor: 1.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::costmodel::online::windows::ParamFit;

    const TRUE: LinearModel = LinearModel {
        rbps: 240_000_000,
        rseqiops: 15_000,
        rrandiops: 13_600,
        wbps: 270_000_000,
        wseqiops: 12_000,
        wrandiops: 7_600,
    };

    /// A fit that determined `which` parameters at TRUE's values.
    fn fit(which: &[usize]) -> Fit {
        let mut f = Fit {
            work: [1e6, 1e4, 1e4, 1e6, 1e4, 1e4],
            ..Default::default()
        };
        for (i, v) in TRUE.values().into_iter().enumerate() {
            f.params[i] = if which.contains(&i) {
                ParamFit {
                    value: Some(v),
                    estimate: v,
                    ..Default::default()
                }
            } else {
                ParamFit {
                    reason: "no such requests in the saturated windows".into(),
                    ..Default::default()
                }
            };
        }
        f
    }

    fn scaled(m: &LinearModel, k: f64) -> LinearModel {
        LinearModel::from_values(m.values().map(|v| (v as f64 * k).round() as u64))
    }

    /// Runs periods until `n` or a converged decision; returns the decisions.
    fn run(
        g: &mut Guard,
        mut m: LinearModel,
        f: &Fit,
        n: usize,
    ) -> (LinearModel, Vec<ModelDecision>) {
        let mut out = Vec::new();
        for _ in 0..n {
            let d = g.decide(m, f, Some(0.5));
            m = d.to;
            let done = d.action == ModelAction::Converged;
            out.push(d);
            if done {
                break;
            }
        }
        (m, out)
    }

    #[test]
    fn four_times_off_either_way_converges_in_bounded_steps() {
        let all = [0, 1, 2, 3, 4, 5];
        for start in [scaled(&TRUE, 4.0), scaled(&TRUE, 0.25)] {
            let mut g = Guard::new(GuardConfig::default());
            let (m, ds) = run(&mut g, start, &fit(&all), 20);
            assert_eq!(m, TRUE, "{ds:#?}");
            let steps: Vec<_> = ds
                .iter()
                .filter(|d| d.action == ModelAction::Step)
                .collect();
            assert_eq!(steps.len(), 2, "x4 in steps of at most x2: {ds:#?}");
            for d in &steps {
                for (a, b) in d.from.values().iter().zip(d.to.values()) {
                    let r = b as f64 / *a as f64;
                    assert!((0.499..=2.001).contains(&r), "{d:?}");
                }
            }
            // Between steps the change is watched (QoS held), then kept.
            let actions: Vec<_> = ds.iter().map(|d| d.action.as_str()).collect();
            assert_eq!(
                actions,
                [
                    "step",
                    "judging",
                    "keep",
                    "step",
                    "judging",
                    "keep",
                    "converged"
                ]
            );
            assert!(ds[0].action.holds_qos() && ds[1].action.holds_qos());
            assert!(!ds[2].action.holds_qos());
        }
    }

    #[test]
    fn vrate_follows_the_scale_of_the_model() {
        // Costs halve (model twice as optimistic): vrate halves, so iocost
        // admits the same work at the moment of the change.
        let mut g = Guard::new(GuardConfig::default());
        let d = g.decide(scaled(&TRUE, 0.5), &fit(&[0, 1, 2, 3, 4, 5]), None);
        assert_eq!(d.action, ModelAction::Step);
        assert!((d.vrate_factor - 0.5).abs() < 0.01, "{d:?}");
    }

    /// Pages made dearer: a window of 128 KiB reads costs more after the
    /// step, one of 4 KiB reads the same. vrate follows the 4 KiB window's
    /// ratio, the smaller (1), so neither window's work is admitted more
    /// than before; with the total work's ratio the 4 KiB one would be.
    #[test]
    fn vrate_follows_the_mix_whose_cost_changes_least() {
        let mut f = fit(&[0]);
        let small = [1000.0, 0.0, 1000.0, 0.0, 0.0, 0.0];
        let large = [32.0 * 300.0, 0.0, 300.0, 0.0, 0.0, 0.0];
        f.window_work = vec![small, large, small];
        f.work = std::array::from_fn(|i| f.window_work.iter().map(|w| w[i]).sum());
        let mut start = TRUE;
        start.rbps *= 2;
        let mut g = Guard::new(GuardConfig::default());
        let d = g.decide(start, &f, None);
        assert_eq!(
            (d.action, d.to.rbps),
            (ModelAction::Step, TRUE.rbps),
            "{d:?}"
        );
        let ratio = |w: &[f64; PARAMS]| cost_of(w, &d.to) / cost_of(w, &d.from);
        let (r_small, r_large) = (ratio(&small), ratio(&large));
        // iocost charges a 4 KiB request 1/rrandiops whatever the page cost.
        assert!(
            (r_small - 1.0).abs() < 1e-9 && r_large > 1.5,
            "{r_small} {r_large}"
        );
        assert!((d.vrate_factor - r_small).abs() < 1e-12, "{d:?}");
        assert!(d.vrate_factor < ratio(&f.work));
    }

    #[test]
    fn within_hysteresis_and_undetermined_parameters_do_not_move() {
        let mut g = Guard::new(GuardConfig::default());
        let near = scaled(&TRUE, 1.08);
        let d = g.decide(near, &fit(&[0, 1, 2, 3, 4, 5]), None);
        assert_eq!(d.action, ModelAction::Converged);
        assert_eq!(d.to, near);
        // Only rrandiops determined: only it moves.
        let start = scaled(&TRUE, 3.0);
        let d = g.decide(start, &fit(&[2]), None);
        assert_eq!(d.action, ModelAction::Step);
        let mut want = start;
        want.rrandiops = (start.rrandiops as f64 / 2.0).round() as u64;
        assert_eq!(d.to, want);
        assert!(
            d.reason.contains("rrandiops 40800 -> 20400 (fit 13600)"),
            "{}",
            d.reason
        );
    }

    #[test]
    fn a_fit_without_determined_parameters_changes_nothing() {
        let mut g = Guard::new(GuardConfig::default());
        let d = g.decide(TRUE, &fit(&[]), None);
        assert_eq!(d.action, ModelAction::Insufficient);
        assert_eq!((d.to, d.vrate_factor), (TRUE, 1.0));
        assert!(d.reason.contains("rbps: no such requests"), "{}", d.reason);
    }

    #[test]
    fn worse_slos_after_a_change_roll_it_back_and_cool_down() {
        let cfg = GuardConfig::default();
        let mut g = Guard::new(cfg.clone());
        let start = scaled(&TRUE, 0.25);
        let f = fit(&[0, 1, 2, 3, 4, 5]);
        let d = g.decide(start, &f, Some(0.8));
        assert_eq!(d.action, ModelAction::Step);
        // The period a step is decided on ran under the model before it;
        // the periods judged and the one that rolls back ran under the step.
        assert!(!d.action.measured_a_change());
        let stepped = d.to;
        let judging = g.decide(stepped, &f, Some(1.5)).action;
        assert_eq!(judging, ModelAction::Judging);
        assert!(judging.measured_a_change());
        let d = g.decide(stepped, &f, Some(1.7));
        assert_eq!(d.action, ModelAction::Rollback, "{d:?}");
        assert!(d.action.measured_a_change());
        assert_eq!(d.to, start);
        // The step halved the costs (and vrate); the rollback doubles them back.
        assert!((d.vrate_factor - 2.0).abs() < 0.01, "{d:?}");
        assert!(
            d.reason.contains("160% of target, 80% before"),
            "{}",
            d.reason
        );
        for _ in 0..cfg.cooldown_periods {
            let cooldown = g.decide(start, &f, Some(0.5)).action;
            assert_eq!(cooldown, ModelAction::Cooldown);
            assert!(!cooldown.measured_a_change());
        }
        assert_eq!(g.decide(start, &f, Some(0.5)).action, ModelAction::Step);
    }

    /// A period that missed gets no model step: the QoS controller, which a
    /// step would hold, acts on it; the step comes with the next met period.
    #[test]
    fn a_step_waits_for_a_period_that_met() {
        let mut g = Guard::new(GuardConfig::default());
        let f = fit(&[0, 1, 2, 3, 4, 5]);
        let start = scaled(&TRUE, 4.0);
        let d = g.decide(start, &f, Some(2.7));
        assert_eq!((d.action, d.to), (ModelAction::Deferred, start), "{d:?}");
        assert!(!d.action.holds_qos() && !d.action.measured_a_change());
        assert!(d.reason.contains("270% of target"), "{}", d.reason);
        // Too few samples to judge the SLOs do not defer it.
        let d = g.decide(start, &f, None);
        assert_eq!(d.action, ModelAction::Step, "{d:?}");
    }

    #[test]
    fn slos_met_or_no_worse_keep_the_change() {
        let mut g = Guard::new(GuardConfig::default());
        let f = fit(&[2]);
        let d = g.decide(scaled(&TRUE, 4.0), &f, Some(0.99));
        g.decide(d.to, &f, Some(1.15));
        // A miss, but no worse than before by more than worse_by.
        assert_eq!(g.decide(d.to, &f, None).action, ModelAction::Keep);
    }

    #[test]
    fn bad_guard_settings_are_refused() {
        let bad = |c: GuardConfig| c.validate().unwrap_err();
        assert!(bad(GuardConfig {
            max_step: 1.0,
            ..Default::default()
        })
        .contains("above 1"));
        assert!(bad(GuardConfig {
            hysteresis: 1.0,
            ..Default::default()
        })
        .contains("[0, 1)"));
        assert!(bad(GuardConfig {
            judge_periods: 0,
            ..Default::default()
        })
        .contains("1 period"));
        GuardConfig::default().validate().unwrap();
    }
}
