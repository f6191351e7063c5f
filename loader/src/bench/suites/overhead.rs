//! The overhead suite: what each knob costs in throughput and CPU with
//! one tenant, against no knob.

use std::path::PathBuf;

use anyhow::Result;

use super::shared::*;
use crate::bench::fio::{Job, JobFile};
use crate::bench::knob::KnobCtl;
use crate::bench::phase::Tenant;
use crate::bench::report::*;
use crate::bench::Knob;

/// D1: each knob active but set not to limit, for 1..N cgroups of 4 KiB
/// random readers; IOPS, latency and CPU per I/O against none.
pub fn overhead(b: &mut Bench, knobs: &[Knob]) -> Result<()> {
    let p = b.ctx.params.clone();
    let model = if knobs.contains(&Knob::IoCost) {
        Some(scaled_model(&calibration(b)?, 100.0))
    } else {
        None
    };
    for &k in knobs {
        for &n in &p.overhead_cgroups {
            let tenants: Vec<Tenant> = (0..n)
                .map(|i| {
                    Tenant::together(
                        &format!("t{i}"),
                        Job::new(JobFile::Tenant).bs("4k").qd(8),
                        p.runtime_s,
                    )
                })
                .collect();
            let mut setting = String::from("-");
            let mut setup = |ctl: &mut KnobCtl, dirs: &[PathBuf]| -> Result<()> {
                ctl.baseline(k.scheduler())?;
                let dev = ctl.devnum();
                match k {
                    // Accounting on, never throttling: a model 100 times the
                    // device (never vrate above 100 %: see iocost_vrate_reset).
                    Knob::IoCost => {
                        iocost_on(ctl, model.as_deref(), 100.0)?;
                        setting = "model 100 × the device, vrate 100%".into();
                    }
                    Knob::IoMax => {
                        for d in dirs {
                            ctl.set(&d.join("io.max"), &format!("{dev} riops=10000000"))?;
                        }
                        setting = "riops=10000000".into();
                    }
                    Knob::IoLatency => {
                        for d in dirs {
                            ctl.set(&d.join("io.latency"), &format!("{dev} target=1000000"))?;
                        }
                        setting = "target=1s".into();
                    }
                    _ => setting = format!("scheduler {}", k.scheduler()),
                }
                Ok(())
            };
            let run = phase(
                b,
                &format!("overhead-{k}-{n}"),
                &tenants,
                p.interval_s,
                &mut setup,
            )?;
            let ios = run.total_ios() as f64;
            let rt = run
                .tenants
                .iter()
                .map(|t| t.fio.runtime_seconds)
                .sum::<f64>()
                / n as f64;
            let per_io = |x: f64| (ios > 0.0).then(|| x / ios);
            b.report.overhead.push(OverheadRun {
                knob: k,
                cgroups: n,
                setting,
                iops: if rt > 0.0 { ios / rt } else { 0.0 },
                p50_seconds: run.quantile(0.5),
                p99_seconds: run.quantile(0.99),
                cpu_per_io_seconds: per_io(run.cpu_busy_s),
                task_cpu_per_io_seconds: per_io(run.task_cpu_s()),
                fio_iops: run.tenants.iter().map(|t| t.fio.iops).sum(),
                fio_p99_seconds: run
                    .tenants
                    .iter()
                    .filter_map(|t| t.fio.clat_p99_seconds)
                    .reduce(f64::max),
            });
        }
    }
    Ok(())
}
