//! What iowarden reads from the host outside BPF: the cgroup hierarchy,
//! block devices, containers, kernel and process facts, privileges, the
//! wall clock.
//! Imports nothing else in the crate.

pub mod cgroups;
pub mod clock;
pub mod container;
pub mod devices;
pub mod diskstats;
pub mod preflight;
pub mod pressure;
pub mod privileges;
pub mod selfstats;
pub mod sysinfo;
