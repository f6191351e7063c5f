//! `tune --model`: the io.cost.model estimator and its write-back, as served
//! in /snapshot.json (`tuner.model`) and as `iowarden_tune_model_*` metrics.

use serde::{Deserialize, Serialize};

use super::cost::LinearModel;
use super::metric::metrics;

/// One io.cost.model parameter: the value in force and the fit's.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ModelParam {
    /// rbps, rseqiops, rrandiops, wbps, wseqiops, wrandiops
    pub name: String,
    /// The fit's value when determined (enough samples, small error).
    pub fitted: Option<u64>,
    /// The fit's estimate even when not determined (0: not in the fit).
    pub estimate: u64,
    /// Relative standard error of the estimate.
    pub relative_error: Option<f64>,
    /// Requests (pages for bps) of this term in the saturated windows.
    pub samples: u64,
    /// Why it is not determined ("" when it is).
    pub reason: String,
}

// The values in force and estimated: one family with a model label
// (openmetrics/tune_model.rs).
metrics!(ModelParam, families only {
    gauge fitted => "iowarden_tune_model_param_determined",
        "1 if the fit determined the parameter (enough samples, relative error small enough)",
        |p: &ModelParam| Some(p.fitted.is_some() as u8 as f64);
    gauge relative_error => "iowarden_tune_model_param_relative_error",
        "Relative standard error of the fitted parameter";
    gauge samples => "iowarden_tune_model_param_samples",
        "Requests (pages for bps) of the parameter's term in the saturated windows the fit uses";
});

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ModelTunerStatus {
    /// The model in force (as written, or as read at start).
    pub current: LinearModel,
    pub params: Vec<ModelParam>,
    /// Windows the fit uses (device saturated) and windows left out.
    pub saturated_windows: u64,
    pub unsaturated_windows: u64,
    /// RMS of (window − predicted) / window over the windows used.
    pub fit_error: Option<f64>,
    /// Decisions so far, per action.
    pub decisions: Vec<(String, u64)>,
    pub last_action: String,
    pub last_reason: String,
    /// The io.cost.model line written by the last decision (None: nothing).
    pub written: Option<String>,
    /// In a dry run: the line that would have been written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub would_write: Option<String>,
}
