//! `iowarden capped-model` (hidden; the guest's model proofs run it): the
//! best linear io.cost.model of the saturated windows a `tune --model` run
//! logged, as measured and as a device that were exactly its QEMU caps
//! would have taken them (costmodel/online/capped_device.rs): the yardsticks its fit is
//! judged against, besides `profile`.

use std::io::BufRead;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use iowarden::costmodel::online::capped_device::{best_linear_model, CappedDevice};
use iowarden::costmodel::online::solve::{fold_sparse_columns, NAMES};
use iowarden::costmodel::online::windows::FitConfig;
use iowarden::tune::model_run::window_from_line;

#[derive(Args)]
pub struct CappedModelArgs {
    /// The device's request cap per second (QEMU throttling.iops-total)
    #[arg(long, required_unless_present = "read_iops")]
    iops: Option<f64>,
    /// Its bandwidth cap in bytes per second (throttling.bps-total)
    #[arg(long, required_unless_present = "read_bps")]
    bps: Option<f64>,
    /// Instead of the totals, each direction's own caps (throttling.iops-read
    /// and so on: QEMU takes one or the other)
    #[arg(long, conflicts_with = "iops", requires = "write_iops")]
    read_iops: Option<f64>,
    #[arg(long, conflicts_with = "bps", requires = "write_bps")]
    read_bps: Option<f64>,
    #[arg(long, requires = "read_iops")]
    write_iops: Option<f64>,
    #[arg(long, requires = "read_bps")]
    write_bps: Option<f64>,
    /// The run's --model-min-samples: a sparser request class is counted
    /// with its sibling, as the fit counts it
    #[arg(long, default_value_t = FitConfig::default().min_samples)]
    min_samples: u64,
    /// The JSON lines `tune --model` wrote on stdout
    log: PathBuf,
}

/// "rbps=V ... wrandiops=V", "-" for a term the windows do not use.
fn terms(model: [Option<u64>; 6]) -> String {
    NAMES
        .iter()
        .zip(model)
        .map(|(n, v)| format!("{n}={}", v.map_or("-".into(), |v| v.to_string())))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Prints three lines: "caps TERMS windows=N", the best linear model of the
/// windows as the caps would take them (max(requests/iops, bytes/bps), or
/// each direction's over its own caps where given);
/// "measured TERMS windows=N", of the windows as the device took them; and
/// "caps-time ...", how well the caps' time explains the measured one
/// (QEMU queues throttled requests in order, so a large request waiting
/// for bandwidth holds back small ones the IOPS budget would admit).
pub fn run(a: CappedModelArgs) -> Result<()> {
    let given = [
        ("--iops", a.iops),
        ("--bps", a.bps),
        ("--read-iops", a.read_iops),
        ("--read-bps", a.read_bps),
        ("--write-iops", a.write_iops),
        ("--write-bps", a.write_bps),
    ];
    for (flag, v) in given.iter().filter_map(|&(f, v)| v.map(|v| (f, v))) {
        if !(v.is_finite() && v > 0.0) {
            bail!("{flag} {v} must be a positive number");
        }
    }
    let none = f64::INFINITY;
    let dev = CappedDevice {
        iops: a.iops.unwrap_or(none),
        bps: a.bps.unwrap_or(none),
        dir_iops: [a.read_iops.unwrap_or(none), a.write_iops.unwrap_or(none)],
        dir_bps: [a.read_bps.unwrap_or(none), a.write_bps.unwrap_or(none)],
    };
    let file = std::fs::File::open(&a.log).with_context(|| format!("{}", a.log.display()))?;
    let mut measured = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let Ok(v) = serde_json::from_str(&line?) else {
            continue; // a line cut short when the run was killed
        };
        if let Some((w, true)) = window_from_line(&v) {
            measured.push(w);
        }
    }
    if measured.is_empty() {
        bail!("{}: no saturated model windows", a.log.display());
    }
    // The columns the fit has: a sparse class counted with its sibling as
    // the fit counts it (m-47 at 8000/s: 1922 reads counted sequential,
    // kept apart, took the per-request cost and left rrandiops at 84100
    // beside the fit's 8217).
    fold_sparse_columns(&mut measured, a.min_samples);
    let n = measured.len();
    let capped: Vec<_> = measured.iter().map(|w| dev.recharge(w)).collect();
    let undetermined = || format!("{n} windows determine no linear model");
    let caps = best_linear_model(&capped).with_context(undetermined)?;
    let real = best_linear_model(&measured).with_context(undetermined)?;
    iowarden::outln!("caps {} windows={n}", terms(caps))?;
    iowarden::outln!("measured {} windows={n}", terms(real))?;
    let mut ratios: Vec<f64> = measured
        .iter()
        .zip(&capped)
        .map(|(m, c)| m.seconds / c.seconds)
        .collect();
    ratios.sort_by(f64::total_cmp);
    let q = |p: f64| ratios[((n - 1) as f64 * p).round() as usize];
    let within = ratios.iter().filter(|r| (*r - 1.0).abs() <= 0.1).count();
    iowarden::outln!(
        "caps-time measured/caps: median {:.2} p10 {:.2} p90 {:.2} max {:.2}; within 10 %: {within} of {n}",
        q(0.5),
        q(0.1),
        q(0.9),
        q(1.0)
    )?;
    Ok(())
}
