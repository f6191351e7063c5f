//! Fleet deployment files under deploy/, checked with the real tools:
//! promtool (configs, rules, rule unit tests), systemd-analyze (unit syntax
//! and hardening), kubernetes-validate (manifests against the Kubernetes
//! OpenAPI schemas, offline), and the unit's capability set on the real
//! kernel. scripts/install-deps.sh installs every tool.

use crate::certs;
use crate::fixtures;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fixtures::{repo, yaml_docs};

fn run(cmd: &mut Command) -> (bool, String) {
    let out: Output = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (run scripts/install-deps.sh)"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn assert_ok(cmd: &mut Command) -> String {
    let desc = format!("{cmd:?}");
    let (ok, text) = run(cmd);
    assert!(ok, "{desc} failed:\n{text}");
    text
}

/// promtool loads the TLS files a config names: the shipped paths of the
/// iowarden-k8s job's Secret point at certificates made for the test.
#[test]
fn promtool_accepts_shipped_prometheus_configs() {
    let dir = repo().join("deploy/prometheus");
    let certs = certs::Certs::new();
    certs.shipped_names();
    for f in ["prometheus.yml", "remote-write.yml"] {
        let text = std::fs::read_to_string(dir.join(f))
            .unwrap()
            .replace("/etc/prometheus/iowarden", &certs.at(""))
            .replace("rules/", &format!("{}/rules/", dir.display()));
        let copy = certs.path(f);
        std::fs::write(&copy, text).unwrap();
        let out = assert_ok(
            Command::new("promtool")
                .args(["check", "config"])
                .arg(&copy),
        );
        println!("promtool check config {f}: {}", out.trim());
    }
    assert_ok(
        Command::new("promtool")
            .args(["check", "rules"])
            .arg(dir.join("rules/iowarden.rules.yml")),
    );
}

/// Alerts fire (and stay quiet) on fixture series as the rules intend.
#[test]
fn promtool_rule_unit_tests_pass() {
    let out = assert_ok(
        Command::new("promtool")
            .args(["test", "rules"])
            .arg(repo().join("deploy/prometheus/tests/iowarden.rules.test.yml")),
    );
    assert!(out.contains("SUCCESS"), "{out}");
    // Every alert of the rules file has a test.
    let rules =
        std::fs::read_to_string(repo().join("deploy/prometheus/rules/iowarden.rules.yml")).unwrap();
    let tests =
        std::fs::read_to_string(repo().join("deploy/prometheus/tests/iowarden.rules.test.yml"))
            .unwrap();
    for alert in rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
    {
        assert!(
            tests.contains(&format!("alertname: {alert}")),
            "alert {alert} has no promtool test"
        );
    }
}

/// The unit with ExecStart pointing at the built binary (verify checks that
/// the command exists).
fn unit_for_test() -> (tempfile::TempDir, PathBuf, String) {
    let text = std::fs::read_to_string(repo().join("deploy/systemd/iowarden.service")).unwrap();
    assert!(text.contains("ExecStart=/usr/local/bin/iowarden "));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("iowarden.service");
    std::fs::write(
        &path,
        text.replace("/usr/local/bin/iowarden", env!("CARGO_BIN_EXE_iowarden")),
    )
    .unwrap();
    (dir, path, text)
}

#[test]
fn systemd_unit_verifies_and_is_hardened() {
    let (_dir, path, _) = unit_for_test();
    // verify exits 0 on unknown keys too: any output is a failure.
    let out = assert_ok(Command::new("systemd-analyze").arg("verify").arg(&path));
    assert!(out.trim().is_empty(), "systemd-analyze verify: {out}");
    // Exposure score on systemd's 0-10 scale, x10 for --threshold: at most 2.5 ("OK").
    let out = assert_ok(
        Command::new("systemd-analyze")
            .args(["security", "--offline=true", "--threshold=25", "--no-pager"])
            .arg(&path),
    );
    let overall = out
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or("");
    println!("{}", overall.trim());
    assert!(!overall.is_empty(), "{out}");
}

pub(crate) fn unit_capabilities(unit: &str) -> Vec<String> {
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("CapabilityBoundingSet=");
    let ambient = unit
        .lines()
        .find_map(|l| l.strip_prefix("AmbientCapabilities="))
        .expect("AmbientCapabilities=");
    assert_eq!(line, ambient, "ambient and bounding sets differ");
    line.split_whitespace().map(str::to_string).collect()
}

