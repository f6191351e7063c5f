//! The Grafana dashboards in dashboards/, checked two ways:
//! - as files: generated output up to date, parses, unique uids and panel
//!   ids, every datasource reference is the `$datasource` variable, every
//!   variable used is defined, provisioning files well-formed;
//! - against a real Prometheus scraping a running iowarden every second
//!   while fio runs in two cgroups on a loop device: every variable query and
//!   every panel query (variables substituted) must return a non-empty result
//!   of the expected type with at least one finite value, every metric they
//!   name must be in iowarden's /metrics, and the shipped rules must
//!   evaluate cleanly; every family that /metrics serves is in
//!   docs/metrics.md.
//!
//! Dashboards 2-4 (iocost, NVMe queues, tuner) query metrics this host
//! cannot produce (no iocost on cgroup v1, no NVMe). Their queries are
//! checked where those metrics exist; here they are skipped, by name, with
//! the reason printed.

use crate::fixtures;
use crate::panels;
use crate::promserver;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use fixtures::*;
use panels::*;
use promserver::{free_port, scrape_config, PromServer};
use serde_json::Value;

#[test]
fn metric_and_variable_extraction() {
    let e = r#"sum by (le) (rate(iowarden_io_latency_seconds_bucket{device=~"$device", x="iowarden_fake"}[$__rate_interval])) / on (instance) up{instance=~"${instance}"} + label_replace(v, "c", "$1", "cgroup", "(.*)")"#;
    assert_eq!(
        metrics_in(e).into_iter().collect::<Vec<_>>(),
        ["iowarden_io_latency_seconds_bucket", "up"]
    );
    assert_eq!(
        variables_used(e).into_iter().collect::<Vec<_>>(),
        ["__rate_interval", "device", "instance"]
    );
    assert!(metrics_in("iowarden:io_requests:rate5m").is_empty());
    let resp = |t: &str, r: Value| serde_json::json!({"status": "success", "data": {"resultType": t, "result": r}});
    assert!(check_result(&resp("vector", serde_json::json!([])), "vector").is_err());
    let one = serde_json::json!([{"metric": {}, "value": [1, "NaN"]}]);
    assert!(
        check_result(&resp("vector", one), "vector").is_err(),
        "all NaN"
    );
    let one = serde_json::json!([{"metric": {}, "value": [1, "0.5"]}]);
    assert!(
        check_result(&resp("matrix", one.clone()), "vector").is_err(),
        "wrong type"
    );
    assert_eq!(check_result(&resp("vector", one), "vector"), Ok(1));
    let h = |count: &str| serde_json::json!([{"metric": {}, "histograms": [[1, {"count": count, "sum": "0.1"}]]}]);
    assert_eq!(check_result(&resp("matrix", h("3")), "matrix"), Ok(1));
    assert!(
        check_result(&resp("matrix", h("0")), "matrix").is_err(),
        "an empty histogram"
    );
}

