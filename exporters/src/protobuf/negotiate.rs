//! Which exposition a scraper gets, from its Accept header.

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
