//! SVG plots of a report (plotters, SVG backend only): fairness bars, the
//! Pareto fronts of D3 and the burst timelines of D4.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::params::Knob;
use super::report::Report;

const MIB: f64 = (1u64 << 20) as f64;

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing a plot: {e}")
}

fn color(k: Knob) -> RGBColor {
    let i = Knob::ALL.iter().position(|&x| x == k).unwrap_or(0);
    let c = Palette99::pick(i).to_rgba();
    RGBColor(c.0, c.1, c.2)
}

/// A tenant's bar height: window bandwidth per 100 of weight, MiB/s.
fn per_weight(t: &super::report::FairnessTenant) -> f64 {
    t.window_bw_bytes / MIB / (t.weight.max(1) as f64 / 100.0)
}

/// Per-tenant bandwidth (normalised by weight) in the shared window, one
/// group per scenario and knob: equal bars are proportional sharing. Every
/// group is labelled with its scenario, knob and Jain index, every bar with
/// its tenant, weight and request size; the legend names the knobs' colours.
fn fairness(r: &Report, path: &Path) -> Result<()> {
    let groups = &r.fairness;
    let top = groups
        .iter()
        .flat_map(|g| g.tenants.iter().map(per_weight))
        .fold(0.0, f64::max)
        .max(1e-3);
    // Headroom above the tallest bar: two lines of group labels, and above
    // them the legend (one line per knob).
    let ymax = top * 1.9;
    let width = (groups.len() as u32 * 230).clamp(900, 4000);
    let root = SVGBackend::new(path, (width, 620)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "D2: bandwidth per 100 of weight over the shared window, {} (equal bars = proportional sharing)",
                r.device.name
            ),
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(10)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..groups.len().max(1) as f64, 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("MiB/s per 100 weight")
        .draw()
        .map_err(err)?;
    for (gi, g) in groups.iter().enumerate() {
        fairness_group(&mut chart, gi, g, top, ymax)?;
    }
    let mut knobs: Vec<Knob> = groups.iter().map(|g| g.knob).collect();
    knobs.sort_by_key(|k| Knob::ALL.iter().position(|x| x == k));
    knobs.dedup();
    knob_legend(&mut chart, &knobs)?;
    root.present().map_err(err)
}

/// The cartesian chart every plot here draws on.
type Chart<'a> = ChartContext<
    'a,
    SVGBackend<'a>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// One fairness group: its scenario, knob and Jain index above one bar per
/// tenant, and a separator before it.
fn fairness_group(
    chart: &mut Chart<'_>,
    gi: usize,
    g: &super::report::FairnessRun,
    top: f64,
    ymax: f64,
) -> Result<()> {
    let group_font = ("sans-serif", 16).into_font().color(&BLACK);
    let bar_font = ("sans-serif", 13)
        .into_font()
        .transform(FontTransform::Rotate270)
        .color(&BLACK);
    let centre = Pos::new(HPos::Center, VPos::Center);
    let mid = gi as f64 + 0.5;
    let jain = g
        .jain
        .map(|j| format!("Jain {j:.2}"))
        .unwrap_or_else(|| "Jain n/a".into());
    chart
        .draw_series([
            Text::new(
                format!("{}: {}", g.scenario, g.knob),
                (mid, top * 1.3),
                group_font.clone().pos(centre),
            ),
            Text::new(jain, (mid, top * 1.19), group_font.clone().pos(centre)),
        ])
        .map_err(err)?;
    let n = g.tenants.len().max(1) as f64;
    for (ti, t) in g.tenants.iter().enumerate() {
        let x0 = gi as f64 + 0.1 + 0.8 * ti as f64 / n;
        let x1 = x0 + 0.8 / n * 0.9;
        let y = per_weight(t);
        chart
            .draw_series([Rectangle::new(
                [(x0, 0.0), (x1, y)],
                color(g.knob)
                    .mix(0.4 + 0.6 * (ti as f64 + 1.0) / n)
                    .filled(),
            )])
            .map_err(err)?;
        // The bar's tenant, reading upwards from just above its base.
        chart
            .draw_series([Text::new(
                format!("{} w{} {}", t.name, t.weight, t.bs),
                ((x0 + x1) / 2.0, top * 0.02),
                bar_font.clone().pos(Pos::new(HPos::Left, VPos::Center)),
            )])
            .map_err(err)?;
    }
    // Groups apart: a thin separator.
    if gi > 0 {
        chart
            .draw_series(LineSeries::new(
                [(gi as f64, 0.0), (gi as f64, ymax)],
                BLACK.mix(0.15),
            ))
            .map_err(err)?;
    }
    Ok(())
}