/// Everything that can be checked without a kernel or a Prometheus.
#[test]
fn dashboard_files_are_valid() {
    // The committed JSON is what the generator makes, run as `make dashboards` runs it:
    // with the tools venv's python, which has the pinned grafana-foundation-sdk.
    let tools = std::env::var("IOWARDEN_TOOLS").unwrap_or_else(|_| "/opt/iowarden-tools".into());
    let python = PathBuf::from(tools).join("bin/python");
    let out = Command::new(&python)
        .arg(repo().join("dashboards/generate.py"))
        .arg("--check")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (scripts/install-deps.sh --test installs it)",
                python.display()
            )
        });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let ds_ref = serde_json::json!({"type": "prometheus", "uid": "${datasource}"});
    let mut uids = HashSet::new();
    let mut problems = Vec::new();
    for d in dashboards() {
        let j = &d.json;
        let f = &d.file;
        let uid = j["uid"].as_str().unwrap_or("");
        if uid.is_empty() || uid.len() > 40 || !uids.insert(uid.to_string()) {
            problems.push(format!("{f}: uid '{uid}' empty, too long or not unique"));
        }
        if j["schemaVersion"].as_u64().unwrap_or(0) < 36 {
            problems.push(format!("{f}: schemaVersion below 36"));
        }
        if j["title"].as_str().unwrap_or("").is_empty() {
            problems.push(format!("{f}: no title"));
        }
        // Every datasource reference anywhere is the variable.
        fn walk(v: &Value, path: &str, ds_ref: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    for (k, x) in m {
                        let p = format!("{path}.{k}");
                        if k == "datasource" && x != ds_ref {
                            out.push(format!("{p} = {x} is not the $datasource variable"));
                        }
                        walk(x, &p, ds_ref, out);
                    }
                }
                Value::Array(a) => {
                    for (i, x) in a.iter().enumerate() {
                        walk(x, &format!("{path}[{i}]"), ds_ref, out);
                    }
                }
                _ => {}
            }
        }
        let mut bad = Vec::new();
        walk(j, f, &ds_ref, &mut bad);
        problems.extend(bad);

        let vars: Vec<&Value> = j["templating"]["list"].as_array().unwrap().iter().collect();
        let names: HashSet<&str> = vars.iter().map(|v| v["name"].as_str().unwrap()).collect();
        if !vars.iter().any(|v| {
            v["name"] == "datasource" && v["type"] == "datasource" && v["query"] == "prometheus"
        }) {
            problems.push(format!("{f}: no $datasource variable of type datasource"));
        }
        if f != "iowarden-self.json" {
            for want in ["device", "cgroup"] {
                if !names.contains(want) {
                    problems.push(format!("{f}: no ${want} variable"));
                }
            }
        }
        for (name, q) in variable_queries(j) {
            if !q.starts_with("label_values(") {
                problems.push(format!(
                    "{f}: variable {name} is not a label_values query: {q}"
                ));
            }
        }

        let mut ids = HashSet::new();
        for p in panels(j) {
            let title = p["title"].as_str().unwrap_or("");
            let id = p["id"].as_u64();
            if id.is_none() || !ids.insert(id) {
                problems.push(format!(
                    "{f}: panel '{title}' id {id:?} missing or duplicate"
                ));
            }
            let g = &p["gridPos"];
            let (x, w) = (g["x"].as_u64().unwrap_or(99), g["w"].as_u64().unwrap_or(99));
            if x + w > 24 || g["h"].as_u64().unwrap_or(0) == 0 {
                problems.push(format!("{f}: panel '{title}' gridPos {g}"));
            }
            if p["type"] == "row" {
                continue;
            }
            if title.is_empty() || p["description"].as_str().unwrap_or("").is_empty() {
                problems.push(format!("{f}: panel {id:?} needs a title and a description"));
            }
            let targets = p["targets"].as_array().cloned().unwrap_or_default();
            if targets.is_empty() {
                problems.push(format!("{f}: panel '{title}' has no query"));
            }
            let mut refs = HashSet::new();
            for t in &targets {
                let expr = t["expr"].as_str().unwrap_or("");
                if expr.trim().is_empty() || !refs.insert(t["refId"].as_str().unwrap_or("")) {
                    problems.push(format!(
                        "{f}: panel '{title}' has an empty query or duplicate refId"
                    ));
                }
                for v in variables_used(expr) {
                    if !names.contains(v.as_str()) && !BUILTIN_VARS.contains(&v.as_str()) {
                        problems.push(format!("{f}: panel '{title}' uses undefined ${v}"));
                    }
                }
                if metrics_in(expr).is_empty() {
                    problems.push(format!("{f}: panel '{title}' queries no metric"));
                }
            }
        }
    }

    // Provisioning: a Prometheus datasource and a file provider.
    let prov = repo().join("dashboards/provisioning");
    let ds = yaml_docs(&prov.join("datasources/iowarden.yaml"));
    let d0 = &ds[0]["datasources"][0];
    assert_eq!(ds[0]["apiVersion"], 1);
    assert_eq!(d0["type"], "prometheus", "{d0}");
    assert!(d0["url"].as_str().unwrap().starts_with("http"));
    let dp = yaml_docs(&prov.join("dashboards/iowarden.yaml"));
    let p0 = &dp[0]["providers"][0];
    assert_eq!(dp[0]["apiVersion"], 1);
    assert_eq!(p0["type"], "file", "{p0}");
    assert!(p0["options"]["path"].as_str().unwrap().starts_with('/'));

    assert!(
        problems.is_empty(),
        "dashboard problems:\n{}",
        problems.join("\n")
    );
}

