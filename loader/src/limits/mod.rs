//! Every configured io limit judged against what the probes measured over
//! a window: acting (it held I/O), idle (set, nothing held), in effect
//! (its hold is not measured here) or not in effect, with the reason in
//! words a user can act on. Pure: read.rs gathers the configuration and
//! the devices from the host, the snapshot gives the activity;
//! evidence.rs holds what the judge reads, judge.rs the judge (latency.rs
//! io.latency's, which holds the cgroups beside its own).

mod evidence;
mod judge;
mod latency;
pub mod lost;
pub mod read;
pub mod watch;
pub mod writeback;

pub use evidence::{activity_of, activity_since, Activity, ActivityMap, DeviceFacts, Evidence};
pub use iowarden_exporters::{LimitKnob, LimitReason, LimitState, LimitVerdict};
pub use judge::{judge, judge_all};

#[cfg(test)]
mod tests;
