//! Facts about iowarden itself: which probes are attached, what its BPF
//! programs cost, how full its tables are, and its polls and scrapes.

use serde::{Deserialize, Serialize};

/// Whether an optional probe (BPF program or feature) is active, and why not.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ProbeStatus {
    pub name: String,
    pub active: bool,
    /// Empty when active; otherwise what is missing or disabled.
    pub reason: String,
}

/// Kernel-side statistics of one loaded BPF program (`bpf_prog_info`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BpfProgramStats {
    pub program: String,
    /// Run time and count stay 0 unless the kernel times BPF programs.
    pub run_time_seconds: f64,
    pub run_count: u64,
    /// Runs skipped because the program was already running on the CPU.
    pub recursion_misses: u64,
}

/// One fixed-size table the BPF side fills.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableFill {
    pub table: String,
    pub entries: u64,
    pub capacity: u64,
}

#[derive(Debug, Clone, Default)]
pub struct RuntimeMetrics {
    /// Whether the kernel is timing BPF programs (ours or a sysctl). Run
    /// count and time are exported only then: zeros would read as "never ran".
    pub bpf_stats_enabled: bool,
    pub programs: Vec<BpfProgramStats>,
    pub tables: Vec<TableFill>,
    /// Duration of the previous /metrics request (encoding and sending).
    pub scrape_duration_seconds: f64,
    /// Unix time the daemon started; 0 = unknown (not exported).
    pub start_time_seconds: f64,
    /// (cgroup path, attribution labels) for `iowarden_cgroup_info`.
    pub cgroups: Vec<(String, Vec<(String, String)>)>,
}

/// Facts about the exporter itself.
#[derive(Debug, Clone, Default)]
pub struct SelfMetrics {
    pub poll_duration_seconds: f64,
    pub polls_total: u64,
    pub scrape_count: u64,
    /// Cgroups summed into cgroup="other" at the last poll; None without
    /// --max-cgroups (not exported).
    pub cgroups_folded: Option<u64>,
    pub build_version: String,
    /// BPF program cost, table fill, scrape cost, cgroup attribution.
    pub runtime: RuntimeMetrics,
}
