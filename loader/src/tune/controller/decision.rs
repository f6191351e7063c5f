//! What one period's decision is: the action, the vrate it leaves and why.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The first pin, from what the first period measured with iocost as
    /// the tuner found it.
    Start,
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
            Action::Start => "start",
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

/// What one decision does: the action, the vrate it leaves, and the reason's
/// head (the measurement is appended by `decide`).
pub(super) type Verdict = (Action, f64, String);
