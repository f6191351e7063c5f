//! iowarden: per-cgroup block I/O observability on BPF tracepoints.

pub mod skel {
    #![allow(
        clippy::all,
        non_camel_case_types,
        non_snake_case,
        dead_code,
        missing_docs
    )]
    include!(concat!(env!("OUT_DIR"), "/iowarden.skel.rs"));
}

pub mod cgroups;
pub mod collect;
pub mod container;
pub mod daemon;
pub mod devices;
pub mod duration;
pub mod hist;
pub mod knobs;
pub mod monitor;
pub mod preflight;
pub mod selfstats;
pub mod sysinfo;
pub mod topview;

pub mod tracer;
