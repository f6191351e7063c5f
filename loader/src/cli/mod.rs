//! One file per subcommand: its clap arguments and what it runs.

pub mod bench;
pub mod bench_shards;
pub mod capped_model;
pub mod knob;
pub mod limits;
pub mod locks;
pub mod metrics;
pub mod model;
pub mod profile;
pub mod run;
pub mod snapshot;
pub mod top;
pub mod trace;
pub mod tune;
