//! `iowarden bench`: isolation desiderata and scheduler cost per knob.

use anyhow::Result;
use clap::Args;

use super::trace::stop_flag;

#[derive(Args)]
pub struct BenchArgs {
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
}

pub fn run(a: BenchArgs) -> Result<()> {
    iowarden::say!(
        "iowarden: {}",
        iowarden::host::privileges::keeping(
            "bench",
            "create cgroups, set each knob and restore it after every phase"
        )
    );
    let out = a.out.clone();
    let opts = iowarden::bench::run::BenchOptions {
        device: a.device,
        suites: a.suite,
        knobs: a.knobs,
        out: a.out,
        quick: a.quick,
        force: a.force,
        state_dir: a.state_dir,
    };
    let report = iowarden::bench::run::run(opts, stop_flag()?)?;
    iowarden::out!("{}", iowarden::bench::report::markdown(&report))?;
    iowarden::say!("iowarden bench: report in {}", out.display());
    Ok(())
}
