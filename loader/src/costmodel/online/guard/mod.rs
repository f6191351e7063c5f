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
//!   change of the SLOs is the model's doing); if their mean got worse than
//!   the worst of as many periods before (same model, same vrate) by more
//!   than `worse_by` and missed, the previous model is put back and no
//!   change is tried for `cooldown_periods`;
//! - a step waits while the period missed an SLO (the QoS controller acts
//!   on the miss first) unless vrate is at its floor (it cannot), and while
//!   the QoS search is still raising vrate (a step lowers it, below), for at
//!   most `climb_wait_periods`.
//!
//! With the QoS controller: the model sets the scale (vrate 100% = the
//! device's measured capacity) and vrate the margin. A model change rescales
//! vrate by the smallest change in cost over the mixes the device has been
//! serving (its saturated windows), so that at the moment of the change
//! iocost admits no more of any of them than before, and the QoS search
//! continues from there.

mod config;
mod decision;
mod rails;

pub use config::GuardConfig;
pub use decision::{ModelAction, ModelDecision, QosPeriod};
pub use rails::Guard;

#[cfg(test)]
mod tests;
