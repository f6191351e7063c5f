//! The online io.cost.qos tuner: SLO parsing, the pure controller, the
//! measurement of a decision period, and the runner that writes the knobs.
//! `tune --model` adds the io.cost.model loop (model_run): the estimator
//! and the guard it runs are the cost model's (crate::costmodel::online).

pub mod controller;
mod decision_log;
pub mod measure;
pub mod model_run;
#[cfg(test)]
mod plant;
pub mod runner;
mod setup;
pub mod slo;
