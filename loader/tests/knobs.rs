//! `iowarden knob` against regular files standing in for cgroup knobs.
//!
//! This host runs cgroup v1 (blkio), so it has no io.weight / io.cost.* files:
//! here the knobs are plain files in a tempdir, which exercises the journal,
//! dry-run, restore-on-exit, signals and crash recovery. The writer sees they
//! are not cgroupfs and puts the previous bytes back verbatim. The real knobs
//! (cgroup v2, iocost on NVMe) are tested in the guest: tests/vmtest/guest/t-40-knobs.sh.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::fixtures::{signal, wait_until};
use nix::sys::signal::Signal;

const BIN: &str = env!("CARGO_BIN_EXE_iowarden");
const QOS: &str =
    "259:0 enable=1 ctrl=user rpct=95.00 rlat=5000 wpct=95.00 wlat=5000 min=50.00 max=150.00\n";

struct Fixture {
    _tmp: tempfile::TempDir,
    cg: PathBuf,
    state: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let cg = tmp.path().join("cg");
        fs::create_dir(&cg).unwrap();
        fs::write(cg.join("io.weight"), "default 100\n259:0 250\n").unwrap();
        fs::write(cg.join("io.cost.qos"), QOS).unwrap();
        let state = tmp.path().join("state");
        Fixture {
            _tmp: tmp,
            cg,
            state,
        }
    }
    fn knob(&self, name: &str) -> PathBuf {
        self.cg.join(name)
    }
    fn journals(&self) -> Vec<String> {
        fs::read_dir(&self.state)
            .map(|rd| {
                rd.flatten()
                    .map(|e| fs::read_to_string(e.path()).unwrap())
                    .collect()
            })
            .unwrap_or_default()
    }
    fn args(&self, extra: &[&str]) -> Vec<String> {
        let mut a: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        a.push("--state-dir".into());
        a.push(self.state.display().to_string());
        a
    }
    fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN).args(self.args(args)).output().unwrap()
    }
    fn spawn(&self, args: &[&str]) -> Child {
        Command::new(BIN)
            .args(self.args(args))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// `knob set <knob> <value> --hold 60` running, once the value is written.
    fn hold(&self, knob: &Path, value: &str) -> Child {
        let child = self.spawn(&["knob", "set", knob.to_str().unwrap(), value, "--hold", "60"]);
        wait_for(knob, &format!("{value}\n"));
        child
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn wait_for(path: &Path, want: &str) {
    wait_until(
        &format!("{} never became {want:?}", path.display()),
        Duration::from_secs(20),
        Duration::from_millis(20),
        || (fs::read_to_string(path).unwrap() == want).then_some(()),
    );
}

#[test]
fn journal_holds_previous_value_before_the_change() {
    let f = Fixture::new();
    let w = f.knob("io.weight");
    let mut child = f.hold(&w, "default 50");
    let j = f.journals();
    assert_eq!(j.len(), 1, "one journal while the change is held");
    let rec: serde_json::Value = serde_json::from_str(j[0].lines().next().unwrap()).unwrap();
    assert_eq!(rec["op"], "set");
    assert_eq!(rec["previous"], "default 100\n259:0 250\n");
    assert_eq!(rec["value"], "default 50");
    assert_eq!(rec["path"], w.to_str().unwrap());
    signal(&child, Signal::SIGTERM);
    assert!(child.wait().unwrap().success());
}

#[test]
fn dry_run_writes_nothing() {
    let f = Fixture::new();
    let q = f.knob("io.cost.qos");
    let o = f.run(&[
        "knob",
        "set",
        q.to_str().unwrap(),
        "259:0 rlat=2000",
        "--dry-run",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("dry-run: would write '259:0 rlat=2000'"),
        "{}",
        stderr(&o)
    );
    assert_eq!(fs::read_to_string(&q).unwrap(), QOS);
    assert!(!f.state.exists(), "dry-run created the state dir");
}

#[test]
fn restores_on_normal_exit() {
    let f = Fixture::new();
    let q = f.knob("io.cost.qos");
    let o = f.run(&[
        "knob",
        "set",
        q.to_str().unwrap(),
        "259:0 enable=1 rlat=2000",
        "--hold",
        "0.2",
        "--iocost-interval",
        "100ms",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("restored"), "{}", stderr(&o));
    assert_eq!(fs::read_to_string(&q).unwrap(), QOS);
    assert!(f.journals().is_empty(), "journal left after a clean exit");
}

#[test]
fn iocost_writes_are_rate_limited() {
    let f = Fixture::new();
    let q = f.knob("io.cost.qos");
    let t = Instant::now();
    // set + restore on one device: the restore waits out the 1 s interval.
    let o = f.run(&[
        "knob",
        "set",
        q.to_str().unwrap(),
        "259:0 rlat=2000",
        "--hold",
        "0",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        t.elapsed() >= Duration::from_millis(950),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(fs::read_to_string(&q).unwrap(), QOS);
}

#[test]
fn restores_after_sigterm_and_sigint() {
    for sig in [Signal::SIGTERM, Signal::SIGINT] {
        let f = Fixture::new();
        let w = f.knob("io.weight");
        let child = f.hold(&w, "259:0 7");
        signal(&child, sig);
        // The hold is 60 s: the restore must come from the signal, which
        // the tool says (not from the hold running out).
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{sig:?}: {}\n{err}", out.status);
        assert!(err.contains("signal received, restoring"), "{sig:?}: {err}");
        assert_eq!(fs::read_to_string(&w).unwrap(), "default 100\n259:0 250\n");
        assert!(f.journals().is_empty());
    }
}

#[test]
fn next_run_restores_what_a_killed_run_left() {
    let f = Fixture::new();
    let w = f.knob("io.weight");
    let mut child = f.hold(&w, "default 50");
    let pid = child.id();
    signal(&child, Signal::SIGKILL);
    child.wait().unwrap();
    assert_eq!(
        fs::read_to_string(&w).unwrap(),
        "default 50\n",
        "kill -9 restores nothing"
    );
    let o = f.run(&["knob", "restore"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let msg = stderr(&o);
    assert_eq!(msg.lines().count(), 1, "one line per knob: {msg}");
    assert!(
        msg.contains(&format!("restored {}", w.display()))
            && msg.contains(&format!(
                "left changed by pid {pid}, which did not exit cleanly"
            )),
        "{msg}"
    );
    assert_eq!(fs::read_to_string(&w).unwrap(), "default 100\n259:0 250\n");
    assert!(f.journals().is_empty());
    let o = f.run(&["knob", "restore"]);
    assert!(stderr(&o).contains("nothing to restore"), "{}", stderr(&o));
}

#[test]
fn a_live_runs_journal_is_left_alone() {
    let f = Fixture::new();
    let w = f.knob("io.weight");
    let mut child = f.hold(&w, "default 50");
    let o = f.run(&["knob", "restore"]);
    assert!(stderr(&o).contains("nothing to restore"), "{}", stderr(&o));
    assert_eq!(fs::read_to_string(&w).unwrap(), "default 50\n");
    signal(&child, Signal::SIGTERM);
    assert!(child.wait().unwrap().success());
    assert_eq!(fs::read_to_string(&w).unwrap(), "default 100\n259:0 250\n");
}

#[test]
fn bad_values_and_vanished_cgroups_change_nothing() {
    let f = Fixture::new();
    let q = f.knob("io.cost.qos");
    let o = f.run(&["knob", "set", q.to_str().unwrap(), "259:0 rpct=101"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("io.cost.qos: rpct=101 out of range 0..=100"),
        "{}",
        stderr(&o)
    );
    let o = f.run(&["knob", "set", q.to_str().unwrap(), "259:0 min=80 max=20"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("min=80.00 greater than max=20.00"),
        "{}",
        stderr(&o)
    );
    assert_eq!(fs::read_to_string(&q).unwrap(), QOS);
    let gone = f.cg.join("gone/io.weight");
    let o = f.run(&["knob", "set", gone.to_str().unwrap(), "default 50"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("does not exist (vanished?); nothing changed"),
        "{}",
        stderr(&o)
    );
    let o = f.run(&[
        "knob",
        "set",
        f.cg.join("io.stat").to_str().unwrap(),
        "8:0 rbytes=1",
    ]);
    assert!(stderr(&o).contains("read-only"), "{}", stderr(&o));
    // A --hold too large for a Duration is an error, not a panic.
    let w = f.knob("io.weight");
    let o = f.run(&[
        "knob",
        "set",
        w.to_str().unwrap(),
        "default 50",
        "--hold",
        "1e300",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--hold 1e300"), "{}", stderr(&o));
    assert!(f.journals().is_empty());
    assert_eq!(
        fs::read_to_string(f.knob("io.weight")).unwrap(),
        "default 100\n259:0 250\n"
    );
}

#[test]
fn set_without_hold_keeps_and_get_parses() {
    let f = Fixture::new();
    let w = f.knob("io.weight");
    let o = f.run(&["knob", "set", w.to_str().unwrap(), "default 50"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read_to_string(&w).unwrap(), "default 50\n");
    assert!(f.journals().is_empty());
    let o = Command::new(BIN)
        .args(["knob", "get", f.knob("io.cost.qos").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout), QOS);
    fs::write(f.knob("io.max"), "8:0 rbps=oops\n").unwrap();
    let o = Command::new(BIN)
        .args(["knob", "get", f.knob("io.max").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("io.max: rbps=oops is not a number"),
        "{}",
        stderr(&o)
    );
}

/// A tuner writes the same knob many times: restoring puts the original back
/// with one write per knob (each io.cost write is paced), both on a normal
/// exit and when recovering a killed run's journal.
#[test]
fn repeated_changes_restore_to_the_original_with_one_write_each() {
    use iowarden::knobs::writer::{Writer, WriterConfig};
    let f = Fixture::new();
    let cfg = WriterConfig {
        state_dir: f.state.clone(),
        dry_run: false,
        iocost_min_interval: Duration::from_millis(0),
    };
    let (qos, weight) = (f.knob("io.cost.qos"), f.knob("io.weight"));
    let orig_weight = fs::read_to_string(&weight).unwrap();
    let mut w = Writer::new(cfg.clone());
    for v in [40, 45, 50] {
        w.set(&qos, &format!("259:0 enable=1 min={v} max={v}"))
            .unwrap();
    }
    w.set(&weight, "default 300").unwrap();
    w.set(&weight, "default 500").unwrap();
    w.set(&weight, "259:0 700").unwrap();
    let msgs = w.restore_all().unwrap();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert_eq!(fs::read_to_string(&qos).unwrap(), QOS);
    assert_eq!(fs::read_to_string(&weight).unwrap(), orig_weight);
    assert!(f.journals().is_empty());

    // A killed run's journal: three changes of the qos, the file left at the last.
    fs::create_dir_all(&f.state).unwrap();
    let mut journal = String::new();
    let mut prev = QOS.to_string();
    for (id, v) in [
        (1, "259:0 min=10 max=10"),
        (2, "259:0 min=20 max=20"),
        (3, "259:0 min=30 max=30"),
    ] {
        journal.push_str(
            &serde_json::json!({"op": "set", "id": id, "pid": 1, "time": 0,
                "path": qos, "previous": prev, "value": v})
            .to_string(),
        );
        journal.push('\n');
        prev = format!("{v}\n");
    }
    fs::write(f.state.join("journal-1-1.jsonl"), journal).unwrap();
    fs::write(&qos, &prev).unwrap();
    let msgs = Writer::new(cfg).recover().unwrap();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert!(msgs[0].contains("did not exit cleanly"), "{msgs:?}");
    assert_eq!(fs::read_to_string(&qos).unwrap(), QOS);
    assert!(f.journals().is_empty());
}
