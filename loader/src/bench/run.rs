//! `iowarden bench` from the command line to the files: validates
//! everything before changing anything, runs the suites, writes
//! report.json, summary.md and the plots, and restores what it changed
//! (also when interrupted: the report then holds what was measured).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use iowarden_exporters::DeviceRef;

use super::knob::{select, HostFacts, KnobCtl};
use super::params::{parse_knobs, parse_suites, Knob, Params, Suite};
use super::phase::{Cgroups, Ctx};
use super::report::{markdown, Report, Unavailable, SCHEMA};
use super::suites::{self, Bench};
use crate::host::devices::resolve_device;
use crate::monitor::{Monitor, MonitorConfig, TraceOptions};
use crate::probes::block::BlockMeasures;

pub struct BenchOptions {
    pub device: String,
    pub suites: String,
    /// None: every knob this host offers (the others are listed as unavailable).
    pub knobs: Option<String>,
    pub out: PathBuf,
    pub quick: bool,
    pub force: bool,
    pub state_dir: PathBuf,
}

fn monitor(dev: &iowarden_exporters::DeviceRef, locks: bool) -> Result<Monitor> {
    Monitor::start(&MonitorConfig::new(&TraceOptions {
        device: Some(format!("{}:{}", dev.major, dev.minor)),
        measure: BlockMeasures {
            hwq: false,
            // The bench scores the knobs, not the model: no per-request charge.
            cost: false,
            ..Default::default()
        },
        probes: locks
            .then_some(crate::probes::locks::NAME)
            .into_iter()
            .collect(),
        ..Default::default()
    })?)
}

/// Checks what needs no kernel change: suites, knobs, device, mounts.
fn validate(o: &BenchOptions) -> Result<(Vec<Suite>, Vec<Knob>, iowarden_exporters::DeviceRef)> {
    let suites = parse_suites(&o.suites)?;
    let knobs = parse_knobs(o.knobs.as_deref().unwrap_or("all"))?;
    let dev = resolve_device(&o.device)?;
    if !o.force {
        let mi = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        if let Some(why) = crate::host::devices::mounted_or_held(&dev.name, &mi) {
            bail!(
                "{} is {why}: the bench would disturb what uses it and measure noise. Use an idle device, or --force; nothing changed",
                dev.name
            );
        }
    }
    Ok((suites, knobs, dev))
}

pub fn run(o: BenchOptions, stop: Arc<AtomicBool>) -> Result<Report> {
    let (suites, requested, dev) = validate(&o)?;
    crate::host::preflight::check()?;
    let h = io_hierarchy()?;
    let device_bytes = device_bytes(&dev.name);
    if device_bytes < (64 << 20) {
        bail!("{} is smaller than 64 MiB; nothing changed", dev.name);
    }
    let mut ctl = KnobCtl::new(&h.mount_point, h.v2, &dev, &o.state_dir);
    ctl.recover()?;
    let cgroups = Cgroups::create(&h.mount_point, h.v2)?;
    let probe = cgroups.make("probe")?;
    let facts = HostFacts::probe(&h.mount_point, h.v2, &probe, &dev);
    cgroups.remove(&probe);
    let (knobs, missing) = select(&requested, o.knobs.is_some(), &facts)?;
    for (k, why) in &missing {
        crate::say!("iowarden bench: {k} unavailable: {why}");
    }

    let jobs_dir = o.out.join("jobs");
    let fio_dir = o.out.join("fio");
    super::fio::write_job_files(&jobs_dir)?;
    std::fs::create_dir_all(&fio_dir)?;
    let params = Params::new(o.quick, device_bytes);
    let report = new_report(&dev, &params, &suites, &knobs, &missing);
    let ctx = Ctx {
        monitor: monitor(&dev, false)?,
        cgroups,
        ctl,
        dev: dev.clone(),
        dev_path: Path::new("/dev").join(&dev.name),
        jobs_dir,
        fio_dir,
        params,
        stop,
    };
    let mut b = Bench::new(ctx, report);
    let outcome = run_suites(&mut b, &suites, &knobs, &dev);
    let Bench {
        ctx, mut report, ..
    } = b;
    // Restore before writing: knobs, scheduler, cgroups.
    drop(ctx);
    report.finished_unix_seconds = crate::host::clock::since_epoch().as_secs_f64();
    report.verdicts = super::verdict::verdicts(&report);
    write_outputs(&mut report, &o.out)?;
    match outcome {
        Ok(()) => Ok(report),
        Err(e) => Err(e.context(format!(
            "stopped; everything changed was restored; partial results in {}",
            o.out.display()
        ))),
    }
}

