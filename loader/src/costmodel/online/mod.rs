//! The online io.cost.model estimator `tune --model` runs: saturated
//! windows of cost classes and the unit costs a model charges them
//! (windows.rs), the weighted least squares over a sliding set of windows
//! with each parameter's error and why it is undetermined (solve.rs), the
//! guard that steps the kernel's model towards the fit and judges each
//! step (guard/), and the exact best linear model of a QEMU-capped device
//! the proofs compare with (capped_device.rs). Pure: tune/model_run.rs
//! reads the snapshots and writes the knob.

pub mod capped_device;
pub mod guard;
pub mod solve;
pub mod windows;

#[cfg(test)]
mod tests;
