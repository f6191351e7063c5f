//! OpenMetrics for `tune --model`: the io.cost.model in force and fitted,
//! what the fit determined, its windows and error, its decisions.

use prometheus_client::encoding::DescriptorEncoder;

use super::family::{counter, encode_families, gauge, Labels};
use crate::model::{ModelParam, ModelTunerStatus};

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The `iowarden_tune_model_*` families of one device.
pub(crate) fn encode(
    enc: &mut DescriptorEncoder,
    dev: &str,
    m: &ModelTunerStatus,
) -> std::fmt::Result {
    let mut values = Vec::new();
    for (p, c) in m.params.iter().zip(m.current.values()) {
        values.push((
            labels(&[("device", dev), ("param", &p.name), ("model", "current")]),
            c as f64,
        ));
        values.push((
            labels(&[("device", dev), ("param", &p.name), ("model", "estimate")]),
            p.estimate as f64,
        ));
    }
    gauge(enc, "iowarden_tune_model_param", "io.cost.model parameters: in force (model=current) and fitted from device occupancy (model=estimate)", None, &values)?;
    let records: Vec<(Labels, &ModelParam)> = m
        .params
        .iter()
        .map(|p| (labels(&[("device", dev), ("param", &p.name)]), p))
        .collect();
    encode_families(enc, &records)?;
    encode_fit(enc, dev, m)
}

/// The fit's windows and error, and the decisions so far.
fn encode_fit(enc: &mut DescriptorEncoder, dev: &str, m: &ModelTunerStatus) -> std::fmt::Result {
    let windows = vec![
        (
            labels(&[("device", dev), ("state", "saturated")]),
            m.saturated_windows as f64,
        ),
        (
            labels(&[("device", dev), ("state", "unsaturated")]),
            m.unsaturated_windows as f64,
        ),
    ];
    gauge(
        enc,
        "iowarden_tune_model_windows",
        "Measurement windows: saturated ones kept for the fit, unsaturated ones left out",
        None,
        &windows,
    )?;
    if let Some(e) = m.fit_error {
        gauge(
            enc,
            "iowarden_tune_model_fit_error",
            "RMS relative error of the fit over its windows",
            None,
            &[(labels(&[("device", dev)]), e)],
        )?;
    }
    let decisions: Vec<_> = m
        .decisions
        .iter()
        .map(|(a, n)| (labels(&[("device", dev), ("action", a)]), *n as f64))
        .collect();
    counter(
        enc,
        "iowarden_tune_model_decisions",
        "io.cost.model decisions by action",
        None,
        &decisions,
    )
}

#[cfg(test)]
mod tests {
    use crate::model::TunerStatus;
    use crate::model::{LinearModel, ModelParam, ModelTunerStatus};

    #[test]
    fn model_status_is_exported() {
        let m = ModelTunerStatus {
            current: LinearModel {
                rrandiops: 3420,
                ..Default::default()
            },
            params: vec![
                ModelParam {
                    name: "rbps".into(),
                    reason: "no such requests in the saturated windows".into(),
                    ..Default::default()
                },
                ModelParam {
                    name: "rseqiops".into(),
                    ..Default::default()
                },
                ModelParam {
                    name: "rrandiops".into(),
                    fitted: Some(13680),
                    estimate: 13680,
                    relative_error: Some(0.01),
                    samples: 40000,
                    reason: String::new(),
                },
            ],
            saturated_windows: 30,
            unsaturated_windows: 4,
            fit_error: Some(0.02),
            decisions: vec![("step".into(), 2)],
            ..Default::default()
        };
        let t = super::super::tuner::tests::encoded(TunerStatus {
            model: Some(m),
            ..Default::default()
        });
        let d = r#"device="nvme0n1""#;
        for line in [
            format!(r#"iowarden_tune_model_param{{{d},param="rrandiops",model="current"}} 3420"#),
            format!(r#"iowarden_tune_model_param{{{d},param="rrandiops",model="estimate"}} 13680"#),
            format!(r#"iowarden_tune_model_param_determined{{{d},param="rrandiops"}} 1"#),
            format!(r#"iowarden_tune_model_param_determined{{{d},param="rbps"}} 0"#),
            format!(r#"iowarden_tune_model_param_relative_error{{{d},param="rrandiops"}} 0.01"#),
            format!(r#"iowarden_tune_model_param_samples{{{d},param="rrandiops"}} 40000"#),
            format!(r#"iowarden_tune_model_windows{{{d},state="saturated"}} 30"#),
            format!(r#"iowarden_tune_model_fit_error{{{d}}} 0.02"#),
            format!(r#"iowarden_tune_model_decisions_total{{{d},action="step"}} 2"#),
        ] {
            assert!(t.contains(&line), "{line} in\n{t}");
        }
        // No error where the fit has none.
        assert!(!t.contains(r#"relative_error{device="nvme0n1",param="rbps"}"#));
    }
}
