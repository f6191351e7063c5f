//! Native histograms against real Prometheus 2.42 servers: one with
//! --enable-feature=native-histograms (it asks for the protobuf exposition)
//! and one without (it gets OpenMetrics text), both scraping the same
//! iowarden while fio reads from a loop device in a cgroup. The quantiles
//! each computes with histogram_quantile must agree within one bucket.
//! Needs root (BPF, loop devices, cgroups).

use crate::fixtures;
use crate::promserver;

use fixtures::*;
use promserver::{scrape_config, PromServer};

const PROMETHEUS_NATIVE_ACCEPT: &str = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// GET /metrics with an Accept header: (content type, body).
fn scrape(url: &str, accept: &str) -> (String, Vec<u8>) {
    let resp = ureq::get(&format!("{url}/metrics"))
        .header("Accept", accept)
        .call()
        .expect("/metrics");
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = resp.into_body().read_to_vec().unwrap();
    (ct, body)
}

/// [lower, upper) of the classic power-of-two bucket holding `v` seconds.
fn pow2_bucket(v: f64) -> (f64, f64) {
    let us = v * 1e6;
    let lo = 2f64.powf(us.log2().floor());
    (lo / 1e6, 2.0 * lo / 1e6)
}

#[test]
fn native_and_classic_quantiles_agree_on_real_prometheus() {
    let dev = LoopDev::file(512);
    let cg = Cgroup::new("iowarden-native-a");
    let daemon = Daemon::start(
        19601,
        &[
            "--device",
            &dev.name(),
            "--histogram-stages",
            "all",
            "--classic-buckets",
            "pow2",
        ],
    );
    let target = daemon.url.trim_start_matches("http://").to_string();
    let native = PromServer::start(
        19611,
        &scrape_config(&target),
        &["--enable-feature=native-histograms"],
    );
    let classic = PromServer::start(19612, &scrape_config(&target), &[]);

    // The exposition each scraper gets, and what a bad Accept gets.
    let (ct, body) = scrape(&daemon.url, PROMETHEUS_NATIVE_ACCEPT);
    assert!(ct.starts_with("application/vnd.google.protobuf"), "{ct}");
    let fams = iowarden_exporters::decode_protobuf(&body).expect("delimited MetricFamily");
    assert!(fams.iter().any(|f| f.name() == "iowarden_build_info"));
    for bad in ["application/json", "image/png;q=1", "garbage;;", ""] {
        let (ct, body) = scrape(&daemon.url, bad);
        assert!(
            ct.starts_with("application/openmetrics-text"),
            "{bad}: {ct}"
        );
        assert!(String::from_utf8(body).unwrap().ends_with("# EOF\n"));
    }

    let undelivered = Undelivered::start(daemon.child.id());
    let out = cg
        .command(
            "fio",
            &fio_args(&dev.path, "randread", "4k", 4, 20000, "0", "256M"),
        )
        .output()
        .expect("fio");
    assert!(out.status.success(), "fio failed");

    // fio is done: the histograms are final once both servers have scraped them.
    let sel = format!(
        "cgroup=\"{}\", device=\"{}\", op=\"read\"",
        cg.rel,
        dev.name()
    );
    // fio is done: a poll that starts now counts every read, completed or
    // merged into another, summed over the device (only this test reads
    // it; the kernel may charge a bio to an ancestor when it cannot
    // allocate the cgroup's blkg), but for those the kernel did not
    // deliver to BPF.
    let snap = daemon.settled();
    let counted: u64 = snap.io.iter().map(|s| s.ios + s.merged).sum();
    let undelivered = undelivered.so_far();
    assert!(
        counted <= 20000 && 20000 - counted <= undelivered,
        "{counted} of fio's 20000 reads counted, {undelivered} not delivered to BPF: {:?}",
        snap.io
            .iter()
            .map(|s| (&s.cgroup.path, s.op, s.ios, s.merged))
            .collect::<Vec<_>>()
    );
    let want = (
        snap.hist_lower_bounds_seconds.clone(),
        snap.io
            .iter()
            .find(|s| s.cgroup.path == cg.rel && s.op == iowarden_exporters::Op::Read)
            .expect("the cgroup's read series")
            .clone(),
    );
    let (bounds, series) = want;
    let n = series.ios as f64;
    native.wait_for(
        &format!("histogram_count(iowarden_io_latency_seconds{{{sel}, stage=\"total\"}})"),
        20,
        |v| v == n,
    );
    classic.wait_for(
        &format!("iowarden_io_latency_seconds_count{{{sel}, stage=\"total\"}}"),
        20,
        |v| v == n,
    );
    // Each server stored the form it asked for, and only that.
    assert!(native
        .query(&format!("iowarden_io_latency_seconds_bucket{{{sel}}}"))
        .is_empty());
    let h = native.query(&format!(
        "iowarden_io_latency_seconds{{{sel}, stage=\"total\"}}"
    ));
    assert!(h[0].get("histogram").is_some(), "native sample: {h:?}");

    for stage in ["total", "device"] {
        let hist = series.latency.get(match stage {
            "total" => iowarden_exporters::Stage::Total,
            _ => iowarden_exporters::Stage::Device,
        });
        for q in [0.5, 0.99] {
            let nq = native
                .scalar(&format!(
                    "histogram_quantile({q}, iowarden_io_latency_seconds{{{sel}, stage=\"{stage}\"}})"
                ))
                .unwrap();
            let cq = classic
                .scalar(&format!(
                    "histogram_quantile({q}, iowarden_io_latency_seconds_bucket{{{sel}, stage=\"{stage}\"}})"
                ))
                .unwrap();
            // The BPF bucket holding the quantile, widened to its neighbours.
            let i = hist.quantile_bucket(q).unwrap();
            let (lo, hi) = (
                bounds[i.saturating_sub(1)],
                bounds.get(i + 2).copied().unwrap_or(f64::INFINITY),
            );
            let (clo, chi) = pow2_bucket(cq);
            println!(
                "{stage} p{}: native {:.1} us, classic {:.1} us, BPF bucket [{:.1}, {:.1}) us",
                q * 100.0,
                nq * 1e6,
                cq * 1e6,
                bounds[i] * 1e6,
                bounds.get(i + 1).copied().unwrap_or(f64::INFINITY) * 1e6
            );
            assert!(
                nq >= lo && nq <= hi,
                "{stage} p{q}: native {nq} outside one BPF bucket of [{lo}, {hi}]"
            );
            assert!(
                (nq - cq).abs() <= chi - clo,
                "{stage} p{q}: native {nq} and classic {cq} more than one classic bucket ({clo}..{chi}) apart"
            );
        }
    }
}

