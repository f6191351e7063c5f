//! One module per BPF object, each with the same shape: `start` loads and
//! attaches its programs (or says in a ProbeStatus why it cannot), `read`
//! copies its maps, `fill` writes its part of the Snapshot; every object
//! implements [`Probe`] (probe.rs). block is always loaded; the optional
//! objects are described once in [`optional::ALL`], from which the command
//! line's switches, the monitor's configuration and the statuses of probes
//! left off follow. `pressure` is a [`Probe`] too, with no BPF: it reads
//! the kernel's io.pressure of the cgroups the block programs report.
//! What they share: opening and loading objects (objects.rs), map values
//! and key tables (tables.rs), program statistics (bpf_stats.rs).

pub mod block;
pub mod bpf_stats;
pub mod features;
pub mod gap_watch;
pub mod iocost;
pub mod locks;
pub mod mapped;
pub mod nvme;
pub mod objects;
pub mod optional;
pub mod pressure;
pub mod probe;
mod skeleton;
pub mod tables;

pub use probe::{cgroup_ref, HostNames, Probe};
