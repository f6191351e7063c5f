//! The lock-contention object (bpf/locks.bpf.c): wait time per lock site
//! and cgroup. `start` loads it where the kernel has lock:contention_*,
//! `read` copies the series table, `release` frees the slots of cgroups
//! that are gone, `fill` builds the report (report.rs) with the stacks
//! named by symbols.rs. sites.rs holds the pure logic of lock sites.

mod probe;
mod raw;
pub mod report;
pub mod sites;
pub mod symbols;

pub use probe::{LockConfig, LockProbe, MAX_RANGES, MAX_SLOTS, NAME};
pub use raw::{LockKey, RawLockSample, NO_STACK};
