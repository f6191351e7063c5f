//! The fleet path on real servers: two Prometheus agents run the shipped
//! deploy/prometheus/remote-write.yml (its endpoint, credentials and
//! intervals swapped for loopback test values), scrape one iowarden while
//! fio runs in a cgroup, and remote-write to a third Prometheus started as
//! a receiver with the shipped rules. Agent "node-a" has native histograms
//! on (protobuf scrape), agent "node-b" not (text scrape). On the receiver,
//! the dashboards' latency and throughput queries and the per-node and
//! per-cluster recording rules must return data from both.
//! Needs root (BPF, loop devices, cgroups); run under the kernel lock.

mod fixtures;
mod promserver;

use std::collections::BTreeSet;

use fixtures::*;
use promserver::PromServer;
use serde_json::Value;

const DAEMON: u16 = 19651;
const RECEIVER: u16 = 19652;

/// The shipped agent config pointed at `target` and the receiver, as node `node`.
fn agent_config(target: &str, node: &str) -> String {
    let shipped =
        std::fs::read_to_string(repo().join("deploy/prometheus/remote-write.yml")).unwrap();
    let mut out = String::new();
    let mut skip_auth = false;
    for line in shipped.lines() {
        // The test receiver takes no credentials: drop the basic_auth block.
        if line.trim_start() == "basic_auth:" {
            skip_auth = true;
            continue;
        }
        if skip_auth && line.starts_with("      ") {
            continue;
        }
        skip_auth = false;
        out.push_str(line);
        out.push('\n');
    }
    let replaced = out
        .replace("scrape_interval: 5s", "scrape_interval: 1s")
        .replace("batch_send_deadline: 5s", "batch_send_deadline: 1s")
        .replace("node: node-a", &format!("node: {node}"))
        .replace("127.0.0.1:9617", target)
        .replace(
            "https://metrics.example.internal/api/v1/write",
            &format!("http://127.0.0.1:{RECEIVER}/api/v1/write"),
        );
    for (what, want) in [
        ("target", target),
        ("receiver", &format!(":{RECEIVER}/api/v1/write")),
        ("node", &format!("node: {node}")),
        (
            "native histograms forwarded",
            "send_native_histograms: true",
        ),
    ] {
        assert!(
            replaced.contains(want),
            "remote-write.yml changed shape: no {what}"
        );
    }
    replaced
}

fn receiver_config() -> String {
    format!(
        "global:\n  evaluation_interval: 1s\nrule_files:\n  - {}\n",
        repo()
            .join("deploy/prometheus/rules/iowarden.rules.yml")
            .display()
    )
}

/// A panel's first query from the committed dashboards, by dashboard file and panel title.
fn panel_query(file: &str, title: &str) -> String {
    let d: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("dashboards").join(file)).unwrap(),
    )
    .unwrap();
    let mut panels: Vec<&Value> = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        panels.push(p);
        panels.extend(p["panels"].as_array().into_iter().flatten());
    }
    let p = panels
        .into_iter()
        .find(|p| p["title"] == title)
        .unwrap_or_else(|| panic!("{file}: no panel {title}"));
    p["targets"][0]["expr"].as_str().unwrap().to_string()
}

fn substitute(expr: &str, device: &str) -> String {
    expr.replace("$__rate_interval", "2m")
        .replace("$instance", ".*")
        .replace("$device", device)
        .replace("$cgroup", ".*")
}

/// Values of `label` over an instant query's result.
fn label_values(result: &[Value], label: &str) -> BTreeSet<String> {
    result
        .iter()
        .filter(|s| {
            s["value"][1]
                .as_str()
                .and_then(|v| v.parse::<f64>().ok())
                .is_some_and(f64::is_finite)
        })
        .filter_map(|s| s["metric"][label].as_str().map(str::to_string))
        .collect()
}

