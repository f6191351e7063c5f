//! The bench's JSON report (schema `iowarden-bench/1`, documented in
//! loader/src/bench/README.md) and its Markdown summary, a table like isol-bench's
//! Table I. Pure: built from measured numbers, unit-tested on fixed ones.

use serde::{Deserialize, Serialize};

use super::params::{Knob, Params, Suite};

pub const SCHEMA: &str = "iowarden-bench/1";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub device: iowarden_exporters::DeviceRef,
    pub kernel: String,
    pub hostname: String,
    pub started_unix_seconds: f64,
    pub finished_unix_seconds: f64,
    pub params: Option<Params>,
    pub suites: Vec<Suite>,
    pub knobs: Vec<Knob>,
    pub unavailable: Vec<Unavailable>,
    pub calibration: Option<Calibration>,
    pub overhead: Vec<OverheadRun>,
    pub fairness: Vec<FairnessRun>,
    pub prio_util: Option<PrioUtil>,
    pub burst: Vec<BurstRun>,
    pub schedulers: Vec<SchedulerRun>,
    /// iowarden's per-cgroup bandwidth against fio's, every tenant of every phase.
    pub cross_check: Vec<CrossCheck>,
    pub verdicts: Vec<Verdict>,
    /// Plots written next to the report (relative paths).
    pub plots: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Unavailable {
    pub knob: Knob,
    pub reason: String,
}

/// The device alone, measured before io.cost / io.max need its capacity.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// 4 KiB random reads per second at queue depth 32.
    pub iops_4k: f64,
    /// 1 MiB sequential reads, bytes/s.
    pub bw_bytes: f64,
    /// The io.cost.model line derived from them.
    pub io_cost_model: String,
    /// iocost's vrate after the bench brought it to 100 % (io.cost runs only).
    #[serde(default)]
    pub iocost_vrate_pct: Option<f64>,
}

/// D1: one knob at one cgroup count.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OverheadRun {
    pub knob: Knob,
    pub cgroups: usize,
    /// What was written to make the knob active without limiting.
    pub setting: String,
    /// From iowarden: completed I/Os per second, total latency quantiles.
    pub iops: f64,
    pub p50_seconds: Option<f64>,
    pub p99_seconds: Option<f64>,
    /// Busy CPU of the whole machine (/proc/stat) per I/O.
    pub cpu_per_io_seconds: Option<f64>,
    /// fio's own tasks' CPU per I/O (usr + sys).
    pub task_cpu_per_io_seconds: Option<f64>,
    /// fio's view: IOPS and clat p99.
    pub fio_iops: f64,
    pub fio_p99_seconds: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FairnessTenant {
    pub name: String,
    pub weight: u32,
    pub bs: String,
    /// Bandwidth over the window in which every tenant ran, from iowarden.
    pub window_bw_bytes: f64,
    /// Whole-run bandwidth: iowarden's bytes / fio's runtime, and fio's.
    pub bw_bytes: f64,
    pub fio_bw_bytes: f64,
}

/// D2: one scenario under one knob.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FairnessRun {
    /// "weights" (1:2:4:8, same job) or "sizes" (equal weights, 4k..256k).
    pub scenario: String,
    pub knob: Knob,
    pub tenants: Vec<FairnessTenant>,
    /// Seconds of the all-tenants-active window the index is computed on.
    pub window_seconds: f64,
    /// iocost's effective vrate at the end of the run (io.cost only), %.
    #[serde(default)]
    pub iocost_vrate_pct: Option<f64>,
    /// Jain's index over bandwidth/weight: iowarden (window), fio (whole run).
    pub jain: Option<f64>,
    pub jain_fio: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TradeoffPoint {
    pub knob: Knob,
    pub setting: String,
    pub aggregate_bw_bytes: f64,
    pub prio_bw_bytes: f64,
    pub prio_p99_seconds: Option<f64>,
    pub prio_fio_p99_seconds: Option<f64>,
    /// On its knob's Pareto front (p99 against aggregate bandwidth).
    pub on_front: bool,
}

/// D3: the priority app's p99 against aggregate bandwidth across settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PrioUtil {
    /// The priority app alone (knob none).
    pub alone_p99_seconds: Option<f64>,
    pub alone_bw_bytes: f64,
    pub points: Vec<TradeoffPoint>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BurstWindow {
    pub t: f64,
    pub prio_p99_seconds: Option<f64>,
    pub be_bw_bytes: f64,
}

