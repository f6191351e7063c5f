//! `iowarden limits` on this host's own hierarchy (cgroup v1 blkio here,
//! v2 elsewhere): a read IOPS limit and a write bandwidth limit on a loop
//! device, judged while the cgroup reads through the limit. The read limit
//! acts, or is "in effect" with the reason its holds are not timed (this
//! kernel refuses fexit); on v1 the write limit says buffered writes escape
//! it. A cgroup that does not exist is refused before anything is traced.
//! The guest suite (t-18) judges the cgroup v2 reasons. Needs root.

use crate::fixtures;

use std::process::Command;

use fixtures::{io_root, Cgroup, LoopDev};

fn limits(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_iowarden"))
        .arg("limits")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_read_limit_in_use_and_a_v1_write_limit_are_judged_with_their_reasons() {
    let dev = LoopDev::file(64);
    let cg = Cgroup::new("iowarden-test-limits");
    let (_, v2) = io_root();
    let mm = std::fs::read_to_string(format!("/sys/block/{}/dev", dev.name())).unwrap();
    let mm = mm.trim();
    let (read_knob, write_knob) = match v2 {
        true => ("io.max", "io.max"),
        false => (
            "blkio.throttle.read_iops_device",
            "blkio.throttle.write_bps_device",
        ),
    };
    if v2 {
        std::fs::write(
            cg.dir.join("io.max"),
            format!("{mm} riops=100 wbps=1048576"),
        )
        .unwrap();
    } else {
        std::fs::write(cg.dir.join(read_knob), format!("{mm} 100")).unwrap();
        std::fs::write(cg.dir.join(write_knob), format!("{mm} 1048576")).unwrap();
    }
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
