//! iowarden's exporters: the snapshot data model and its encodings
//! (OpenMetrics text for Prometheus, JSON for `/snapshot.json` and
//! `iowarden snapshot --json`).

pub mod blockext;
pub mod blockext_metrics;
pub mod cardinality;
pub mod costmodel;
pub mod iocounters;
pub mod json;
pub mod locks;
pub mod locks_metrics;
pub mod model;
pub mod modeltune;
pub mod native;
pub mod openmetrics;
pub mod protobuf;
pub mod selfmetrics;
pub mod tuner;

/// The io.prometheus.client exposition model, generated from proto/ by build.rs.
#[allow(clippy::all)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/io.prometheus.client.rs"));
}

pub use blockext::*;
pub use cardinality::{CgroupCap, OTHER_CGROUP, OTHER_CGROUP_ID};
pub use costmodel::{CostClass, CostParams, DeviceCostModel};
pub use iocounters::IoCounter;
pub use json::{decode_json, encode_json};
pub use locks::{log2_quantile_seconds, LockReport, LockSeries, LockSiteRow, LockStack};
pub use model::*;
pub use modeltune::{ModelParam, ModelTunerStatus};
pub use openmetrics::{
    collapse_buckets, encode_openmetrics, ClassicBuckets, ExpositionOptions, SelfMetrics,
};
pub use protobuf::{
    decode_protobuf, encode_protobuf, negotiate, Exposition, OPENMETRICS_CONTENT_TYPE,
    PROTOBUF_CONTENT_TYPE,
};
pub use selfmetrics::{BpfProgramStats, RuntimeMetrics, TableFill};
pub use tuner::{TunerDecision, TunerSlo, TunerStatus};
