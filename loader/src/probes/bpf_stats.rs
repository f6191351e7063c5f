//! BPF run-time statistics for iowarden's own cost. The kernel counts run
//! time and run count of BPF programs only while statistics are enabled,
//! since timing every call costs ~20 ns; iowarden enables them only when
//! asked (`iowarden run --bpf-stats`), through BPF_ENABLE_STATS: the kernel
//! keeps them on while the returned fd is open, so they go off again when
//! the daemon exits, even on a crash.

use std::os::fd::{FromRawFd, OwnedFd};

use anyhow::{bail, Result};
use iowarden_exporters::BpfProgramStats;

/// Holds BPF run-time statistics on; dropping it turns them off (unless
/// someone else holds them on too).
pub struct BpfStatsGuard {
    _fd: OwnedFd,
}

pub fn enable_bpf_stats() -> Result<BpfStatsGuard> {
    // SAFETY: a plain syscall wrapper; a non-negative return is a new fd we own.
    let fd = unsafe {
        libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME)
    };
    if fd < 0 {
        let err = std::io::Error::from_raw_os_error(-fd);
        bail!(
            "--bpf-stats: enabling BPF run-time statistics failed ({err}); it needs CAP_SYS_ADMIN. \
             Alternatively run `sysctl kernel.bpf_stats_enabled=1` as root and drop --bpf-stats"
        );
    }
    Ok(BpfStatsGuard {
        // SAFETY: fd was just returned by the kernel and is owned by nobody else.
        _fd: unsafe { OwnedFd::from_raw_fd(fd) },
    })
}

/// Run count and time of one loaded program from the kernel's
/// `bpf_prog_info`; None when the kernel does not answer. Both stay 0
/// unless BPF run-time stats are enabled (see crate::host::selfstats).
fn prog_stats_of(name: &str, prog: &impl std::os::fd::AsFd) -> Option<BpfProgramStats> {
    prog_info(prog).map(|info| BpfProgramStats {
        program: name.to_string(),
        run_time_seconds: info.run_time_ns as f64 / 1e9,
        run_count: info.run_cnt,
        recursion_misses: info.recursion_misses,
    })
}

/// Run count and time of the programs `links` attached from `obj`, by name:
/// every program of an object that runs per request or per event counts
/// in what iowarden reports it costs.
pub(crate) fn attached_prog_stats(
    obj: &libbpf_rs::Object,
    links: &[(&'static str, libbpf_rs::Link)],
) -> Vec<BpfProgramStats> {
    attached_prog_stats_as(obj, links, str::to_string)
}

/// [`attached_prog_stats`] for an object whose programs load under
/// another name than the one they are linked and reported by (the block
/// object's variants per claim method): `loaded_as` maps the one to the
/// other.
pub(crate) fn attached_prog_stats_as(
    obj: &libbpf_rs::Object,
    links: &[(&'static str, libbpf_rs::Link)],
    loaded_as: impl Fn(&str) -> String,
) -> Vec<BpfProgramStats> {
    links
        .iter()
        .filter_map(|&(name, _)| {
            let loaded = loaded_as(name);
            prog_stats_of(name, &obj.progs().find(|p| p.name() == loaded.as_str())?)
        })
        .collect()
}

/// The scalar fields of a loaded program's `bpf_prog_info` (name, run
/// count, ...); None when the kernel does not answer.
pub fn prog_info(prog: &impl std::os::fd::AsFd) -> Option<libbpf_rs::libbpf_sys::bpf_prog_info> {
    use std::os::fd::AsRawFd;
    let fd = prog.as_fd().as_raw_fd();
    let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a zeroed bpf_prog_info and len its size; with no
    // array pointers set the kernel fills only the scalar fields.
    let rc = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    (rc == 0).then_some(info)
}
