use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use iowarden::container::StaticPodDirectory;
use iowarden::devices::{kernel_devt, resolve_device};
use iowarden::duration::parse_duration;
use iowarden::locks::LockConfig;
use iowarden::monitor::Monitor;
use iowarden::tracer::TracerConfig;
use iowarden::{daemon, lockview, preflight, selfstats, topview};

#[derive(Parser)]
#[command(
    name = "iowarden",
    version,
    about = "Per-cgroup block I/O isolation observability (eBPF)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Args, Clone)]
struct TraceArgs {
    /// Only this device: a whole disk by name (nvme0n1, loop3) or MAJ:MIN
    #[arg(long)]
    device: Option<String>,
    /// Capacity of the (cgroup, device, op) series table
    #[arg(long, default_value_t = 1024)]
    max_series: u32,
    /// Do not record latency histograms (counts and bytes only)
    #[arg(long)]
    no_latency: bool,
    /// Do not record per-hardware-queue counters
    #[arg(long)]
    no_hwq: bool,
    /// Do not load the NVMe queue programs
    #[arg(long)]
    no_nvme: bool,
    /// Do not load the iocost programs (the kernel formats a cgroup path
    /// under a global lock for every iocost event while they are attached)
    #[arg(long)]
    no_iocost: bool,
    /// Do not load the lock contention programs (lock:contention_begin/end)
    #[arg(long)]
    no_locks: bool,
    /// Record lock contention anywhere in the kernel, not only in stacks
    /// through the block layer (costs a stack walk per contention)
    #[arg(long)]
    locks_all: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the daemon: poll the BPF maps, serve /metrics and /snapshot.json
    Run {
        #[command(flatten)]
        trace: TraceArgs,
        /// Address for the HTTP endpoint
        #[arg(long, default_value = "127.0.0.1:9617")]
        listen: SocketAddr,
        /// Poll interval (e.g. 500ms, 1s)
        #[arg(long, default_value = "1s", value_parser = parse_duration)]
        interval: Duration,
        /// Exit after this long (default: run until SIGINT/SIGTERM)
        #[arg(long, value_parser = parse_duration)]
        duration: Option<Duration>,
        /// Have the kernel time the BPF programs (~20 ns per call; needs CAP_SYS_ADMIN)
        /// and export their run count and time
        #[arg(long)]
        bpf_stats: bool,
        /// JSON file naming pods and containers by uid and id, for iowarden_cgroup_info
        #[arg(long)]
        pod_map: Option<std::path::PathBuf>,
    },
    /// Live view of cgroups sorted by device-time share, naming the noisy neighbour
    Top {
        #[command(flatten)]
        trace: TraceArgs,
        #[arg(long, default_value = "1s", value_parser = parse_duration)]
        interval: Duration,
        /// Exit after this long
        #[arg(long, value_parser = parse_duration)]
        duration: Option<Duration>,
    },
    /// Trace for a while, print one snapshot and exit
    Snapshot {
        #[command(flatten)]
        trace: TraceArgs,
        /// Print JSON (the /snapshot.json schema)
        #[arg(long)]
        json: bool,
        /// How long to trace before printing
        #[arg(long, default_value = "1s", value_parser = parse_duration)]
        wait: Duration,
    },
    /// Where I/O waits on kernel locks: wait time per lock site and cgroup over a window
    Locks {
        #[command(flatten)]
        trace: TraceArgs,
        /// How long to trace
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        duration: Duration,
        /// Print folded stacks (root first, cgroup as root frame, value = ns waited) for flamegraph.pl
        #[arg(long)]
        folded: bool,
        /// Every contended kernel lock, not only under the block layer
        #[arg(long, conflicts_with = "block_only")]
        all: bool,
        /// Only stacks through the block layer (the default)
        #[arg(long)]
        block_only: bool,
        /// Rows of the table
        #[arg(long, default_value_t = 20)]
        top: usize,
    },
    /// Read, set and restore cgroup v2 io.* knobs (journaled, restorable)
    Knob {
        #[command(subcommand)]
        cmd: iowarden::knobs::cli::KnobCmd,
    },
}

