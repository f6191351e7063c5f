//! `iowarden top`: the live view of cgroups by device-time share.

use std::time::Duration;

use anyhow::Result;
use clap::Args;

use iowarden::duration::parse_duration;
use iowarden::views::top as topview;

use super::trace::{start_monitor, stop_flag, TraceArgs};

#[derive(Args)]
pub struct TopArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    interval: Duration,
    /// Exit after this long
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
}

pub fn run(a: TopArgs) -> Result<()> {
    let mut monitor = start_monitor(&a.trace)?;
    let stop = stop_flag()?;
    let device = a.trace.device_name()?;
    let opts = topview::TopOptions {
        interval: a.interval,
        device,
        duration: a.duration,
    };
    let outcome = topview::run_top(|| monitor.poll(), &opts, &stop)?;
    println!("{}", outcome.culprit.unwrap_or(outcome.last_verdict));
    Ok(())
}
