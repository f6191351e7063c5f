//! OpenMetrics for whom each cgroup's requests waited behind on the device.

use prometheus_client::encoding::DescriptorEncoder;

use super::expose::{Expose, Input};
use super::family::{encode_families, labels, Labels};
use crate::model::CulpritSeries;

impl Expose for Vec<CulpritSeries> {
    fn expose(&self, enc: &mut DescriptorEncoder, _: &Input) -> std::fmt::Result {
        encode(enc, self)
    }
}

fn encode(enc: &mut DescriptorEncoder, culprits: &[CulpritSeries]) -> std::fmt::Result {
    let records: Vec<(Labels, &CulpritSeries)> = culprits
        .iter()
        .map(|c| {
            let l = labels(&[
                ("device", c.device.name.clone()),
                ("victim", c.victim.path.clone()),
                ("op", c.op.as_str().into()),
                ("stage", c.stage.as_str().into()),
                (
                    "culprit",
                    c.culprit
                        .as_ref()
                        .map_or_else(|| "none".into(), |p| p.path.clone()),
                ),
                ("culprit_op", c.culprit_op.map_or("", |o| o.as_str()).into()),
            ]);
            (l, c)
        })
        .collect();
    encode_families(enc, &records)
}
