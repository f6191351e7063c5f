//! iowarden: per-cgroup block I/O observability on BPF tracepoints.

/// A libbpf-cargo skeleton that build.rs generated into OUT_DIR, as a
/// module (generated code: lints off).
macro_rules! skeleton {
    ($module:ident, $file:literal) => {
        pub mod $module {
            #![allow(
                clippy::all,
                non_camel_case_types,
                non_snake_case,
                dead_code,
                missing_docs
            )]
            include!(concat!(env!("OUT_DIR"), "/", $file));
        }
    };
}

skeleton!(skel, "iowarden.skel.rs");
skeleton!(nvme_skel, "nvme.skel.rs");
skeleton!(iocost_skel, "iocost.skel.rs");
skeleton!(locks_skel, "locks.skel.rs");

pub mod bench;
pub mod capacity;
pub mod cgroups;
pub mod collect;
pub mod container;
pub mod costmodel;
pub mod costs;
pub mod costview;
pub mod daemon;
pub mod devices;
pub mod duration;
pub mod exposition;
pub mod extensions;
pub mod hist;
pub mod iocost;
pub mod knobs;
pub mod locks;
pub mod lockstack;
pub mod lockview;
pub mod mapped;
pub mod monitor;
pub mod nvme;
pub mod preflight;
pub mod profile;
pub mod selfstats;
pub mod sysinfo;
pub mod topview;
pub mod tui;

pub mod tracer;
pub mod tune;
