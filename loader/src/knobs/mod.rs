//! cgroup v2 io.* knobs: typed parse/format (pure, no filesystem) and the
//! journaling writer (the `iowarden knob` subcommand is cli/knob.rs).
//!
//! Every parser accepts what the kernel prints (block/blk-iocost.c,
//! blk-throttle.c, blk-iolatency.c, blk-cgroup.c, kernel/sched/psi.c) and the
//! shorter forms one writes (`8:0 enable=1 rlat=2000`, `default 100`,
//! `8:0 rbps=max`). Display gives back exactly what the kernel prints for
//! kernel output; keys this code does not know are kept, in order.

// The filesystem parts are cfg(not(fuzzing)): the fuzz crate (fuzz/)
// compiles only the pure parsers, with --cfg fuzzing.
pub mod cost_model;
pub mod cost_qos;
pub mod devnum;
// Compiled for fuzzing too: journals are input from disk (fuzz target journal).
pub(crate) mod journal;
mod kind;
pub mod latency;
pub mod lines;
pub mod max;
pub mod pressure;
#[cfg(not(fuzzing))]
mod recovery;
pub mod stat;
#[cfg(not(fuzzing))]
pub mod vrate_pin;
pub mod weight;
#[cfg(not(fuzzing))]
pub mod writer;

pub(crate) mod fields;

pub use devnum::DevNum;
pub use fields::{Fixed2, KnobError};
pub use kind::KnobKind;
