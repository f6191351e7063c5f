//! The linear iocost cost model per device: the model iowarden charges
//! requests with (`configured`), the samples it compares against measured
//! device time per class, and the model refitted from those samples
//! (`fitted`). Served in /snapshot.json (`cost_models`) and as
//! `iowarden_cost_model_*` metrics.

use serde::{Deserialize, Serialize};

use super::core::{DeviceRef, Op};

/// io.cost.model's six parameters (0: that term is free).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CostParams {
    pub rbps: u64,
    pub rseqiops: u64,
    pub rrandiops: u64,
    pub wbps: u64,
    pub wseqiops: u64,
    pub wrandiops: u64,
}

impl CostParams {
    pub fn bps(&self, op: Op) -> u64 {
        if op == Op::Write {
            self.wbps
        } else {
            self.rbps
        }
    }

    pub fn iops(&self, op: Op, random: bool) -> u64 {
        match (op == Op::Write, random) {
            (false, false) => self.rseqiops,
            (false, true) => self.rrandiops,
            (true, false) => self.wseqiops,
            (true, true) => self.wrandiops,
        }
    }
}

/// Samples of one (op, sequential/random, size) class on one device: only
/// requests whose device time was measured.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CostClass {
    pub op: Op,
    pub random: bool,
    /// Lower bound of the class's request sizes in bytes (a power of two;
    /// the first class also holds smaller requests, the last larger ones).
    pub size_bytes: u64,
    pub ios: u64,
    pub bytes: u64,
    /// Σ issue-to-completion time.
    pub device_seconds: f64,
    /// Σ cost the configured model charged.
    pub model_seconds: f64,
    /// (Σ model − Σ device) / Σ device of the configured model.
    pub error: Option<f64>,
    /// The same for the fitted model (None: the fit does not cover the class).
    pub fitted_error: Option<f64>,
}

impl CostClass {
    pub fn pattern(&self) -> &'static str {
        if self.random {
            "random"
        } else {
            "sequential"
        }
    }
}

/// The cost model of one device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct DeviceCostModel {
    pub device: DeviceRef,
    /// The model requests are charged with, and where it came from:
    /// "flag" (--cost-model), "io.cost.model", "default-hdd" or "default-ssd"
    /// (blk-iocost.c's autop parameters for the device type).
    pub configured: CostParams,
    pub source: String,
    /// Refitted from `classes` by least squares of device time against size
    /// (latency-based: at queue depth > 1 requests overlap and the fitted
    /// rates come out below the device's throughput). 0 where the samples
    /// do not determine a term.
    pub fitted: CostParams,
    /// `fitted` as an io.cost.model line ("" until some class has samples).
    pub fitted_line: String,
    pub classes: Vec<CostClass>,
}
