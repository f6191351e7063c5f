use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use iowarden::daemon;
use iowarden::duration::parse_duration;
use iowarden::host::container::StaticPodDirectory;
use iowarden::host::devices::{kernel_devt, resolve_device};
use iowarden::host::{preflight, selfstats};
use iowarden::monitor::Monitor;
use iowarden::probes::block::TracerConfig;
use iowarden::probes::locks::LockConfig;
use iowarden::views::{locks as lockview, top as topview};

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
    /// Capacity of the (cgroup, device, op) series table (rounded up to a
    /// power of two)
    #[arg(long, default_value_t = iowarden::probes::block::capacity::DEFAULT_SERIES)]
    max_series: u32,
    /// Counter shards (a power of two; default: one per CPU up to 4). More
    /// shards: less contention between CPUs completing one series' I/O,
    /// more memory
    #[arg(long)]
    shards: Option<u32>,
    /// BPF map memory the I/O tables may take, in MiB
    #[arg(long, default_value_t = iowarden::probes::block::capacity::DEFAULT_BUDGET_BYTES >> 20)]
    max_map_memory: u64,
    /// Do not record latency histograms (counts and bytes only)
    #[arg(long)]
    no_latency: bool,
    /// Do not record per-hardware-queue counters
    #[arg(long)]
    no_hwq: bool,
    /// Also count requests inserted and issued per hardware queue (and so
    /// those in flight now): two more BPF programs per request
    #[arg(long, conflicts_with = "no_hwq")]
    hwq_events: bool,
    /// Do not charge requests the linear iocost model's cost
    #[arg(long)]
    no_cost: bool,
    /// The linear cost model for every device, io.cost.model's keys over
    /// the kernel's SSD defaults, e.g. 'rbps=500000000 rrandiops=20000'
    /// (default: each device's io.cost.model line, else the kernel's
    /// defaults for its type)
    #[arg(long, value_parser = parse_cost_model)]
    cost_model: Option<iowarden::costmodel::LinearModel>,
    /// Do not load the NVMe queue programs
    #[arg(long)]
    no_nvme: bool,
    /// Do not load the iocost programs (the kernel formats a cgroup path
    /// under a global lock for every iocost event while they are attached)
    #[arg(long)]
    no_iocost: bool,
    /// Load the lock contention programs (lock:contention_begin/end): wait
    /// time per lock site and cgroup, stacks through the block layer only.
    /// Off by default: every contention costs a kernel stack walk (~2 us)
    #[arg(long)]
    locks: bool,
    /// Like --locks, but record contention anywhere in the kernel
    #[arg(long)]
    locks_all: bool,
}

