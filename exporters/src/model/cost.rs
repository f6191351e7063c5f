//! The linear iocost cost model per device: the model iowarden charges
//! requests with (`configured`), the samples it compares against measured
//! device time per class, and the model refitted from those samples
//! (`fitted`). Served in /snapshot.json (`cost_models`) and as
//! `iowarden_cost_model_*` metrics.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::core::{delta_by_key, Delta, DeviceRef, Op};
use super::metric::metrics;

/// io.cost.model's six parameters (0: that term is free, as in the kernel):
/// the one type for a linear device model at every layer (the model the
/// BPF side charges, the fit, the tuner's write-back, the snapshot).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinearModel {
    pub rbps: u64,
    pub rseqiops: u64,
    pub rrandiops: u64,
    pub wbps: u64,
    pub wseqiops: u64,
    pub wrandiops: u64,
}

impl LinearModel {
    /// The parameters' names in the order the kernel prints them.
    pub const KEYS: [&'static str; 6] = [
        "rbps",
        "rseqiops",
        "rrandiops",
        "wbps",
        "wseqiops",
        "wrandiops",
    ];

    /// The six values in KEYS order.
    pub fn values(&self) -> [u64; 6] {
        [
            self.rbps,
            self.rseqiops,
            self.rrandiops,
            self.wbps,
            self.wseqiops,
            self.wrandiops,
        ]
    }

    /// The inverse of `values`.
    pub fn from_values(v: [u64; 6]) -> LinearModel {
        LinearModel {
            rbps: v[0],
            rseqiops: v[1],
            rrandiops: v[2],
            wbps: v[3],
            wseqiops: v[4],
            wrandiops: v[5],
        }
    }

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

    /// The model as an io.cost.model line for device `devnum` (MAJ:MIN).
    pub fn line(&self, devnum: &str) -> String {
        format!("{devnum} ctrl=user model=linear {self}")
    }
}

/// `rbps=… rseqiops=… … wrandiops=…`, as io.cost.model prints them.
impl fmt::Display for LinearModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (k, v)) in Self::KEYS.iter().zip(self.values()).enumerate() {
            write!(f, "{}{k}={v}", if i > 0 { " " } else { "" })?;
        }
        Ok(())
    }
}

/// Samples of one (op, sequential/random, size) class on one device: only
/// requests whose device time was measured.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
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
    pub fn key(&self) -> (Op, bool, u64) {
        (self.op, self.random, self.size_bytes)
    }

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
    pub configured: LinearModel,
    pub source: String,
    /// Refitted from `classes` by least squares of device time against size
    /// (latency-based: at queue depth > 1 requests overlap and the fitted
    /// rates come out below the device's throughput). 0 where the samples
    /// do not determine a term.
    pub fitted: LinearModel,
    /// `fitted` as an io.cost.model line ("" until some class has samples).
    pub fitted_line: String,
    pub classes: Vec<CostClass>,
}

// The errors: one family with a model label (openmetrics/cost.rs).
metrics!(CostClass, families only {
    counter ios => "iowarden_cost_class_requests",
        "Requests with measured device time per cost class (op, pattern, size = lower bound in bytes)";
    counter bytes;
    counter device_seconds => "iowarden_cost_class_device" [Seconds],
        "Measured device time (issue to completion) of the class's requests";
    counter model_seconds => "iowarden_cost_class_model" [Seconds],
        "Cost the configured linear model charged the class's requests";
});

/// The window's samples, and the configured model's error over them; the
/// fitted error stays the (cumulative) fit's.
impl Delta for CostClass {
    fn delta(&self, earlier: &CostClass) -> CostClass {
        let device_seconds = self.device_seconds.delta(&earlier.device_seconds);
        let model_seconds = self.model_seconds.delta(&earlier.model_seconds);
        CostClass {
            ios: self.ios.delta(&earlier.ios),
            bytes: self.bytes.delta(&earlier.bytes),
            device_seconds,
            model_seconds,
            error: (device_seconds > 0.0)
                .then(|| (model_seconds - device_seconds) / device_seconds),
            ..self.clone()
        }
    }
}

impl DeviceCostModel {
    pub fn key(&self) -> (u32, u32) {
        (self.device.major, self.device.minor)
    }
}

/// The classes' window; the models are state (the fit covers every sample
/// since start).
impl Delta for DeviceCostModel {
    fn delta(&self, earlier: &DeviceCostModel) -> DeviceCostModel {
        DeviceCostModel {
            classes: delta_by_key(&self.classes, &earlier.classes, CostClass::key),
            ..self.clone()
        }
    }
}
