//! OpenMetrics text encoding of a [`Snapshot`], through prometheus-client's
//! collector API (it escapes label values and writes the exposition format).
//!
//! Each domain's families are written by its file (io, queues, runtime,
//! nvme, iocost, locks, cost, tuner, ...), an `Expose` impl for its field's
//! type, with the helpers of `family`; encode.rs calls them in the order
//! model/snapshot.rs's `snapshot_domains!` gives.

mod cost;
mod culprits;
mod diskstats;
mod encode;
mod expose;
mod family;
mod io;
mod iocost;
mod limits;
mod locks;
mod nvme;
mod pressure;
mod queues;
mod runtime;
#[cfg(test)]
pub(crate) mod test_text;
mod tune_model;
mod tuner;

pub use encode::encode_openmetrics;
pub use expose::{ExpositionOptions, IoCounter};
pub(crate) use family::unit_of;
pub use family::{collapse_buckets, ClassicBuckets};
pub(crate) use io::io_labels;
pub(crate) use io::LATENCY_HELP;
pub use nvme::hol_extra_latency;