/// D4: a priority app starting while a best-effort one saturates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BurstRun {
    pub knob: Knob,
    pub setting: String,
    /// How long after the best-effort app's first I/O the priority app was
    /// started, and when its first I/O completed (since the phase started).
    pub prio_start_seconds: f64,
    pub first_io_seconds: Option<f64>,
    /// p99 over the second half of its run.
    pub steady_p99_seconds: Option<f64>,
    /// From its first I/O until its p99 (over 0.5 s of completions) is
    /// within 10 % of the steady state (None: never).
    pub settle_seconds: Option<f64>,
    pub timeline: Vec<BurstWindow>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SchedulerRun {
    pub scheduler: String,
    pub iops: f64,
    pub cpu_per_io_seconds: Option<f64>,
    pub task_cpu_per_io_seconds: Option<f64>,
    /// The priority app's p99 beside the best-effort app.
    pub p99_interference_seconds: Option<f64>,
    /// Lock wait of the tenants per I/O; null where the lock programs are
    /// not available (`lock_source` says why).
    pub lock_wait_per_io_seconds: Option<f64>,
    pub lock_source: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CrossCheck {
    pub phase: String,
    pub tenant: String,
    pub cgroup: String,
    pub bw_bytes: f64,
    pub fio_bw_bytes: f64,
    /// |iowarden - fio| / fio.
    pub rel_diff: Option<f64>,
}

/// A mark of Table I.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    Pass,
    Fail,
    /// The desideratum does not apply to the knob (e.g. weights for io.max).
    NotApplicable,
    NotRun,
    Unavailable,
}

impl Mark {
    pub fn symbol(self) -> &'static str {
        match self {
            Mark::Pass => "✓",
            Mark::Fail => "✗",
            Mark::NotApplicable => "—",
            Mark::NotRun => "·",
            Mark::Unavailable => "n/a",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub knob: Knob,
    /// "D1".."D4".
    pub desideratum: String,
    pub mark: Mark,
    /// The numbers behind the mark.
    pub detail: String,
}

pub const DESIDERATA: [(&str, &str); 4] = [
    ("D1", "Low overhead"),
    ("D2", "Proportional fairness"),
    ("D3", "Priority/utilisation trade-off"),
    ("D4", "Priority bursts"),
];

pub fn fmt_s(s: Option<f64>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s >= 1.0 => format!("{s:.2}s"),
        Some(s) if s >= 1e-3 => format!("{:.2}ms", s * 1e3),
        Some(s) if s >= 1e-6 => format!("{:.1}µs", s * 1e6),
        Some(s) => format!("{:.0}ns", s * 1e9),
    }
}

pub fn fmt_bw(b: f64) -> String {
    format!("{:.1}MiB/s", b / (1u64 << 20) as f64)
}

/// The Markdown summary: Table I, then the tables behind it.
pub fn markdown(r: &Report) -> String {
    let mut s = format!(
        "# iowarden bench: {} ({}:{}), {}{}\n\n",
        r.device.name,
        r.device.major,
        r.device.minor,
        r.kernel,
        if r.params.as_ref().is_some_and(|p| p.quick) {
            ", --quick"
        } else {
            ""
        }
    );
    s += &md_table_i(r);
    s += &md_notes(r);
    s += &md_overhead(r);
    s += &md_fairness(r);
    s += &md_prio_util(r);
    s += &md_burst(r);
    s += &md_schedulers(r);
    s += &md_cross_check(r);
    s += &md_plots(r);
    s
}

/// Table I: one row per knob, one mark per desideratum.
fn md_table_i(r: &Report) -> String {
    let mut s = String::new();
    s += "| knob | ";
    s += &DESIDERATA
        .iter()
        .map(|(d, n)| format!("{d} {n}"))
        .collect::<Vec<_>>()
        .join(" | ");
    s += " |\n|---|---|---|---|---|\n";
    let mut knobs: Vec<Knob> = r.knobs.clone();
    knobs.extend(r.unavailable.iter().map(|u| u.knob));
    knobs.sort();
    knobs.dedup();
    for k in knobs {
        s += &format!("| {k} |");
        for (d, _) in DESIDERATA {
            let cell = match r
                .verdicts
                .iter()
                .find(|v| v.knob == k && v.desideratum == d)
            {
                Some(v) if v.detail.is_empty() => v.mark.symbol().to_string(),
                Some(v) => format!("{} {}", v.mark.symbol(), v.detail),
                None => Mark::NotRun.symbol().into(),
            };
            s += &format!(" {cell} |");
        }
        s += "\n";
    }
    s
}

