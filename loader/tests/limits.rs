//! `iowarden limits` on this host's own hierarchy (cgroup v1 blkio here,
//! v2 elsewhere): a read IOPS limit and a write bandwidth limit on a loop
//! device, judged while the cgroup reads through the limit. The read limit
//! acts, or is "in effect" with the reason its holds are not timed (this
//! kernel refuses fexit); on v1 the write limit says buffered writes escape
//! it. A cgroup that does not exist is refused before anything is traced.
//! `iowarden run` exports the same judgement, window by window
//! (iowarden_limit_state). The guest suite (t-18) judges the cgroup v2
//! reasons. Needs root.

use crate::fixtures;
use crate::promserver::free_port;

use std::process::Command;

use fixtures::{io_root, Cgroup, Daemon, LoopDev};

fn limits(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_iowarden"))
        .arg("limits")
        .args(args)
        .output()
        .unwrap()
}

/// A 100 IOPS read limit and a 1 MiB/s write limit on `dev` for `cg`
/// (io.max on v2, blkio.throttle.* on v1): (v2, read knob, write knob).
fn limit(cg: &Cgroup, dev: &LoopDev) -> (bool, &'static str, &'static str) {
    let (_, v2) = io_root();
    let mm = std::fs::read_to_string(format!("/sys/block/{}/dev", dev.name())).unwrap();
    let mm = mm.trim();
    if v2 {
        cg.write("io.max", &format!("{mm} riops=100 wbps=1048576"));
        return (true, "io.max", "io.max");
    }
    let (read_knob, write_knob) = (
        "blkio.throttle.read_iops_device",
        "blkio.throttle.write_bps_device",
    );
    cg.write(read_knob, &format!("{mm} 100"));
    cg.write(write_knob, &format!("{mm} 1048576"));
    (false, read_knob, write_knob)
}

#[test]
fn a_read_limit_in_use_and_a_v1_write_limit_are_judged_with_their_reasons() {
    let dev = LoopDev::file(64);
    let cg = Cgroup::new("iowarden-test-limits");
    let (v2, read_knob, write_knob) = limit(&cg, &dev);
    // 300 reads at 100 IOPS: 3 s, inside the 4 s window.
    let reader = cg
        .command(
            "sh",
            &[
                "-c".into(),
                format!(
                    "sleep 0.5; dd if={} of=/dev/null bs=4k count=300 iflag=direct status=none",
                    dev.path
                ),
            ],
        )
        .spawn()
        .unwrap();
    let out = limits(&[&cg.rel, "--device", &dev.name(), "--wait", "4s", "--json"]);
    let _ = { reader }.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let verdicts: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let find = |knob: &str| {
        verdicts
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["knob"] == knob && v["device"] == dev.name().as_str())
            .unwrap_or_else(|| panic!("no {knob} verdict in {verdicts:#}"))
            .clone()
    };
    let read = find(read_knob);
    let why = read["why"].as_str().unwrap();
    match read["state"].as_str().unwrap() {
        "acting" => assert!(why.contains("ms each"), "{read}"),
        "in_effect" => assert!(
            why.contains("300 I/Os") && why.contains("not timed"),
            "{read}"
        ),
        other => panic!("read limit {other}: {read}"),
    }
    if !v2 {
        let write = find(write_knob);
        assert_eq!(write["state"], "in_effect", "{write}");
        assert!(
            write["why"].as_str().unwrap().contains("buffered writes"),
            "{write}"
        );
    }
}

#[test]
fn a_cgroup_that_does_not_exist_is_refused_with_its_name() {
    let out = limits(&["/iowarden-test-no-such-cgroup", "--wait", "10s"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no cgroup '/iowarden-test-no-such-cgroup'"),
        "{err}"
    );
    assert!(!err.contains("on Linux"), "refused before tracing: {err}");
}

/// `run` judges the limits once a window (2 s here) and exports each as
/// iowarden_limit_state{state, reason}: the read limit, while 300 reads go
/// through it, in effect because its holds are not timed here (acting
/// where fexit attaches), and on v1 the write limit's buffered-writes
/// caveat; /snapshot.json has the same verdicts with the reason in words.
#[test]
fn run_exports_each_limit_with_its_state_and_reason() {
    let dev = LoopDev::file(64);
    let cg = Cgroup::new("iowarden-test-limits-run");
    let (v2, read_knob, write_knob) = limit(&cg, &dev);
    let daemon = Daemon::start(
        free_port(),
        &["--device", &dev.name(), "--limits-window", "2s"],
    );
    let mut reader = cg
        .command(
            "dd",
            &[
                format!("if={}", dev.path),
                "of=/dev/null".into(),
                "bs=4k".into(),
                "count=300".into(),
                "iflag=direct".into(),
                "status=none".into(),
            ],
        )
        .spawn()
        .unwrap();
    // Every distinct (knob, state, reason) line /metrics showed for the
    // cgroup, and the verdicts of /snapshot.json beside them: polled
    // faster than the window until the reads are done and a window more.
    let prefix = format!("iowarden_limit_state{{cgroup=\"{}\",", cg.rel);
    let mut seen = std::collections::BTreeSet::new();
    let mut snaps = Vec::new();
    let mut done_polls = 0;
    while done_polls < 12 {
        std::thread::sleep(std::time::Duration::from_millis(300));
        if reader.try_wait().unwrap().is_some() {
            done_polls += 1;
        }
        let metrics = daemon.get("/metrics").unwrap();
        seen.extend(
            metrics
                .lines()
                .filter(|l| l.starts_with(&prefix))
                .map(str::to_string),
        );
        snaps.push(daemon.snapshot());
    }
    reader.wait().unwrap();
    let seen: Vec<&String> = seen.iter().collect();
    println!("{seen:#?}");
    let has = |knob: &str, state: &str, reason: &str| {
        seen.iter().any(|l| {
            l.contains(&format!("knob=\"{knob}\",device=\"{}\",", dev.name()))
                && l.contains(&format!("state=\"{state}\",reason=\"{reason}\"}} 1"))
        })
    };
    let timed = snaps
        .last()
        .unwrap()
        .probes
        .iter()
        .all(|p| p.name != "throtl_held" || p.active);
    let (state, reason) = match timed {
        true => ("acting", "held"),
        false => ("in_effect", "holds_not_timed"),
    };
    assert!(
        has(read_knob, state, reason),
        "read limit never {state}/{reason}"
    );
    assert!(
        has(read_knob, "idle", "no_io"),
        "no window without the reads"
    );
    if !v2 {
        assert!(has(write_knob, "in_effect", "v1_buffered_writes"));
    }
    let why = snaps
        .iter()
        .flat_map(|s| &s.limits)
        .find(|v| v.knob.cgroup == cg.rel && v.knob.knob == read_knob && v.reason.label() == reason)
        .map(|v| v.why.clone())
        .expect("the verdict in /snapshot.json");
    assert!(why.contains("I/Os"), "{why}");
}
