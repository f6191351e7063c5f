//! The dashboards under the flags deploy/ ships: the systemd unit's
//! ExecStart and the DaemonSet's args, parsed from those files and run as
//! they are (only `--listen` moved to a loopback port, the DaemonSet's
//! `--web.config.file` left out — its Secret-mounted TLS and client
//! certificates are webconfig.rs's subject, the data is this test's — and
//! the knob journal kept in a temporary directory), each scraped by two real Prometheus
//! servers at once: one as text, one native (protobuf,
//! `--enable-feature=native-histograms`). While fio runs in two cgroups on a
//! loop device, every variable and panel query of every dashboard must
//! return data from both. A panel may come back empty only when its data
//! needs an option the shipped flags leave off (a histogram stage they do
//! not export, `--locks`, `--bpf-stats`) and its title says so ("(needs
//! --option …)"). Metrics this host cannot produce (iocost, NVMe, tuner) are
//! skipped as in dashboards.rs.
//! Needs root (BPF, loop devices, cgroups).

use crate::fixtures;
use crate::panels;
use crate::promserver;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::{Duration, Instant};

use fixtures::*;
use panels::*;
use promserver::{free_port, scrape_config, PromServer};

/// Options that export what the shipped flags may leave out, by the metric
/// family they add.
const OPTION_OF_FAMILY: &[(&str, &str)] = &[
    ("iowarden_lock_", "--locks"),
    ("iowarden_bpf_program_run", "--bpf-stats"),
    ("iowarden_nvme_", "--nvme"),
];

/// The option that chooses the exported latency stages.
const STAGES_OPTION: &str = "--histogram-stages";

/// The arguments of the systemd unit's ExecStart, after the binary.
fn systemd_args() -> Vec<String> {
    let unit = std::fs::read_to_string(repo().join("deploy/systemd/iowarden.service")).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart= in the unit");
    let mut words = exec.split_whitespace().map(str::to_string);
    let bin = words.next().unwrap();
    assert!(bin.ends_with("/iowarden"), "ExecStart runs {bin}");
    words.collect()
}

