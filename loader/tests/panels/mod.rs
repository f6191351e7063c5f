//! The committed Grafana dashboards as queries: panels, their PromQL, the
//! variables and metrics they name, and what a Prometheus answers for them;
//! and the fio load the live tests run them under.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::process::{Child, Stdio};

use crate::fixtures::{repo, Cgroup};
use serde_json::Value;

/// Metrics the dashboards and rules use that other work adds: family prefix
/// or exact name, and where they can be seen.
pub const PLANNED: &[(&str, &str)] = &[
    (
        "iowarden_iocost_",
        "iocost metrics need the io.cost controller (cgroup v2, iocost enabled on the device): tested in the guest, tests/vmtest/guest/t-35-iocost.sh",
    ),
    (
        "iowarden_nvme_",
        "NVMe queue metrics need an NVMe device: tested on the guest's emulated NVMe, tests/vmtest/guest/t-30-nvme.sh",
    ),
    (
        "iowarden_io_held_io_max_seconds_total",
        "io.max holds are timed by a fexit program on blk-throttle, which this host's kernel refuses: tested in the guest, tests/vmtest/guest/t-16-throttle.sh",
    ),
    (
        "iowarden_io_throttle_seconds_total",
        "the throttle stage needs bios stamped at submission, which this host's kernel does only for io.latency: tested in the guest, tests/vmtest/guest/t-16-throttle.sh",
    ),
    (
        "iowarden_tune_",
        "tuner metrics need iocost (cgroup v2): tested in the guest, tests/vmtest/guest/t-45-tune.sh",
    ),
];

/// Series Prometheus makes itself for every target.
pub const PROMETHEUS_SERIES: &[&str] = &[
    "up",
    "scrape_duration_seconds",
    "scrape_samples_scraped",
    "scrape_samples_post_metric_relabeling",
    "scrape_series_added",
];

pub const BUILTIN_VARS: &[&str] = &["__rate_interval", "__range", "__interval"];

pub fn planned_reason(metric: &str) -> Option<&'static str> {
    PLANNED
        .iter()
        .find(|(p, _)| metric.starts_with(p))
        .map(|(_, why)| *why)
}

pub struct Dash {
    pub file: String,
    pub json: Value,
}

pub fn dashboards() -> Vec<Dash> {
    let dir = repo().join("dashboards");
    let mut out: Vec<Dash> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| Dash {
            file: p.file_name().unwrap().to_string_lossy().into_owned(),
            json: serde_json::from_str(&std::fs::read_to_string(&p).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", p.display())),
        })
        .collect();
    out.sort_by(|a, b| a.file.cmp(&b.file));
    assert_eq!(out.len(), 5, "five dashboards");
    out
}

/// Panels, rows' nested panels included.
pub fn panels(d: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        out.push(p);
        if let Some(inner) = p["panels"].as_array() {
            out.extend(inner.iter());
        }
    }
    out
}

pub struct Query {
    pub dashboard: String,
    pub panel: String,
    pub ref_id: String,
    pub expr: String,
    pub instant: bool,
}

pub fn queries(d: &Dash) -> Vec<Query> {
    let title = d.json["title"].as_str().unwrap().to_string();
    panels(&d.json)
        .into_iter()
        .flat_map(|p| {
            let title = title.clone();
            p["targets"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |t| Query {
                    dashboard: title.clone(),
                    panel: p["title"].as_str().unwrap_or("?").to_string(),
                    ref_id: t["refId"].as_str().unwrap_or("?").to_string(),
                    expr: t["expr"].as_str().unwrap_or("").to_string(),
                    instant: t["instant"] == true,
                })
        })
        .collect()
}