impl TraceArgs {
    /// The kernel's name of the `--device` filter, if one was given.
    fn device_name(&self) -> Result<Option<String>> {
        Ok(self
            .device
            .as_deref()
            .map(resolve_device)
            .transpose()?
            .map(|d| d.name))
    }
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
        /// Knob journal directory: what a killed `tune`/`knob set --hold` left
        /// changed is restored at start
        #[arg(long, default_value = iowarden::knobs::writer::DEFAULT_STATE_DIR)]
        state_dir: std::path::PathBuf,
        #[command(flatten)]
        export: iowarden::exposition::ExportArgs,
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
    /// Trace for a while, then print each device's linear cost model: the
    /// one requests are charged with, its error per class against measured
    /// device time, and the model refitted from those measurements
    Model {
        #[command(flatten)]
        trace: TraceArgs,
        /// How long to trace
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        duration: Duration,
    },
    /// Tune io.cost.qos online so the protected cgroups meet their latency
    /// SLOs while the device keeps as much throughput as it can
    Tune(TuneArgs),
    /// Measure a device's linear iocost model with saturating fio runs
    /// (overwrites the region: refuses a device in use unless --force)
    Profile {
        /// A whole disk by name (nvme0n1, loop3) or MAJ:MIN
        device: String,
        /// Run time of each of the six fio cases
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        duration: Duration,
        /// Start of the region to use, bytes (K, M, G suffixes)
        #[arg(long, default_value = "0", value_parser = iowarden::profile::parse_size)]
        offset: u64,
        /// Length of the region (default: to the end of the device)
        #[arg(long, value_parser = iowarden::profile::parse_size)]
        size: Option<u64>,
        /// Profile even a device that is mounted, partitioned or holds data
        #[arg(long)]
        force: bool,
        /// Write the model to io.cost.model (journaled; kept)
        #[arg(long)]
        apply: bool,
        #[arg(long, default_value = iowarden::knobs::writer::DEFAULT_STATE_DIR)]
        state_dir: std::path::PathBuf,
    },
    /// Isolation desiderata (isol-bench D1-D4) and scheduler cost per knob,
    /// scored from the block layer and cross-checked against fio
    Bench {
        /// The device under test: a whole disk by name (nvme0n1) or MAJ:MIN
        #[arg(long)]
        device: String,
        /// overhead, fairness, prio-util, burst, schedulers (comma-separated) or all
        #[arg(long, default_value = "all")]
        suite: String,
        /// none, io.max, io.latency, io.cost, bfq, mq-deadline, kyber (comma-separated)
        /// or all; default: every knob this host offers
        #[arg(long)]
        knobs: Option<String>,
        /// Directory for report.json, summary.md, the plots, fio's jobs and outputs
        #[arg(long)]
        out: std::path::PathBuf,
        /// Short runs (a few minutes in all), for CI
        #[arg(long)]
        quick: bool,
        /// Run on a device that is mounted or held
        #[arg(long)]
        force: bool,
        #[arg(long, default_value = iowarden::knobs::writer::DEFAULT_STATE_DIR)]
        state_dir: std::path::PathBuf,
    },
    /// Read, set and restore cgroup v2 io.* knobs (journaled, restorable)
    Knob {
        #[command(subcommand)]
        cmd: iowarden::knobs::cli::KnobCmd,
    },
}

#[derive(Args)]
struct TuneArgs {
    /// The device to tune: a whole disk by name (nvme0n1) or MAJ:MIN
    #[arg(long)]
    device: String,
    /// A cgroup whose SLOs must hold (path on the io hierarchy, e.g. /lc); repeatable
    #[arg(long, required = true)]
    protect: Vec<String>,
    /// Latency SLO of every protected cgroup, <read|write|any>-p<pct>=<latency>,
    /// e.g. read-p99=2ms; repeatable
    #[arg(long, required = true)]
    slo: Vec<String>,
    /// Lowest vrate (percent of the cost model) the tuner may set
    #[arg(long, default_value_t = 5.0)]
    vrate_min: f64,
    /// Highest vrate (percent) the tuner may set
    #[arg(long, default_value_t = 100.0)]
    vrate_max: f64,
    /// First vrate to try (default: --vrate-max)
    #[arg(long)]
    start: Option<f64>,
    /// Largest vrate change per decision, percentage points
    #[arg(long, default_value_t = 30.0)]
    max_step: f64,
    /// Slack (fraction of the target) needed before raising vrate
    #[arg(long, default_value_t = 0.15)]
    margin: f64,
    /// Decision period: one bounded step per period
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    period: Duration,
    /// Fewer I/Os of an SLO's class in a period: no decision
    #[arg(long, default_value_t = 100)]
    min_samples: u64,
    /// Also set io.weight 'default W' on the protected cgroups
    #[arg(long)]
    protect_weight: Option<u32>,
    /// Print the decisions; write nothing
    #[arg(long)]
    dry_run: bool,
    /// Where the journal of previous knob values lives
    #[arg(long, default_value = iowarden::knobs::writer::DEFAULT_STATE_DIR)]
    state_dir: std::path::PathBuf,
    /// Address for /metrics and /snapshot.json (with iowarden_tune_* metrics)
    #[arg(long, default_value = "127.0.0.1:9617")]
    listen: SocketAddr,
    /// Poll interval
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    interval: Duration,
    /// Stop (and restore the knobs) after this long
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
}

