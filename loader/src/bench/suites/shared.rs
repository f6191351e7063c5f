//! What every suite uses: the suites' state (the phases' context and the
//! report so far), running and recording a phase, the device's
//! calibration and iocost set from it.

use std::path::PathBuf;

use anyhow::Result;

use crate::bench::fio::{Job, JobFile};
use crate::bench::knob::KnobCtl;
use crate::bench::phase::{Ctx, PhaseRun, Tenant};
use crate::bench::phase_loop::run_phase;
use crate::bench::report::*;
use crate::bench::score;
use crate::bench::Knob;

/// The suites' shared state: the phases' context and the report so far.
pub struct Bench {
    pub ctx: Ctx,
    pub report: Report,
    /// The priority app's p99 and bandwidth alone (D3, D4).
    pub(super) alone: Option<(Option<f64>, f64)>,
}

impl Bench {
    pub fn new(ctx: Ctx, report: Report) -> Bench {
        Bench {
            ctx,
            report,
            alone: None,
        }
    }
}

/// iowarden's bandwidth of a tenant over fio's runtime: the same time base
/// as fio's, so the two differ only by what each counted.
pub(super) fn bw(t: &crate::bench::phase::TenantRun) -> f64 {
    if t.fio.runtime_seconds > 0.0 {
        t.bytes as f64 / t.fio.runtime_seconds
    } else {
        0.0
    }
}

pub(super) fn record(b: &mut Bench, run: &PhaseRun) {
    for t in &run.tenants {
        let ours = bw(t);
        b.report.cross_check.push(CrossCheck {
            phase: run.name.clone(),
            tenant: t.tenant.name.clone(),
            cgroup: t.cgroup.clone(),
            bw_bytes: ours,
            fio_bw_bytes: t.fio.bw_bytes,
            rel_diff: score::rel_diff(ours, t.fio.bw_bytes),
        });
    }
}

pub(super) fn phase(
    b: &mut Bench,
    name: &str,
    tenants: &[Tenant],
    interval_s: f64,
    setup: &mut dyn FnMut(&mut KnobCtl, &[PathBuf]) -> Result<()>,
) -> Result<PhaseRun> {
    let run = run_phase(&mut b.ctx, name, tenants, interval_s, setup)?;
    record(b, &run);
    Ok(run)
}

/// The device alone: 4 KiB random IOPS and large sequential bandwidth, and
/// the io.cost.model line they give (reads and writes alike: the suites
/// only read). Measured once, with no knob.
pub fn calibration(b: &mut Bench) -> Result<Calibration> {
    if let Some(c) = &b.report.calibration {
        return Ok(c.clone());
    }
    let rt = b.ctx.params.calibrate_s;
    let iv = b.ctx.params.interval_s;
    let mut none = |ctl: &mut KnobCtl, _: &[PathBuf]| ctl.baseline("none");
    let iops = phase(
        b,
        "calibrate-iops",
        &[Tenant::new(
            "cal",
            Job::new(JobFile::Calibrate).section("iops"),
            rt,
        )],
        iv,
        &mut none,
    )?;
    let bwr = phase(
        b,
        "calibrate-bw",
        &[Tenant::new(
            "cal",
            Job::new(JobFile::Calibrate).section("bandwidth"),
            rt,
        )],
        iv,
        &mut none,
    )?;
    let t = &iops.tenants[0];
    let iops_4k = t.ios as f64 / t.fio.runtime_seconds.max(1e-9);
    let bw_bytes = bw(&bwr.tenants[0]);
    let (i, w) = (
        iops_4k.round().max(1.0) as u64,
        bw_bytes.round().max(1.0) as u64,
    );
    let c = Calibration {
        iops_4k,
        bw_bytes,
        iocost_vrate_pct: None,
        io_cost_model: format!(
            "{} ctrl=user model=linear rbps={w} rseqiops={i} rrandiops={i} wbps={w} wseqiops={i} wrandiops={i}",
            b.ctx.ctl.devnum()
        ),
    };
    crate::say!(
        "iowarden bench: device alone: {iops_4k:.0} IOPS (4 KiB), {}; {}",
        fmt_bw(bw_bytes),
        c.io_cost_model
    );
    b.report.calibration = Some(c.clone());
    if b.report.knobs.contains(&Knob::IoCost) {
        let v = iocost_vrate_reset(b, &c)?;
        if let Some(c) = b.report.calibration.as_mut() {
            c.iocost_vrate_pct = v;
        }
    }
    Ok(b.report.calibration.clone().expect("set above"))
}