/// The unit's capability set is enough to load, attach and read the BPF
/// programs: run the binary with exactly those capabilities (what systemd
/// would give it) on the real kernel.
#[test]
fn unit_capabilities_suffice_on_this_kernel() {
    let (_, _, text) = unit_for_test();
    let caps = unit_capabilities(&text);
    assert!(!caps.iter().any(|c| c == "CAP_SYS_ADMIN"), "{caps:?}");
    let set = caps
        .iter()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect::<Vec<_>>()
        .join(",");
    let out = assert_ok(
        Command::new("setpriv")
            .arg(format!("--bounding-set=-all,{set}"))
            .arg("--inh-caps=-all")
            .arg(env!("CARGO_BIN_EXE_iowarden"))
            .args(["snapshot", "--wait", "200ms"]),
    );
    assert!(
        out.contains(r#"iowarden_probe_active{probe="block_rq_complete",reason=""} 1"#),
        "{out}"
    );
    // And --bpf-stats, which needs CAP_SYS_ADMIN, says so.
    let (ok, err) = run(Command::new("setpriv")
        .arg(format!("--bounding-set=-all,{set}"))
        .arg("--inh-caps=-all")
        .arg(env!("CARGO_BIN_EXE_iowarden"))
        .args([
            "run",
            "--bpf-stats",
            "--listen",
            "127.0.0.1:0",
            "--duration",
            "1s",
        ]));
    assert!(!ok && err.contains("CAP_SYS_ADMIN"), "{err}");
}

/// Every manifest passes the Kubernetes OpenAPI schemas (strict: unknown
/// fields fail), without network, and the DaemonSet asks for the same
/// capabilities as the systemd unit.
#[test]
fn kubernetes_manifests_validate() {
    let tools = std::env::var("IOWARDEN_TOOLS").unwrap_or_else(|_| "/opt/iowarden-tools".into());
    let kv = Path::new(&tools).join("bin/kubernetes-validate");
    let dir = repo().join("deploy/kubernetes");
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    assert!(!files.is_empty());
    // In a fresh network namespace when possible: proves the schemas are local.
    let offline = run(Command::new("unshare").args(["-n", "true"])).0;
    let mut cmd = if offline {
        let mut c = Command::new("unshare");
        c.arg("-n").arg(&kv);
        c
    } else {
        Command::new(&kv)
    };
    let out = assert_ok(cmd.arg("--strict").args(&files));
    println!("{}", out.trim());
    assert!(!out.contains("ERROR") && !out.contains("WARN"), "{out}");

    let (_, _, unit) = unit_for_test();
    let want: Vec<String> = unit_capabilities(&unit)
        .iter()
        .map(|c| c.trim_start_matches("CAP_").to_string())
        .collect();
    let docs = yaml_docs(&dir.join("iowarden.yaml"));
    let ds = docs
        .iter()
        .find(|d| d["kind"] == "DaemonSet")
        .expect("a DaemonSet");
    let spec = &ds["spec"]["template"]["spec"];
    assert_eq!(spec["hostPID"], true);
    let c = &spec["containers"][0]["securityContext"];
    let added: Vec<String> = c["capabilities"]["add"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        added, want,
        "DaemonSet and systemd unit capabilities differ"
    );
    assert_eq!(c["capabilities"]["drop"][0], "ALL");
    assert_ne!(c["privileged"], true);
    let mounts: Vec<&str> = spec["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["mountPath"].as_str().unwrap())
        .collect();
    for m in ["/sys/fs/cgroup", "/sys/kernel/btf"] {
        assert!(mounts.contains(&m), "{m} not mounted: {mounts:?}");
    }
}

/// The DaemonSet's port is never open: TLS from a Secret-mounted web config,
/// probes that need no client certificate, a NetworkPolicy admitting only
/// Prometheus to that port, and a scrape job speaking mTLS.
#[test]
fn kubernetes_metrics_port_is_protected() {
    let docs = yaml_docs(&repo().join("deploy/kubernetes/iowarden.yaml"));
    let ds = docs.iter().find(|d| d["kind"] == "DaemonSet").unwrap();
    let spec = &ds["spec"]["template"]["spec"];
    let c = &spec["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let web = args
        .iter()
        .find_map(|a| a.strip_prefix("--web.config.file="))
        .expect("--web.config.file in the DaemonSet's args");
    let mount = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| web.starts_with(m["mountPath"].as_str().unwrap()))
        .expect("the web config lies in a mounted volume");
    assert_eq!(mount["readOnly"], true);
    let volume = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    assert_eq!(volume["secret"]["secretName"], "iowarden-web");
    for probe in ["readinessProbe", "livenessProbe"] {
        assert!(c[probe]["tcpSocket"].is_object(), "{probe}: {}", c[probe]);
    }
    let np = docs
        .iter()
        .find(|d| d["kind"] == "NetworkPolicy")
        .expect("a NetworkPolicy");
    assert_eq!(
        np["spec"]["podSelector"]["matchLabels"],
        ds["spec"]["selector"]["matchLabels"]
    );
    let rule = &np["spec"]["ingress"][0];
    assert_eq!(np["spec"]["ingress"].as_array().unwrap().len(), 1);
    assert_eq!(rule["ports"][0]["port"], 9617);
    assert!(rule["from"][0]["podSelector"]["matchLabels"].is_object());
    // The web config the Secret carries asks for client certificates.
    let shipped = std::fs::read_to_string(repo().join("deploy/kubernetes/web-config.yml")).unwrap();
    let parsed = iowarden::web::config::parse_web_config(&shipped).unwrap();
    assert_eq!(
        parsed.tls.unwrap().client_auth,
        iowarden::web::config::ClientAuth::RequireAndVerifyClientCert
    );
    let prom = std::fs::read_to_string(repo().join("deploy/prometheus/prometheus.yml")).unwrap();
    let prom: serde_yaml_ng::Value = serde_yaml_ng::from_str(&prom).unwrap();
    let job = prom["scrape_configs"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|j| j["job_name"].as_str() == Some("iowarden-k8s"))
        .unwrap();
    assert_eq!(job["scheme"].as_str(), Some("https"));
    assert!(job["tls_config"]["cert_file"].is_string());
}
