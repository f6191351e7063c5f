//! `iowarden capped-model` (hidden; the guest's model proofs run it): the
//! best linear io.cost.model of a device capped the way QEMU throttles one
//! (tune/capped_device.rs), over the saturated windows a `tune --model` run
//! logged: the yardstick its fit is judged against, besides `profile`.

use std::io::BufRead;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use iowarden::tune::capped_device::{best_linear_model, CappedDevice};
use iowarden::tune::model_run::window_from_line;
use iowarden::tune::model_solve::NAMES;

#[derive(Args)]
pub struct CappedModelArgs {
    /// The device's request cap per second (QEMU throttling.iops-total)
    #[arg(long)]
    iops: f64,
    /// Its bandwidth cap in bytes per second (throttling.bps-total)
    #[arg(long)]
    bps: f64,
    /// The JSON lines `tune --model` wrote on stdout
    log: PathBuf,
}

/// Prints "rbps=V ... wrandiops=V windows=N", "-" for a term the windows
/// do not use.
pub fn run(a: CappedModelArgs) -> Result<()> {
    for (flag, v) in [("--iops", a.iops), ("--bps", a.bps)] {
        if !(v.is_finite() && v > 0.0) {
            bail!("{flag} {v} must be a positive number");
        }
    }
    let dev = CappedDevice {
        iops: a.iops,
        bps: a.bps,
    };
    let file = std::fs::File::open(&a.log).with_context(|| format!("{}", a.log.display()))?;
    let mut windows = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let Ok(v) = serde_json::from_str(&line?) else {
            continue; // a line cut short when the run was killed
        };
        if let Some((w, true)) = window_from_line(&v) {
            windows.push(dev.recharge(&w));
        }
    }
    if windows.is_empty() {
        bail!("{}: no saturated model windows", a.log.display());
    }
    let best = best_linear_model(&windows)
        .with_context(|| format!("{} windows determine no linear model", windows.len()))?;
    let terms: Vec<String> = NAMES
        .iter()
        .zip(best)
        .map(|(n, v)| format!("{n}={}", v.map_or("-".into(), |v| v.to_string())))
        .collect();
    println!("{} windows={}", terms.join(" "), windows.len());
    Ok(())
}
