//! D2/D3, priority and utilization: a latency-critical tenant beside a
//! best-effort one, each knob swept from permissive to protective.

use std::path::PathBuf;

use anyhow::Result;

use super::shared::*;
use crate::bench::fio::{Job, JobFile};
use crate::bench::knob::KnobCtl;
use crate::bench::phase::Tenant;
use crate::bench::report::*;
use crate::bench::score;
use crate::bench::Knob;

/// A knob's settings in the priority/utilisation sweep: (label, setup).
#[derive(Clone, Debug, PartialEq)]
pub enum Setting {
    Plain,
    /// io.cost: weight of the priority app (best effort: 100).
    CostWeight(u32),
    /// io.max: the best-effort app's rbps.
    MaxBps(u64),
    /// io.latency: the priority app's target, µs.
    LatencyTarget(u64),
    /// bfq: io.bfq.weight of the priority app (best effort: 100).
    BfqWeight(u32),
}

impl Setting {
    pub fn label(&self) -> String {
        match self {
            Setting::Plain => "-".into(),
            Setting::CostWeight(w) => format!("io.weight lc {w} be 100"),
            Setting::MaxBps(b) => format!("be rbps={}", fmt_bw(*b as f64)),
            Setting::LatencyTarget(us) => format!("lc target={us}us"),
            Setting::BfqWeight(w) => format!("io.bfq.weight lc {w} be 100"),
        }
    }
}

/// The sweep of each knob (the last setting is the most protective: the
/// one the burst suite uses).
pub fn sweep(k: Knob, quick: bool, cal_bw: f64, alone_p99: f64) -> Vec<Setting> {
    let pick = |full: &[f64], q: &[f64]| if quick { q.to_vec() } else { full.to_vec() };
    match k {
        Knob::IoCost => pick(&[100.0, 300.0, 1000.0, 3000.0, 10000.0], &[100.0, 10000.0])
            .into_iter()
            .map(|w| Setting::CostWeight(w as u32))
            .collect(),
        Knob::IoMax => pick(&[0.9, 0.75, 0.5, 0.25, 0.1], &[0.5, 0.25])
            .into_iter()
            .map(|f| Setting::MaxBps((cal_bw * f).max(1_000_000.0) as u64))
            .collect(),
        Knob::IoLatency => pick(&[20.0, 10.0, 5.0, 2.0, 1.0], &[10.0, 2.0])
            .into_iter()
            .map(|m| Setting::LatencyTarget(((alone_p99 * m) * 1e6).max(10.0) as u64))
            .collect(),
        Knob::Bfq => vec![Setting::BfqWeight(1000)],
        _ => vec![Setting::Plain],
    }
}

pub(super) fn apply(
    ctl: &mut KnobCtl,
    k: Knob,
    s: &Setting,
    model: Option<&str>,
    lc: &std::path::Path,
    be: &std::path::Path,
) -> Result<()> {
    ctl.baseline(k.scheduler())?;
    let dev = ctl.devnum();
    match *s {
        Setting::Plain => {}
        Setting::CostWeight(w) => {
            iocost_on(ctl, model, 100.0)?;
            ctl.set_weight(Knob::IoCost, lc, w)?;
            ctl.set_weight(Knob::IoCost, be, 100)?;
        }
        Setting::MaxBps(bps) => ctl.set(&be.join("io.max"), &format!("{dev} rbps={bps}"))?,
        Setting::LatencyTarget(us) => {
            ctl.set(&lc.join("io.latency"), &format!("{dev} target={us}"))?
        }
        Setting::BfqWeight(w) => {
            ctl.set_weight(Knob::Bfq, lc, w)?;
            ctl.set_weight(Knob::Bfq, be, 100)?;
        }
    }
    Ok(())
}

/// The priority app alone, once: the reference of D3 and D4.
pub(super) fn alone(b: &mut Bench) -> Result<(Option<f64>, f64)> {
    if let Some(a) = b.alone {
        return Ok(a);
    }
    let p = b.ctx.params.clone();
    let run = phase(
        b,
        "prio-alone",
        &[Tenant::new("lc", Job::new(JobFile::Lc), p.runtime_s)],
        p.interval_s,
        &mut |ctl: &mut KnobCtl, _: &[PathBuf]| ctl.baseline("none"),
    )?;
    let t = &run.tenants[0];
    let a = (t.latency.quantile(&run.bounds, 0.99), bw(t));
    b.alone = Some(a);
    Ok(a)
}