/// The mounted hierarchy with the io (blkio) controller.
fn io_hierarchy() -> Result<crate::host::cgroups::Hierarchy> {
    let hs =
        crate::host::cgroups::parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo")?);
    Ok(crate::host::cgroups::io_hierarchy(&hs)
        .context("no cgroup hierarchy with the io (blkio) controller is mounted")?
        .clone())
}

/// A disk's size in bytes (0 when unreadable).
fn device_bytes(name: &str) -> u64 {
    std::fs::read_to_string(Path::new("/sys/block").join(name).join("size"))
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map(|s| s * 512)
        .unwrap_or(0)
}

/// The report before any suite ran: what runs, on what, and what cannot.
fn new_report(
    dev: &DeviceRef,
    params: &Params,
    suites: &[Suite],
    knobs: &[Knob],
    missing: &[(Knob, String)],
) -> Report {
    Report {
        schema: SCHEMA.into(),
        device: dev.clone(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .into(),
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap_or_default()
            .trim()
            .into(),
        started_unix_seconds: crate::host::clock::since_epoch().as_secs_f64(),
        params: Some(params.clone()),
        suites: suites.to_vec(),
        knobs: knobs.to_vec(),
        unavailable: missing
            .iter()
            .map(|(k, r)| Unavailable {
                knob: *k,
                reason: r.clone(),
            })
            .collect(),
        ..Default::default()
    }
}

/// Runs the suites in order; the first that fails stops the rest.
fn run_suites(b: &mut Bench, suites: &[Suite], knobs: &[Knob], dev: &DeviceRef) -> Result<()> {
    for s in suites {
        let r = match s {
            Suite::Overhead => suites::overhead(b, knobs),
            Suite::Fairness => suites::fairness(b, knobs),
            Suite::PrioUtil => suites::prio_util(b, knobs),
            Suite::Burst => suites::burst(b, knobs),
            Suite::Schedulers => run_schedulers(b, knobs, dev),
        };
        r.map_err(|e| e.context(format!("suite {s}")))?;
    }
    Ok(())
}

/// The schedulers suite, with the lock programs loaded for it only (they
/// cost a stack walk per contention).
fn run_schedulers(b: &mut Bench, knobs: &[Knob], dev: &DeviceRef) -> Result<()> {
    let (m, src) = match monitor(dev, true) {
        Ok(m) => {
            let why = m
                .probe_report()
                .into_iter()
                .find(|p| p.starts_with("lock"))
                .unwrap_or_default();
            (m, why)
        }
        Err(e) => (monitor(dev, false)?, format!("lock programs: {e:#}")),
    };
    b.ctx.monitor = m;
    let r = suites::schedulers(b, knobs, &src);
    b.ctx.monitor = monitor(dev, false)?;
    r
}

/// report.json, summary.md and the plots (a plot that fails is a warning).
fn write_outputs(report: &mut Report, out: &Path) -> Result<()> {
    match super::plot::write_all(report, out) {
        Ok(p) => report.plots = p,
        Err(e) => crate::say!("iowarden bench: warning: {e:#}"),
    }
    let json = serde_json::to_string_pretty(&report)?;
    std::fs::write(out.join("report.json"), json + "\n")
        .with_context(|| format!("writing {}/report.json", out.display()))?;
    std::fs::write(out.join("summary.md"), markdown(report))?;
    Ok(())
}
