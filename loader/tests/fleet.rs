//! The fleet path on real servers: two Prometheus agents run the shipped
//! deploy/prometheus/remote-write.yml (its endpoint, credentials and
//! intervals swapped for loopback test values), each scraping its own
//! iowarden while fio reads in a cgroup, and remote-write to a third
//! Prometheus started as a receiver with the shipped rules. Agent "node-a"
//! has native histograms on (protobuf scrape), agent "node-b" not (text
//! scrape). node-a's device is slow (its reads wait on a throttled loop
//! device underneath), node-b's fast: the cluster p99 must be node-a's, which
//! a rule that lets the classic node hide the native one gets wrong. On the
//! receiver, the dashboards' latency and throughput queries and the per-node
//! and per-cluster recording rules must return data from both.
//! Needs root (BPF, loop devices, cgroups).

use crate::fixtures;
use crate::promserver;

use std::collections::{BTreeMap, BTreeSet};

use fixtures::*;
use promserver::{free_port, PromServer};
use serde_json::Value;

/// The shipped agent config pointed at `target` and the receiver, as node `node`.
fn agent_config(target: &str, node: &str, receiver: &str) -> String {
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
            &format!("{receiver}/api/v1/write"),
        );
    for (what, want) in [
        ("target", target),
        ("receiver", &format!("{receiver}/api/v1/write")),
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

/// Reads of the cgroup `cg` from device `dev` limited to `iops` a second,
/// by the io controller of whichever hierarchy it is bound to.
fn throttle_reads(cg: &Cgroup, dev: &LoopDev, iops: u32) {
    let (_, v2) = io_root();
    if v2 {
        cg.write("io.max", &format!("{} riops={iops}", dev.majmin()));
    } else {
        cg.write(
            "blkio.throttle.read_iops_device",
            &format!("{} {iops}", dev.majmin()),
        );
    }
}

/// One node: a daemon tracing only `traced`, and a cgroup reading from it.
/// Fields drop in order: the daemon, the cgroup, then the devices, a
/// stacked loop device before the one under it.
struct Node {
    daemon: Daemon,
    cg: Cgroup,
    traced: LoopDev,
    _under: Option<LoopDev>,
}

impl Node {
    /// A loop device over a plain file.
    fn fast(cgroup: &str) -> Node {
        let traced = LoopDev::file(512);
        let daemon = Daemon::start(free_port(), &["--device", &traced.name()]);
        Node {
            daemon,
            cg: Cgroup::new(cgroup),
            traced,
            _under: None,
        }
    }

    /// A loop device stacked on another whose reads are throttled for the
    /// cgroup (the loop worker submits in the cgroup of the request): the
    /// traced device's requests wait for the throttle, so its latency is
    /// the throttle's, whatever else the machine does.
    fn slow(cgroup: &str) -> Node {
        let under = LoopDev::file(512);
        let traced = LoopDev::over(&under);
        let cg = Cgroup::new(cgroup);
        throttle_reads(&cg, &under, 200);
        let daemon = Daemon::start(free_port(), &["--device", &traced.name()]);
        Node {
            daemon,
            cg,
            traced,
            _under: Some(under),
        }
    }

    fn target(&self) -> String {
        self.daemon.url.trim_start_matches("http://").to_string()
    }

    /// fio reading 4 KiB blocks at `depth` for 8 s (the rate windows hold it).
    fn read_load(&self, depth: u32) -> std::process::Child {
        let mut args = fio_args(
            &self.traced.path,
            "randread",
            "4k",
            depth,
            1_000_000,
            "0",
            "256M",
        );
        args.extend(["--time_based".into(), "--runtime=8".into()]);
        self.cg
            .command("fio", &args)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("fio")
    }

    fn selector(&self) -> String {
        format!(
            "cgroup=\"{}\", device=\"{}\"",
            self.cg.rel,
            self.traced.name()
        )
    }
}

/// Per-node values of an instant query, by `node` label.
fn by_node(receiver: &PromServer, expr: &str) -> BTreeMap<String, f64> {
    receiver
        .query(expr)
        .iter()
        .filter_map(|s| {
            let node = s["metric"]["node"].as_str()?.to_string();
            let v: f64 = s["value"][1].as_str()?.parse().ok()?;
            Some((node, v))
        })
        .collect()
}

#[test]
fn remote_write_carries_classic_and_native_to_a_real_receiver() {
    // node-a (native) slow, node-b (classic) fast.
    let a = Node::slow("iowarden-fleet-a");
    let b = Node::fast("iowarden-fleet-b");
    let receiver = PromServer::start(
        free_port(),
        &receiver_config(),
        &[
            "--web.enable-remote-write-receiver",
            "--enable-feature=native-histograms",
        ],
    );
    let _agent_a = PromServer::start(
        free_port(),
        &agent_config(&a.target(), "node-a", &receiver.url),
        &["--enable-feature=agent,native-histograms"],
    );
    let _agent_b = PromServer::start(
        free_port(),
        &agent_config(&b.target(), "node-b", &receiver.url),
        &["--enable-feature=agent"],
    );

    let loads = [a.read_load(4), b.read_load(1)];
    for mut fio in loads {
        assert!(fio.wait().expect("fio").success(), "fio failed");
    }

    // Both forms arrived: node-a's as native histograms only.
    let (sa, sb) = (a.selector(), b.selector());
    let native_n = receiver.wait_for(
        &format!("sum(histogram_count(iowarden_io_latency_seconds{{{sa}, node=\"node-a\", stage=\"total\"}}))"),
        40,
        |v| v > 0.0,
    );
    let classic_n = receiver.wait_for(
        &format!(
            "sum(iowarden_io_latency_seconds_count{{{sb}, node=\"node-b\", stage=\"total\"}})"
        ),
        40,
        |v| v > 0.0,
    );
    println!("latency counts: native node-a {native_n}, classic node-b {classic_n}");
    assert!(receiver
        .query("iowarden_io_latency_seconds_bucket{node=\"node-a\"}")
        .is_empty());

    // The dashboards' queries, both instances (one per node and form) answered.
    let instances = BTreeSet::from([a.target(), b.target()]);
    let devices = format!("{}|{}", a.traced.name(), b.traced.name());
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
        let expr = substitute(&panel_query(file, title), &devices);
        // Evaluated a little after the load, inside its rate window.
        let r = receiver.query(&expr);
        let got = label_values(&r, "instance");
        assert_eq!(got, instances, "{file} / {title}: {expr}\n{r:?}");
        println!("dashboard {title}: {} series", r.len());
    }

    // Recording rules: per node (each form).
    let nodes = BTreeSet::from(["node-a".to_string(), "node-b".to_string()]);
    for rule in [
        "node:iowarden_io_latency_seconds:p99_5m",
        "node:iowarden_io_requests:rate5m",
        "node:iowarden_io_device_seconds:rate5m",
    ] {
        let r = receiver.query(rule);
        assert_eq!(label_values(&r, "node"), nodes, "{rule}: {r:?}");
    }
    let requests = receiver.wait_for("cluster:iowarden_io_requests:rate5m", 20, |v| v > 0.0);
    println!("cluster:iowarden_io_requests:rate5m = {requests}");

    // The cluster p99 follows the slow native node, not the fast classic
    // one. Rules commit one by one: poll until one read holds the cluster
    // and both nodes of the same evaluation.
    let all = "label_replace(cluster:iowarden_io_latency_seconds:p99_5m, \"node\", \"cluster\", \"\", \"\") \
               or node:iowarden_io_latency_seconds:p99_5m";
    let mut last = BTreeMap::new();
    let p99 = poll_until(
        std::time::Duration::from_secs(20),
        std::time::Duration::from_millis(500),
        || {
            let p99 = by_node(&receiver, all);
            let worst = p99
                .iter()
                .filter(|(n, _)| n.starts_with("node-"))
                .map(|(_, v)| *v)
                .fold(f64::NAN, f64::max);
            if p99.len() == 3 && p99["cluster"] == worst {
                return Some(p99);
            }
            last = p99;
            None
        },
    )
    .unwrap_or_else(|| panic!("the cluster p99 is not the worst node's p99: {last:?}"));
    println!("p99 seconds: {p99:?}");
    let (slow, fast, cluster) = (p99["node-a"], p99["node-b"], p99["cluster"]);
    assert!(
        slow > 10.0 * fast,
        "the throttled node's p99 {slow} s is not clearly above the other's {fast} s"
    );
    assert_eq!(
        cluster, slow,
        "cluster p99 {cluster} s does not follow the slow native node ({slow} s; classic node {fast} s)"
    );
}