/// The priority app (index 0) starting `delay_s` after the best-effort
/// app's (index 1) first I/O and running `runtime_s`; the best-effort app
/// is stopped when it ends, so the two overlap whatever fio's start-up costs.
pub(super) fn prio_pair(delay_s: f64, runtime_s: f64) -> [Tenant; 2] {
    [
        Tenant {
            start_s: delay_s,
            after: Some(1),
            ..Tenant::new("lc", Job::new(JobFile::Lc), runtime_s)
        },
        Tenant {
            stop_with: Some(0),
            // A cap only: stopped with the priority app.
            ..Tenant::new("be", Job::new(JobFile::Be), runtime_s + 30.0)
        },
    ]
}

pub(super) fn needs_calibration(knobs: &[Knob]) -> bool {
    knobs
        .iter()
        .any(|k| matches!(k, Knob::IoCost | Knob::IoMax))
}

/// D3: the priority app (lc.fio) beside a saturating best-effort app
/// (be.fio), across each knob's sweep; Pareto front of the priority app's
/// p99 against aggregate bandwidth.
pub fn prio_util(b: &mut Bench, knobs: &[Knob]) -> Result<()> {
    let p = b.ctx.params.clone();
    let cal = if needs_calibration(knobs) {
        Some(calibration(b)?)
    } else {
        None
    };
    let (alone_p99, alone_bw) = alone(b)?;
    let mut points = Vec::new();
    for &k in knobs {
        let settings = sweep(
            k,
            p.quick,
            cal.as_ref().map(|c| c.bw_bytes).unwrap_or(0.0),
            alone_p99.unwrap_or(1e-3),
        );
        let mut mine = Vec::new();
        for (i, s) in settings.iter().enumerate() {
            let tenants = prio_pair(0.5, p.runtime_s);
            let model = cal.as_ref().map(|c| c.io_cost_model.clone());
            let run = phase(
                b,
                &format!("prio-util-{k}-{i}"),
                &tenants,
                p.interval_s,
                &mut |ctl: &mut KnobCtl, d: &[PathBuf]| {
                    apply(ctl, k, s, model.as_deref(), &d[0], &d[1])
                },
            )?;
            let (lc, be) = (run.tenant("lc").expect("lc"), run.tenant("be").expect("be"));
            mine.push(TradeoffPoint {
                knob: k,
                setting: s.label(),
                aggregate_bw_bytes: bw(lc) + bw(be),
                prio_bw_bytes: bw(lc),
                prio_p99_seconds: lc.latency.quantile(&run.bounds, 0.99),
                prio_fio_p99_seconds: lc.fio.clat_p99_seconds,
                on_front: false,
            });
        }
        let sp: Vec<score::TradeoffPoint> = mine
            .iter()
            .map(|x| score::TradeoffPoint {
                setting: x.setting.clone(),
                aggregate_bw: x.aggregate_bw_bytes,
                prio_p99: x.prio_p99_seconds.unwrap_or(f64::INFINITY),
            })
            .collect();
        for i in score::pareto_front(&sp) {
            mine[i].on_front = true;
        }
        points.extend(mine);
    }
    b.report.prio_util = Some(PrioUtil {
        alone_p99_seconds: alone_p99,
        alone_bw_bytes: alone_bw,
        points,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_end_with_their_most_protective_setting() {
        let s = sweep(Knob::IoMax, true, 200e6, 1e-3);
        assert_eq!(
            s,
            vec![Setting::MaxBps(100_000_000), Setting::MaxBps(50_000_000)]
        );
        assert_eq!(
            sweep(Knob::IoCost, true, 0.0, 1e-3).last(),
            Some(&Setting::CostWeight(10000))
        );
        assert_eq!(
            sweep(Knob::IoLatency, true, 0.0, 1e-3).last(),
            Some(&Setting::LatencyTarget(2000))
        );
        assert_eq!(sweep(Knob::IoCost, false, 0.0, 1e-3).len(), 5);
        assert_eq!(sweep(Knob::None, true, 0.0, 1e-3), vec![Setting::Plain]);
    }
}