fn tune(a: TuneArgs) -> Result<()> {
    use iowarden::tune::{controller::ControllerConfig, runner, slo::parse_slo};
    let device = resolve_device(&a.device)?;
    let slos = a
        .slo
        .iter()
        .map(|s| parse_slo(s).map_err(anyhow::Error::msg))
        .collect::<Result<Vec<_>>>()?;
    let controller = ControllerConfig {
        vrate_min: a.vrate_min,
        vrate_max: a.vrate_max,
        start: a.start.unwrap_or(a.vrate_max),
        max_step: a.max_step,
        margin: a.margin,
        min_samples: a.min_samples,
        ..ControllerConfig::default()
    };
    let resolver = iowarden::host::cgroups::CgroupResolver::for_host()?;
    let mut tuner = runner::Tuner::prepare(
        runner::TuneOptions {
            device: device.clone(),
            protect: a.protect,
            slos,
            controller,
            period: a.period,
            protect_weight: a.protect_weight,
            writer: iowarden::knobs::writer::WriterConfig {
                state_dir: a.state_dir,
                dry_run: a.dry_run,
                ..Default::default()
            },
        },
        &resolver,
    )?;
    let server = daemon::bind(a.listen)?;
    let trace = TraceArgs {
        device: Some(format!("{}:{}", device.major, device.minor)),
        max_series: iowarden::probes::block::capacity::DEFAULT_SERIES,
        shards: None,
        max_map_memory: iowarden::probes::block::capacity::DEFAULT_BUDGET_BYTES >> 20,
        no_latency: false,
        no_hwq: false,
        hwq_events: false,
        no_cost: false,
        cost_model: None,
        no_nvme: false,
        no_iocost: false,
        locks: false,
        locks_all: false,
    };
    let monitor = start_monitor(&trace)?;
    let stop = stop_flag()?;
    tuner.start()?;
    let result = daemon::run(
        monitor,
        server,
        &daemon::RunOptions {
            listen: a.listen,
            interval: a.interval,
            duration: a.duration,
            bpf_stats: false,
            pods: None,
            exposition: Default::default(),
            max_cgroups: None,
        },
        stop,
        &mut |snap| tuner.on_poll(snap),
    );
    eprintln!("iowarden tune: {}", tuner.summary());
    let restored = tuner.finish();
    for m in restored.as_deref().unwrap_or_default() {
        eprintln!("iowarden: {m}");
    }
    match (result, restored) {
        (Err(e), Ok(_)) => Err(e.context("tuner stopped; what it changed was restored")),
        (Err(e), Err(r)) => Err(e.context(format!("tuner stopped, and restoring failed: {r:#}"))),
        (Ok(()), Err(e)) => Err(e),
        (Ok(()), Ok(_)) => Ok(()),
    }
}

fn parse_cost_model(s: &str) -> Result<iowarden::costmodel::LinearModel, String> {
    iowarden::costmodel::LinearModel::parse_over(iowarden::costmodel::AUTOP_SSD_DFL, s)
}

