//! OpenMetrics for the online io.cost.qos tuner: each SLO as last
//! measured, the QoS fields it set, its decisions and convergence.

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use super::expose::{Expose, Input};
use super::family::{counter, encode_families, gauge, Labels};
use crate::model::{TunerSlo, TunerStatus};

/// Nothing outside `iowarden tune`.
impl Expose for Option<TunerStatus> {
    fn expose(&self, enc: &mut DescriptorEncoder, _: &Input) -> std::fmt::Result {
        match self {
            Some(t) => encode(enc, t),
            None => Ok(()),
        }
    }
}

fn kv(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The tuner's SLOs, QoS settings, decisions and state.
fn encode(enc: &mut DescriptorEncoder, t: &TunerStatus) -> std::fmt::Result {
    encode_slos(enc, t)?;
    encode_state(enc, t)
}

fn encode_slos(enc: &mut DescriptorEncoder, t: &TunerStatus) -> std::fmt::Result {
    let dev = t.device.name.as_str();
    let records: Vec<(Labels, &TunerSlo)> = t
        .slos
        .iter()
        .map(|s| {
            let l = kv(&[("device", dev), ("cgroup", &s.cgroup), ("slo", &s.slo)]);
            (l, s)
        })
        .collect();
    encode_families(enc, &records)
}

fn encode_state(enc: &mut DescriptorEncoder, t: &TunerStatus) -> std::fmt::Result {
    let dev = t.device.name.as_str();
    let qos: Vec<_> = t
        .qos
        .iter()
        .map(|(f, v)| (kv(&[("device", dev), ("field", f)]), *v))
        .collect();
    gauge(
            enc,
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
        enc,
        "iowarden_tune_decisions",
        "Tuner decisions by action",
        None,
        &decisions,
    )?;
    let one = |v: f64| vec![(kv(&[("device", dev)]), v)];
    gauge(
        enc,
        "iowarden_tune_converged",
        "1 once the tuner's search has converged",
        None,
        &one(if t.converged { 1.0 } else { 0.0 }),
    )?;
    gauge(
        enc,
        "iowarden_tune_throughput",
        "Aggregate device throughput over the last decision period",
        Some(Unit::Other("bytes_per_second".into())),
        &one(t.throughput_bytes_per_second),
    )?;
    match &t.model {
        Some(m) => super::tune_model::encode(enc, dev, m),
        None => Ok(()),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use crate::model::{DeviceRef, Snapshot, TunerSlo, TunerStatus};
    use crate::openmetrics::test_text::text_of;

    /// The OpenMetrics text of a snapshot holding only `status`, on nvme0n1.
    pub(in crate::openmetrics) fn encoded(status: TunerStatus) -> String {
        let snap = Snapshot {
            tuner: Some(TunerStatus {
                device: DeviceRef {
                    name: "nvme0n1".into(),
                    major: 259,
                    minor: 0,
                },
                ..status
            }),
            ..Default::default()
        };
        text_of(snap)
    }

    fn text(slo: TunerSlo) -> String {
        encoded(TunerStatus {
            slos: vec![slo],
            ..Default::default()
        })
    }

    #[test]
    fn misses_after_convergence_are_exported() {
        let slo = TunerSlo {
            cgroup: "/lc".into(),
            slo: "read-p99=6ms".into(),
            periods: 43,
            periods_met: 36,
            periods_after_convergence: 29,
            periods_missed_after_convergence: 2,
            worst_after_convergence_seconds: Some(0.0076),
            periods_missed_under_model_change: 3,
            ..Default::default()
        };
        let t = text(slo.clone());
        let l = r#"device="nvme0n1",cgroup="/lc",slo="read-p99=6ms""#;
        for line in [
            format!("iowarden_tune_slo_periods_after_convergence_total{{{l}}} 29"),
            format!("iowarden_tune_slo_periods_missed_after_convergence_total{{{l}}} 2"),
            format!("iowarden_tune_slo_worst_after_convergence_seconds{{{l}}} 0.0076"),
            format!("iowarden_tune_slo_periods_missed_under_model_change_total{{{l}}} 3"),
        ] {
            assert!(t.contains(&line), "{line} in\n{t}");
        }
        // Before the first convergence there is no worst period.
        let t = text(TunerSlo {
            worst_after_convergence_seconds: None,
            ..slo
        });
        assert!(!t.contains("iowarden_tune_slo_worst_after_convergence_seconds{"));
    }
}
