//! `iowarden locks`: wait time per kernel lock site and cgroup over a window.

use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use iowarden_exporters::{Snapshot, Stage};

use iowarden::duration::parse_duration;
use iowarden::views::locks as lockview;

use super::trace::{start_monitor, stop_flag, TraceArgs};

#[derive(Args)]
pub struct LocksArgs {
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
}

pub fn run(a: LocksArgs) -> Result<()> {
    let LocksArgs {
        mut trace,
        duration,
        folded,
        all,
        block_only: _,
        top,
    } = a;
    trace.probes.enabled.insert(iowarden::probes::locks::NAME);
    trace.locks_all |= all;
    // Before loading: a signal while the programs load must not kill the
    // process with them half set up (SIGHUP's default action).
    let stop = stop_flag()?;
    let mut monitor = start_monitor(&trace, &Stage::ALL)?;
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
        iowarden::out!("{}", lockview::folded(&delta))?;
    } else {
        iowarden::out!("{}", lockview::render_panel(&delta, device.as_deref(), top))?;
        print_wait_per_io(&delta, device.as_deref())?;
    }
    Ok(())
}

/// One line per cgroup with I/O: its lock wait per I/O.
fn print_wait_per_io(delta: &Snapshot, device: Option<&str>) -> Result<()> {
    let mut cgroups: Vec<&str> = delta.io.iter().map(|s| s.cgroup.path.as_str()).collect();
    cgroups.sort_unstable();
    cgroups.dedup();
    for cg in cgroups {
        if let Some(w) = lockview::lock_wait_per_io(delta, cg, device) {
            iowarden::outln!(
                "lock wait per I/O{}: {cg} {}",
                device.map(|d| format!(" on {d}")).unwrap_or_default(),
                lockview::fmt_wait(Some(w))
            )?;
        }
    }
    Ok(())
}
