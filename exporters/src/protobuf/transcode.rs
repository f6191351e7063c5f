//! OpenMetrics text, as iowarden's collectors write it, transcoded to
//! MetricFamily messages: the protobuf exposition's counters and gauges.

use crate::proto::{self, MetricFamily, MetricType};

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

/// Label pairs of a protobuf metric, in the order given.
pub(super) fn label_pairs(labels: Vec<(String, String)>) -> Vec<proto::LabelPair> {
    labels
        .into_iter()
        .map(|(name, value)| proto::LabelPair {
            name: Some(name),
            value: Some(value),
        })
        .collect()
}
