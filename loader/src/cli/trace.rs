//! What every tracing subcommand shares: the probe options (TraceArgs),
//! starting the monitor, and the SIGINT/SIGTERM flag.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

use anyhow::{Context, Result};
use clap::Args;

use iowarden::host::devices::{kernel_devt, resolve_device};
use iowarden::host::preflight;
use iowarden::monitor::{Monitor, MonitorConfig};
use iowarden::probes::block::BlockConfig;
use iowarden::probes::locks::LockConfig;
use iowarden_exporters::Stage;

#[derive(Args, Clone)]
pub struct TraceArgs {
    /// Only this device: a whole disk by name (nvme0n1, loop3) or MAJ:MIN
    #[arg(long)]
    pub device: Option<String>,
    /// Capacity of the (cgroup, device, op) series table (rounded up to a
    /// power of two)
    #[arg(long, default_value_t = iowarden::probes::block::capacity::DEFAULT_SERIES)]
    pub max_series: u32,
    /// Counter shards (a power of two; default: one per CPU up to 4). More
    /// shards: less contention between CPUs completing one series' I/O,
    /// more memory
    #[arg(long)]
    pub shards: Option<u32>,
    /// BPF map memory the I/O tables may take, in MiB
    #[arg(long, default_value_t = iowarden::probes::block::capacity::DEFAULT_BUDGET_BYTES >> 20)]
    pub max_map_memory: u64,
    /// Do not record latency histograms (counts and bytes only)
    #[arg(long)]
    pub no_latency: bool,
    /// Do not record per-hardware-queue counters
    #[arg(long)]
    pub no_hwq: bool,
    /// Also count requests inserted and issued per hardware queue (and so
    /// those in flight now): two more BPF programs per request
    #[arg(long, conflicts_with = "no_hwq")]
    pub hwq_events: bool,
    /// Do not charge requests the linear iocost model's cost
    #[arg(long)]
    pub no_cost: bool,
    /// The linear cost model for every device, io.cost.model's keys over
    /// the kernel's SSD defaults, e.g. 'rbps=500000000 rrandiops=20000'
    /// (default: each device's io.cost.model line, else the kernel's
    /// defaults for its type)
    #[arg(long, value_parser = parse_cost_model)]
    pub cost_model: Option<iowarden::costmodel::LinearModel>,
    /// Do not load the NVMe queue programs
    #[arg(long)]
    pub no_nvme: bool,
    /// Do not load the iocost programs (the kernel formats a cgroup path
    /// under a global lock for every iocost event while they are attached)
    #[arg(long)]
    pub no_iocost: bool,
    /// Load the lock contention programs (lock:contention_begin/end): wait
    /// time per lock site and cgroup, stacks through the block layer only.
    /// Off by default: every contention costs a kernel stack walk (~2 us)
    #[arg(long)]
    pub locks: bool,
    /// Like --locks, but record contention anywhere in the kernel
    #[arg(long)]
    pub locks_all: bool,
}

impl TraceArgs {
    /// The kernel's name of the `--device` filter, if one was given.
    pub fn device_name(&self) -> Result<Option<String>> {
        Ok(self
            .device
            .as_deref()
            .map(resolve_device)
            .transpose()?
            .map(|d| d.name))
    }
}

pub fn parse_cost_model(s: &str) -> Result<iowarden::costmodel::LinearModel, String> {
    iowarden::costmodel::parse_over(iowarden::costmodel::AUTOP_SSD_DFL, s)
}

/// `stages`: the latency stages exported or shown; the queue and device
/// histograms are counted only when one of them is.
pub fn monitor_config(t: &TraceArgs, stages: &[Stage]) -> Result<MonitorConfig> {
    let filter_devt = match &t.device {
        Some(spec) => {
            let d = resolve_device(spec)?;
            Some(kernel_devt(d.major, d.minor))
        }
        None => None,
    };
    let cpus = libbpf_rs::num_possible_cpus().context("counting possible CPUs")? as u32;
    let capacity = iowarden::probes::block::capacity::plan(
        t.max_series,
        t.shards,
        cpus,
        t.max_map_memory.saturating_mul(1 << 20),
    )
    .map_err(anyhow::Error::msg)?;
    Ok(MonitorConfig {
        block: BlockConfig {
            capacity,
            filter_devt,
            latency: !t.no_latency,
            stage_histograms: stages.iter().any(|s| *s != Stage::Total),
            hwq: !t.no_hwq,
            hwq_events: t.hwq_events,
            cost: !t.no_cost,
            cost_model: t.cost_model,
            cost_devices: Vec::new(),
        },
        nvme: !t.no_nvme,
        iocost: !t.no_iocost,
        locks: (t.locks || t.locks_all).then(|| LockConfig {
            block_only: !t.locks_all,
            ..Default::default()
        }),
    })
}

/// Checks privileges and BTF, loads and attaches the programs, and says
/// which optional probes are missing and why.
pub fn start_monitor(trace: &TraceArgs, stages: &[Stage]) -> Result<Monitor> {
    let cfg = monitor_config(trace, stages)?;
    preflight::check()?;
    let monitor = Monitor::start(&cfg)?;
    for p in monitor.probe_report() {
        iowarden::say!("iowarden: {p}");
    }
    iowarden::say!(
        "iowarden: on Linux {}: {}",
        iowarden::host::sysinfo::kernel_release(),
        iowarden::views::support::row(monitor.probes())
    );
    Ok(monitor)
}

/// A flag SIGINT, SIGTERM and SIGHUP set. The handlers store to it
/// directly (no handler thread: `run` drops its capabilities per thread
/// after attaching, and a thread started before would keep them all).
/// SIGHUP also sets the hangup flag (see [`hung_up`]).
pub fn stop_flag() -> Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register(sig, stop.clone())
            .context("installing the SIGINT/SIGTERM/SIGHUP handler")?;
    }
    signal_hook::flag::register(SIGHUP, HANGUP.clone()).context("installing the SIGHUP handler")?;
    Ok(stop)
}

/// Set by SIGHUP: the terminal or session went away.
static HANGUP: LazyLock<Arc<AtomicBool>> = LazyLock::new(Default::default);

/// A SIGHUP arrived. The command stopped as on SIGINT (programs detached,
/// knobs restored), but nobody asked it to: main exits non-zero.
pub fn hung_up() -> bool {
    HANGUP.load(Ordering::Relaxed)
}
