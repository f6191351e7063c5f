//! The suites: which phases each runs, how each knob is set in them, and
//! how a phase's numbers become the report's rows.

use std::path::PathBuf;

use anyhow::Result;

use super::fio::{Job, JobFile};
use super::knob::KnobCtl;
use super::phase::{run_phase, Ctx, PhaseRun, Sample, Tenant};
use super::report::*;
use super::score;
use super::Knob;

/// The suites' shared state: the phases' context and the report so far.
pub struct Bench {
    pub ctx: Ctx,
    pub report: Report,
    /// The priority app's p99 and bandwidth alone (D3, D4).
    alone: Option<(Option<f64>, f64)>,
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
fn bw(t: &super::phase::TenantRun) -> f64 {
    if t.fio.runtime_seconds > 0.0 {
        t.bytes as f64 / t.fio.runtime_seconds
    } else {
        0.0
    }
}

fn record(b: &mut Bench, run: &PhaseRun) {
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

fn phase(
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
    eprintln!(
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
fn scaled_model(c: &Calibration, f: f64) -> String {
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
fn iocost_vrate_reset(b: &mut Bench, c: &Calibration) -> Result<Option<f64>> {
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
    eprintln!(
        "iowarden bench: iocost vrate after the reset: {}",
        run.iocost_vrate_pct
            .map(|v| format!("{v:.2}%"))
            .unwrap_or("unknown".into())
    );
    Ok(run.iocost_vrate_pct)
}

/// iocost with the calibrated model and vrate pinned at `vrate` %, latency
/// targets off: the knob's capacity is what the device did alone.
fn iocost_on(ctl: &mut KnobCtl, model: Option<&str>, vrate: f64) -> Result<()> {
    let root = ctl.io_root.clone();
    if let Some(m) = model {
        ctl.set(&root.join("io.cost.model"), m)?;
    }
    let qos = format!(
        "{} enable=1 ctrl=user rpct=0.00 wpct=0.00 min={vrate:.2} max={vrate:.2}",
        ctl.devnum()
    );
    ctl.set(&root.join("io.cost.qos"), &qos)
}

fn label(tenants: &[Tenant]) -> Vec<u32> {
    tenants.iter().map(|t| t.weight).collect()
}

// ---------------------------------------------------------------- D1

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

// ---------------------------------------------------------------- D2

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
            let wf: Vec<f64> = weights.iter().map(|&w| w as f64).collect();
            let (win, secs) = shared_window_bw(&run.samples).unwrap_or((vec![0.0; 4], 0.0));
            let fio_bw: Vec<f64> = run.tenants.iter().map(|t| t.fio.bw_bytes).collect();
            b.report.fairness.push(FairnessRun {
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
            });
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- D3, D4

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

fn apply(
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
fn alone(b: &mut Bench) -> Result<(Option<f64>, f64)> {
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
fn prio_pair(delay_s: f64, runtime_s: f64) -> [Tenant; 2] {
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

fn needs_calibration(knobs: &[Knob]) -> bool {
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
                score::settle_time(&w, &run.bounds, st, super::verdict::D4_TOLERANCE, span)
            }),
            timeline,
        });
    }
    Ok(())
}

// ---------------------------------------------------------------- schedulers

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
