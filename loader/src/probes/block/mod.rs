//! The block object (bpf/iowarden.bpf.c), always loaded. probe.rs starts
//! it (load.rs opens, configures and loads it; programs.rs chooses which
//! programs load and attach, some late) and reads its sharded counters
//! (sample.rs: RawSample); accumulate.rs sums reads over time and fills
//! the snapshot's io and queues; object.rs is its [`Probe`]. config.rs
//! says what it is loaded with, capacity.rs sizes its tables, held.rs
//! plans the fexit on blk-throttle, hist.rs names its buckets.
//!
//! [`Probe`]: crate::probes::Probe

pub mod accumulate;
pub mod bench;
pub mod capacity;
pub mod config;
pub mod culprit_totals;
pub mod culprits;
pub mod delay;
pub mod held;
pub mod hist;
pub mod latency_watch;
mod load;
pub mod object;
pub mod probe;
mod programs;
pub mod sample;

pub use config::{BlockConfig, BlockMeasures};
pub use probe::BlockProbe;
pub use programs::Claims;
pub use sample::RawSample;
