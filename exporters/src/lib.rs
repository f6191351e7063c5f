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
pub mod proto;
pub mod protobuf;
pub mod reference;
#[cfg(test)]
mod test_layout;
#[cfg(test)]
mod walkthrough_tests;

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
