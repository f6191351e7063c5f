//! `iowarden snapshot`: trace for a while, print one snapshot.

use std::time::Duration;

use anyhow::Result;
use clap::Args;
use iowarden_exporters::Stage;

use iowarden::duration::parse_duration;

use super::trace::{start_monitor, TraceArgs};

#[derive(Args)]
pub struct SnapshotArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// Print JSON (the /snapshot.json schema)
    #[arg(long)]
    json: bool,
    /// How long to trace before printing
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    wait: Duration,
}

pub fn run(a: SnapshotArgs) -> Result<()> {
    let mut monitor = start_monitor(&a.trace, &Stage::ALL)?;
    std::thread::sleep(a.wait);
    let snap = monitor.poll()?;
    if a.json {
        iowarden::outln!("{}", iowarden_exporters::encode_json(&snap))?;
    } else {
        let all = iowarden_exporters::ExpositionOptions {
            counters: iowarden_exporters::IoCounter::all(),
            stages: iowarden_exporters::Stage::ALL.to_vec(),
            classic: iowarden_exporters::ClassicBuckets::PowersOfTwo,
        };
        iowarden::out!(
            "{}",
            iowarden_exporters::encode_openmetrics(&snap.into(), &Default::default(), &all)?
        )?;
    }
    Ok(())
}