/// The legend: one colour per knob.
fn knob_legend(chart: &mut Chart<'_>, knobs: &[Knob]) -> Result<()> {
    for &k in knobs {
        let c = color(k);
        chart
            .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
            .map_err(err)?
            .label(format!("{k} (darker: later tenant)"))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// D3: the priority app's p99 against aggregate bandwidth, every point,
/// each knob's front joined.
fn pareto(r: &Report, path: &Path) -> Result<()> {
    let Some(p) = &r.prio_util else {
        return Ok(());
    };
    let xmax = p
        .points
        .iter()
        .map(|x| x.aggregate_bw_bytes / MIB)
        .fold(0.0, f64::max)
        .max(1e-3)
        * 1.1;
    let ymax = p
        .points
        .iter()
        .filter_map(|x| x.prio_p99_seconds)
        .map(|s| s * 1e3)
        .chain(p.alone_p99_seconds.map(|s| s * 1e3))
        .fold(0.0, f64::max)
        .max(1e-3)
        * 1.1;
    let root = SVGBackend::new(path, (800, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("D3: priority p99 vs aggregate bandwidth, {}", r.device.name),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("aggregate bandwidth (MiB/s)")
        .y_desc("priority app p99 (ms)")
        .draw()
        .map_err(err)?;
    if let Some(a) = p.alone_p99_seconds {
        chart
            .draw_series(LineSeries::new(
                [(0.0, a * 1e3), (xmax, a * 1e3)],
                BLACK.mix(0.4),
            ))
            .map_err(err)?
            .label("priority alone")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.mix(0.4)));
    }
    let mut knobs: Vec<Knob> = p.points.iter().map(|x| x.knob).collect();
    knobs.dedup();
    for k in knobs {
        pareto_knob(&mut chart, &p.points, k)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// One knob's points in D3, each labelled with its setting, and its front.
fn pareto_knob(
    chart: &mut Chart<'_>,
    points: &[super::report::TradeoffPoint],
    k: Knob,
) -> Result<()> {
    let c = color(k);
    let pts: Vec<(f64, f64)> = points
        .iter()
        .filter(|x| x.knob == k)
        .filter_map(|x| Some((x.aggregate_bw_bytes / MIB, x.prio_p99_seconds? * 1e3)))
        .collect();
    let mut front: Vec<(f64, f64)> = points
        .iter()
        .filter(|x| x.knob == k && x.on_front)
        .filter_map(|x| Some((x.aggregate_bw_bytes / MIB, x.prio_p99_seconds? * 1e3)))
        .collect();
    front.sort_by(|a, b| a.0.total_cmp(&b.0));
    chart
        .draw_series(pts.iter().map(|&xy| Circle::new(xy, 4, c.filled())))
        .map_err(err)?
        .label(k.name())
        .legend(move |(x, y)| Circle::new((x + 10, y), 4, c.filled()));
    chart.draw_series(LineSeries::new(front, c)).map_err(err)?;
    // Each point's setting beside it: the plot says which knob value it is.
    let font = ("sans-serif", 10).into_font().color(&c);
    chart
        .draw_series(
            points
                .iter()
                .filter(|x| x.knob == k)
                .filter_map(|x| Some((x.aggregate_bw_bytes / MIB, x.prio_p99_seconds? * 1e3, x)))
                .map(|(bw, p99, x)| {
                    Text::new(
                        x.setting.clone(),
                        (bw, p99),
                        font.clone().pos(Pos::new(HPos::Left, VPos::Bottom)),
                    )
                }),
        )
        .map_err(err)?;
    Ok(())
}

/// D4: the priority app's p99 per window after it starts, one line per knob.
fn burst(r: &Report, path: &Path) -> Result<()> {
    if r.burst.is_empty() {
        return Ok(());
    }
    let xmax = r
        .burst
        .iter()
        .flat_map(|b| b.timeline.iter().map(|w| w.t))
        .fold(0.0, f64::max)
        .max(1e-3);
    let ymax = r
        .burst
        .iter()
        .flat_map(|b| b.timeline.iter().filter_map(|w| w.prio_p99_seconds))
        .map(|s| s * 1e3)
        .fold(0.0, f64::max)
        .max(1e-3)
        * 1.1;
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "D4: priority app p99 per window after its start, {}",
                r.device.name
            ),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the phase started")
        .y_desc("p99 (ms)")
        .draw()
        .map_err(err)?;
    for b in &r.burst {
        let c = color(b.knob);
        let pts: Vec<(f64, f64)> = b
            .timeline
            .iter()
            .filter_map(|w| Some((w.t, w.prio_p99_seconds? * 1e3)))
            .collect();
        chart
            .draw_series(LineSeries::new(pts, c))
            .map_err(err)?
            .label(format!(
                "{} (settled {})",
                b.knob,
                b.settle_seconds
                    .map(|s| format!("{s:.2}s"))
                    .unwrap_or("never".into())
            ))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// Writes the plots that have data into `dir`; returns their file names.
pub fn write_all(r: &Report, dir: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    if !r.fairness.is_empty() {
        fairness(r, &dir.join("fairness.svg"))?;
        out.push("fairness.svg".to_string());
    }
    if r.prio_util.is_some() {
        pareto(r, &dir.join("pareto.svg"))?;
        out.push("pareto.svg".to_string());
    }
    if !r.burst.is_empty() {
        burst(r, &dir.join("burst.svg"))?;
        out.push("burst.svg".to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::report::*;
    use super::*;

    #[test]
    fn plots_are_svg_with_the_data() {
        let r = Report {
            fairness: vec![FairnessRun {
                scenario: "weights".into(),
                knob: Knob::IoCost,
                tenants: vec![FairnessTenant {
                    weight: 100,
                    window_bw_bytes: 10.0 * MIB,
                    ..Default::default()
                }],
                jain: Some(0.97),
                ..Default::default()
            }],
            prio_util: Some(PrioUtil {
                alone_p99_seconds: Some(1e-3),
                points: vec![TradeoffPoint {
                    knob: Knob::IoCost,
                    setting: "prio-x".into(),
                    aggregate_bw_bytes: 100.0 * MIB,
                    prio_p99_seconds: Some(2e-3),
                    on_front: true,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            burst: vec![BurstRun {
                knob: Knob::IoMax,
                settle_seconds: Some(0.2),
                timeline: vec![
                    BurstWindow {
                        t: 0.1,
                        prio_p99_seconds: Some(3e-3),
                        be_bw_bytes: 0.0,
                    },
                    BurstWindow {
                        t: 0.2,
                        prio_p99_seconds: Some(1e-3),
                        be_bw_bytes: 0.0,
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let files = write_all(&r, dir.path()).unwrap();
        assert_eq!(files, ["fairness.svg", "pareto.svg", "burst.svg"]);
        let f = std::fs::read_to_string(dir.path().join("fairness.svg")).unwrap();
        assert!(
            f.starts_with("<svg") && f.contains("<rect") && f.contains("Jain 0.97"),
            "{f}"
        );
        let p = std::fs::read_to_string(dir.path().join("pareto.svg")).unwrap();
        assert!(p.contains("prio-x"), "each point's setting: {p}");
        assert!(p.contains("<circle") && p.contains("io.cost"), "{p}");
        let b = std::fs::read_to_string(dir.path().join("burst.svg")).unwrap();
        assert!(
            b.contains("<polyline") && b.contains("settled 0.20s"),
            "{b}"
        );
    }

    /// Every group, not only the first of each scenario, carries its
    /// scenario, knob and Jain index; every bar its tenant; the legend the knobs.
    #[test]
    fn the_fairness_plot_labels_every_group_and_bar() {
        let tenant = |name: &str, weight: u32, bs: &str, mib: f64| FairnessTenant {
            name: name.into(),
            weight,
            bs: bs.into(),
            window_bw_bytes: mib * MIB,
            ..Default::default()
        };
        let mut fairness = Vec::new();
        for (scenario, tenants) in [
            (
                "weights",
                vec![
                    tenant("w1", 100, "64k", 10.0),
                    tenant("w8", 800, "64k", 70.0),
                ],
            ),
            (
                "sizes",
                vec![
                    tenant("s4k", 100, "4k", 5.0),
                    tenant("s256k", 100, "256k", 40.0),
                ],
            ),
        ] {
            for (knob, jain) in [(Knob::None, 0.61), (Knob::IoCost, 0.93)] {
                fairness.push(FairnessRun {
                    scenario: scenario.into(),
                    knob,
                    tenants: tenants.clone(),
                    jain: Some(jain),
                    ..Default::default()
                });
            }
        }
        let r = Report {
            fairness,
            ..Default::default()
        };
        let dir = tempfile::tempdir().unwrap();
        write_all(&r, dir.path()).unwrap();
        let f = std::fs::read_to_string(dir.path().join("fairness.svg")).unwrap();
        for g in &r.fairness {
            let label = format!("{}: {}", g.scenario, g.knob);
            assert_eq!(f.matches(&label).count(), 1, "{label}: {f}");
            for t in &g.tenants {
                let bar = format!("{} w{} {}", t.name, t.weight, t.bs);
                assert_eq!(f.matches(&bar).count(), 2, "{bar} under each knob: {f}");
            }
        }
        assert_eq!(f.matches("Jain 0.61").count(), 2, "{f}");
        assert_eq!(f.matches("Jain 0.93").count(), 2, "{f}");
        for k in [Knob::None, Knob::IoCost] {
            assert!(
                f.contains(&format!("{k} (darker: later tenant)")),
                "legend: {f}"
            );
        }
    }
}
