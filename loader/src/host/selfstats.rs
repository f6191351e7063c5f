//! Self-observation read from the host: whether an administrator turned
//! BPF run-time statistics on for everyone, and the clock. (Turning them
//! on for iowarden alone is a BPF call: probes::bpf_stats.)

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
