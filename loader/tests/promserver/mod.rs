//! A real Prometheus (Debian's 2.42) on loopback with its own config,
//! flags and storage, stopped on drop.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::fixtures::{poll_until, wait_until};

use serde_json::Value;

pub struct PromServer {
    child: Child,
    pub url: String,
    /// Config and storage, removed when the server is dropped.
    _dir: tempfile::TempDir,
}

impl PromServer {
    /// Starts `prometheus` with `config` (YAML text) and extra flags, and
    /// waits until it is ready.
    pub fn start(port: u16, config: &str, flags: &[&str]) -> PromServer {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("prometheus.yml");
        std::fs::write(&file, config).unwrap();
        // Agent mode refuses the server's storage flag.
        let agent = flags.iter().any(|f| f.contains("agent"));
        let storage = if agent {
            "--storage.agent.path"
        } else {
            "--storage.tsdb.path"
        };
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", file.display()))
            .arg(format!("{storage}={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .args(flags)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("prometheus (Debian package prometheus; scripts/install-deps.sh)");
        let p = PromServer {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        };
        wait_until(
            &format!("prometheus on :{port} not ready in 30 s"),
            Duration::from_secs(30),
            Duration::from_millis(200),
            || {
                ureq::get(&format!("{}/-/ready", p.url))
                    .call()
                    .ok()
                    .map(|_| ())
            },
        );
        p
    }

    pub fn api(&self, path: &str, params: &[(&str, &str)]) -> Value {
        let mut req = ureq::get(&format!("{}{path}", self.url))
            .config()
            .http_status_as_error(false)
            .build();
        for (k, v) in params {
            req = req.query(*k, *v);
        }
        let body = req
            .call()
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .into_body()
            .read_to_string()
            .unwrap();
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
    }

    /// An instant query's whole response (a bad query's error kept).
    pub fn instant(&self, expr: &str) -> Value {
        self.api("/api/v1/query", &[("query", expr)])
    }

    /// An instant query's result vector (panics on a query error).
    pub fn query(&self, expr: &str) -> Vec<Value> {
        let r = self.instant(expr);
        assert_eq!(r["status"], "success", "{expr}: {r}");
        r["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// The single float value of an instant query, if it has exactly one.
    pub fn scalar(&self, expr: &str) -> Option<f64> {
        let r = self.query(expr);
        if r.len() != 1 {
            return None;
        }
        r[0]["value"][1].as_str()?.parse().ok()
    }

    /// Polls `expr` until `ok` holds for its single value, or panics after `secs`.
    pub fn wait_for(&self, expr: &str, secs: u64, ok: impl Fn(f64) -> bool) -> f64 {
        poll_until(
            Duration::from_secs(secs),
            Duration::from_millis(300),
            || self.scalar(expr).filter(|v| ok(*v)),
        )
        .unwrap_or_else(|| {
            panic!(
                "{}: {expr} did not reach the wanted value in {secs} s: {:?}",
                self.url,
                self.query(expr)
            )
        })
    }
}

impl Drop for PromServer {
    fn drop(&mut self) {
        crate::fixtures::stop_child(&mut self.child);
    }
}

/// A loopback port the kernel just handed out (bound to port 0, then
/// released) for a server that takes its address on the command line.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A scrape config for one iowarden target every second.
pub fn scrape_config(target: &str) -> String {
    format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
         scrape_configs:\n  - job_name: iowarden\n    static_configs:\n      - targets: [\"{target}\"]\n"
    )
}
