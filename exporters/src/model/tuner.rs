//! The online io.cost.qos tuner's state, as served in /snapshot.json
//! (`tuner`) and as `iowarden_tune_*` metrics.

use serde::{Deserialize, Serialize};

use super::core::DeviceRef;
use super::metric::metrics;

/// One SLO of one protected cgroup, as last measured.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TunerSlo {
    /// Cgroup path on the io controller's hierarchy.
    pub cgroup: String,
    /// As given, e.g. "read-p99=2ms".
    pub slo: String,
    pub target_seconds: f64,
    /// Measured quantile over the last decision period (None: too few I/Os).
    pub observed_seconds: Option<f64>,
    /// I/Os of the SLO's class in that period.
    pub samples: u64,
    pub met: bool,
    /// Periods measured / periods met since the tuner started.
    pub periods: u64,
    pub periods_met: u64,
    /// Periods measured since the search first converged, those that
    /// missed, and the worst quantile among them: what the SLO cost once
    /// the search had found its value (probes, tips, load changes).
    #[serde(default)]
    pub periods_after_convergence: u64,
    #[serde(default)]
    pub periods_missed_after_convergence: u64,
    #[serde(default)]
    pub worst_after_convergence_seconds: Option<f64>,
    /// Periods missed while they ran under an io.cost.model change still
    /// being judged (the QoS search held vrate): the model's doing.
    #[serde(default)]
    pub periods_missed_under_model_change: u64,
}

// Status, not a reading: no delta (Snapshot::delta_since keeps the later).
metrics!(TunerSlo, families only {
    gauge met => "iowarden_tune_slo_met", "1 if the SLO held over the tuner's last decision period";
    gauge target_seconds => "iowarden_tune_slo_target" [Seconds], "The SLO's latency target";
    gauge observed_seconds => "iowarden_tune_slo_observed" [Seconds],
        "The SLO's quantile measured over the last decision period";
    counter periods => "iowarden_tune_slo_periods", "Decision periods measured for the SLO";
    counter periods_met => "iowarden_tune_slo_periods_met", "Decision periods in which the SLO held";
    counter periods_after_convergence => "iowarden_tune_slo_periods_after_convergence",
        "Decision periods measured for the SLO since the search first converged";
    counter periods_missed_after_convergence => "iowarden_tune_slo_periods_missed_after_convergence",
        "Decision periods since the search first converged in which the SLO missed";
    counter periods_missed_under_model_change => "iowarden_tune_slo_periods_missed_under_model_change",
        "Decision periods in which the SLO missed while they ran under an io.cost.model change still being judged";
    gauge worst_after_convergence_seconds => "iowarden_tune_slo_worst_after_convergence" [Seconds],
        "The SLO's worst quantile over a decision period since the search first converged";
});

/// One decision of the tuner (the latest is kept in the status).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TunerDecision {
    /// Seconds since the tuner started.
    pub at_seconds: f64,
    /// hold, decrease, increase, converged, insufficient
    pub action: String,
    pub reason: String,
    /// vrate (percent) before and after.
    pub vrate_from: f64,
    pub vrate_to: f64,
    /// The io.cost.qos line written (None when nothing was written).
    pub written: Option<String>,
    /// In a dry run: the line that would have been written (nothing was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub would_write: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TunerStatus {
    pub device: DeviceRef,
    pub slos: Vec<TunerSlo>,
    /// Every QoS field the tuner sets and its current value (percent for
    /// rpct/wpct/min/max, µs for rlat/wlat).
    pub qos: Vec<(String, f64)>,
    /// Decisions so far, per action.
    pub decisions: Vec<(String, u64)>,
    pub last: Option<TunerDecision>,
    pub converged: bool,
    /// Seconds from start to the latest convergence (a miss reopens the search).
    pub converged_after_seconds: Option<f64>,
    /// Aggregate device throughput over the last period.
    pub throughput_bytes_per_second: f64,
    pub iops: f64,
    /// Known-good / known-bad vrate bracket of the search (percent).
    pub vrate_good: Option<f64>,
    pub vrate_bad: Option<f64>,
    /// `tune --model`: the io.cost.model estimator and write-back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<super::tune_model::ModelTunerStatus>,
}