fn tracer_config(t: &TraceArgs) -> Result<TracerConfig> {
    let filter_devt = match &t.device {
        Some(spec) => {
            let d = resolve_device(spec)?;
            Some(kernel_devt(d.major, d.minor))
        }
        None => None,
    };
    Ok(TracerConfig {
        max_series: t.max_series,
        filter_devt,
        latency: !t.no_latency,
        hwq: !t.no_hwq,
        nvme: !t.no_nvme,
        iocost: !t.no_iocost,
        locks: (!t.no_locks).then(|| LockConfig {
            block_only: !t.locks_all,
            ..Default::default()
        }),
    })
}

/// Checks privileges and BTF, loads and attaches the programs, and says
/// which optional probes are missing and why.
fn start_monitor(trace: &TraceArgs) -> Result<Monitor> {
    let cfg = tracer_config(trace)?;
    preflight::check()?;
    let monitor = Monitor::start(&cfg)?;
    for p in monitor.probe_report() {
        eprintln!("iowarden: {p}");
    }
    Ok(monitor)
}

fn stop_flag() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Ordering::Relaxed))
        .context("installing the SIGINT/SIGTERM handler")?;
    Ok(stop)
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = real_main(cli) {
        eprintln!("iowarden: error: {e:#}");
        std::process::exit(1);
    }
}

fn real_main(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Knob { cmd } => iowarden::knobs::cli::run(cmd),
        Cmd::Run {
            trace,
            listen,
            interval,
            duration,
            bpf_stats,
            pod_map,
        } => {
            let pods = pod_map
                .as_deref()
                .map(StaticPodDirectory::load)
                .transpose()?
                .map(Arc::new);
            // Bind first: a taken port should fail before BPF is loaded.
            let server = daemon::bind(listen)?;
            // Held until exit: the kernel stops timing when the fd closes.
            let _stats = bpf_stats.then(selfstats::enable_bpf_stats).transpose()?;
            let monitor = start_monitor(&trace)?;
            daemon::run(
                monitor,
                server,
                &daemon::RunOptions {
                    listen,
                    interval,
                    duration,
                    bpf_stats,
                    pods,
                },
                stop_flag()?,
            )
        }
        Cmd::Top {
            trace,
            interval,
            duration,
        } => {
            let mut monitor = start_monitor(&trace)?;
            let stop = stop_flag()?;
            let device = trace
                .device
                .as_deref()
                .map(resolve_device)
                .transpose()?
                .map(|d| d.name);
            let opts = topview::TopOptions {
                interval,
                device,
                duration,
            };
            let outcome = topview::run_top(|| monitor.poll(), &opts, &stop)?;
            println!("{}", outcome.culprit.unwrap_or(outcome.last_verdict));
            Ok(())
        }
        Cmd::Locks {
            mut trace,
            duration,
            folded,
            all,
            block_only: _,
            top,
        } => {
            trace.no_locks = false;
            trace.locks_all |= all;
            let mut monitor = start_monitor(&trace)?;
            let stop = stop_flag()?;
            let device = trace
                .device
                .as_deref()
                .map(resolve_device)
                .transpose()?
                .map(|d| d.name);
            let prev = monitor.poll()?;
            if prev.locks.is_none() {
                anyhow::bail!("lock contention cannot be traced here (see the message above)");
            }
            let t0 = std::time::Instant::now();
            while t0.elapsed() < duration && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let delta = monitor.poll()?.delta_since(&prev);
            if folded {
                print!("{}", lockview::folded(&delta));
            } else {
                print!("{}", lockview::render_panel(&delta, device.as_deref(), top));
                let mut cgroups: Vec<&str> =
                    delta.io.iter().map(|s| s.cgroup.path.as_str()).collect();
                cgroups.sort_unstable();
                cgroups.dedup();
                for cg in cgroups {
                    if let Some(w) = lockview::lock_wait_per_io(&delta, cg, device.as_deref()) {
                        println!(
                            "lock wait per I/O{}: {cg} {}",
                            device
                                .as_deref()
                                .map(|d| format!(" on {d}"))
                                .unwrap_or_default(),
                            lockview::fmt_wait(Some(w))
                        );
                    }
                }
            }
            Ok(())
        }
        Cmd::Snapshot { trace, json, wait } => {
            let mut monitor = start_monitor(&trace)?;
            std::thread::sleep(wait);
            let snap = monitor.poll()?;
            if json {
                println!("{}", iowarden_exporters::encode_json(&snap));
            } else {
                let extra = iowarden_exporters::SelfMetrics::default();
                print!("{}", iowarden_exporters::encode_openmetrics(&snap, &extra)?);
            }
            Ok(())
        }
    }
}
