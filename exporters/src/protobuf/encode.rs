//! The snapshot as protobuf: latency histograms native, every other family
//! transcoded from the OpenMetrics text.

use std::sync::Arc;

use prost::Message;

use crate::model::{SelfMetrics, Snapshot};
use crate::openmetrics::{encode_openmetrics, io_labels, ExpositionOptions};
use crate::proto::{self, MetricFamily, MetricType};

use super::native::native_histogram;
use super::transcode::{label_pairs, transcode_openmetrics};

/// The snapshot as length-delimited MetricFamily messages, latency
/// histograms native.
pub fn encode_protobuf(
    snap: &Arc<Snapshot>,
    extra: &Arc<SelfMetrics>,
    opts: &ExpositionOptions,
) -> Result<Vec<u8>, String> {
    let text_opts = ExpositionOptions {
        stages: Vec::new(),
        ..opts.clone()
    };
    let text = encode_openmetrics(snap, extra, &text_opts).map_err(|e| e.to_string())?;
    let mut families = transcode_openmetrics(&text)?;
    if !snap.io.is_empty() && !opts.stages.is_empty() {
        families.push(latency_family(snap, opts));
    }
    let mut out = Vec::new();
    for f in &families {
        f.encode_length_delimited(&mut out)
            .map_err(|e| e.to_string())?;
    }
    Ok(out)
}

fn latency_family(snap: &Snapshot, opts: &ExpositionOptions) -> MetricFamily {
    let mut metric = Vec::with_capacity(snap.io.len() * opts.stages.len());
    for x in &snap.io {
        for &stage in &opts.stages {
            let mut labels = io_labels(x);
            labels.push(("stage".into(), stage.as_str().into()));
            metric.push(proto::Metric {
                label: label_pairs(labels),
                histogram: Some(native_histogram(
                    x.latency.get(stage),
                    &snap.hist_lower_bounds_seconds,
                )),
                ..Default::default()
            });
        }
    }
    MetricFamily {
        name: Some("iowarden_io_latency_seconds".into()),
        help: Some(crate::openmetrics::LATENCY_HELP.into()),
        r#type: Some(MetricType::Histogram as i32),
        metric,
        unit: None,
    }
}

/// Decodes a length-delimited exposition (tests and tools).
pub fn decode_protobuf(mut buf: &[u8]) -> Result<Vec<MetricFamily>, String> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        out.push(MetricFamily::decode_length_delimited(&mut buf).map_err(|e| e.to_string())?);
    }
    Ok(out)
}
