//! `--web.config.file` (exporter-toolkit's format) against a real
//! Prometheus: TLS with a required, verified client certificate and bcrypt
//! basic auth. One daemon, four scrape jobs: the right credentials get
//! the metrics; a wrong password gets 401 and no samples; plain HTTP to
//! the TLS port and TLS without a client certificate get nothing. Bad
//! configs are refused before anything listens, naming file and field.
//! Needs root (the daemon loads BPF); openssl and prometheus installed by
//! scripts/install-deps.sh --test.

use crate::certs;
use crate::fixtures;
use crate::promserver;

use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

use certs::Certs;
use fixtures::*;
use promserver::{free_port, PromServer};

const PASSWORD: &str = "correct horse battery staple";

/// TLS requiring a client certificate from the test CA, and one bcrypt user.
fn web_config(c: &Certs) -> String {
    let hash = bcrypt::hash(PASSWORD, 6).unwrap();
    format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: {}\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {}\n  min_version: TLS12\n\
         http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n\
         basic_auth_users:\n  prometheus: '{hash}'\n",
        c.at("server.pem"),
        c.at("server.key"),
        c.at("ca.pem"),
    )
}

/// One scrape job against `target`; `tls`/`auth` are YAML blocks or "".
fn job(name: &str, scheme: &str, target: &str, tls: &str, auth: &str) -> String {
    format!(
        "  - job_name: {name}\n    scheme: {scheme}\n{tls}{auth}    static_configs:\n      - targets: [\"{target}\"]\n"
    )
}

fn prometheus_config(c: &Certs, target: &str) -> String {
    let ca_only = format!("    tls_config:\n      ca_file: {}\n", c.at("ca.pem"));
    let with_cert = format!(
        "{ca_only}      cert_file: {}\n      key_file: {}\n",
        c.at("client.pem"),
        c.at("client.key")
    );
    let auth =
        |pw: &str| format!("    basic_auth:\n      username: prometheus\n      password: '{pw}'\n");
    let mut cfg = String::from(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n",
    );
    cfg += &job("good", "https", target, &with_cert, &auth(PASSWORD));
    cfg += &job("wrongpw", "https", target, &with_cert, &auth("guess"));
    cfg += &job("plain", "http", target, "", &auth(PASSWORD));
    cfg += &job("nocert", "https", target, &ca_only, &auth(PASSWORD));
    cfg
}

