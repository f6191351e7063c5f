//! `iowarden bench` on this host: a loop device (its scheduler switched
//! only for it), the io controller on cgroup v1, so the v2 knobs are
//! refused by name and the suites run with no knob and the schedulers.
//! The guest (tests/vmtest/guest/t-50-bench.sh) runs io.cost on NVMe.
//! Run as root.

use crate::fixtures;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use fixtures::*;
use iowarden::bench::report::{Mark, Report};

const BIN: &str = env!("CARGO_BIN_EXE_iowarden");

/// One bench at a time: each checks that no bench cgroup is left behind.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn bench(args: &[&str], state: &Path) -> Output {
    Command::new(BIN)
        .arg("bench")
        .args(args)
        .arg("--state-dir")
        .arg(state)
        .output()
        .unwrap()
}

fn scheduler(dev: &LoopDev) -> String {
    std::fs::read_to_string(format!("/sys/block/{}/queue/scheduler", dev.name()))
        .unwrap()
        .trim()
        .to_string()
}

/// A loop device whose scheduler is "none", so that the bench's
/// mq-deadline knob changes it: mq-deadline is in every kernel iowarden
/// runs on, where BFQ may be a module or absent (this host's 6.18 is built
/// without it).
fn device_without_scheduler() -> LoopDev {
    let dev = LoopDev::file(512);
    std::fs::write(format!("/sys/block/{}/queue/scheduler", dev.name()), "none").unwrap();
    assert!(scheduler(&dev).contains("[none]"), "{}", scheduler(&dev));
    dev
}

/// The bench's cgroups (iowarden-bench-PID) left in the io hierarchy.
fn leftover_cgroups() -> Vec<String> {
    std::fs::read_dir(io_root().0)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("iowarden-bench-"))
        .collect()
}

