//! The online io.cost.qos tuner: SLO parsing, the pure controller, the
//! measurement of a decision period, and the runner that writes the knobs.

pub mod controller;
pub mod measure;
#[cfg(test)]
mod plant;
pub mod runner;
pub mod slo;
