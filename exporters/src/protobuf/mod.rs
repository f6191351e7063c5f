//! The Prometheus protobuf exposition (io.prometheus.client.MetricFamily,
//! length-delimited), which is what carries native histograms.
//!
//! The latency histograms are built here as native histograms. Every other
//! family is written once, by the OpenMetrics collectors, and transcoded from
//! that text: one source for names, help and labels in both formats.

mod encode;
pub mod native;
mod negotiate;
mod transcode;

pub use encode::{decode_protobuf, encode_protobuf};
pub use negotiate::{negotiate, Exposition, OPENMETRICS_CONTENT_TYPE, PROTOBUF_CONTENT_TYPE};
pub use transcode::transcode_openmetrics;

#[cfg(test)]
mod tests;
