//! D1, fairness: weighted tenants sharing the device, scored over the
//! window where all of them ran.

use std::path::PathBuf;

use anyhow::Result;

use super::shared::*;
use crate::bench::fio::{Job, JobFile};
use crate::bench::knob::KnobCtl;
use crate::bench::phase::{PhaseRun, Sample, Tenant};
use crate::bench::report::*;
use crate::bench::score;
use crate::bench::Knob;

/// Per-tenant bandwidth over the longest stretch in which all of them
/// completed I/O, and that stretch's length.
pub fn shared_window_bw(samples: &[Sample]) -> Option<(Vec<f64>, f64)> {
    let active: Vec<Vec<bool>> = samples
        .windows(2)
        .map(|w| {
            w[1].bytes
                .iter()
                .zip(&w[0].bytes)
                .map(|(a, b)| a > b)
                .collect()
        })
        .collect();
    let (a, z) = score::all_active_span(&active)?;
    let (s0, s1) = (&samples[a], &samples[z + 1]);
    let dt = s1.t - s0.t;
    (dt > 0.0).then(|| {
        (
            s1.bytes
                .iter()
                .zip(&s0.bytes)
                .map(|(x, y)| (x - y) as f64 / dt)
                .collect(),
            dt,
        )
    })
}

/// D2: 1:2:4:8 weights on the same job ("weights"), and equal weights on
/// 4 KiB..256 KiB requests ("sizes"); Jain's index over bandwidth/weight.
pub fn fairness(b: &mut Bench, knobs: &[Knob]) -> Result<()> {
    let p = b.ctx.params.clone();
    let knobs: Vec<Knob> = knobs.iter().copied().filter(|k| k.has_weights()).collect();
    let model = if knobs.contains(&Knob::IoCost) {
        Some(calibration(b)?.io_cost_model)
    } else {
        None
    };
    let scenarios: [(&str, [(u32, &str); 4]); 2] = [
        (
            "weights",
            [(100, "64k"), (200, "64k"), (400, "64k"), (800, "64k")],
        ),
        (
            "sizes",
            [(100, "4k"), (100, "16k"), (100, "64k"), (100, "256k")],
        ),
    ];
    for (scenario, spec) in scenarios {
        for &k in &knobs {
            let tenants: Vec<Tenant> = spec
                .iter()
                .enumerate()
                .map(|(i, &(w, bs))| Tenant {
                    weight: w,
                    ..Tenant::together(
                        &format!("t{i}"),
                        Job::new(JobFile::Tenant).bs(bs).qd(8),
                        p.runtime_s,
                    )
                })
                .collect();
            let weights = label(&tenants);
            let model = model.clone();
            let mut setup = |ctl: &mut KnobCtl, dirs: &[PathBuf]| -> Result<()> {
                ctl.baseline(k.scheduler())?;
                if k == Knob::IoCost {
                    iocost_on(ctl, model.as_deref(), 100.0)?;
                }
                for (d, &w) in dirs.iter().zip(&weights) {
                    ctl.set_weight(k, d, w)?;
                }
                Ok(())
            };
            let run = phase(
                b,
                &format!("fairness-{scenario}-{k}"),
                &tenants,
                p.interval_s,
                &mut setup,
            )?;
            b.report
                .fairness
                .push(fairness_row(scenario, k, &weights, &run));
        }
    }
    Ok(())
}

/// One row of the fairness table: the tenants' bandwidth in the shared
/// window and Jain's index over it and over fio's.
fn fairness_row(scenario: &str, k: Knob, weights: &[u32], run: &PhaseRun) -> FairnessRun {
    let wf: Vec<f64> = weights.iter().map(|&w| w as f64).collect();
    let (win, secs) = shared_window_bw(&run.samples).unwrap_or((vec![0.0; 4], 0.0));
    let fio_bw: Vec<f64> = run.tenants.iter().map(|t| t.fio.bw_bytes).collect();
    FairnessRun {
        scenario: scenario.into(),
        knob: k,
        tenants: run
            .tenants
            .iter()
            .zip(&win)
            .map(|(t, &w)| FairnessTenant {
                name: t.tenant.name.clone(),
                weight: t.tenant.weight,
                bs: t.tenant.job.bs.clone(),
                window_bw_bytes: w,
                bw_bytes: bw(t),
                fio_bw_bytes: t.fio.bw_bytes,
            })
            .collect(),
        window_seconds: secs,
        iocost_vrate_pct: (k == Knob::IoCost)
            .then_some(run.iocost_vrate_pct)
            .flatten(),
        jain: if secs > 0.0 {
            score::weighted_jain(&win, &wf)
        } else {
            None
        },
        jain_fio: score::weighted_jain(&fio_bw, &wf),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, bytes: Vec<u64>) -> Sample {
        let n = bytes.len();
        Sample {
            t,
            ios: vec![0; n],
            bytes,
            latency: vec![Default::default(); n],
        }
    }

    #[test]
    fn shared_window_is_where_all_tenants_ran() {
        // Tenant 1 starts late and tenant 0 ends early; in between both
        // move 100 and 300 bytes per 0.5 s.
        let s = vec![
            sample(0.5, vec![100, 0]),
            sample(1.0, vec![200, 0]),
            sample(1.5, vec![300, 300]),
            sample(2.0, vec![400, 600]),
            sample(2.5, vec![500, 900]),
            sample(3.0, vec![600, 1200]),
            sample(3.5, vec![700, 1500]),
            sample(4.0, vec![800, 1800]),
            sample(4.5, vec![800, 2100]),
        ];
        let (bw, dt) = shared_window_bw(&s).unwrap();
        // Intervals 1..=6 are all-active, trimmed to 2..=5: samples 2..6.
        assert!((dt - 2.0).abs() < 1e-9, "{dt}");
        assert_eq!(bw, vec![200.0, 600.0]);
        assert_eq!(shared_window_bw(&s[..1]), None);
    }
}
