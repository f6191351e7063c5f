//! `iowarden model`: each device's linear cost model against measured
//! device time.

use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use iowarden_exporters::Stage;

use iowarden::duration::parse_duration;

use super::trace::{start_monitor, stop_flag, TraceArgs};

#[derive(Args)]
pub struct ModelArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// How long to trace
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
}

pub fn run(a: ModelArgs) -> Result<()> {
    let ModelArgs { trace, duration } = a;
    if trace.no_cost {
        anyhow::bail!("iowarden model needs cost charging (drop --no-cost)");
    }
    // Before loading: a signal while the programs load must not kill the
    // process with them half set up (SIGHUP's default action).
    let stop = stop_flag()?;
    let mut monitor = start_monitor(&trace, &Stage::ALL)?;
    // Said once the programs are attached and Ctrl-C is handled: from here
    // on every request is counted (scripts wait for this line).
    iowarden::say!(
        "iowarden model: tracing for {duration:?}; Ctrl-C ends it early and prints the fit"
    );
    let t0 = std::time::Instant::now();
    while t0.elapsed() < duration && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let snap = monitor.poll()?;
    let device = trace.device_name()?;
    iowarden::out!(
        "{}",
        iowarden::costmodel::view::render(&snap.cost_models, device.as_deref())
    )?;
    Ok(())
}
