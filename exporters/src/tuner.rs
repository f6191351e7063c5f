//! The online io.cost.qos tuner's state, as served in /snapshot.json
//! (`tuner`) and as `iowarden_tune_*` metrics.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;
use serde::{Deserialize, Serialize};

use crate::model::DeviceRef;
use crate::openmetrics::{counter, gauge};

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
}

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
    pub model: Option<crate::modeltune::ModelTunerStatus>,
}

#[derive(Debug)]
pub(crate) struct TunerCollector {
    pub(crate) t: TunerStatus,
}

fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl Collector for TunerCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let t = &self.t;
        let dev = t.device.name.as_str();
        let slo_rows = |f: &dyn Fn(&TunerSlo) -> Option<f64>| -> Vec<_> {
            t.slos
                .iter()
                .filter_map(|s| {
                    f(s).map(|v| {
                        (
                            kv(&[("device", dev), ("cgroup", &s.cgroup), ("slo", &s.slo)]),
                            v,
                        )
                    })
                })
                .collect()
        };
        gauge(
            &mut enc,
            "iowarden_tune_slo_met",
            "1 if the SLO held over the tuner's last decision period",
            None,
            &slo_rows(&|s| Some(if s.met { 1.0 } else { 0.0 })),
        )?;
        gauge(
            &mut enc,
            "iowarden_tune_slo_target",
            "The SLO's latency target",
            Some(Unit::Seconds),
            &slo_rows(&|s| Some(s.target_seconds)),
        )?;
        gauge(
            &mut enc,
            "iowarden_tune_slo_observed",
            "The SLO's quantile measured over the last decision period",
            Some(Unit::Seconds),
            &slo_rows(&|s| s.observed_seconds),
        )?;
        counter(
            &mut enc,
            "iowarden_tune_slo_periods",
            "Decision periods measured for the SLO",
            None,
            &slo_rows(&|s| Some(s.periods as f64)),
        )?;
        counter(
            &mut enc,
            "iowarden_tune_slo_periods_met",
            "Decision periods in which the SLO held",
            None,
            &slo_rows(&|s| Some(s.periods_met as f64)),
        )?;
        let qos: Vec<_> = t
            .qos
            .iter()
            .map(|(f, v)| (kv(&[("device", dev), ("field", f)]), *v))
            .collect();
        gauge(
            &mut enc,
            "iowarden_tune_qos_value",
            "Each io.cost.qos field the tuner set (percent for rpct/wpct/min/max, microseconds for rlat/wlat)",
            None,
            &qos,
        )?;
        let decisions: Vec<_> = t
            .decisions
            .iter()
            .map(|(a, n)| (kv(&[("device", dev), ("action", a)]), *n as f64))
            .collect();
        counter(
            &mut enc,
            "iowarden_tune_decisions",
            "Tuner decisions by action",
            None,
            &decisions,
        )?;
        let one = |v: f64| vec![(kv(&[("device", dev)]), v)];
        gauge(
            &mut enc,
            "iowarden_tune_converged",
            "1 once the tuner's search has converged",
            None,
            &one(if t.converged { 1.0 } else { 0.0 }),
        )?;
        gauge(
            &mut enc,
            "iowarden_tune_throughput",
            "Aggregate device throughput over the last decision period",
            Some(Unit::Other("bytes_per_second".into())),
            &one(t.throughput_bytes_per_second),
        )?;
        if let Some(m) = &t.model {
            crate::modeltune::encode(&mut enc, dev, m)?;
        }
        Ok(())
    }
}
