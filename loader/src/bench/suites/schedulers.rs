//! The schedulers suite: the I/O schedulers' cost and lock contention.

use super::prio_util::prio_pair;
use std::path::PathBuf;

use anyhow::Result;

use super::shared::*;
use crate::bench::fio::{Job, JobFile};
use crate::bench::knob::KnobCtl;
use crate::bench::phase::Tenant;
use crate::bench::report::*;
use crate::bench::Knob;

/// none / mq-deadline / kyber / bfq: CPU per I/O of two 4 KiB readers, the
/// priority app's p99 beside the best-effort app, and lock wait per I/O
/// where the lock programs run (`lock_source` says why not otherwise).
pub fn schedulers(b: &mut Bench, knobs: &[Knob], lock_source: &str) -> Result<()> {
    let p = b.ctx.params.clone();
    for &k in knobs
        .iter()
        .filter(|k| **k == Knob::None || k.is_scheduler())
    {
        let sched = k.scheduler();
        let tenants: Vec<Tenant> = (0..2)
            .map(|i| {
                Tenant::together(
                    &format!("t{i}"),
                    Job::new(JobFile::Tenant).bs("4k").qd(16),
                    p.runtime_s,
                )
            })
            .collect();
        let mut set = |ctl: &mut KnobCtl, _: &[PathBuf]| ctl.baseline(sched);
        let cost = phase(
            b,
            &format!("schedulers-{sched}-cost"),
            &tenants,
            p.interval_s,
            &mut set,
        )?;
        let tenants = prio_pair(0.5, p.runtime_s);
        let inter = phase(
            b,
            &format!("schedulers-{sched}-interference"),
            &tenants,
            p.interval_s,
            &mut set,
        )?;
        let ios = cost.total_ios() as f64;
        let rt = cost
            .tenants
            .iter()
            .map(|t| t.fio.runtime_seconds)
            .sum::<f64>()
            / 2.0;
        let per_io = |x: f64| (ios > 0.0).then(|| x / ios);
        b.report.schedulers.push(SchedulerRun {
            scheduler: sched.into(),
            iops: if rt > 0.0 { ios / rt } else { 0.0 },
            cpu_per_io_seconds: per_io(cost.cpu_busy_s),
            task_cpu_per_io_seconds: per_io(cost.task_cpu_s()),
            p99_interference_seconds: inter
                .tenant("lc")
                .and_then(|t| t.latency.quantile(&inter.bounds, 0.99)),
            lock_wait_per_io_seconds: cost.lock_wait_s.and_then(per_io),
            lock_source: if cost.lock_wait_s.is_some() {
                "locks.bpf.c (block layer stacks)".into()
            } else {
                lock_source.into()
            },
        });
    }
    Ok(())
}
