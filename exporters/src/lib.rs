//! iowarden's exporters: the snapshot data model and its encodings
//! (OpenMetrics text for Prometheus, Prometheus protobuf with native
//! histograms, JSON for `/snapshot.json` and `iowarden snapshot --json`).
//!
//! `model/` holds the snapshot, one file per domain; `openmetrics/` writes
//! it, one file per domain; `protobuf/` and `json` are the other
//! encodings; `cgroup_cap` bounds the cgroups a snapshot exports.

pub mod cgroup_cap;
pub mod json;
pub mod model;
pub mod openmetrics;
pub mod protobuf;
pub mod reference;
#[cfg(test)]
mod walkthrough_tests;

/// The io.prometheus.client exposition model, generated from proto/ by build.rs.
#[allow(clippy::all)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/io.prometheus.client.rs"));
}

pub use cgroup_cap::CgroupCap;
pub use json::{decode_json, encode_json};
pub use model::*;
pub use openmetrics::{
    collapse_buckets, encode_openmetrics, ClassicBuckets, ExpositionOptions, IoCounter,
};
pub use protobuf::{
    decode_protobuf, encode_protobuf, negotiate, Exposition, OPENMETRICS_CONTENT_TYPE,
    PROTOBUF_CONTENT_TYPE,
};

/// The loader's histogram layout, for the encoders' unit tests: 1 us buckets
/// below 4 us, then 4 per power of two, 88 in all.
#[cfg(test)]
pub(crate) mod test_layout {
    pub(crate) fn bounds() -> Vec<f64> {
        (0..88usize)
            .map(|i| {
                if i < 4 {
                    i as u64
                } else {
                    (4 + (i % 4) as u64) << (i / 4 - 1)
                }
            })
            .map(|us| us as f64 / 1e6)
            .collect()
    }
}
