//! OpenMetrics for the linear cost model of each device: measured device
//! time against the configured model per cost class, the model's error,
//! and the configured and fitted parameters.

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use super::expose::{Expose, Input};
use super::family::{encode_families, gauge, Labels, Rows};
use crate::model::{CostClass, DeviceCostModel, DeviceRef, Op};

impl Expose for Vec<DeviceCostModel> {
    fn expose(&self, enc: &mut DescriptorEncoder, _: &Input) -> std::fmt::Result {
        encode(enc, self)
    }
}

fn labels(d: &DeviceRef, extra: &[(&str, String)]) -> Labels {
    let mut l = vec![
        ("device".to_string(), d.name.clone()),
        ("devt".to_string(), d.devt()),
    ];
    l.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
    l
}

fn encode(enc: &mut DescriptorEncoder, models: &[DeviceCostModel]) -> std::fmt::Result {
    encode_classes(enc, models)?;
    encode_errors(enc, models)?;
    encode_params(enc, models)
}

/// A class's labels: its device's, op, pattern and size.
fn class_labels(d: &DeviceRef, c: &CostClass) -> Labels {
    let l = [
        ("op", c.op.as_str().to_string()),
        ("pattern", c.pattern().to_string()),
        ("size", c.size_bytes.to_string()),
    ];
    labels(d, &l)
}

/// One row per class of every device that has a value.
fn class_rows(models: &[DeviceCostModel], f: fn(&CostClass) -> Option<f64>) -> Rows {
    models
        .iter()
        .flat_map(|m| {
            m.classes
                .iter()
                .filter_map(move |c| Some((class_labels(&m.device, c), f(c)?)))
        })
        .collect()
}

fn encode_classes(enc: &mut DescriptorEncoder, models: &[DeviceCostModel]) -> std::fmt::Result {
    let records: Vec<(Labels, &CostClass)> = models
        .iter()
        .flat_map(|m| {
            m.classes
                .iter()
                .map(move |c| (class_labels(&m.device, c), c))
        })
        .collect();
    encode_families(enc, &records)
}

fn encode_errors(enc: &mut DescriptorEncoder, models: &[DeviceCostModel]) -> std::fmt::Result {
    let mut err = class_rows(models, |c| c.error);
    for r in &mut err {
        r.0.push(("model".into(), "configured".into()));
    }
    let mut fitted = class_rows(models, |c| c.fitted_error);
    for r in &mut fitted {
        r.0.push(("model".into(), "fitted".into()));
    }
    err.extend(fitted);
    gauge(
        enc,
        "iowarden_cost_model_error",
        "(model cost - measured device time) / measured device time per class, since start",
        Some(Unit::Other("ratio".into())),
        &err,
    )
}

/// The bps and IOPS terms of the configured and the fitted model (zero
/// terms left out).
fn encode_params(enc: &mut DescriptorEncoder, models: &[DeviceCostModel]) -> std::fmt::Result {
    let mut bps = Vec::new();
    let mut iops = Vec::new();
    for m in models {
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
        enc,
        "iowarden_cost_model_bandwidth",
        "The linear model's bps term (io.cost.model rbps/wbps) of the configured and the fitted model",
        Some(Unit::Other("bytes_per_second".into())),
        &bps,
    )?;
    gauge(
        enc,
        "iowarden_cost_model_iops",
        "The linear model's 4 KiB IOPS terms (io.cost.model r/w seq/rand iops) of the configured and the fitted model",
        None,
        &iops,
    )
}

#[cfg(test)]
mod tests {
    use crate::model::{CostClass, DeviceCostModel, DeviceRef, LinearModel, Op, Snapshot};
    use crate::openmetrics::test_text::text_of;

    #[test]
    fn families_units_and_labels() {
        let m = DeviceCostModel {
            device: DeviceRef {
                name: "loop1".into(),
                major: 7,
                minor: 1,
            },
            configured: LinearModel {
                rbps: 200,
                rrandiops: 5,
                ..Default::default()
            },
            source: "flag".into(),
            fitted: LinearModel {
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
        let t = text_of(snap);
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
