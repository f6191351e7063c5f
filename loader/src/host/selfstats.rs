//! Self-observation read from the host: whether an administrator turned
//! BPF run-time statistics on for everyone. (Turning them on for iowarden
//! alone is a BPF call: probes::bpf_stats.)

/// Whether an administrator turned statistics on for everyone.
pub fn sysctl_bpf_stats_enabled() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").is_ok_and(|s| s.trim() == "1")
}