/// The args of the DaemonSet's iowarden container (the image's entrypoint is
/// the binary).
fn daemonset_args() -> Vec<String> {
    let docs = yaml_docs(&repo().join("deploy/kubernetes/iowarden.yaml"));
    let ds = docs
        .iter()
        .find(|d| d["kind"] == "DaemonSet")
        .expect("a DaemonSet");
    let container = ds["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "iowarden")
        .expect("the iowarden container");
    assert!(
        container["command"].is_null(),
        "the DaemonSet overrides the entrypoint"
    );
    container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// `args` with its one `--listen` address (either spelling) on loopback
/// `port`, and without `--web.config.file` (see the top of this file).
fn on_loopback(args: &[String], port: u16) -> Vec<String> {
    let addr = format!("127.0.0.1:{port}");
    let mut out = Vec::new();
    let mut listens = 0;
    let mut words = args.iter();
    while let Some(w) = words.next() {
        if w == "--listen" {
            words.next().expect("--listen's address");
            out.extend([w.clone(), addr.clone()]);
            listens += 1;
        } else if w.starts_with("--listen=") {
            out.push(format!("--listen={addr}"));
            listens += 1;
        } else if w == "--web.config.file" {
            words.next().expect("--web.config.file's path");
        } else if w.starts_with("--web.config.file=") {
        } else {
            out.push(w.clone());
        }
    }
    assert_eq!(listens, 1, "one --listen in {args:?}");
    assert_eq!(out[0], "run", "{args:?}");
    out
}

/// Stage label values a PromQL expression or sample line names
/// (`stage="x"`, `stage=~"x|y"`).
fn stages_in(text: &str) -> BTreeSet<String> {
    text.split("stage=")
        .skip(1)
        .filter_map(|rest| {
            let rest = rest.strip_prefix('~').unwrap_or(rest);
            rest.strip_prefix('"')?.split('"').next()
        })
        .flat_map(|v| v.split('|').map(str::to_string))
        .collect()
}

/// The latency stages an exposition carries.
fn exported_stages(metrics: &str) -> BTreeSet<String> {
    metrics
        .lines()
        .filter(|l| l.starts_with("iowarden_io_latency_seconds_count{"))
        .flat_map(stages_in)
        .collect()
}

/// The option a query's data needs that this daemon was not given, if any.
fn needed_option(
    expr: &str,
    exported: &HashSet<String>,
    stages: &BTreeSet<String>,
) -> Option<&'static str> {
    let named = stages_in(expr);
    if !named.is_empty() && named.is_disjoint(stages) {
        return Some(STAGES_OPTION);
    }
    metrics_in(expr)
        .iter()
        .filter(|m| !exported.contains(*m))
        .find_map(|m| {
            OPTION_OF_FAMILY
                .iter()
                .find(|(family, _)| m.starts_with(family))
                .map(|(_, option)| *option)
        })
}

/// A load like dashboards.rs's: a 64k writer (the noisy neighbour) and a 4k
/// reader (its victim) on one loop device.
struct Workload {
    _load: Load,
    victim: Cgroup,
    noisy: Cgroup,
    dev: LoopDev,
}

impl Workload {
    fn start() -> Workload {
        let dev = LoopDev::file(1024);
        let victim = Cgroup::new("iowarden-defaults-victim");
        let noisy = Cgroup::new("iowarden-defaults-noisy");
        let load = Load(vec![
            fio_until_killed(&victim, &dev.path, "randread", "4k", 2, "0"),
            fio_until_killed(&noisy, &dev.path, "randwrite", "64k", 16, "512M"),
        ]);
        Workload {
            _load: load,
            victim,
            noisy,
            dev,
        }
    }

    /// Waits (up to 40 s) until `prom` holds I/O of both cgroups.
    fn wait_seen_by(&self, prom: &PromServer) {
        let expr = format!(
            "count(rate(iowarden_io_requests_total{{cgroup=~\"{}|{}\"}}[5s]) > 0)",
            self.victim.rel, self.noisy.rel
        );
        prom.wait_for(&expr, 40, |n| n >= 2.0);
    }
}

/// What one Prometheus answered for every dashboard query.
#[derive(Default)]
struct Outcome {
    passed: usize,
    skipped: Vec<String>,
    failures: Vec<String>,
}

/// Runs every variable and panel query against `prom` and sorts the answers.
fn run_queries(
    prom: &PromServer,
    vars: &BTreeMap<&str, String>,
    exported: &HashSet<String>,
    stages: &BTreeSet<String>,
) -> Outcome {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let (start, end) = (format!("{:.3}", now - 15.0), format!("{now:.3}"));
    let planned_absent = |m: &str| planned_reason(m).filter(|_| !exported.contains(m));
    let mut out = Outcome::default();
    for d in dashboards() {
        for (name, q) in variable_queries(&d.json) {
            let q = substitute(&q, vars);
            let (selector, label) = q
                .strip_prefix("label_values(")
                .and_then(|s| s.strip_suffix(')'))
                .and_then(|s| s.rsplit_once(','))
                .unwrap();
            if metrics_in(selector)
                .iter()
                .any(|m| planned_absent(m).is_some())
            {
                continue;
            }
            let r = prom.api(
                &format!("/api/v1/label/{}/values", label.trim()),
                &[("match[]", selector.trim())],
            );
            match r["data"].as_array().filter(|v| !v.is_empty()) {
                Some(_) => out.passed += 1,
                None => out.failures.push(format!("{} / ${name}: {r}", d.file)),
            }
        }
        for q in queries(&d) {
            let name = format!("{} / {} ({})", q.dashboard, q.panel, q.ref_id);
            if let Some(why) = metrics_in(&q.expr).iter().find_map(|m| planned_absent(m)) {
                out.skipped.push(format!("{name}: {why}"));
                continue;
            }
            let expr = substitute(&q.expr, vars);
            let (resp, want) = if q.instant {
                (prom.instant(&expr), "vector")
            } else {
                let range = [
                    ("query", expr.as_str()),
                    ("start", &start),
                    ("end", &end),
                    ("step", "1"),
                ];
                (prom.api("/api/v1/query_range", &range), "matrix")
            };
            let Err(e) = check_result(&resp, want) else {
                out.passed += 1;
                continue;
            };
            match needed_option(&expr, exported, stages) {
                Some(opt) if q.panel.contains(&format!("(needs {opt}")) => out
                    .skipped
                    .push(format!("{name}: needs {opt}, as its title says")),
                Some(opt) => out.failures.push(format!(
                    "{name}: {e}; needs {opt}, which the panel's title does not say\n      {expr}"
                )),
                None => out.failures.push(format!("{name}: {e}\n      {expr}")),
            }
        }
    }
    out
}

/// "Who hurts whom", measured under the shipped flags: of the reader's
/// time on their loop device, the largest part is behind the writer.
fn assert_who_hurts_whom(prom: &PromServer, vars: &BTreeMap<&str, String>, w: &Workload) {
    let hurts = dashboards()
        .iter()
        .flat_map(queries)
        .find(|q| q.panel == "Who hurts whom" && q.ref_id == "A")
        .expect("who hurts whom");
    let r = prom.query(&substitute(&hurts.expr, vars));
    let value = |s: &serde_json::Value| {
        s["value"][1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let largest = r
        .iter()
        .filter(|s| {
            s["metric"]["victim"] == w.victim.rel.as_str()
                && s["metric"]["device"] == w.dev.name().as_str()
        })
        .max_by(|a, b| value(a).total_cmp(&value(b)))
        .and_then(|s| s["metric"]["culprit"].as_str());
    assert_eq!(
        largest,
        Some(w.noisy.rel.as_str()),
        "{}: who hurts whom: {r:?}",
        prom.url
    );
}

/// The whole chain under the shipped flags `args`, scraped both ways.
fn dashboards_show_data_under(shipped: &str, args: Vec<String>) {
    let port = free_port();
    let args = on_loopback(&args, port);
    println!("{shipped}: iowarden {}", args.join(" "));
    let work = Workload::start();
    let daemon = Daemon::start_exact(port, &args);
    let target = daemon.url.trim_start_matches("http://").to_string();
    let text = PromServer::start(free_port(), &scrape_config(&target), &[]);
    let native = PromServer::start(
        free_port(),
        &scrape_config(&target),
        &["--enable-feature=native-histograms"],
    );
    work.wait_seen_by(&text);
    work.wait_seen_by(&native);
    // The native server stores histograms, never buckets.
    assert!(native
        .query("iowarden_io_latency_seconds_bucket")
        .is_empty());
    // History for the range queries.
    std::thread::sleep(Duration::from_secs(8));

    let metrics = daemon.get("/metrics").expect("/metrics");
    let exported: HashSet<String> = exported_metrics(&metrics);
    let stages = exported_stages(&metrics);
    println!("{shipped}: latency stages exported {stages:?}");
    let vars: BTreeMap<&str, String> = [
        ("instance", ".*".to_string()),
        ("device", work.dev.name()),
        ("cgroup", ".*".to_string()),
        ("qid", ".*".to_string()),
        ("__rate_interval", "5s".to_string()),
        ("__interval", "1s".to_string()),
        ("__range", "30s".to_string()),
    ]
    .into_iter()
    .collect();

    let mut failures = Vec::new();
    for (form, prom) in [("text", &text), ("native", &native)] {
        let t0 = Instant::now();
        let out = run_queries(prom, &vars, &exported, &stages);
        for s in &out.skipped {
            println!("{shipped} {form}: skip {s}");
        }
        println!(
            "{shipped} {form}: {} queries passed, {} skipped, {} failed ({:.1} s)",
            out.passed,
            out.skipped.len(),
            out.failures.len(),
            t0.elapsed().as_secs_f64()
        );
        failures.extend(out.failures.iter().map(|f| format!("{form}: {f}")));
        // Skips are queries the shipped flags do not serve; all skipped
        // would check nothing.
        assert!(out.passed > 0, "{shipped} {form}: no dashboard query ran");
    }
    assert!(
        failures.is_empty(),
        "{shipped}: panels without data:\n  {}",
        failures.join("\n  ")
    );
    for prom in [&text, &native] {
        assert_who_hurts_whom(prom, &vars, &work);
    }
}

#[test]
fn shipped_flags_are_read_from_the_files() {
    for args in [systemd_args(), daemonset_args()] {
        let moved = on_loopback(&args, 1);
        let web_config = args
            .iter()
            .filter(|w| w.starts_with("--web.config.file="))
            .count();
        assert_eq!(moved.len() + web_config, args.len(), "{args:?}");
        assert!(moved.iter().any(|w| w.ends_with("127.0.0.1:1")));
    }
    assert_eq!(
        stages_in(r#"x{stage="total"} or y{a="b", stage=~"queue|device"}"#),
        BTreeSet::from(["total".into(), "queue".into(), "device".into()])
    );
    let exported = HashSet::from(["iowarden_io_requests_total".to_string()]);
    let total = BTreeSet::from(["total".to_string()]);
    let need = |e: &str| needed_option(e, &exported, &total);
    assert_eq!(need(r#"a{stage="queue"}"#), Some(STAGES_OPTION));
    assert_eq!(need(r#"a{stage=~"queue|total"}"#), None);
    assert_eq!(
        need("rate(iowarden_lock_wait_seconds_total[1m])"),
        Some("--locks")
    );
    assert_eq!(need("rate(iowarden_io_requests_total[1m])"), None);
}

#[test]
fn dashboards_show_data_under_the_systemd_units_flags() {
    dashboards_show_data_under("deploy/systemd/iowarden.service", systemd_args());
}

#[test]
fn dashboards_show_data_under_the_daemonsets_flags() {
    dashboards_show_data_under("deploy/kubernetes/iowarden.yaml", daemonset_args());
}
