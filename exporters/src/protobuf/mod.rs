//! The Prometheus protobuf exposition (io.prometheus.client.MetricFamily,
//! length-delimited), which is what carries native histograms.
//!
//! The latency histograms are built here as native histograms. Every other
//! family is written once, by the OpenMetrics collectors, and transcoded from
//! that text: one source for names, help and labels in both formats.

use std::sync::Arc;

use prost::Message;

use crate::model::{SelfMetrics, Snapshot};
use crate::openmetrics::{encode_openmetrics, io_labels, ExpositionOptions};
use crate::proto::{self, MetricFamily, MetricType};

pub mod native;
mod transcode;

use native::native_histogram;
use transcode::label_pairs;
pub use transcode::transcode_openmetrics;

/// Content type of the protobuf exposition.
pub const PROTOBUF_CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// Content type of the OpenMetrics text exposition.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The two expositions iowarden serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposition {
    OpenMetrics,
    Protobuf,
}

/// One media range of an Accept header: type and its parameters, lowercased.
fn media_range(part: &str) -> (String, Vec<(String, String)>) {
    let mut it = part.split(';');
    let kind = it.next().unwrap_or("").trim().to_ascii_lowercase();
    let params = it
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| {
            (
                k.trim().to_ascii_lowercase(),
                v.trim().trim_matches('"').to_string(),
            )
        })
        .collect();
    (kind, params)
}

/// Picks the exposition for an Accept header: protobuf when the scraper asks
/// for io.prometheus.client.MetricFamily delimited and prefers it (by q) to
/// every text form it admits, wildcards included (a tie goes to protobuf,
/// the range named explicitly); OpenMetrics text for everything else, a
/// missing or unparseable header included.
pub fn negotiate(accept: Option<&str>) -> Exposition {
    let Some(accept) = accept else {
        return Exposition::OpenMetrics;
    };
    let mut best_proto = 0.0f64;
    let mut best_text = 0.0f64;
    for part in accept.split(',') {
        let (kind, params) = media_range(part);
        let param = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let q = param("q")
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(1.0);
        let is_proto = kind == "application/vnd.google.protobuf"
            && param("proto") == Some("io.prometheus.client.MetricFamily")
            && param("encoding") == Some("delimited");
        if is_proto {
            best_proto = best_proto.max(q);
        } else if accepts_text(&kind) {
            best_text = best_text.max(q);
        }
    }
    if best_proto > 0.0 && best_proto >= best_text {
        Exposition::Protobuf
    } else {
        Exposition::OpenMetrics
    }
}

/// Whether a media range admits a text exposition: text itself or a
/// wildcard (`*/*`, `text/*`, `application/*`), whose q counts for text.
fn accepts_text(kind: &str) -> bool {
    kind.starts_with("text/")
        || kind == "application/openmetrics-text"
        || kind == "application/*"
        || kind == "*/*"
}

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

#[cfg(test)]
mod tests;
