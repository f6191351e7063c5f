//! What the guard decides each period, and what it reads of the QoS side.

use crate::costmodel::LinearModel;

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
    /// A step is due, but the period just measured missed an SLO, or the
    /// QoS search is still raising vrate: the QoS controller acts first.
    Deferred,
    /// Every rate scaled at once, before the first pin, to the cost rate
    /// the device completed as found: the model in force admitted more
    /// than the device even at the lowest vrate allowed.
    Scale,
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
            ModelAction::Scale => "scale",
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

/// What the QoS side saw and did around the period just measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QosPeriod {
    /// Worst observed / target of the protected cgroups' SLOs (None: too
    /// few samples to judge).
    pub slo_ratio: Option<f64>,
    /// The vrate the period ran under.
    pub vrate: f64,
    /// The QoS search raised vrate at the decision before.
    pub raising: bool,
    /// vrate is at the search's lower bound: a miss is not the search's to
    /// act on, it cannot lower vrate further.
    pub at_floor: bool,
}
