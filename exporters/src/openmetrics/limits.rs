//! OpenMetrics for the judged io limits: one sample per knob and device,
//! its state and the reason as labels (the reason in words, with numbers
//! that change every window, is in /snapshot.json only).

use prometheus_client::encoding::DescriptorEncoder;

use super::expose::{Expose, Input};
use super::family::{gauge, Labels};
use crate::model::LimitVerdict;

impl Expose for Vec<LimitVerdict> {
    fn expose(&self, enc: &mut DescriptorEncoder, _: &Input) -> std::fmt::Result {
        encode(enc, self)
    }
}

fn encode(enc: &mut DescriptorEncoder, limits: &[LimitVerdict]) -> std::fmt::Result {
    let rows: Vec<(Labels, f64)> = limits
        .iter()
        .map(|v| {
            let labels = [
                ("cgroup", v.knob.cgroup.as_str()),
                ("knob", v.knob.knob.as_str()),
                ("device", v.device.as_str()),
                ("value", v.knob.value.as_str()),
                ("state", v.state.label()),
                ("reason", v.reason.label()),
            ];
            (
                labels.map(|(k, v)| (k.to_string(), v.to_string())).to_vec(),
                1.0,
            )
        })
        .collect();
    gauge(
        enc,
        "iowarden_limit_state",
        "Each io limit and weight set on a cgroup, judged on a device over the last window: \
         acting (it held I/O), idle, in_effect (its holds not timed here) or not_in_effect, \
         and why (reason)",
        None,
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use crate::model::{LimitKnob, LimitReason, LimitState, LimitVerdict, Snapshot};
    use crate::openmetrics::test_text::text_of;

    #[test]
    fn one_sample_per_verdict_with_state_and_reason() {
        let snap = Snapshot {
            limits: vec![LimitVerdict {
                knob: LimitKnob {
                    cgroup: "/a".into(),
                    knob: "io.weight".into(),
                    devnum: None,
                    value: "default 200".into(),
                },
                device: "nvme0n1".into(),
                state: LimitState::NotInEffect,
                reason: LimitReason::NoWeightPolicy,
                why: "no weight-based policy on nvme0n1".into(),
            }],
            ..Default::default()
        };
        let out = text_of(snap);
        assert!(
            out.contains(
                "iowarden_limit_state{cgroup=\"/a\",knob=\"io.weight\",device=\"nvme0n1\",\
                 value=\"default 200\",state=\"not_in_effect\",reason=\"no_weight_policy\"} 1"
            ),
            "{out}"
        );
        let none = text_of(Snapshot::default());
        assert!(
            !none.contains("iowarden_limit_state"),
            "no family without verdicts"
        );
    }
}
