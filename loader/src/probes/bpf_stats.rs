//! BPF run-time statistics for iowarden's own cost. The kernel counts run
//! time and run count of BPF programs only while statistics are enabled,
//! since timing every call costs ~20 ns; iowarden enables them only when
//! asked (`iowarden run --bpf-stats`), through BPF_ENABLE_STATS: the kernel
//! keeps them on while the returned fd is open, so they go off again when
//! the daemon exits, even on a crash.

use std::os::fd::{FromRawFd, OwnedFd};

use anyhow::{bail, Result};

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
    // SAFETY: fd was just returned by the kernel and is owned by nobody else.
    Ok(BpfStatsGuard {
        _fd: unsafe { OwnedFd::from_raw_fd(fd) },
    })
}