/// A Prometheus scraping `target` every second and evaluating `rules`.
fn prometheus(target: &str, rules: &std::path::Path) -> PromServer {
    let config = format!(
        "{}rule_files:\n  - {}\n",
        scrape_config(target),
        rules.display()
    );
    PromServer::start(free_port(), &config, &[])
}

/// Parent directories of a nested test cgroup, removed deepest first on drop
/// (after the leaf [`Cgroup`], which must be declared after this).
struct CgroupParents(Vec<PathBuf>);

impl Drop for CgroupParents {
    fn drop(&mut self) {
        for d in self.0.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

const POD_UID: &str = "3f1c2e4a-5b6d-4e7f-8a9b-0c1d2e3f4a5b";
const CONTAINER_ID: &str = "8e7d3c6f1b2a4d5e9f0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6";

/// A cgroup shaped like a Kubernetes container under the systemd driver
/// (with a kubelet --cgroup-root prefix, so it cannot collide with a real
/// kubepods.slice): container attribution is checked on a real path.
fn pod_container_cgroup() -> (CgroupParents, Cgroup) {
    let (root, _) = io_root();
    let uid_ = POD_UID.replace('-', "_");
    let rel = format!(
        "iowarden-dash-kubepods.slice/iowarden-dash-kubepods-burstable.slice/\
         iowarden-dash-kubepods-burstable-pod{uid_}.slice/cri-containerd-{CONTAINER_ID}.scope"
    );
    let comps: Vec<&str> = rel.split('/').collect();
    let mut parents = Vec::new();
    let mut dir = root.clone();
    for c in &comps[..comps.len() - 1] {
        dir = dir.join(c);
        let _ = std::fs::create_dir(&dir);
        parents.push(dir.clone());
    }
    let leaf = dir.join(comps[comps.len() - 1]);
    let _ = std::fs::remove_dir(&leaf);
    std::fs::create_dir(&leaf).unwrap();
    (
        CgroupParents(parents),
        Cgroup {
            dir: leaf,
            rel: format!("/{rel}"),
        },
    )
}

/// The whole chain on the real kernel: iowarden -> Prometheus -> every
/// dashboard query, rule and variable.
#[test]
fn dashboards_query_a_real_prometheus() {
    let t_start = Instant::now();
    let dev = LoopDev::file(1024);
    let a = Cgroup::new("iowarden-dash-a");
    let (_parents, b) = pod_container_cgroup();
    let pod_map = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        pod_map.path(),
        format!(r#"{{"pods": {{"{POD_UID}": {{"namespace": "shop", "name": "db-0"}}}}, "containers": {{"{CONTAINER_ID}": "postgres"}}}}"#),
    )
    .unwrap();
    let daemon = Daemon::start(
        free_port(),
        &[
            "--device",
            &dev.name(),
            "--bpf-stats",
            "--locks",
            // The per-stage panels (queue, device) need all three histograms;
            // the own limits' part the throttle counter (the shipped flags'
            // fallback, io.max's hold or 0: tests/defaults.rs).
            "--histogram-stages",
            "all",
            "--io-counters",
            "all",
            "--pod-map",
            pod_map.path().to_str().unwrap(),
        ],
    );
    let rules = repo().join("deploy/prometheus/rules/iowarden.rules.yml");
    let target = daemon.url.trim_start_matches("http://").to_string();
    let prom = prometheus(&target, &rules);

    // The noisy neighbour (64k writes at depth 16, in the "pod") and its victim (4k reads at depth 2).
    let _load = Load(vec![
        fio_until_killed(&a, &dev.path, "randread", "4k", 2, "0"),
        fio_until_killed(&b, &dev.path, "randwrite", "64k", 16, "512M"),
    ]);

    // Data from both cgroups, then enough history for the range queries.
    let mut r = Value::Null;
    poll_until(Duration::from_secs(40), Duration::from_millis(500), || {
        r = prom.instant(&format!(
            "count(rate(iowarden_io_device_seconds_total{{cgroup=~\"{}|{}\"}}[5s]) > 0)",
            a.rel, b.rel
        ));
        let n = r["data"]["result"][0]["value"][1]
            .as_str()
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(0.0);
        (n >= 2.0).then_some(())
    })
    .unwrap_or_else(|| panic!("no I/O of both cgroups in Prometheus after 40 s: {r}"));
    std::thread::sleep(Duration::from_secs(8));

    let metrics = daemon.get("/metrics").expect("/metrics");
    // The live scrape passes promtool's lint.
    assert_promtool_accepts(&metrics);
    let exported = exported_metrics(&metrics);
    // Every family this daemon serves is in the generated reference.
    let reference = std::fs::read_to_string(repo().join("docs/metrics.md")).unwrap();
    let undocumented: Vec<&str> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next())
        .filter(|name| !reference.contains(&format!("`{name}")))
        .collect();
    assert!(
        undocumented.is_empty(),
        "served but not in docs/metrics.md: {undocumented:?}"
    );

    // Variables as a user picking this device and "All" elsewhere would set them.
    let vars: BTreeMap<&str, String> = [
        ("instance", ".*".to_string()),
        ("device", dev.name()),
        ("cgroup", ".*".to_string()),
        ("qid", ".*".to_string()),
        // Grafana's $__rate_interval at a 1 s scrape is 4 s; a little more for slack.
        ("__rate_interval", "5s".to_string()),
        ("__interval", "1s".to_string()),
        ("__range", "30s".to_string()),
    ]
    .into_iter()
    .collect();

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let (start, end) = (format!("{:.3}", now - 15.0), format!("{now:.3}"));
    let mut failures = Vec::new();
    let mut skipped = Vec::new();
    let mut passed = 0;
    let mut missing_metrics = BTreeMap::new();
    let mut planned_seen = BTreeSet::new();
    let planned_absent = |m: &str| planned_reason(m).filter(|_| !exported.contains(m));

    for d in dashboards() {
        let title = d.json["title"].as_str().unwrap().to_string();
        // Variable queries: label_values(selector, label) through the label values API.
        for (name, q) in variable_queries(&d.json) {
            let q = substitute(&q, &vars);
            let inner = q
                .strip_prefix("label_values(")
                .and_then(|s| s.strip_suffix(')'))
                .unwrap();
            let (selector, label) = inner.rsplit_once(',').unwrap();
            let ms = metrics_in(selector);
            if let Some(why) = ms.iter().find_map(|m| planned_absent(m)) {
                skipped.push(format!("{title} / variable ${name}: {why}"));
                continue;
            }
            let r = prom.api(
                &format!("/api/v1/label/{}/values", label.trim()),
                &[("match[]", selector.trim())],
            );
            let values: Vec<&str> = r["data"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let expect: Vec<String> = match name.as_str() {
                "device" => vec![dev.name()],
                "cgroup" => vec![a.rel.clone(), b.rel.clone()],
                _ => vec![],
            };
            if values.is_empty() || !expect.iter().all(|e| values.contains(&e.as_str())) {
                failures.push(format!(
                    "{title} / variable ${name}: {values:?} (want {expect:?})"
                ));
            } else {
                passed += 1;
            }
        }
        for q in queries(&d) {
            let name = format!("{} / {} ({})", q.dashboard, q.panel, q.ref_id);
            let ms = metrics_in(&q.expr);
            for m in &ms {
                if !exported.contains(m) && !PROMETHEUS_SERIES.contains(&m.as_str()) {
                    match planned_reason(m) {
                        Some(_) => {
                            planned_seen.insert(m.clone());
                        }
                        None => {
                            missing_metrics.insert(m.clone(), name.clone());
                        }
                    }
                }
            }
            // A planned metric absent here skips the query only if it then
            // has no data: one in an `or` alternative leaves the others.
            let absent = ms.iter().find_map(|m| planned_absent(m));
            let expr = substitute(&q.expr, &vars);
            if !variables_used(&expr).is_empty() {
                failures.push(format!("{name}: unsubstituted variable in {expr}"));
                continue;
            }
            let (resp, want) = if q.instant {
                (prom.instant(&expr), "vector")
            } else {
                (
                    prom.api(
                        "/api/v1/query_range",
                        &[
                            ("query", &expr),
                            ("start", &start),
                            ("end", &end),
                            ("step", "1"),
                        ],
                    ),
                    "matrix",
                )
            };
            match (check_result(&resp, want), absent) {
                (Ok(n), _) => {
                    passed += 1;
                    println!("pass  {name}: {n} series");
                }
                (Err(_), Some(why)) => skipped.push(format!("{name}: {why}")),
                (Err(e), None) => failures.push(format!("{name}: {e}\n      {expr}")),
            }
        }
    }

    // The shipped rules evaluate without error against live data, and the
    // recording rules produce series.
    let rules_resp = prom.api("/api/v1/rules", &[]);
    for g in rules_resp["data"]["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            let name = r["name"].as_str().unwrap();
            if r["health"] == "err" {
                failures.push(format!("rule {name}: {}", r["lastError"]));
            }
            for m in metrics_in(r["query"].as_str().unwrap()) {
                if !exported.contains(&m) && !PROMETHEUS_SERIES.contains(&m.as_str()) {
                    if planned_reason(&m).is_some() {
                        planned_seen.insert(m);
                    } else {
                        missing_metrics.insert(m, format!("rule {name}"));
                    }
                }
            }
            if r["type"] == "recording" {
                match check_result(&prom.instant(name), "vector") {
                    Ok(_) => passed += 1,
                    Err(e) => failures.push(format!("recording rule {name}: {e}")),
                }
            }
        }
    }

    // The inferred "who hurts whom" table names the 64k writer as the
    // culprit and the 4k reader as its victim.
    let d = dashboards();
    let hurts = d
        .iter()
        .flat_map(queries)
        .find(|q| q.panel == "Who hurts whom, inferred from device-time shares" && q.ref_id == "A")
        .expect("who hurts whom, inferred");
    let r = prom.instant(&substitute(&hurts.expr, &vars));
    let rows: Vec<(String, String)> = r["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let m = &s["metric"];
            (
                m["cgroup"].as_str().unwrap_or("").to_string(),
                m["culprit"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![(a.rel.clone(), b.rel.clone())],
        "who hurts whom: {r}"
    );

    // The measured one: of the 4k reader's device time, the largest part
    // is behind the 64k writer.
    let measured = d
        .iter()
        .flat_map(queries)
        .find(|q| q.panel == "Who hurts whom" && q.ref_id == "A")
        .expect("who hurts whom");
    let r = prom.instant(&substitute(&measured.expr, &vars));
    let largest = r["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["metric"]["victim"] == a.rel.as_str())
        .max_by(|x, y| {
            let v = |s: &&Value| s["value"][1].as_str().unwrap().parse::<f64>().unwrap();
            v(x).total_cmp(&v(y))
        })
        .map(|s| s["metric"]["culprit"].as_str().unwrap_or("").to_string());
    assert_eq!(
        largest,
        Some(b.rel.clone()),
        "who hurts whom, measured: {r}"
    );

    // The pod's cgroup is attributed from its path, names from --pod-map.
    let info = prom.instant(&format!("iowarden_cgroup_info{{cgroup=\"{}\"}}", b.rel));
    let m = &info["data"]["result"][0]["metric"];
    for (k, v) in [
        ("kind", "pod"),
        ("pod_uid", POD_UID),
        ("qos_class", "burstable"),
        ("container_id", CONTAINER_ID),
        ("runtime", "containerd"),
        ("namespace", "shop"),
        ("pod", "db-0"),
        ("container", "postgres"),
    ] {
        assert_eq!(m[k], v, "iowarden_cgroup_info label {k}: {info}");
    }

    for s in &skipped {
        println!("skip  {s}");
    }
    println!(
        "planned metrics referenced but not exported here: {}",
        planned_seen.into_iter().collect::<Vec<_>>().join(", ")
    );
    println!(
        "{passed} queries passed, {} skipped, {} failed in {:.1} s",
        skipped.len(),
        failures.len(),
        t_start.elapsed().as_secs_f64()
    );
    assert!(
        missing_metrics.is_empty(),
        "metrics referenced but not in iowarden's /metrics (and not planned): {missing_metrics:?}"
    );
    assert!(
        failures.is_empty(),
        "failing panels:\n  {}",
        failures.join("\n  ")
    );
    let noisy = skipped
        .iter()
        .filter(|s| {
            s.starts_with("iowarden / Noisy") || s.starts_with("iowarden / iowarden itself")
        })
        .count();
    assert_eq!(noisy, 0, "host dashboards must not skip: {skipped:?}");
}
