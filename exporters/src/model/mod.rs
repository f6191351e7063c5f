//! The snapshot data model: what the loader reads out of the BPF maps, in
//! cumulative form, and what every consumer (OpenMetrics, JSON, `iowarden top`)
//! renders. All counters are cumulative since the daemon started; consumers
//! that want rates take [`Snapshot::delta_since`].
//!
//! [`Snapshot`] and the list of its domains are in `snapshot`; the types
//! every part shares are in `core`; each domain's part is in a file of its
//! own, which imports only `core` and `metric`, whose `metrics!` declares
//! each record's counters and gauges once: its [`Delta`] and its
//! OpenMetrics families follow. `fixture` holds one record of every domain.

mod core;
pub mod cost;
pub mod culprits;
pub mod delay;
pub mod diskstats;
pub(crate) mod fixture;
pub mod io;
pub mod iocost;
pub mod limits;
pub mod locks;
pub mod metric;
pub mod nvme;
pub mod pressure;
pub mod queues;
pub mod runtime;
mod snapshot;
pub mod tune_model;
pub mod tuner;
pub mod volume;

#[cfg(test)]
mod delta_tests;

pub use self::core::*;
pub use cost::{CostClass, DeviceCostModel, LinearModel};
pub use culprits::CulpritSeries;
pub use delay::TaskDelay;
pub use diskstats::KernelDiskStats;
pub use io::{DropCounters, IoSeries};
pub use iocost::{derive_hweights, IocostCgroup, IocostDevice};
pub use limits::{LimitKnob, LimitReason, LimitState, LimitVerdict};
pub use locks::{log2_quantile_seconds, LockReport, LockSeries, LockSiteRow, LockStack};
pub use metric::{Families, Family, FamilyKind, MetricUnit};
pub use nvme::{HolSeries, NvmeQueue, NvmeQueueCgroup};
pub use pressure::PressureSeries;
pub use queues::{CpuQueueMap, QueueSeries};
pub use runtime::{BpfProgramStats, ProbeStatus, RuntimeMetrics, SelfMetrics, TableFill};
pub(crate) use snapshot::snapshot_domains;
pub use snapshot::{Snapshot, SCHEMA_VERSION};
pub use tune_model::{ModelParam, ModelTunerStatus};
pub use tuner::{TunerDecision, TunerSlo, TunerStatus};
pub use volume::Volume;
