//! Least privilege of the running daemon, read from /proc/<pid>/status of
//! every thread: after attaching, `iowarden run` holds no capability in
//! any set (effective, permitted, inheritable, ambient, bounding), has
//! no_new_privs and, with `--user nobody`, runs as nobody — and still
//! reads the maps: a cgroup created after the drop shows up with its I/O,
//! also when the issue-stamp fallback attaches a program after the drop.
//! Needs root (BPF, loop devices, cgroups).

use crate::fixtures;

use std::time::Duration;

use fixtures::*;

/// `field` of /proc/<pid>/task/<tid>/status for every thread of `pid`.
fn thread_fields(pid: u32, field: &str) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|t| {
            let status = std::fs::read_to_string(t.unwrap().path().join("status")).unwrap();
            status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .unwrap_or_else(|| panic!("no {field} in {status}"))
                .trim()
                .to_string()
        })
        .collect()
}

fn assert_no_capabilities(d: &Daemon, uid: &str) {
    let pid = d.child.id();
    for set in ["CapEff:", "CapPrm:", "CapInh:", "CapAmb:", "CapBnd:"] {
        for v in thread_fields(pid, set) {
            assert_eq!(v, "0000000000000000", "{set} of a thread of {pid}");
        }
    }
    for v in thread_fields(pid, "NoNewPrivs:") {
        assert_eq!(v, "1");
    }
    for v in thread_fields(pid, "Uid:") {
        let ids: Vec<&str> = v.split_whitespace().collect();
        assert_eq!(ids, vec![uid; 4], "real, effective, saved, fs uid");
    }
}

/// Direct reads in a cgroup made now, on `dev`; waits (30 s at most) until
/// the daemon's snapshot shows that cgroup's reads.
fn new_cgroup_is_seen(d: &Daemon, dev: &LoopDev, name: &str) {
    let cg = Cgroup::new(name);
    succeed(&mut cg.command(
        "fio",
        &fio_args(&dev.path, "randread", "4k", 1, 200, "0", "64M"),
    ));
    let mut ios: u64 = 0;
    poll_until(Duration::from_secs(30), Duration::from_millis(200), || {
        ios = d
            .snapshot()
            .io
            .iter()
            .filter(|s| s.cgroup.path == cg.rel)
            .map(|s| s.ios)
            .sum();
        (ios >= 200).then_some(())
    })
    .unwrap_or_else(|| panic!("{name}: {ios} reads seen after 30 s"));
}

#[test]
fn run_as_nobody_holds_no_capability_and_still_sees_new_cgroups() {
    let dev = LoopDev::file(128);
    let (d, log) = Daemon::start_ephemeral(&["--device", &dev.name(), "--user", "nobody"], &[]);
    assert_no_capabilities(&d, "65534");
    assert!(
        log.text().contains("dropped every capability (kept: none"),
        "{}",
        log.text()
    );
    new_cgroup_is_seen(&d, &dev, "iowarden-privs-nobody");
    assert!(d.get("/metrics").unwrap().contains("iowarden_polls_total"));
}

/// As root without --user: uid 0 but no capability, so no file access
/// beyond what root's owner bits give; the program the issue-stamp fallback
/// attaches after the drop still attaches.
#[test]
fn run_as_root_drops_capabilities_and_attaches_the_fallback_later() {
    let dev = LoopDev::file(128);
    let (d, log) = Daemon::start_ephemeral(
        &["--device", &dev.name()],
        &[("IOWARDEN_IGNORE_KERNEL_ISSUE_STAMPS", "1")],
    );
    assert_no_capabilities(&d, "0");
    new_cgroup_is_seen(&d, &dev, "iowarden-privs-root");
    let text = log.text();
    assert!(text.contains("attached block_rq_issue"), "{text}");
    assert!(!text.contains("error"), "{text}");
}

#[test]
fn user_that_does_not_exist_is_refused() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_iowarden"))
        .args([
            "run",
            "--listen",
            "127.0.0.1:0",
            "--user",
            "no-such-user-iowarden",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--user no-such-user-iowarden: no such user"),
        "{err}"
    );
}
