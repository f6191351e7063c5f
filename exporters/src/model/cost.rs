//! The linear iocost cost model per device: the model iowarden charges
//! requests with (`configured`), the samples it compares against measured
//! device time per class, and the model refitted from those samples
//! (`fitted`). Served in /snapshot.json (`cost_models`) and as
//! `iowarden_cost_model_*` metrics.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;
use serde::{Deserialize, Serialize};

use crate::model::{DeviceRef, Op};
use crate::openmetrics::{counter, gauge};

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

#[derive(Debug)]
pub(crate) struct CostModelCollector {
    pub(crate) models: Vec<DeviceCostModel>,
}

type Rows = Vec<(Vec<(String, String)>, f64)>;

fn labels(d: &DeviceRef, extra: &[(&str, String)]) -> Vec<(String, String)> {
    let mut l = vec![
        ("device".to_string(), d.name.clone()),
        ("devt".to_string(), d.devt()),
    ];
    l.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
    l
}

impl Collector for CostModelCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let class_rows = |f: &dyn Fn(&CostClass) -> Option<f64>| -> Rows {
            let mut rows = Vec::new();
            for m in &self.models {
                for c in &m.classes {
                    if let Some(v) = f(c) {
                        let l = [
                            ("op", c.op.as_str().to_string()),
                            ("pattern", c.pattern().to_string()),
                            ("size", c.size_bytes.to_string()),
                        ];
                        rows.push((labels(&m.device, &l), v));
                    }
                }
            }
            rows
        };
        counter(
            &mut enc,
            "iowarden_cost_class_requests",
            "Requests with measured device time per cost class (op, pattern, size = lower bound in bytes)",
            None,
            &class_rows(&|c| Some(c.ios as f64)),
        )?;
        counter(
            &mut enc,
            "iowarden_cost_class_device",
            "Measured device time (issue to completion) of the class's requests",
            Some(Unit::Seconds),
            &class_rows(&|c| Some(c.device_seconds)),
        )?;
        counter(
            &mut enc,
            "iowarden_cost_class_model",
            "Cost the configured linear model charged the class's requests",
            Some(Unit::Seconds),
            &class_rows(&|c| Some(c.model_seconds)),
        )?;
        let mut err = class_rows(&|c| c.error);
        for r in &mut err {
            r.0.push(("model".into(), "configured".into()));
        }
        let mut fitted = class_rows(&|c| c.fitted_error);
        for r in &mut fitted {
            r.0.push(("model".into(), "fitted".into()));
        }
        err.extend(fitted);
        gauge(
            &mut enc,
            "iowarden_cost_model_error",
            "(model cost - measured device time) / measured device time per class, since start",
            Some(Unit::Other("ratio".into())),
            &err,
        )?;
        let mut bps = Vec::new();
        let mut iops = Vec::new();
        for m in &self.models {
            for (which, p) in [("configured", &m.configured), ("fitted", &m.fitted)] {
                for op in [Op::Read, Op::Write] {
                    let l = |extra: &[(&str, String)]| {
                        let mut v = vec![
                            ("op", op.as_str().to_string()),
                            ("model", which.to_string()),
                        ];
                        v.extend(extra.iter().cloned());
                        labels(&m.device, &v)
                    };
                    if p.bps(op) > 0 {
                        bps.push((l(&[]), p.bps(op) as f64));
                    }
                    for random in [false, true] {
                        if p.iops(op, random) > 0 {
                            let pat = if random { "random" } else { "sequential" };
                            iops.push((l(&[("pattern", pat.into())]), p.iops(op, random) as f64));
                        }
                    }
                }
            }
        }
        gauge(
            &mut enc,
            "iowarden_cost_model_bandwidth",
            "The linear model's bps term (io.cost.model rbps/wbps) of the configured and the fitted model",
            Some(Unit::Other("bytes_per_second".into())),
            &bps,
        )?;
        gauge(
            &mut enc,
            "iowarden_cost_model_iops",
            "The linear model's 4 KiB IOPS terms (io.cost.model r/w seq/rand iops) of the configured and the fitted model",
            None,
            &iops,
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Snapshot;
    use crate::openmetrics::{encode_openmetrics, SelfMetrics};

    #[test]
    fn families_units_and_labels() {
        let m = DeviceCostModel {
            device: DeviceRef {
                name: "loop1".into(),
                major: 7,
                minor: 1,
            },
            configured: CostParams {
                rbps: 200,
                rrandiops: 5,
                ..Default::default()
            },
            source: "flag".into(),
            fitted: CostParams {
                rseqiops: 9,
                ..Default::default()
            },
            fitted_line: String::new(),
            classes: vec![CostClass {
                op: Op::Read,
                random: true,
                size_bytes: 4096,
                ios: 10,
                bytes: 40960,
                device_seconds: 0.5,
                model_seconds: 1.0,
                error: Some(1.0),
                fitted_error: None,
            }],
        };
        let snap = Snapshot {
            cost_models: vec![m],
            ..Default::default()
        };
        let t = encode_openmetrics(&snap, &SelfMetrics::default(), &Default::default()).unwrap();
        let l = r#"device="loop1",devt="7:1",op="read",pattern="random",size="4096""#;
        for line in [
            format!("iowarden_cost_class_requests_total{{{l}}} 10"),
            format!("iowarden_cost_class_device_seconds_total{{{l}}} 0.5"),
            format!("iowarden_cost_class_model_seconds_total{{{l}}} 1.0"),
            format!("iowarden_cost_model_error_ratio{{{l},model=\"configured\"}} 1.0"),
            r#"iowarden_cost_model_bandwidth_bytes_per_second{device="loop1",devt="7:1",op="read",model="configured"} 200"#.to_string(),
            r#"iowarden_cost_model_iops{device="loop1",devt="7:1",op="read",model="configured",pattern="random"} 5"#.to_string(),
            r#"iowarden_cost_model_iops{device="loop1",devt="7:1",op="read",model="fitted",pattern="sequential"} 9"#.to_string(),
        ] {
            assert!(t.contains(&line), "{line} in\n{t}");
        }
        // No fitted error for the class, no zero terms.
        assert!(!t.contains(r#"model="fitted"} "#), "{t}");
        assert!(!t.contains(r#"op="write""#), "{t}");
    }
}
