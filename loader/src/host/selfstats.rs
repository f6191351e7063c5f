//! Self-observation: BPF run-time statistics and what iowarden costs.
//!
//! The kernel counts run time and run count of BPF programs only while
//! statistics are enabled, since timing every call costs ~20 ns. iowarden
//! enables them only when asked (`iowarden run --bpf-stats`), through
//! BPF_ENABLE_STATS: the kernel keeps them on while the returned fd is open,
//! so they go off again when the daemon exits, even on a crash.

// The BPF syscall lives with the other BPF calls, in probes/.
pub use crate::probes::bpf_stats::{enable_bpf_stats, BpfStatsGuard};

/// Whether an administrator turned statistics on for everyone.
pub fn sysctl_bpf_stats_enabled() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").is_ok_and(|s| s.trim() == "1")
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
