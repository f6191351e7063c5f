//! iowarden's exporters: the snapshot data model and its encodings
//! (OpenMetrics text for Prometheus, JSON for `/snapshot.json` and
//! `iowarden snapshot --json`).

pub mod blockext;
pub mod blockext_metrics;
pub mod costmodel;
pub mod json;
pub mod locks;
pub mod locks_metrics;
pub mod model;
pub mod openmetrics;
pub mod selfmetrics;
pub mod tuner;

pub use blockext::*;
pub use costmodel::{CostClass, CostParams, DeviceCostModel};
pub use json::{decode_json, encode_json};
pub use locks::{log2_quantile_seconds, LockReport, LockSeries, LockSiteRow, LockStack};
pub use model::*;
pub use openmetrics::{collapse_buckets, encode_openmetrics, SelfMetrics};
pub use selfmetrics::{BpfProgramStats, RuntimeMetrics, TableFill};
pub use tuner::{TunerDecision, TunerSlo, TunerStatus};