/// The legend, the unavailable knobs and the calibration.
fn md_notes(r: &Report) -> String {
    let mut s = String::new();
    s += "\n✓ met, ✗ not met, — does not apply, · not run, n/a knob unavailable here.\n";
    for u in &r.unavailable {
        s += &format!("- {}: unavailable: {}\n", u.knob, u.reason);
    }
    if let Some(c) = &r.calibration {
        s += &format!(
            "\nDevice alone: {:.0} IOPS (4 KiB random, QD32), {} (1 MiB sequential); io.cost.model `{}`.\n",
            c.iops_4k,
            fmt_bw(c.bw_bytes),
            c.io_cost_model
        );
    }
    s
}

/// The D1 overhead table.
fn md_overhead(r: &Report) -> String {
    let mut s = String::new();
    if !r.overhead.is_empty() {
        s += "\n## D1 overhead\n\n| knob | cgroups | IOPS | p50 | p99 | CPU/IO | fio CPU/IO | fio p99 |\n|---|---|---|---|---|---|---|---|\n";
        for o in &r.overhead {
            s += &format!(
                "| {} | {} | {:.0} | {} | {} | {} | {} | {} |\n",
                o.knob,
                o.cgroups,
                o.iops,
                fmt_s(o.p50_seconds),
                fmt_s(o.p99_seconds),
                fmt_s(o.cpu_per_io_seconds),
                fmt_s(o.task_cpu_per_io_seconds),
                fmt_s(o.fio_p99_seconds)
            );
        }
    }
    s
}

/// The D2 fairness table.
fn md_fairness(r: &Report) -> String {
    let mut s = String::new();
    if !r.fairness.is_empty() {
        s += "\n## D2 fairness\n\n| scenario | knob | tenants (weight, bs: bandwidth in the shared window) | Jain (iowarden) | Jain (fio) |\n|---|---|---|---|---|\n";
        for f in &r.fairness {
            let t = f
                .tenants
                .iter()
                .map(|t| format!("{} {}: {}", t.weight, t.bs, fmt_bw(t.window_bw_bytes)))
                .collect::<Vec<_>>()
                .join(", ");
            let j = |x: Option<f64>| x.map(|j| format!("{j:.3}")).unwrap_or("-".into());
            s += &format!(
                "| {} | {} | {t} | {} | {} |\n",
                f.scenario,
                f.knob,
                j(f.jain),
                j(f.jain_fio)
            );
        }
    }
    s
}

/// The D3 priority vs utilisation table.
fn md_prio_util(r: &Report) -> String {
    let mut s = String::new();
    if let Some(p) = &r.prio_util {
        s += &format!(
            "\n## D3 priority vs utilisation\n\nPriority app alone: p99 {}, {}.\n\n| knob | setting | aggregate | prio p99 | prio p99 (fio) | front |\n|---|---|---|---|---|---|\n",
            fmt_s(p.alone_p99_seconds),
            fmt_bw(p.alone_bw_bytes)
        );
        for x in &p.points {
            s += &format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                x.knob,
                x.setting,
                fmt_bw(x.aggregate_bw_bytes),
                fmt_s(x.prio_p99_seconds),
                fmt_s(x.prio_fio_p99_seconds),
                if x.on_front { "*" } else { "" }
            );
        }
    }
    s
}

/// The D4 bursts table.
fn md_burst(r: &Report) -> String {
    let mut s = String::new();
    if !r.burst.is_empty() {
        s += "\n## D4 bursts\n\n| knob | setting | priority started after be's first I/O | its first I/O | steady p99 | settled after its first I/O |\n|---|---|---|---|---|---|\n";
        for b in &r.burst {
            s += &format!(
                "| {} | {} | {:.1}s | {} | {} | {} |\n",
                b.knob,
                b.setting,
                b.prio_start_seconds,
                b.first_io_seconds
                    .map(|x| format!("{x:.1}s"))
                    .unwrap_or("-".into()),
                fmt_s(b.steady_p99_seconds),
                b.settle_seconds
                    .map(|x| format!("{x:.2}s"))
                    .unwrap_or("never".into())
            );
        }
    }
    s
}