/// Bad exposition options stop `iowarden run` before it binds or loads
/// anything, naming what is wrong. (No kernel involved: parsing fails first.)
#[test]
fn bad_exposition_options_are_refused_at_start() {
    for (args, want) in [
        (&["--max-cgroups", "0"][..], "at least 1"),
        (&["--max-cgroups", "ten"][..], "not a number"),
        (
            &["--histogram-stages", "total,wait"][..],
            "no latency stage 'wait'",
        ),
        (&["--io-counters", "iops"][..], "no counter 'iops'"),
        (&["--classic-buckets", "pow8"][..], "use pow4 or pow2"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_iowarden"))
            .args(["run", "--listen", "127.0.0.1:19609"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("serving"), "{args:?} started: {err}");
    }
}

/// --max-cgroups K: `iowarden_cgroups_folded` counts the cgroups with I/O
/// summed into "other", and the log says so once, when folding starts.
/// The culprit family (on by default) names only the top K and "other"
/// (the three cgroups read side by side, so each waits behind the others),
/// and its series add up to the snapshot's.
#[test]
fn folded_cgroups_are_counted_and_logged_once() {
    let dev = LoopDev::file(64);
    let cgroups: Vec<Cgroup> = (0..3)
        .map(|i| Cgroup::new(&format!("iowarden-test-fold-{i}")))
        .collect();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (daemon, log) = Daemon::start_logged(
        port,
        "200ms",
        &["--device", &dev.name(), "--max-cgroups", "1"],
        &[],
    );
    let readers: Vec<std::process::Child> = cgroups
        .iter()
        .enumerate()
        .map(|(i, cg)| {
            let reads = format!("count={}", 1000 * (i + 1));
            cg.command(
                "dd",
                &[
                    format!("if={}", dev.path),
                    "of=/dev/null".into(),
                    "bs=4k".into(),
                    reads,
                    "iflag=direct".into(),
                    "status=none".into(),
                ],
            )
            .spawn()
            .expect("dd")
        })
        .collect();
    for r in readers {
        let out = r.wait_with_output().expect("dd");
        assert!(out.status.success(), "dd: {out:?}");
    }
    let snap = daemon.settled();
    // Polls after the I/O: folding has started and goes on.
    daemon.settled();
    let with_io: std::collections::HashSet<u64> = snap.io.iter().map(|s| s.cgroup.id).collect();
    let ours = cgroups.iter().filter(|c| with_io.contains(&c.id())).count();
    assert_eq!(ours, 3, "the three cgroups' reads in the snapshot");
    let folded = sample(
        &daemon.get("/metrics").unwrap(),
        "iowarden_cgroups_folded{} ",
    )
    .expect("iowarden_cgroups_folded exported under --max-cgroups");
    assert_eq!(
        folded as usize,
        with_io.len() - 1,
        "cgroups with I/O: {with_io:?}"
    );
    let said: Vec<String> = log
        .text()
        .lines()
        .filter(|l| l.contains("summed into cgroup=\"other\""))
        .map(str::to_string)
        .collect();
    assert_eq!(said.len(), 1, "log lines about folding: {said:?}");
    assert!(said[0].contains("--max-cgroups 1"), "{said:?}");
    assert_culprits_folded(&daemon.get("/metrics").unwrap(), &daemon.snapshot());
}

/// The culprit series of a --max-cgroups 1 scrape: victims and culprits
/// are the top cgroup or "other" (culprit "none" too), "other" is among
/// them, and their seconds add up to the (uncapped) snapshot's.
fn assert_culprits_folded(metrics: &str, snap: &iowarden_exporters::Snapshot) {
    let label = |line: &str, name: &str| -> String {
        let from = line.find(&format!("{name}=\"")).expect(name) + name.len() + 2;
        line[from..].split('"').next().unwrap().to_string()
    };
    let series: Vec<(String, String, f64)> = metrics
        .lines()
        .filter(|l| l.starts_with("iowarden_culprit_seconds_total{"))
        .map(|l| {
            let value = l.rsplit(' ').next().unwrap().parse().unwrap();
            (label(l, "victim"), label(l, "culprit"), value)
        })
        .collect();
    let named: std::collections::BTreeSet<&str> = series
        .iter()
        .flat_map(|(v, c, _)| [v.as_str(), c.as_str()])
        .filter(|n| !["other", "none"].contains(n))
        .collect();
    assert_eq!(named.len(), 1, "one cgroup named besides other: {series:?}");
    assert!(
        series.iter().any(|(v, c, _)| v == "other" && c != "none"),
        "a folded victim waited behind another: {series:?}"
    );
    let exported: f64 = series.iter().map(|s| s.2).sum();
    let uncapped: f64 = snap.culprits.iter().map(|c| c.seconds).sum();
    assert!(
        uncapped > 0.0 && (exported - uncapped).abs() <= 1e-6 * uncapped,
        "culprit seconds exported {exported}, in the snapshot {uncapped}"
    );
}
