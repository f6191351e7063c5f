//! The OCI image (`make image`: scripts/image.sh) run as the DaemonSet runs
//! it: built from the binary under test, started by podman with what
//! deploy/kubernetes/iowarden.yaml grants its container (its args, added
//! capabilities, hostPID, read-only root, no privilege escalation, seccomp,
//! the cgroup, BTF and state host paths, the web config Secret as files made
//! from test certificates) and scraped over mTLS as the shipped config
//! requires. What differs, because this machine is no Kubernetes node: the
//! host's network (no CNI plugins here) with the listen port moved to a free
//! one, runc (crun 1.8 refuses this host's hybrid cgroup layout), and the
//! open-file and process limits given explicitly (podman's defaults exceed
//! this machine's hard limits).

use crate::certs::Certs;
use crate::fixtures::{poll_until, repo, succeed, yaml_docs};
use crate::promserver::free_port;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

const TAG: &str = "localhost/iowarden-test:latest";
const NAME: &str = "iowarden-test-image";

fn podman() -> Command {
    let mut cmd = Command::new("podman");
    cmd.args([
        "--runtime=runc",
        "--cgroup-manager=cgroupfs",
        "--events-backend=file",
    ]);
    cmd
}

/// The cgroups podman's cgroupfs manager makes for its containers and
/// conmon in every hierarchy (libpod_parent and below), deepest first.
fn podman_cgroups() -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for h in std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
    {
        let parent = h.path().join("libpod_parent");
        if let Ok(children) = std::fs::read_dir(&parent) {
            out.extend(children.flatten().map(|c| c.path()).filter(|c| c.is_dir()));
            out.push(parent);
        }
    }
    out
}

/// Removes the container, the test's image and the podman cgroups that
/// were not there before it when the test ends.
struct Cleanup(Vec<std::path::PathBuf>);

impl Cleanup {
    fn new() -> Cleanup {
        Cleanup(podman_cgroups())
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = podman().args(["rm", "-f", NAME]).output();
        let _ = podman().args(["rmi", "-f", TAG]).output();
        for c in podman_cgroups().iter().filter(|c| !self.0.contains(c)) {
            remove_cgroup(c);
        }
    }
}

/// Removes an empty cgroup, retried for up to 5 s while it is busy: conmon
/// may not have left its cgroup yet when `podman rm` returns.
fn remove_cgroup(c: &std::path::Path) {
    for _ in 0..50 {
        match std::fs::remove_dir(c) {
            Err(e) if e.kind() == std::io::ErrorKind::ResourceBusy => {
                std::thread::sleep(Duration::from_millis(100))
            }
            _ => return,
        }
    }
}

