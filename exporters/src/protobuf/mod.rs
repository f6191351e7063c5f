//! The Prometheus protobuf exposition (io.prometheus.client.MetricFamily,
//! length-delimited), which is what carries native histograms.
//!
//! The latency histograms are built here as native histograms. Every other
//! family is written once, by the OpenMetrics collectors, and transcoded from
//! that text: one source for names, help and labels in both formats.

use prost::Message;

use crate::model::Snapshot;
use crate::native::native_histogram;
use crate::openmetrics::{encode_openmetrics, io_labels, ExpositionOptions, SelfMetrics};
use crate::proto::{self, MetricFamily, MetricType};

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
/// every text form it lists; OpenMetrics text for everything else, a missing
/// or unparseable header included.
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
        } else if kind.starts_with("text/") || kind == "application/openmetrics-text" {
            best_text = best_text.max(q);
        }
    }
    if best_proto > 0.0 && best_proto >= best_text {
        Exposition::Protobuf
    } else {
        Exposition::OpenMetrics
    }
}

/// The snapshot as length-delimited MetricFamily messages, latency
/// histograms native.
pub fn encode_protobuf(
    snap: &Snapshot,
    extra: &SelfMetrics,
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
        help: Some(
            "Request latency by stage: queue (allocation to issue), device (issue to completion), total"
                .into(),
        ),
        r#type: Some(MetricType::Histogram as i32),
        metric,
        unit: None,
    }
}

fn label_pairs(labels: Labels) -> Vec<proto::LabelPair> {
    labels
        .into_iter()
        .map(|(name, value)| proto::LabelPair {
            name: Some(name),
            value: Some(value),
        })
        .collect()
}

/// Counter and gauge families of OpenMetrics text (as iowarden's collectors
/// write it) as MetricFamily messages named by their samples (`_total` kept,
/// as Prometheus stores them). Other types are refused: they would need
/// their own mapping.
pub fn transcode_openmetrics(text: &str) -> Result<Vec<MetricFamily>, String> {
    let mut families: Vec<MetricFamily> = Vec::new();
    // (family name, text) of the last HELP line; it comes before its TYPE.
    let mut help = (String::new(), String::new());
    let mut kind: Option<MetricType> = None;
    for (n, line) in text.lines().enumerate() {
        let err = |what: &str| format!("line {}: {what}: {line}", n + 1);
        if let Some(rest) = line.strip_prefix("# ") {
            let mut words = rest.splitn(3, ' ');
            match (words.next(), words.next(), words.next()) {
                (Some("TYPE"), Some(family), Some(t)) => {
                    kind = Some(match t {
                        "counter" => MetricType::Counter,
                        "gauge" => MetricType::Gauge,
                        _ => return Err(err("unsupported metric type")),
                    });
                    if help.0 != family {
                        help = (family.to_string(), String::new());
                    }
                }
                (Some("HELP"), Some(family), h) => {
                    help = (family.to_string(), h.map(unescape).unwrap_or_default())
                }
                (Some("UNIT"), _, _) | (Some("EOF"), None, None) => {}
                _ => return Err(err("unexpected comment")),
            }
            continue;
        }
        if line.is_empty() {
            continue;
        }
        let t = kind.ok_or_else(|| err("sample before # TYPE"))?;
        let (name, labels, value) = parse_sample(line).ok_or_else(|| err("malformed sample"))?;
        let metric = match t {
            MetricType::Counter => proto::Metric {
                label: label_pairs(labels),
                counter: Some(proto::Counter {
                    value: Some(value),
                    ..Default::default()
                }),
                ..Default::default()
            },
            _ => proto::Metric {
                label: label_pairs(labels),
                gauge: Some(proto::Gauge { value: Some(value) }),
                ..Default::default()
            },
        };
        match families.last_mut() {
            Some(f) if f.name() == name && f.r#type == Some(t as i32) => f.metric.push(metric),
            _ => families.push(MetricFamily {
                name: Some(name),
                help: Some(help.1.clone()),
                r#type: Some(t as i32),
                metric: vec![metric],
                unit: None,
            }),
        }
    }
    Ok(families)
}

type Labels = Vec<(String, String)>;

/// `name{a="x",b="y"} value` or `name value`.
fn parse_sample(line: &str) -> Option<(String, Labels, f64)> {
    let name_end = line.find(['{', ' '])?;
    let name = line[..name_end].to_string();
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        let (parsed, after) = parse_labels(body)?;
        labels = parsed;
        rest = after;
    }
    let value = rest.trim().split(' ').next()?;
    Some((name, labels, parse_value(value)?))
}

/// Labels up to the closing brace, and what follows it.
fn parse_labels(mut s: &str) -> Option<(Labels, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.strip_prefix(',').unwrap_or(s);
        if let Some(after) = s.strip_prefix('}') {
            return Some((labels, after));
        }
        let (name, after) = s.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => value.push(match chars.next()?.1 {
                    'n' => '\n',
                    c => c,
                }),
                (_, c) => value.push(c),
            }
        };
        labels.push((name.to_string(), value));
        s = &after[end + 1..];
    }
}

fn parse_value(v: &str) -> Option<f64> {
    match v {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => v.parse().ok(),
    }
}

/// HELP text escapes: `\\` and `\n`.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some(c) => out.push(c),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
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
#[path = "tests.rs"]
mod tests;