#[test]
fn remote_write_carries_classic_and_native_to_a_real_receiver() {
    let dev = LoopDev::file(512);
    let cg = Cgroup::new("iowarden-fleet-a");
    let _daemon = Daemon::start(DAEMON, &["--device", &dev.name()]);
    let receiver = PromServer::start(
        RECEIVER,
        &receiver_config(),
        &[
            "--web.enable-remote-write-receiver",
            "--enable-feature=native-histograms",
        ],
    );
    // Two instance names for the one daemon, so the two forms stay apart.
    let native_target = format!("127.0.0.1:{DAEMON}");
    let classic_target = format!("localhost:{DAEMON}");
    let _agent_a = PromServer::start(
        19653,
        &agent_config(&native_target, "node-a"),
        &["--enable-feature=agent,native-histograms"],
    );
    let _agent_b = PromServer::start(
        19654,
        &agent_config(&classic_target, "node-b"),
        &["--enable-feature=agent"],
    );

    // Load for ~8 s, so the rate windows hold increases.
    let mut args = fio_args(&dev.path, "randread", "4k", 4, 1_000_000, "0", "256M");
    args.extend(["--time_based".into(), "--runtime=8".into()]);
    let out = cg.command("fio", &args).output().expect("fio");
    assert!(out.status.success(), "fio failed");

    let sel = format!("cgroup=\"{}\", device=\"{}\"", cg.rel, dev.name());
    // Both forms arrived, with the same counts once the daemon's stay put.
    let native_n = receiver.wait_for(
        &format!("sum(histogram_count(iowarden_io_latency_seconds{{{sel}, node=\"node-a\", stage=\"total\"}}))"),
        40,
        |v| v > 0.0,
    );
    let classic_n = receiver.wait_for(
        &format!(
            "sum(iowarden_io_latency_seconds_count{{{sel}, node=\"node-b\", stage=\"total\"}})"
        ),
        40,
        |v| v > 0.0,
    );
    let reqs = format!("sum by (node) (iowarden_io_requests_total{{{sel}}})");
    let t0 = std::time::Instant::now();
    loop {
        let r = receiver.query(&reqs);
        let a = receiver.scalar(&format!(
            "sum(histogram_count(iowarden_io_latency_seconds{{{sel}, node=\"node-a\", stage=\"total\"}}))"
        ));
        let b = receiver.scalar(&format!(
            "sum(iowarden_io_latency_seconds_count{{{sel}, node=\"node-b\", stage=\"total\"}})"
        ));
        if r.len() == 2 && a.is_some() && a == b {
            println!("receiver: {r:?}; latency count native {a:?} = classic {b:?} (first seen {native_n}, {classic_n})");
            break;
        }
        assert!(
            t0.elapsed().as_secs() < 30,
            "receiver never held equal counts from both nodes: {r:?} native {a:?} classic {b:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    assert!(receiver
        .query("iowarden_io_latency_seconds_bucket{node=\"node-a\"}")
        .is_empty());

    // The dashboards' queries, both instances (one per form) answered.
    let instances = BTreeSet::from([native_target.clone(), classic_target.clone()]);
    for (file, title) in [
        ("iowarden-noisy-neighbour.json", "p99 latency by cgroup"),
        ("iowarden-noisy-neighbour.json", "Mean latency by cgroup"),
        ("iowarden-noisy-neighbour.json", "IOPS by cgroup"),
        (
            "iowarden-noisy-neighbour.json",
            "Device-time share by cgroup",
        ),
        ("iowarden-tuner.json", "p99 latency by cgroup (measured)"),
    ] {
        let expr = substitute(&panel_query(file, title), &dev.name());
        // Evaluated a little after the load, inside its rate window.
        let r = receiver.query(&expr);
        let got = label_values(&r, "instance");
        assert_eq!(got, instances, "{file} / {title}: {expr}\n{r:?}");
        println!("dashboard {title}: {} series", r.len());
    }

    // Recording rules: per node (each form), per cluster.
    let nodes = BTreeSet::from(["node-a".to_string(), "node-b".to_string()]);
    for rule in [
        "node:iowarden_io_latency_seconds:p99_5m",
        "node:iowarden_io_requests:rate5m",
        "node:iowarden_io_device_seconds:rate5m",
    ] {
        let r = receiver.query(rule);
        assert_eq!(label_values(&r, "node"), nodes, "{rule}: {r:?}");
    }
    for rule in [
        "cluster:iowarden_io_latency_seconds:p99_5m",
        "cluster:iowarden_io_requests:rate5m",
    ] {
        let v = receiver.scalar(rule);
        assert!(v.is_some_and(|v| v.is_finite() && v > 0.0), "{rule}: {v:?}");
        println!("{rule} = {v:?}");
    }
    let p99 = receiver.query("node:iowarden_io_latency_seconds:p99_5m");
    println!("per-node p99: {p99:?}");
}