/// The DaemonSet's pod spec.
fn daemonset_pod() -> Value {
    yaml_docs(&repo().join("deploy/kubernetes/iowarden.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "DaemonSet")
        .expect("a DaemonSet")["spec"]["template"]["spec"]
        .clone()
}

/// podman's flags for what the pod spec grants its one container; the
/// web config Secret's files are `secret_dir`, the state directory
/// `state_dir` (the test's own, not the host's).
fn run_flags(pod: &Value, secret_dir: &str, state_dir: &str) -> Vec<String> {
    let c = &pod["containers"][0];
    let sc = &c["securityContext"];
    let mut f = vec!["--cap-drop=ALL".to_string()];
    assert_eq!(sc["capabilities"]["drop"][0], "ALL");
    for cap in sc["capabilities"]["add"].as_array().unwrap() {
        f.push(format!("--cap-add={}", cap.as_str().unwrap()));
    }
    assert_eq!(sc["privileged"], false);
    if pod["hostPID"] == true {
        f.push("--pid=host".into());
    }
    if sc["readOnlyRootFilesystem"] == true {
        f.push("--read-only".into());
    }
    if sc["allowPrivilegeEscalation"] == false {
        f.push("--security-opt=no-new-privileges".into());
    }
    if sc["seccompProfile"]["type"] == "Unconfined" {
        f.push("--security-opt=seccomp=unconfined".into());
    }
    f.push(format!("--user={}:{}", sc["runAsUser"], sc["runAsGroup"]));
    for m in c["volumeMounts"].as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        let vol = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .unwrap();
        let host = match vol["hostPath"]["path"].as_str() {
            Some("/var/lib/iowarden") => state_dir.to_string(),
            Some(p) => p.to_string(),
            None => {
                assert!(vol["secret"].is_object(), "{name}: hostPath or secret");
                secret_dir.to_string()
            }
        };
        let ro = m["readOnly"] == true || vol["secret"].is_object();
        let prop = if m["mountPropagation"] == "HostToContainer" {
            ",rslave"
        } else {
            ""
        };
        f.push(format!(
            "--volume={host}:{}:{}{prop}",
            m["mountPath"].as_str().unwrap(),
            if ro { "ro" } else { "rw" }
        ));
    }
    f
}

#[test]
fn image_serves_metrics_with_the_daemonsets_privileges() {
    let out = tempfile::tempdir().unwrap();
    let _cleanup = Cleanup::new();
    let _ = podman().args(["rm", "-f", NAME]).output();
    let built = succeed(
        Command::new(repo().join("scripts/image.sh"))
            .arg(env!("CARGO_BIN_EXE_iowarden"))
            .arg(out.path())
            .arg(TAG),
    );
    let archive = String::from_utf8(built.stdout).unwrap().trim().to_string();
    assert!(std::path::Path::new(&archive).exists(), "{archive}");

    // The Secret iowarden-web: web.yml (the shipped web config) and the
    // certificates it names.
    let certs = Certs::new();
    certs.shipped_names();
    let web = out.path().join("web");
    let state = out.path().join("state");
    std::fs::create_dir_all(&web).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    for f in ["tls.crt", "tls.key", "ca.crt"] {
        std::fs::copy(certs.path(f), web.join(f)).unwrap();
    }
    std::fs::copy(
        repo().join("deploy/kubernetes/web-config.yml"),
        web.join("web.yml"),
    )
    .unwrap();

    let pod = daemonset_pod();
    let port = free_port();
    let args: Vec<String> = pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let a = a.as_str().unwrap();
            match a.strip_prefix("--listen=") {
                Some(_) => format!("--listen=127.0.0.1:{port}"),
                None => a.to_string(),
            }
        })
        .collect();
    assert!(
        args.iter().any(|a| a.starts_with("--web.config.file=")),
        "{args:?}"
    );
    succeed(
        podman()
            .args(["run", "--detach", "--name", NAME, "--network=host"])
            .args(["--ulimit=nofile=4096:4096", "--ulimit=nproc=4096:4096"])
            .args(run_flags(
                &pod,
                web.to_str().unwrap(),
                state.to_str().unwrap(),
            ))
            .arg(TAG)
            .args(&args),
    );

    let url = format!("https://127.0.0.1:{port}/metrics");
    let scrape = || {
        let out = Command::new("curl")
            .args(["-sf", "--cacert"])
            .arg(certs.path("ca.crt"))
            .arg("--cert")
            .arg(certs.path("client.crt"))
            .arg("--key")
            .arg(certs.path("client.key"))
            .arg(&url)
            .output()
            .expect("curl (scripts/install-deps.sh --test)");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let mut logs = Vec::new();
    let metrics = poll_until(Duration::from_secs(60), Duration::from_millis(500), || {
        let m = scrape();
        if m.contains("iowarden_polls_total") {
            return Some(m);
        }
        logs = podman().args(["logs", NAME]).output().unwrap().stderr;
        None
    })
    .unwrap_or_else(|| {
        panic!(
            "the container served no metrics within 60 s:\n{}",
            String::from_utf8_lossy(&logs)
        )
    });
    assert!(
        metrics.contains(r#"iowarden_probe_active{probe="block_rq_complete",reason=""} 1"#),
        "{metrics}"
    );
    // Without a client certificate: nothing.
    let plain = Command::new("curl").args(["-sk", &url]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&plain.stdout).contains("iowarden_"),
        "metrics served without a client certificate"
    );
}
