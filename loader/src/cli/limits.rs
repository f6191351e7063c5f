//! `iowarden limits`: every io limit and weight set on this host's
//! cgroups, judged over a window of tracing: acting, idle, in effect, or
//! not in effect and why.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use iowarden::duration::parse_duration;
use iowarden::host::cgroups::{io_hierarchy, parse_mountinfo};
use iowarden::limits::{judge_all, read, Evidence};
use iowarden_exporters::Stage;

use super::trace::{start_monitor, TraceArgs};

#[derive(Args)]
pub struct LimitsArgs {
    /// Only this cgroup and those below it: its path below the hierarchy's
    /// root (e.g. /kubepods.slice)
    cgroup: Option<String>,
    #[command(flatten)]
    trace: TraceArgs,
    /// Print JSON: one object per knob and device judged
    #[arg(long)]
    json: bool,
    /// How long to trace: a limit is acting if it held I/O in this window
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    wait: Duration,
}

pub fn run(a: LimitsArgs) -> Result<()> {
    let mountinfo =
        std::fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    let hs = parse_mountinfo(&mountinfo);
    let h = io_hierarchy(&hs)
        .context("no cgroup hierarchy is mounted (neither cgroup2 nor a v1 blkio hierarchy)")?;
    let start = a.cgroup.as_deref().unwrap_or("/");
    let dir = h.mount_point.join(start.trim_start_matches('/'));
    if !dir.is_dir() {
        bail!(
            "no cgroup '{start}' under {} (give its path below the root, e.g. /system.slice)",
            h.mount_point.display()
        );
    }
    let mut monitor = start_monitor(&a.trace, &Stage::ALL)?;
    std::thread::sleep(a.wait);
    let snap = monitor.poll()?;
    let v2_root = h.v2.then_some(h.mount_point.as_path());
    let mut ev = Evidence::from_snapshot(&snap, read::devices(v2_root), !h.v2);
    let knobs = read::configured(&h.mount_point, start, !h.v2);
    if h.v2 {
        ev.dirty_bytes = read::dirty_bytes(&h.mount_point, &knobs, &ev.devices);
    }
    let verdicts = judge_all(&knobs, &ev);
    if a.json {
        iowarden::outln!("{}", serde_json::to_string_pretty(&verdicts)?)?;
    } else {
        iowarden::out!("{}", iowarden::views::limits::table(&verdicts))?;
    }
    Ok(())
}
