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

mod config;
mod control;
mod decision;
mod measurement;
mod pace;
mod search;
mod start;

pub use config::ControllerConfig;
pub use control::Controller;
pub use decision::{Action, Decision};
pub use measurement::{Measurement, SloSample, LATE_AFTER_SECONDS};

#[cfg(test)]
mod from_configured_tests;
#[cfg(test)]
mod from_off_tests;
#[cfg(test)]
mod tests;
