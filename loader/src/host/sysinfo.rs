//! Host facts for snapshots and preflight checks.

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The CPUs this process may run on (its affinity: a cpuset or taskset
/// may leave some out), in order.
pub fn allowed_cpus() -> anyhow::Result<Vec<usize>> {
    use nix::sched::{sched_getaffinity, CpuSet};
    let set = sched_getaffinity(nix::unistd::Pid::from_raw(0))
        .map_err(|e| anyhow::anyhow!("reading this process's CPU affinity: {e}"))?;
    let cpus: Vec<usize> = (0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect();
    anyhow::ensure!(!cpus.is_empty(), "this process may run on no CPU");
    Ok(cpus)
}
