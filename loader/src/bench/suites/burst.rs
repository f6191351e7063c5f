//! D4, bursts: how fast a knob gives a tenant that starts late its share.

use super::prio_util::{alone, apply, needs_calibration, prio_pair, sweep, Setting};
use std::path::PathBuf;

use anyhow::Result;

use super::shared::*;
use crate::bench::knob::KnobCtl;
use crate::bench::phase::Sample;
use crate::bench::report::*;
use crate::bench::score;
use crate::bench::Knob;

/// Per-window latency of tenant `i` (score's input) and the report's
/// timeline: its p99 and the bandwidth of tenant `j` per window.
pub fn burst_windows(
    samples: &[Sample],
    bounds: &[f64],
    i: usize,
    j: usize,
) -> (Vec<score::Window>, Vec<BurstWindow>) {
    samples
        .windows(2)
        .map(|w| {
            let hist = iowarden_exporters::Histogram {
                counts: w[1].latency[i]
                    .counts
                    .iter()
                    .enumerate()
                    .map(|(k, &c)| {
                        c.saturating_sub(w[0].latency[i].counts.get(k).copied().unwrap_or(0))
                    })
                    .collect(),
                sum_seconds: 0.0,
            };
            let dt = (w[1].t - w[0].t).max(1e-9);
            let row = BurstWindow {
                t: w[1].t,
                prio_p99_seconds: hist.quantile(bounds, 0.99),
                be_bw_bytes: (w[1].bytes[j] - w[0].bytes[j].min(w[1].bytes[j])) as f64 / dt,
            };
            (score::Window { t: w[1].t, hist }, row)
        })
        .unzip()
}

/// D4: the best-effort app saturates from the start; the priority app
/// starts a third of the way in, under each knob's most protective setting.
pub fn burst(b: &mut Bench, knobs: &[Knob]) -> Result<()> {
    let p = b.ctx.params.clone();
    let cal = if needs_calibration(knobs) {
        Some(calibration(b)?)
    } else {
        None
    };
    let (alone_p99, _) = alone(b)?;
    let start = p.runtime_s / 3.0;
    for &k in knobs {
        let s = sweep(
            k,
            p.quick,
            cal.as_ref().map(|c| c.bw_bytes).unwrap_or(0.0),
            alone_p99.unwrap_or(1e-3),
        )
        .pop()
        .unwrap_or(Setting::Plain);
        let tenants = prio_pair(start, p.runtime_s);
        let model = cal.as_ref().map(|c| c.io_cost_model.clone());
        let run = phase(
            b,
            &format!("burst-{k}"),
            &tenants,
            p.burst_interval_s,
            &mut |ctl: &mut KnobCtl, d: &[PathBuf]| {
                apply(ctl, k, &s, model.as_deref(), &d[0], &d[1])
            },
        )?;
        let (w, timeline) = burst_windows(&run.samples, &run.bounds, 0, 1);
        let steady = score::steady_p99(&w, &run.bounds);
        // 0.5 s of completions per p99: one 100 ms window is too few samples.
        let span = (0.5 / p.burst_interval_s).round().max(1.0) as usize;
        b.report.burst.push(BurstRun {
            knob: k,
            setting: s.label(),
            prio_start_seconds: start,
            first_io_seconds: score::first_io(&w),
            steady_p99_seconds: steady,
            settle_seconds: steady.and_then(|st| {
                score::settle_time(
                    &w,
                    &run.bounds,
                    st,
                    crate::bench::verdict::D4_TOLERANCE,
                    span,
                )
            }),
            timeline,
        });
    }
    Ok(())
}