/// The io.cost.model line of the device scaled by `f`.
pub(super) fn scaled_model(c: &Calibration, f: f64) -> String {
    let (i, w) = (
        (c.iops_4k * f).round().max(1.0) as u64,
        (c.bw_bytes * f).round().max(1.0) as u64,
    );
    let dev = c.io_cost_model.split_whitespace().next().unwrap_or("");
    format!(
        "{dev} ctrl=user model=linear rbps={w} rseqiops={i} rrandiops={i} wbps={w} wseqiops={i} wrandiops={i}"
    )
}

/// Brings iocost's vrate to 100 %. The kernel clamps vrate into the QoS
/// min..max only while it adjusts it, and it coasts when nobody is
/// throttled and no latency target is missed: a vrate left above 100 % (by
/// an earlier run, or the kernel's automatic QoS) would stay there under a
/// pinned 100 %. A latency target every read misses (1 µs) with vrate
/// pinned at 100 % and a model that throttles nothing makes it adjust once,
/// into the clamp. Returns the vrate seen at the end (root io.stat).
pub(super) fn iocost_vrate_reset(b: &mut Bench, c: &Calibration) -> Result<Option<f64>> {
    let rt = b.ctx.params.calibrate_s;
    let iv = b.ctx.params.interval_s;
    let model = scaled_model(c, 100.0);
    let run = phase(
        b,
        "iocost-vrate-reset",
        &[Tenant::new(
            "reset",
            Job::new(JobFile::Tenant).bs("4k").qd(4),
            rt,
        )],
        iv,
        &mut |ctl: &mut KnobCtl, _: &[PathBuf]| {
            ctl.baseline("none")?;
            let root = ctl.io_root.clone();
            ctl.set(&root.join("io.cost.model"), &model)?;
            let qos = format!(
                "{} enable=1 ctrl=user rpct=99.00 rlat=1 wpct=99.00 wlat=1 min=100.00 max=100.00",
                ctl.devnum()
            );
            ctl.set(&root.join("io.cost.qos"), &qos)
        },
    )?;
    crate::say!(
        "iowarden bench: iocost vrate after the reset: {}",
        run.iocost_vrate_pct
            .map(|v| format!("{v:.2}%"))
            .unwrap_or("unknown".into())
    );
    Ok(run.iocost_vrate_pct)
}

/// iocost with the calibrated model and vrate pinned at `vrate` %: the
/// knob's capacity is what the device did alone.
pub(super) fn iocost_on(ctl: &mut KnobCtl, model: Option<&str>, vrate: f64) -> Result<()> {
    let root = ctl.io_root.clone();
    if let Some(m) = model {
        ctl.set(&root.join("io.cost.model"), m)?;
    }
    let qos = crate::knobs::cost_qos::pinned_vrate_line(&ctl.devnum(), vrate, None);
    ctl.set(&root.join("io.cost.qos"), &qos)
}

pub(super) fn label(tenants: &[Tenant]) -> Vec<u32> {
    tenants.iter().map(|t| t.weight).collect()
}

// ---------------------------------------------------------------- D1

// ---------------------------------------------------------------- D2

// ---------------------------------------------------------------- D3, D4

// ---------------------------------------------------------------- schedulers
