//! The ✓/✗ of Table I from the measured numbers. The thresholds are the
//! bench's definition of each desideratum (loader/src/bench/README.md), fixed here,
//! never fitted to a result.

use super::params::Knob;
use super::report::{Mark, Report, TradeoffPoint, Verdict};

/// D1: a knob is cheap if, with the most cgroups measured, it keeps this
/// share of none's IOPS ...
pub const D1_MIN_IOPS: f64 = 0.9;
/// ... and stays within these multiples of none's p99 and CPU per I/O.
pub const D1_MAX_P99: f64 = 1.2;
pub const D1_MAX_CPU: f64 = 1.2;
/// D2: Jain's index over bandwidth/weight (1:2:4:8 weights) at least this.
pub const D2_MIN_JAIN: f64 = 0.9;
/// D3: the priority app is protected when its p99 is within this multiple
/// of its p99 alone ...
pub const D3_MAX_P99_VS_ALONE: f64 = 2.0;
/// ... while the device keeps this share of none's aggregate bandwidth.
pub const D3_MIN_UTIL: f64 = 0.5;
/// D4: the priority app's p99 settles (within 10 % of its steady state)
/// within this many seconds, and that steady state is protected (D3's bound).
pub const D4_MAX_SETTLE_S: f64 = 1.0;
pub const D4_TOLERANCE: f64 = 0.1;

