//! What every tracing subcommand shares: the probe options (TraceArgs),
//! starting the monitor, and the SIGINT/SIGTERM flag.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

use anyhow::{Context, Result};
use clap::Args;

use iowarden::host::devices::resolve_device;
use iowarden::host::preflight;
use iowarden::monitor::{Monitor, MonitorConfig, TraceOptions};
use iowarden::probes::block::BlockMeasures;
use iowarden::probes::optional::ALL;
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
    /// Time the delays iocost (a cgroup in debt) and io.latency put on
    /// tasks between their I/Os (iowarden_io_task_delay_seconds_total):
    /// a fentry/fexit pair on every return to user space with work
    /// pending, for every task on the host, delayed or not
    #[arg(long)]
    pub task_delays: bool,
    /// Do not charge requests the linear iocost model's cost
    #[arg(long)]
    pub no_cost: bool,
    /// Do not split each cgroup's time by whom it waited behind (the
    /// culprit account: iowarden_culprit_seconds_total, top's measured
    /// verdict, docs/culprits.md). On by default: the completion program
    /// logs each timed request (16 B in its CPU's ring), a thread replays
    /// the log
    #[arg(long)]
    pub no_culprits: bool,
    /// The culprit account is on by default; kept so that older command
    /// lines still run
    #[arg(long, hide = true, conflicts_with = "no_culprits")]
    pub culprits: bool,
    /// The linear cost model for every device, io.cost.model's keys over
    /// the kernel's SSD defaults, e.g. 'rbps=500000000 rrandiops=20000'
    /// (default: each device's io.cost.model line, else the kernel's
    /// defaults for its type)
    #[arg(long, value_parser = parse_cost_model)]
    pub cost_model: Option<iowarden::costmodel::LinearModel>,
    /// One switch per optional probe, from iowarden::probes::optional::ALL.
    #[command(flatten)]
    pub probes: ProbeSwitches,
    /// Like --locks, but record contention anywhere in the kernel
    #[arg(long)]
    pub locks_all: bool,
}

/// The optional probes' switches (`--nvme`, `--locks`, ...), made from
/// [`iowarden::probes::optional::ALL`]: a probe added there has its switch here.
#[derive(Clone, Debug)]
pub struct ProbeSwitches {
    /// The optional probes to load: [`ALL`]'s defaults, each flipped by its
    /// switch.
    pub enabled: BTreeSet<&'static str>,
}

impl clap::FromArgMatches for ProbeSwitches {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        Ok(ProbeSwitches {
            enabled: ALL
                .iter()
                .filter(|p| p.default_on != m.get_flag(p.switch))
                .map(|p| p.name)
                .collect(),
        })
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for ProbeSwitches {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        ALL.iter().fold(cmd, |cmd, p| {
            cmd.arg(
                clap::Arg::new(p.switch)
                    .long(p.switch)
                    .action(clap::ArgAction::SetTrue)
                    .help(p.help),
            )
        })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl TraceArgs {
    /// The command line's defaults (every probe as [`ALL`] has it), for a
    /// command that traces on its own terms (`tune`).
    pub fn defaults() -> TraceArgs {
        #[derive(clap::Parser)]
        struct Defaults {
            #[command(flatten)]
            trace: TraceArgs,
        }
        <Defaults as clap::Parser>::parse_from(["iowarden"]).trace
    }

    /// What the flags ask for. `stages`: the latency stages exported or
    /// shown; the queue and device histograms are counted only when one of
    /// them is.
    pub fn options(&self, stages: &[Stage]) -> TraceOptions {
        TraceOptions {
            device: self.device.clone(),
            max_series: self.max_series,
            shards: self.shards,
            max_map_memory_bytes: self.max_map_memory.saturating_mul(1 << 20),
            measure: BlockMeasures {
                latency: !self.no_latency,
                stage_histograms: stages.iter().any(|s| *s != Stage::Total),
                hwq: !self.no_hwq,
                hwq_events: self.hwq_events,
                task_delays: self.task_delays,
                cost: !self.no_cost,
                culprits: !self.no_culprits,
                cost_model: self.cost_model,
            },
            probes: self.probes.enabled.clone(),
            locks_all: self.locks_all,
        }
    }

    /// The optional probes to load (--locks-all is --locks too).
    pub fn enabled_probes(&self) -> BTreeSet<&'static str> {
        self.options(&[]).enabled_probes()
    }

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

/// Checks privileges and BTF, loads and attaches the programs, starts
/// their threads, and says which optional probes are missing and why.
pub fn start_monitor(trace: &TraceArgs, stages: &[Stage]) -> Result<Monitor> {
    let mut monitor = load_monitor(trace, stages)?;
    monitor.start_threads()?;
    Ok(monitor)
}

/// [`start_monitor`] without starting the threads, for a command that
/// drops its privileges first (then calls `start_threads`).
pub fn load_monitor(trace: &TraceArgs, stages: &[Stage]) -> Result<Monitor> {
    let cfg = MonitorConfig::new(&trace.options(stages))?;
    preflight::check()?;
    let monitor = Monitor::load(&cfg)?;
    for p in monitor.probe_report() {
        iowarden::say!("iowarden: {p}");
    }
    iowarden::say!(
        "iowarden: on Linux {}: {}",
        iowarden::host::sysinfo::kernel_release(),
        iowarden::views::support::row(&monitor.probes())
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        trace: TraceArgs,
    }

    fn enabled(args: &[&str]) -> Vec<&'static str> {
        let cli =
            Cli::try_parse_from(std::iter::once("iowarden").chain(args.iter().copied())).unwrap();
        cli.trace.enabled_probes().into_iter().collect()
    }

    #[test]
    fn every_optional_probe_has_its_switch_and_default() {
        assert_eq!(enabled(&[]), ["iocost"]);
        assert_eq!(enabled(&["--nvme", "--locks"]), ["iocost", "locks", "nvme"]);
        assert_eq!(enabled(&["--no-iocost", "--locks-all"]), ["locks"]);
        assert_eq!(
            TraceArgs::defaults().enabled_probes(),
            enabled(&[]).into_iter().collect()
        );
        for p in ALL {
            let want = if p.default_on {
                format!("no-{}", p.name)
            } else {
                p.name.to_string()
            };
            assert_eq!(p.switch, want, "{}'s switch", p.name);
        }
    }

    /// The flags' defaults are TraceOptions' (what the bench and the tests
    /// start from).
    #[test]
    fn the_flags_defaults_are_the_options_defaults() {
        assert_eq!(
            format!("{:?}", TraceArgs::defaults().options(&[Stage::Total])),
            format!("{:?}", TraceOptions::default())
        );
    }

    #[test]
    fn a_misspelt_switch_is_refused() {
        assert!(Cli::try_parse_from(["iowarden", "--no-nvm"]).is_err());
    }
}
