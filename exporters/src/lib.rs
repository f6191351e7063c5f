//! iowarden's exporters: the snapshot data model and its encodings
//! (OpenMetrics text for Prometheus, JSON for `/snapshot.json` and
//! `iowarden snapshot --json`).

#[path = "model/iocost.rs"]
pub mod blockext;
#[path = "openmetrics/nvme.rs"]
pub mod blockext_metrics;
#[path = "cgroup_cap.rs"]
pub mod cardinality;
#[path = "model/cost.rs"]
pub mod costmodel;
#[path = "openmetrics/io.rs"]
pub mod iocounters;
pub mod json;
#[path = "model/locks.rs"]
pub mod locks;
#[path = "openmetrics/locks.rs"]
pub mod locks_metrics;
#[path = "model/mod.rs"]
pub mod model;
#[path = "protobuf/native.rs"]
pub mod native;
#[path = "openmetrics/mod.rs"]
pub mod openmetrics;
#[path = "protobuf/mod.rs"]
pub mod protobuf;
#[path = "openmetrics/runtime.rs"]
pub mod selfmetrics;
#[path = "model/tuner.rs"]
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
pub use openmetrics::{
    collapse_buckets, encode_openmetrics, ClassicBuckets, ExpositionOptions, SelfMetrics,
};
pub use protobuf::{
    decode_protobuf, encode_protobuf, negotiate, Exposition, OPENMETRICS_CONTENT_TYPE,
    PROTOBUF_CONTENT_TYPE,
};
pub use selfmetrics::{BpfProgramStats, RuntimeMetrics, TableFill};
pub use tuner::{TunerDecision, TunerSlo, TunerStatus};