fn v(knob: Knob, d: &str, mark: Mark, detail: String) -> Verdict {
    Verdict {
        knob,
        desideratum: d.into(),
        mark,
        detail,
    }
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

fn d1(r: &Report, k: Knob) -> Option<Verdict> {
    let n = r
        .overhead
        .iter()
        .filter(|o| o.knob == k)
        .map(|o| o.cgroups)
        .filter(|&n| {
            r.overhead
                .iter()
                .any(|o| o.knob == Knob::None && o.cgroups == n)
        })
        .max()?;
    let at = |k: Knob| r.overhead.iter().find(|o| o.knob == k && o.cgroups == n);
    let (o, base) = (at(k)?, at(Knob::None)?);
    if k == Knob::None {
        return Some(v(k, "D1", Mark::NotApplicable, "baseline".into()));
    }
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let iops = (base.iops > 0.0).then(|| o.iops / base.iops);
    let p99 = ratio(o.p99_seconds, base.p99_seconds);
    let cpu = ratio(o.task_cpu_per_io_seconds, base.task_cpu_per_io_seconds);
    let ok = iops.is_some_and(|x| x >= D1_MIN_IOPS)
        && p99.is_some_and(|x| x <= D1_MAX_P99)
        && cpu.is_none_or(|x| x <= D1_MAX_CPU);
    let f = |x: Option<f64>| x.map(pct).unwrap_or("-".into());
    Some(v(
        k,
        "D1",
        if ok { Mark::Pass } else { Mark::Fail },
        format!(
            "IOPS {}, p99 {}, CPU/IO {} of none ({n} cgroups)",
            f(iops),
            f(p99),
            f(cpu)
        ),
    ))
}

fn d2(r: &Report, k: Knob) -> Option<Verdict> {
    let runs: Vec<_> = r.fairness.iter().filter(|f| f.knob == k).collect();
    if runs.is_empty() {
        return (!k.has_weights() && !r.fairness.is_empty())
            .then(|| v(k, "D2", Mark::NotApplicable, "no weights".into()));
    }
    let w = runs.iter().find(|f| f.scenario == "weights")?;
    let j = w.jain?;
    let sizes = runs
        .iter()
        .find(|f| f.scenario == "sizes")
        .and_then(|f| f.jain)
        .map(|j| format!(", sizes J={j:.2}"))
        .unwrap_or_default();
    Some(v(
        k,
        "D2",
        if j >= D2_MIN_JAIN {
            Mark::Pass
        } else {
            Mark::Fail
        },
        format!("J={j:.2}{sizes}"),
    ))
}

fn d3(r: &Report, k: Knob) -> Option<Verdict> {
    let p = r.prio_util.as_ref()?;
    let alone = p.alone_p99_seconds?;
    let none_bw = p
        .points
        .iter()
        .find(|x| x.knob == Knob::None)?
        .aggregate_bw_bytes;
    let pts: Vec<_> = p.points.iter().filter(|x| x.knob == k).collect();
    if pts.is_empty() || none_bw <= 0.0 {
        return None;
    }
    let ok = |x: &TradeoffPoint| {
        x.prio_p99_seconds
            .is_some_and(|q| q <= D3_MAX_P99_VS_ALONE * alone)
            && x.aggregate_bw_bytes >= D3_MIN_UTIL * none_bw
    };
    // The point shown: a protecting one with the most bandwidth, else the
    // best p99 among those keeping the utilisation, else the best p99.
    let p99 = |x: &TradeoffPoint| x.prio_p99_seconds.unwrap_or(f64::MAX);
    let keeps = |x: &TradeoffPoint| x.aggregate_bw_bytes >= D3_MIN_UTIL * none_bw;
    let shown: &TradeoffPoint = pts
        .iter()
        .copied()
        .filter(|x| ok(x))
        .max_by(|a, b| a.aggregate_bw_bytes.total_cmp(&b.aggregate_bw_bytes))
        .or_else(|| {
            pts.iter()
                .copied()
                .filter(|x| keeps(x))
                .min_by(|a, b| p99(a).total_cmp(&p99(b)))
        })
        .or_else(|| pts.iter().copied().min_by(|a, b| p99(a).total_cmp(&p99(b))))?;
    let pass = pts.iter().any(|x| ok(x));
    Some(v(
        k,
        "D3",
        if pass { Mark::Pass } else { Mark::Fail },
        format!(
            "p99 {:.1}× alone at {} of none's bandwidth ({})",
            shown.prio_p99_seconds.unwrap_or(f64::NAN) / alone,
            pct(shown.aggregate_bw_bytes / none_bw),
            shown.setting
        ),
    ))
}

fn d4(r: &Report, k: Knob) -> Option<Verdict> {
    let b = r.burst.iter().find(|b| b.knob == k)?;
    let alone = r.prio_util.as_ref().and_then(|p| p.alone_p99_seconds);
    let protected = match (b.steady_p99_seconds, alone) {
        (Some(s), Some(a)) => Some(s / a),
        _ => None,
    };
    let ok = b.settle_seconds.is_some_and(|s| s <= D4_MAX_SETTLE_S)
        && protected.is_none_or(|x| x <= D3_MAX_P99_VS_ALONE);
    let settle = b
        .settle_seconds
        .map(|s| format!("settled in {s:.2}s"))
        .unwrap_or("never settled".into());
    let prot = protected
        .map(|x| format!(", steady p99 {x:.1}× alone"))
        .unwrap_or_default();
    Some(v(
        k,
        "D4",
        if ok { Mark::Pass } else { Mark::Fail },
        format!("{settle}{prot}"),
    ))
}

/// Every knob × desideratum that has data, plus n/a for unavailable knobs.
pub fn verdicts(r: &Report) -> Vec<Verdict> {
    let mut out = Vec::new();
    for &k in &r.knobs {
        out.extend(d1(r, k));
        out.extend(d2(r, k));
        out.extend(d3(r, k));
        out.extend(d4(r, k));
    }
    for u in &r.unavailable {
        for (d, _) in super::report::DESIDERATA {
            out.push(v(u.knob, d, Mark::Unavailable, String::new()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::report::*;
    use super::*;

    fn fair(k: Knob, j: f64) -> FairnessRun {
        FairnessRun {
            scenario: "weights".into(),
            knob: k,
            jain: Some(j),
            ..Default::default()
        }
    }

    fn pt(k: Knob, setting: &str, bw: f64, p99: f64) -> TradeoffPoint {
        TradeoffPoint {
            knob: k,
            setting: setting.into(),
            aggregate_bw_bytes: bw,
            prio_p99_seconds: Some(p99),
            ..Default::default()
        }
    }

    fn find<'a>(vs: &'a [Verdict], k: Knob, d: &str) -> &'a Verdict {
        vs.iter()
            .find(|v| v.knob == k && v.desideratum == d)
            .unwrap_or_else(|| panic!("no {k} {d} in {vs:?}"))
    }

    #[test]
    fn marks_follow_the_thresholds() {
        let r = Report {
            knobs: vec![Knob::None, Knob::IoMax, Knob::IoCost],
            overhead: vec![
                OverheadRun {
                    knob: Knob::None,
                    cgroups: 4,
                    iops: 1000.0,
                    p99_seconds: Some(1e-3),
                    task_cpu_per_io_seconds: Some(10e-6),
                    ..Default::default()
                },
                OverheadRun {
                    knob: Knob::IoCost,
                    cgroups: 4,
                    iops: 950.0,
                    p99_seconds: Some(1.1e-3),
                    task_cpu_per_io_seconds: Some(11e-6),
                    ..Default::default()
                },
                OverheadRun {
                    knob: Knob::IoMax,
                    cgroups: 4,
                    iops: 800.0,
                    p99_seconds: Some(1e-3),
                    task_cpu_per_io_seconds: Some(10e-6),
                    ..Default::default()
                },
            ],
            fairness: vec![fair(Knob::None, 0.66), fair(Knob::IoCost, 0.97)],
            prio_util: Some(PrioUtil {
                alone_p99_seconds: Some(1e-3),
                points: vec![
                    pt(Knob::None, "-", 100.0, 10e-3),
                    // Protected only by giving up too much bandwidth.
                    pt(Knob::IoMax, "be rbps=10", 20.0, 1.5e-3),
                    pt(Knob::IoMax, "be rbps=60", 70.0, 5e-3),
                    pt(Knob::IoCost, "lc 100", 100.0, 9e-3),
                    pt(Knob::IoCost, "lc 10000", 80.0, 1.8e-3),
                ],
                ..Default::default()
            }),
            burst: vec![
                BurstRun {
                    knob: Knob::IoCost,
                    settle_seconds: Some(0.3),
                    steady_p99_seconds: Some(1.5e-3),
                    ..Default::default()
                },
                BurstRun {
                    knob: Knob::IoMax,
                    settle_seconds: Some(0.1),
                    // Settles fast, into an unprotected state.
                    steady_p99_seconds: Some(5e-3),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let vs = verdicts(&r);
        let cost_d1 = find(&vs, Knob::IoCost, "D1");
        assert_eq!(cost_d1.mark, Mark::Pass, "{cost_d1:?}");
        assert_eq!(
            cost_d1.detail,
            "IOPS 95%, p99 110%, CPU/IO 110% of none (4 cgroups)"
        );
        assert_eq!(find(&vs, Knob::IoMax, "D1").mark, Mark::Fail);
        assert_eq!(find(&vs, Knob::None, "D1").mark, Mark::NotApplicable);
        assert_eq!(find(&vs, Knob::IoCost, "D2").mark, Mark::Pass);
        assert_eq!(find(&vs, Knob::None, "D2").mark, Mark::Fail);
        assert_eq!(find(&vs, Knob::IoMax, "D2").mark, Mark::NotApplicable);
        let d3 = find(&vs, Knob::IoCost, "D3");
        assert_eq!(d3.mark, Mark::Pass);
        assert_eq!(
            d3.detail,
            "p99 1.8× alone at 80% of none's bandwidth (lc 10000)"
        );
        let d3 = find(&vs, Knob::IoMax, "D3");
        assert_eq!(d3.mark, Mark::Fail, "{d3:?}");
        assert_eq!(
            d3.detail,
            "p99 5.0× alone at 70% of none's bandwidth (be rbps=60)"
        );
        assert_eq!(find(&vs, Knob::None, "D3").mark, Mark::Fail);
        assert_eq!(find(&vs, Knob::IoCost, "D4").mark, Mark::Pass);
        let d4 = find(&vs, Knob::IoMax, "D4");
        assert_eq!(d4.mark, Mark::Fail);
        assert_eq!(d4.detail, "settled in 0.10s, steady p99 5.0× alone");
    }
}