fn tracer_config(t: &TraceArgs) -> Result<TracerConfig> {
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
    Ok(TracerConfig {
        capacity,
        filter_devt,
        latency: !t.no_latency,
        hwq: !t.no_hwq,
        hwq_events: t.hwq_events,
        cost: !t.no_cost,
        cost_model: t.cost_model,
        cost_devices: Vec::new(),
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
fn start_monitor(trace: &TraceArgs) -> Result<Monitor> {
    let cfg = tracer_config(trace)?;
    preflight::check()?;
    let monitor = Monitor::start(&cfg)?;
    for p in monitor.probe_report() {
        eprintln!("iowarden: {p}");
    }
    Ok(monitor)
}

/// Restores what a killed iowarden left changed (it journaled the previous
/// values); a failure is reported but does not stop the daemon.
fn recover_knobs(state_dir: std::path::PathBuf) {
    use iowarden::knobs::writer::{Writer, WriterConfig};
    let mut w = Writer::new(WriterConfig {
        state_dir,
        ..Default::default()
    });
    match w.recover() {
        Ok(msgs) => msgs.iter().for_each(|m| eprintln!("iowarden: {m}")),
        Err(e) => {
            eprintln!("iowarden: warning: could not restore knobs a killed run left changed: {e:#}")
        }
    }
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
        Cmd::Bench {
            device,
            suite,
            knobs,
            out,
            quick,
            force,
            state_dir,
        } => {
            let opts = iowarden::bench::run::BenchOptions {
                device,
                suites: suite,
                knobs,
                out: out.clone(),
                quick,
                force,
                state_dir,
            };
            let report = iowarden::bench::run::run(opts, stop_flag()?)?;
            print!("{}", iowarden::bench::report::markdown(&report));
            eprintln!("iowarden bench: report in {}", out.display());
            Ok(())
        }
        Cmd::Tune(args) => tune(args),
        Cmd::Profile {
            device,
            duration,
            offset,
            size,
            force,
            apply,
            state_dir,
        } => {
            let d = resolve_device(&device)?;
            // Checked before the runs: the profile takes minutes.
            let model_path =
                iowarden::probes::iocost::cgroup2_root().map(|r| r.join("io.cost.model"));
            if apply && !model_path.as_ref().is_some_and(|p| p.exists()) {
                anyhow::bail!("--apply: no io.cost.model on this host (iocost needs the io controller on cgroup v2); nothing measured or changed");
            }
            let (line, report) = iowarden::profile::profile(&iowarden::profile::ProfileOptions {
                name: d.name.clone(),
                devnum: format!("{}:{}", d.major, d.minor),
                runtime: duration,
                offset,
                size,
                force,
            })?;
            for r in report {
                eprintln!("iowarden profile: {r}");
            }
            println!("{line}");
            if apply {
                let mut w =
                    iowarden::knobs::writer::Writer::new(iowarden::knobs::writer::WriterConfig {
                        state_dir,
                        ..Default::default()
                    });
                let path = model_path.expect("checked above");
                eprintln!("iowarden: {}", w.set(&path, &line)?);
                w.keep_all()?;
            }
            Ok(())
        }
        Cmd::Run {
            trace,
            listen,
            interval,
            duration,
            bpf_stats,
            pod_map,
            state_dir,
            export,
        } => {
            recover_knobs(state_dir);
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
                    exposition: export.options(),
                    max_cgroups: export.max_cgroups,
                },
                stop_flag()?,
                &mut |_| Ok(()),
            )
        }
        Cmd::Top {
            trace,
            interval,
            duration,
        } => {
            let mut monitor = start_monitor(&trace)?;
            let stop = stop_flag()?;
            let device = trace.device_name()?;
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
            trace.locks = true;
            trace.locks_all |= all;
            let mut monitor = start_monitor(&trace)?;
            let stop = stop_flag()?;
            let device = trace.device_name()?;
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
        Cmd::Model { trace, duration } => {
            if trace.no_cost {
                anyhow::bail!("iowarden model needs cost charging (drop --no-cost)");
            }
            let mut monitor = start_monitor(&trace)?;
            let stop = stop_flag()?;
            let t0 = std::time::Instant::now();
            while t0.elapsed() < duration && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
            }
            let snap = monitor.poll()?;
            let device = trace.device_name()?;
            print!(
                "{}",
                iowarden::views::cost::render(&snap.cost_models, device.as_deref())
            );
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
                let all = iowarden_exporters::ExpositionOptions {
                    counters: iowarden_exporters::IoCounter::ALL.to_vec(),
                    stages: iowarden_exporters::Stage::ALL.to_vec(),
                    classic: iowarden_exporters::ClassicBuckets::PowersOfTwo,
                };
                print!(
                    "{}",
                    iowarden_exporters::encode_openmetrics(&snap, &extra, &all)?
                );
            }
            Ok(())
        }
    }
}
