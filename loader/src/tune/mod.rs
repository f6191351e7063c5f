//! The online io.cost.qos tuner: SLO parsing, the pure controller, the
//! measurement of a decision period, and the runner that writes the knobs.
//! `tune --model` adds the io.cost.model estimator (model_fit, model_solve)
//! and its guarded write-back (model_guard, model_run).

pub mod capped_device;
pub mod controller;
mod decision_log;
pub mod measure;
pub mod model_fit;
pub mod model_guard;
pub mod model_run;
pub mod model_solve;
#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod plant;
pub mod runner;
mod setup;
pub mod slo;