fn report(dir: &Path) -> Report {
    let text = std::fs::read_to_string(dir.join("report.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn assert_cross_check(r: &Report) {
    assert!(!r.cross_check.is_empty());
    for c in &r.cross_check {
        let d = c.rel_diff.expect("fio measured bandwidth");
        println!(
            "{} {}: iowarden {:.1} MB/s fio {:.1} MB/s ({:.3} %)",
            c.phase,
            c.tenant,
            c.bw_bytes / 1e6,
            c.fio_bw_bytes / 1e6,
            d * 100.0
        );
        assert!(d <= 0.02, "{c:?}");
    }
}

#[test]
fn overhead_with_no_knob_reports_what_fio_saw() {
    let _serial = serial();
    let dev = LoopDev::file(512);
    let before = scheduler(&dev);
    let out = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let o = bench(
        &[
            "--device",
            &dev.name(),
            "--suite",
            "overhead",
            "--knobs",
            "none",
            "--quick",
            "--out",
            out.path().to_str().unwrap(),
        ],
        state.path(),
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success());
    let r = report(out.path());
    assert_eq!(r.schema, "iowarden-bench/1");
    assert_eq!(r.device.name, dev.name());
    let counts: Vec<usize> = r.overhead.iter().map(|x| x.cgroups).collect();
    assert_eq!(counts, [1, 4]);
    for x in &r.overhead {
        assert!(x.iops > 0.0 && x.p99_seconds.is_some() && x.cpu_per_io_seconds.is_some());
        // Block-layer IOPS against fio's, over the same runtimes.
        let rel = (x.iops - x.fio_iops).abs() / x.fio_iops;
        assert!(rel <= 0.02, "{x:?}");
    }
    assert_cross_check(&r);
    let none_d1 = r
        .verdicts
        .iter()
        .find(|v| v.desideratum == "D1")
        .expect("D1 verdict");
    assert_eq!(none_d1.mark, Mark::NotApplicable);
    // The summary printed is the one written.
    let md = std::fs::read_to_string(out.path().join("summary.md")).unwrap();
    assert_eq!(stdout, md);
    assert!(md.contains("| none | — baseline |"), "{md}");
    for f in ["tenant.fio", "lc.fio", "be.fio", "calibrate.fio"] {
        assert!(out.path().join("jobs").join(f).exists(), "{f}");
    }
    assert!(out.path().join("fio/overhead-none-4.t3.json").exists());
    assert_eq!(scheduler(&dev), before);
    assert!(leftover_cgroups().is_empty(), "{:?}", leftover_cgroups());
}

#[test]
fn schedulers_on_a_loop_device_with_lock_wait_and_restored_scheduler() {
    let _serial = serial();
    let dev = LoopDev::file(512);
    let path = format!("/sys/block/{}/queue/scheduler", dev.name());
    // Start from a scheduler that is not the first one the suite sets.
    std::fs::write(&path, "kyber").unwrap();
    let out = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let o = bench(
        &[
            "--device",
            &dev.name(),
            "--suite",
            "schedulers",
            "--knobs",
            "none,mq-deadline",
            "--quick",
            "--out",
            out.path().to_str().unwrap(),
        ],
        state.path(),
    );
    println!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success());
    assert!(scheduler(&dev).contains("[kyber]"), "{}", scheduler(&dev));
    let r = report(out.path());
    let names: Vec<&str> = r.schedulers.iter().map(|s| s.scheduler.as_str()).collect();
    assert_eq!(names, ["none", "mq-deadline"]);
    for s in &r.schedulers {
        assert!(
            s.iops > 0.0 && s.p99_interference_seconds.is_some(),
            "{s:?}"
        );
        // This kernel has lock:contention_begin/end: the lock programs ran.
        assert!(s.lock_wait_per_io_seconds.is_some(), "{s:?}");
        assert!(s.lock_source.contains("locks.bpf.c"), "{s:?}");
    }
    assert_cross_check(&r);
    assert!(leftover_cgroups().is_empty());
}

#[test]
fn refusals_change_nothing() {
    let _serial = serial();
    let dev = LoopDev::file(128);
    let out = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let o_dir = out.path().join("r");
    let run = |args: &[&str]| {
        let mut a = vec!["--out", o_dir.to_str().unwrap(), "--quick"];
        a.extend_from_slice(args);
        let o = bench(&a, state.path());
        assert!(!o.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let e = run(&["--device", &dev.name(), "--suite", "speed"]);
    assert!(e.contains("unknown suite 'speed'"), "{e}");
    let e = run(&[
        "--device",
        &dev.name(),
        "--suite",
        "fairness",
        "--knobs",
        "io.prio",
    ]);
    assert!(e.contains("unknown knob 'io.prio'"), "{e}");
    let e = run(&["--device", "no-such-disk", "--suite", "fairness"]);
    assert!(e.contains("unknown block device 'no-such-disk'"), "{e}");
    // A v2 knob on this v1 host: named, with the reason, before anything runs.
    if !io_root().1 {
        let e = run(&[
            "--device",
            &dev.name(),
            "--suite",
            "fairness",
            "--knobs",
            "io.cost,io.max",
        ]);
        assert!(
            e.contains("knobs unavailable on this host: io.max: the io controller is on cgroup v1")
                && e.contains("io.cost: the io controller is on cgroup v1")
                && e.contains("nothing changed"),
            "{e}"
        );
    }
    // Mounted: refused unless --force.
    assert!(Command::new("mkfs.ext4")
        .args(["-q", "-F", &dev.path])
        .status()
        .unwrap()
        .success());
    let mnt = tempfile::tempdir().unwrap();
    assert!(Command::new("mount")
        .arg(&dev.path)
        .arg(mnt.path())
        .status()
        .unwrap()
        .success());
    let e = run(&["--device", &dev.name(), "--suite", "overhead"]);
    let _ = Command::new("umount").arg(mnt.path()).status();
    assert!(e.contains("is mounted at") && e.contains("--force"), "{e}");
    assert!(!o_dir.exists(), "a refused run wrote {}", o_dir.display());
    assert!(leftover_cgroups().is_empty());
    assert_eq!(std::fs::read_dir(state.path()).unwrap().count(), 0);
}

#[test]
fn sigint_stops_the_run_and_restores_the_scheduler_and_cgroups() {
    let _serial = serial();
    let dev = device_without_scheduler();
    let before = scheduler(&dev);
    let out = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let child = Command::new(BIN)
        .args([
            "bench",
            "--device",
            &dev.name(),
            "--suite",
            "overhead",
            "--knobs",
            "none,mq-deadline",
            "--quick",
            "--out",
            out.path().to_str().unwrap(),
            "--state-dir",
            state.path().to_str().unwrap(),
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt while mq-deadline is on.
    wait_until(
        "mq-deadline never set",
        Duration::from_secs(120),
        Duration::from_millis(50),
        || scheduler(&dev).contains("[mq-deadline]").then_some(()),
    );
    std::thread::sleep(Duration::from_millis(500));
    signal(&child, nix::sys::signal::Signal::SIGINT);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    println!("{err}");
    assert!(!o.status.success());
    assert!(
        err.contains("interrupted") && err.contains("everything changed was restored"),
        "{err}"
    );
    assert_eq!(scheduler(&dev), before);
    assert!(leftover_cgroups().is_empty(), "{:?}", leftover_cgroups());
    // What was measured before the interrupt is kept.
    let r = report(out.path());
    assert!(r.overhead.iter().any(|x| x.knob.name() == "none"), "{r:?}");
}

#[test]
fn a_run_after_kill_9_restores_the_scheduler_and_removes_the_cgroups() {
    let _serial = serial();
    let dev = device_without_scheduler();
    let before = scheduler(&dev);
    let out = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let args = |knobs: &str| {
        vec![
            "bench".to_string(),
            "--device".into(),
            dev.name(),
            "--suite".into(),
            "overhead".into(),
            "--knobs".into(),
            knobs.into(),
            "--quick".into(),
            "--out".into(),
            out.path().display().to_string(),
            "--state-dir".into(),
            state.path().display().to_string(),
        ]
    };
    let mut child = Command::new(BIN)
        .args(args("mq-deadline"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until(
        "mq-deadline never set",
        Duration::from_secs(120),
        Duration::from_millis(50),
        || scheduler(&dev).contains("[mq-deadline]").then_some(()),
    );
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    let stale = format!("iowarden-bench-{}", child.id());
    assert!(scheduler(&dev).contains("[mq-deadline]"));
    assert!(leftover_cgroups().contains(&stale));
    // fio outlives the bench (until its runtime cap): the next run stops it.
    let procs = |d: &Path| -> usize {
        walk(d)
            .iter()
            .map(|c| {
                std::fs::read_to_string(c.join("cgroup.procs"))
                    .unwrap_or_default()
                    .lines()
                    .count()
            })
            .sum()
    };
    let dir = io_root().0.join(&stale);
    assert!(procs(&dir) > 0, "the killed bench's fio should still run");
    let o = Command::new(BIN).args(args("none")).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    println!("{err}");
    assert!(o.status.success());
    assert!(
        err.contains(&format!(
            "restored the {} scheduler of {} (left changed by pid {}",
            before.split('[').nth(1).unwrap().split(']').next().unwrap(),
            dev.name(),
            child.id()
        )),
        "{err}"
    );
    assert!(err.contains(&format!("removed {}", dir.display())), "{err}");
    assert_eq!(scheduler(&dev), before);
    assert!(leftover_cgroups().is_empty(), "{:?}", leftover_cgroups());
    assert_eq!(std::fs::read_dir(state.path()).unwrap().count(), 0);
}

/// A cgroup and every cgroup below it.
fn walk(d: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![d.to_path_buf()];
    if let Ok(rd) = std::fs::read_dir(d) {
        for e in rd.flatten() {
            if e.path().is_dir() {
                out.extend(walk(&e.path()));
            }
        }
    }
    out
}