/// The target's last scrape error, from Prometheus' targets API.
fn last_error(prom: &PromServer, job: &str) -> String {
    let t = prom.api("/api/v1/targets", &[]);
    t["data"]["activeTargets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["labels"]["job"] == job)
        .and_then(|t| t["lastError"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Polls until `job` has been scraped at least twice and returns `expr`'s
/// value then (a failed scrape still records up and the sample count).
fn after_scrapes(prom: &PromServer, job: &str, expr: &str) -> f64 {
    prom.wait_for(
        &format!("count_over_time(up{{job=\"{job}\"}}[1m])"),
        60,
        |n| n >= 2.0,
    );
    prom.scalar(expr)
        .unwrap_or_else(|| panic!("{expr}: no single value: {:?}", prom.query(expr)))
}

#[test]
fn prometheus_scrapes_over_mtls_with_basic_auth_and_nothing_else_gets_in() {
    let c = Certs::new();
    let cfg = c.path("web.yml");
    std::fs::write(&cfg, web_config(&c)).unwrap();
    let (daemon, log) = Daemon::start_ephemeral(&["--web.config.file", cfg.to_str().unwrap()], &[]);
    assert!(daemon.url.starts_with("https://"), "{}", log.text());
    let target = format!("127.0.0.1:{}", daemon.port());
    let prom = PromServer::start(free_port(), &prometheus_config(&c, &target), &[]);

    prom.wait_for(r#"up{job="good"}"#, 60, |v| v == 1.0);
    let polls = after_scrapes(&prom, "good", r#"iowarden_polls_total{job="good"}"#);
    assert!(polls >= 1.0, "good scrape carries iowarden's metrics");

    for job in ["wrongpw", "plain", "nocert"] {
        let up = after_scrapes(
            &prom,
            job,
            &format!("max_over_time(up{{job=\"{job}\"}}[1m])"),
        );
        assert_eq!(up, 0.0, "{job} was scraped: {}", last_error(&prom, job));
        let samples = after_scrapes(
            &prom,
            job,
            &format!("max_over_time(scrape_samples_scraped{{job=\"{job}\"}}[1m])"),
        );
        assert_eq!(samples, 0.0, "{job} got samples");
    }
    let e = last_error(&prom, "wrongpw");
    assert!(e.contains("401"), "wrong password: {e}");
    assert!(
        prom.query(r#"iowarden_polls_total{job!="good"}"#)
            .is_empty(),
        "only the authenticated job has iowarden's series"
    );
    assert_plain_http_gets_no_metrics(daemon.port());
}

/// A plain-text request to the TLS port: whatever comes back (a TLS alert
/// or nothing), no metrics.
fn assert_plain_http_gets_no_metrics(port: u16) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    assert!(
        !text.contains("iowarden_"),
        "plain HTTP got metrics: {text}"
    );
}

/// `iowarden run --web.config.file` with `config`: must fail before
/// listening, with an error naming the file and `field`.
fn assert_refused(c: &Certs, name: &str, config: &str, field: &str) {
    let cfg = c.path(name);
    std::fs::write(&cfg, config).unwrap();
    let port = free_port();
    let out = Command::new(env!("CARGO_BIN_EXE_iowarden"))
        .args(["run", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--web.config.file")
        .arg(&cfg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{name} accepted: {err}");
    assert!(
        err.contains(cfg.to_str().unwrap()) && err.contains(field),
        "{name}: error names neither file nor {field}: {err}"
    );
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "{name}: something listens on :{port}"
    );
    assert!(
        !err.contains("serving"),
        "{name}: the daemon started: {err}"
    );
}

#[test]
fn bad_web_configs_are_refused_before_listening() {
    let c = Certs::new();
    let tls = |cert: &str, key: &str| {
        format!("tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n")
    };
    let (cert, key) = (c.at("server.pem"), c.at("server.key"));
    assert_refused(
        &c,
        "syntax.yml",
        "tls_server_config: [\n",
        "tls_server_config",
    );
    assert_refused(&c, "typo.yml", "tls_server_confg: {}\n", "tls_server_confg");
    assert_refused(&c, "nocert.yml", &tls("missing.pem", &key), "cert_file");
    assert_refused(&c, "nokey.yml", &tls(&cert, "missing.key"), "key_file");
    assert_refused(
        &c,
        "wrongkey.yml",
        &tls(&cert, &c.at("client.key")),
        "key_file",
    );
    assert_refused(
        &c,
        "notpem.yml",
        &tls(&c.at("client.ext"), &key),
        "cert_file",
    );
    assert_refused(
        &c,
        "plainpw.yml",
        "basic_auth_users:\n  prometheus: hunter2\n",
        "basic_auth_users.prometheus",
    );
    assert_refused(
        &c,
        "noca.yml",
        &format!(
            "{}  client_auth_type: RequireAndVerifyClientCert\n",
            tls(&cert, &key)
        ),
        "client_ca_file",
    );
    let missing = c.path("absent.yml");
    let out = Command::new(env!("CARGO_BIN_EXE_iowarden"))
        .args(["run", "--listen", "127.0.0.1:0", "--web.config.file"])
        .arg(&missing)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains(missing.to_str().unwrap()),
        "{err}"
    );
}

/// The shipped iowarden-k8s job from deploy/prometheus/prometheus.yml,
/// its DNS discovery swapped for `target` and its Secret directory for `dir`.
fn shipped_k8s_job(target: &str, dir: &str) -> String {
    let shipped = std::fs::read_to_string(repo().join("deploy/prometheus/prometheus.yml")).unwrap();
    let mut cfg: serde_yaml_ng::Value = serde_yaml_ng::from_str(&shipped).unwrap();
    let jobs = cfg["scrape_configs"].as_sequence_mut().unwrap();
    let mut job = jobs
        .iter()
        .find(|j| j["job_name"].as_str() == Some("iowarden-k8s"))
        .expect("job iowarden-k8s")
        .clone();
    let m = job.as_mapping_mut().unwrap();
    assert!(m.remove("dns_sd_configs").is_some(), "job changed shape");
    m.insert(
        "static_configs".into(),
        serde_yaml_ng::from_str(&format!("[{{targets: [\"{target}\"]}}]")).unwrap(),
    );
    m.insert("scrape_interval".into(), "1s".into());
    let text = serde_yaml_ng::to_string(&job).unwrap();
    assert!(text.contains("/etc/prometheus/iowarden/"), "{text}");
    let text = text.replace("/etc/prometheus/iowarden", dir);
    format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n{}",
        text.lines()
            .enumerate()
            .map(|(i, l)| format!("{}{l}\n", if i == 0 { "  - " } else { "    " }))
            .collect::<String>()
    )
}

/// The DaemonSet's web config (deploy/kubernetes/web-config.yml) served to
/// the shipped Prometheus job: mTLS through the Service name, scrape up.
#[test]
fn shipped_kubernetes_web_config_and_scrape_job_work_together() {
    let c = Certs::new();
    c.shipped_names();
    let cfg = c.path("web.yml");
    std::fs::copy(repo().join("deploy/kubernetes/web-config.yml"), &cfg).unwrap();
    let (daemon, log) = Daemon::start_ephemeral(&["--web.config.file", cfg.to_str().unwrap()], &[]);
    assert!(daemon.url.starts_with("https://"), "{}", log.text());
    let target = format!("127.0.0.1:{}", daemon.port());
    let prom = PromServer::start(
        free_port(),
        &shipped_k8s_job(&target, c.dir.path().to_str().unwrap()),
        &[],
    );
    prom.wait_for(r#"up{job="iowarden-k8s"}"#, 60, |v| v == 1.0);
    prom.wait_for(r#"iowarden_polls_total{job="iowarden-k8s"}"#, 30, |v| {
        v >= 1.0
    });
    assert_plain_http_gets_no_metrics(daemon.port());
}