/// The I/O schedulers table.
fn md_schedulers(r: &Report) -> String {
    let mut s = String::new();
    if !r.schedulers.is_empty() {
        s += "\n## I/O schedulers\n\n| scheduler | IOPS | CPU/IO | fio CPU/IO | p99 under interference | lock wait/IO |\n|---|---|---|---|---|---|\n";
        for x in &r.schedulers {
            s += &format!(
                "| {} | {:.0} | {} | {} | {} | {} |\n",
                x.scheduler,
                x.iops,
                fmt_s(x.cpu_per_io_seconds),
                fmt_s(x.task_cpu_per_io_seconds),
                fmt_s(x.p99_interference_seconds),
                match x.lock_wait_per_io_seconds {
                    Some(w) => fmt_s(Some(w)),
                    None => format!("- ({})", x.lock_source),
                }
            );
        }
    }
    s
}

/// The largest iowarden vs fio bandwidth difference.
fn md_cross_check(r: &Report) -> String {
    let mut s = String::new();
    if !r.cross_check.is_empty() {
        let worst = r
            .cross_check
            .iter()
            .filter_map(|c| c.rel_diff.map(|d| (d, c)))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((d, c)) = worst {
            s += &format!(
                "\niowarden vs fio per-cgroup bandwidth: {} tenants, largest difference {:.2} % ({} {}: {} vs {}).\n",
                r.cross_check.len(),
                d * 100.0,
                c.phase,
                c.tenant,
                fmt_bw(c.bw_bytes),
                fmt_bw(c.fio_bw_bytes)
            );
        }
    }
    s
}

/// The plots written.
fn md_plots(r: &Report) -> String {
    let mut s = String::new();
    if !r.plots.is_empty() {
        s += "\nPlots: ";
        s += &r.plots.join(", ");
        s += "\n";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_one_has_a_row_per_knob_with_the_numbers() {
        let r = Report {
            schema: SCHEMA.into(),
            knobs: vec![Knob::None, Knob::IoCost],
            unavailable: vec![Unavailable {
                knob: Knob::IoLatency,
                reason: "cgroup v1".into(),
            }],
            verdicts: vec![
                Verdict {
                    knob: Knob::IoCost,
                    desideratum: "D2".into(),
                    mark: Mark::Pass,
                    detail: "J=0.98".into(),
                },
                Verdict {
                    knob: Knob::None,
                    desideratum: "D2".into(),
                    mark: Mark::Fail,
                    detail: "J=0.66".into(),
                },
                Verdict {
                    knob: Knob::IoLatency,
                    desideratum: "D1".into(),
                    mark: Mark::Unavailable,
                    detail: String::new(),
                },
            ],
            ..Default::default()
        };
        let md = markdown(&r);
        assert!(md.contains("| none | · | ✗ J=0.66 | · | · |"), "{md}");
        assert!(md.contains("| io.cost | · | ✓ J=0.98 | · | · |"), "{md}");
        assert!(md.contains("| io.latency | n/a | · | · | · |"), "{md}");
        assert!(md.contains("- io.latency: unavailable: cgroup v1"), "{md}");
        // Round trip through the documented JSON.
        let j = serde_json::to_string(&r).unwrap();
        assert!(
            j.contains("\"mark\":\"pass\"") && j.contains("\"knob\":\"io.cost\""),
            "{j}"
        );
        let back: Report = serde_json::from_str(&j).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn durations_format_in_readable_units() {
        assert_eq!(fmt_s(Some(2.5)), "2.50s");
        assert_eq!(fmt_s(Some(0.0123)), "12.30ms");
        assert_eq!(fmt_s(Some(45.6e-6)), "45.6µs");
        assert_eq!(fmt_s(Some(80e-9)), "80ns");
        assert_eq!(fmt_s(None), "-");
        assert_eq!(fmt_bw(3.0 * 1048576.0), "3.0MiB/s");
    }
}