/// (name, label_values query) of the query variables.
pub fn variable_queries(d: &Value) -> Vec<(String, String)> {
    d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["type"] == "query")
        .map(|v| {
            (
                v["name"].as_str().unwrap().to_string(),
                v["definition"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `$name` and `${name}` references in a string.
pub fn variables_used(s: &str) -> BTreeSet<String> {
    let b = s.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' {
            let brace = b.get(i + 1) == Some(&b'{');
            let start = i + 1 + brace as usize;
            let mut j = start;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            // "$1" in label_replace is a regex group, not a variable.
            if j > start && !b[start].is_ascii_digit() {
                out.insert(s[start..j].to_string());
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// Metric names in a PromQL expression: iowarden's and Prometheus' own.
pub fn metrics_in(expr: &str) -> BTreeSet<String> {
    // Drop string literals (label values, regexes) first.
    let mut s = String::new();
    let mut in_str = false;
    let mut prev = ' ';
    for c in expr.chars() {
        if c == '"' && prev != '\\' {
            in_str = !in_str;
            s.push(' ');
        } else if !in_str {
            s.push(c);
        }
        prev = c;
    }
    s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| w.starts_with("iowarden_") || PROMETHEUS_SERIES.contains(w))
        .map(str::to_string)
        .collect()
}

/// Names of the samples in an exposition, and of the histograms (which a
/// native scrape stores under their own name).
pub fn exported_metrics(text: &str) -> HashSet<String> {
    let samples: HashSet<String> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect();
    let histograms = samples
        .iter()
        .filter_map(|s| s.strip_suffix("_bucket"))
        .map(str::to_string)
        .collect::<Vec<_>>();
    samples.into_iter().chain(histograms).collect()
}

/// fio running until dropped.
pub struct Load(pub Vec<Child>);

impl Drop for Load {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = crate::fixtures::send(c, nix::sys::signal::Signal::SIGTERM);
        }
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}

pub fn fio_until_killed(
    cg: &Cgroup,
    dev: &str,
    rw: &str,
    bs: &str,
    qd: u32,
    offset: &str,
) -> Child {
    let args: Vec<String> = [
        "--name=load".to_string(),
        format!("--filename={dev}"),
        "--direct=1".into(),
        "--ioengine=libaio".into(),
        format!("--rw={rw}"),
        format!("--bs={bs}"),
        format!("--iodepth={qd}"),
        format!("--offset={offset}"),
        "--size=256M".into(),
        "--time_based".into(),
        "--runtime=120".into(),
        "--randrepeat=0".into(),
    ]
    .to_vec();
    cg.command("fio", &args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("fio")
}

/// Non-empty, of the expected type, with at least one finite value or
/// native histogram holding observations.
pub fn check_result(resp: &Value, want: &str) -> Result<usize, String> {
    if resp["status"] != "success" {
        return Err(format!("query failed: {}", resp["error"]));
    }
    let got = resp["data"]["resultType"].as_str().unwrap_or("");
    if got != want {
        return Err(format!("result type {got}, expected {want}"));
    }
    let series = resp["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if series.is_empty() {
        return Err("empty result".into());
    }
    let finite = |v: &Value| {
        v[1].as_str()
            .and_then(|s| s.parse::<f64>().ok())
            .is_some_and(f64::is_finite)
    };
    // A native histogram sample: [time, {"count": "12", "sum": ..., "buckets": ...}].
    let observed = |h: &Value| {
        h[1]["count"]
            .as_str()
            .and_then(|s| s.parse::<f64>().ok())
            .is_some_and(|n| n > 0.0)
    };
    let any_finite = series.iter().any(|s| {
        finite(&s["value"])
            || s["values"]
                .as_array()
                .is_some_and(|vs| vs.iter().any(finite))
            || observed(&s["histogram"])
            || s["histograms"]
                .as_array()
                .is_some_and(|hs| hs.iter().any(observed))
    });
    if !any_finite {
        return Err(format!("{} series, all NaN/Inf", series.len()));
    }
    Ok(series.len())
}

pub fn substitute(expr: &str, vars: &BTreeMap<&str, String>) -> String {
    let mut s = expr.to_string();
    // Longest names first, and the ${x} form before $x.
    let mut names: Vec<&&str> = vars.keys().collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    for n in names {
        s = s
            .replace(&format!("${{{n}}}"), &vars[*n])
            .replace(&format!("${n}"), &vars[*n]);
    }
    s
}
