//! Real-kernel fixtures for integration tests: loop devices, cgroups in the
//! io controller's hierarchy, fio, a running daemon. Each cleans up on drop.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use iowarden::host::cgroups::{io_hierarchy, parse_mountinfo};

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A loop device over a sparse file (or over another block device), with direct I/O.
pub struct LoopDev {
    pub path: String,
    backing_file: Option<PathBuf>,
}

impl LoopDev {
    pub fn file(size_mb: u64) -> LoopDev {
        let f = tempfile::Builder::new()
            .prefix("iowarden-test-")
            .suffix(".img")
            .tempfile_in("/var/tmp")
            .unwrap();
        let (_, p) = f.keep().unwrap();
        run(Command::new("truncate")
            .args(["-s", &format!("{size_mb}M")])
            .arg(&p));
        let path = run(Command::new("losetup")
            .args(["-f", "--show", "--direct-io=on"])
            .arg(&p));
        LoopDev {
            path,
            backing_file: Some(p),
        }
    }

    /// A loop device whose backing store is another block device.
    pub fn over(dev: &LoopDev) -> LoopDev {
        let path = run(Command::new("losetup").args(["-f", "--show", "--direct-io=on", &dev.path]));
        LoopDev {
            path,
            backing_file: None,
        }
    }

    pub fn name(&self) -> String {
        Path::new(&self.path)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    pub fn majmin(&self) -> String {
        std::fs::read_to_string(format!("/sys/block/{}/dev", self.name()))
            .unwrap()
            .trim()
            .to_string()
    }

    pub fn backing_file(&self) -> Option<&Path> {
        self.backing_file.as_deref()
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.path]).status();
        if let Some(f) = &self.backing_file {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// Root of the hierarchy the io controller is bound to on this host.
pub fn io_root() -> (PathBuf, bool) {
    let hs = parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").unwrap());
    let h = io_hierarchy(&hs).expect("an io cgroup hierarchy");
    (h.mount_point.clone(), h.v2)
}

/// A child cgroup in the io hierarchy.
pub struct Cgroup {
    pub dir: PathBuf,
    pub rel: String,
}

impl Cgroup {
    pub fn new(name: &str) -> Cgroup {
        let (root, v2) = io_root();
        if v2 {
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+io");
        }
        let dir = root.join(name);
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).unwrap();
        Cgroup {
            dir,
            rel: format!("/{name}"),
        }
    }

    pub fn id(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&self.dir).unwrap().ino()
    }

    pub fn write(&self, file: &str, v: &str) {
        std::fs::write(self.dir.join(file), v)
            .unwrap_or_else(|e| panic!("writing {v} to {file}: {e}"));
    }

    /// Runs a command inside this cgroup; it joins before exec.
    pub fn command(&self, prog: &str, args: &[String]) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!(
                "echo $$ > {}/cgroup.procs && exec \"$0\" \"$@\"",
                self.dir.display()
            ))
            .arg(prog)
            .args(args);
        c
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// fio job arguments with direct I/O and JSON output.
pub fn fio_args(
    dev: &str,
    rw: &str,
    bs: &str,
    qd: u32,
    ios: u64,
    offset: &str,
    size: &str,
) -> Vec<String> {
    [
        "--name=job".to_string(),
        format!("--filename={dev}"),
        "--direct=1".into(),
        "--ioengine=libaio".into(),
        format!("--rw={rw}"),
        format!("--bs={bs}"),
        format!("--iodepth={qd}"),
        format!("--number_ios={ios}"),
        format!("--offset={offset}"),
        format!("--size={size}"),
        "--randrepeat=0".into(),
        // Reap completions from the ring without a syscall: less of fio's
        // own time in its clat.
        "--userspace_reap=1".into(),
        "--output-format=json".into(),
    ]
    .to_vec()
}

/// The daemon under test, killed on drop.
pub struct Daemon {
    pub child: Child,
    pub url: String,
}

impl Daemon {
    pub fn start(port: u16, extra: &[&str]) -> Daemon {
        let listen = format!("127.0.0.1:{port}");
        let child = Command::new(env!("CARGO_BIN_EXE_iowarden"))
            .args(["run", "--listen", &listen, "--interval", "500ms"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let d = Daemon {
            child,
            url: format!("http://{listen}"),
        };
        let t0 = Instant::now();
        while d.get("/snapshot.json").is_none() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "daemon did not answer within 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        d
    }

    pub fn get(&self, path: &str) -> Option<String> {
        ureq::get(&format!("{}{path}", self.url))
            .call()
            .ok()?
            .into_body()
            .read_to_string()
            .ok()
    }

    /// Completions the kernel did not run block_rq_complete for: it skips
    /// a program that fires while the same program runs on that CPU (a
    /// completion interrupting another), and counts a recursion miss.
    pub fn completions_missed(&self) -> u64 {
        let m = self.get("/metrics").expect("/metrics");
        m.lines()
            .find_map(|l| {
                l.strip_prefix(
                    r#"iowarden_bpf_program_recursion_misses_total{program="block_rq_complete"} "#,
                )
            })
            .map(|v| v.trim().parse::<f64>().expect("a count") as u64)
            .expect("recursion misses of block_rq_complete exported")
    }

    pub fn snapshot(&self) -> iowarden_exporters::Snapshot {
        iowarden_exporters::decode_json(&self.get("/snapshot.json").expect("snapshot")).unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// promtool 2.42 lints in the Prometheus text format, where a counter's HELP
/// names the `_total` sample; OpenMetrics names the family without it. That
/// one message is the format difference; any other output is a failure.
pub fn assert_promtool_accepts(metrics: &str) {
    assert!(
        metrics.trim_end().ends_with("# EOF"),
        "not OpenMetrics: no # EOF"
    );
    let (ok, text) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .output_with_stdin(metrics.as_bytes());
    let problems: Vec<&str> = text
        .lines()
        .filter(|l| {
            let family_has_help = l.strip_suffix("_total no help text").is_some_and(|fam| {
                metrics.contains(&format!("# HELP {fam} "))
                    && metrics.contains(&format!("# TYPE {fam} counter"))
            });
            !l.trim().is_empty() && !family_has_help
        })
        .collect();
    assert!(problems.is_empty(), "promtool check metrics: {problems:?}");
    let _ = ok;
}

trait OutputWithStdin {
    fn output_with_stdin(&mut self, input: &[u8]) -> (bool, String);
}

impl OutputWithStdin for Command {
    fn output_with_stdin(&mut self, input: &[u8]) -> (bool, String) {
        use std::io::Write;
        let mut child = self
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("promtool (Debian package prometheus) is required");
        child.stdin.take().unwrap().write_all(input).unwrap();
        let out = child.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success() && text.trim().is_empty(), text)
    }
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// YAML (possibly multi-document) as JSON values, through Debian's python3-yaml.
pub fn yaml_docs(path: &Path) -> Vec<serde_json::Value> {
    let out = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import json, sys, yaml; json.dump([d for d in yaml.safe_load_all(open(sys.argv[1])) if d is not None], sys.stdout)",
        ])
        .arg(path)
        .output()
        .expect("/usr/bin/python3 (scripts/install-deps.sh)");
    assert!(
        out.status.success(),
        "parsing {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
