//! Least privilege of the running daemon, read from /proc/<pid>/status of
//! every thread: after attaching, `iowarden run` holds no capability in
//! any set (effective, permitted, inheritable, ambient, bounding), has
//! no_new_privs and, with `--user nobody`, runs as nobody — and still
//! reads the maps: a cgroup created after the drop shows up with its I/O,
//! also when the issue-stamp fallback attaches a program after the drop.
//! The culprits' drain runs at nice -20 and every other thread at the
//! level the daemon started at, with RLIMIT_NICE as it was; without the privilege to lower it (CAP_SYS_NICE
//! out of the bounding set: this host's root has no CAP_SYS_RESOURCE, the
//! systemd unit's way) the drain says so and the daemon runs on.
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

/// (name, nice level) of every thread of `pid`, from its stat.
fn thread_nices(pid: u32) -> Vec<(String, i32)> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|t| {
            let stat = std::fs::read_to_string(t.unwrap().path().join("stat")).unwrap();
            let (head, rest) = stat.rsplit_once(')').unwrap();
            let name = head.split_once('(').unwrap().1.to_string();
            // Fields from the third on: nice is the 19th.
            let nice = rest.split_whitespace().nth(16).unwrap().parse().unwrap();
            (name, nice)
        })
        .collect()
}

/// The "Max nice priority" line of /proc/<pid>/limits.
fn nice_limit(pid: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/limits"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Max nice priority"))
        .unwrap()
        .to_string()
}

/// The drain at -20, every other thread at `rest`, RLIMIT_NICE as this
/// test's.
fn assert_only_the_drain_niced(d: &Daemon, rest: i32) {
    let pid = d.child.id();
    let nices = thread_nices(pid);
    let drain: Vec<i32> = nices
        .iter()
        .filter(|(n, _)| n.starts_with("iowarden-culpri"))
        .map(|&(_, v)| v)
        .collect();
    assert_eq!(drain, vec![-20], "{nices:?}");
    assert!(
        nices
            .iter()
            .all(|(n, v)| n.starts_with("iowarden-culpri") || *v == rest),
        "{nices:?}"
    );
    assert_eq!(nice_limit(&pid.to_string()), nice_limit("self"));
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
    assert_only_the_drain_niced(&d, 0);
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
    assert_only_the_drain_niced(&d, 0);
    new_cgroup_is_seen(&d, &dev, "iowarden-privs-root");
    let text = log.text();
    assert!(text.contains("attached block_rq_issue"), "{text}");
    assert!(!text.contains("error"), "{text}");
}

/// Without CAP_SYS_NICE or CAP_SYS_RESOURCE (this host's root has no
/// CAP_SYS_RESOURCE; setpriv takes CAP_SYS_NICE out of the bounding set,
/// so root's exec gets neither): the drain stays at nice 0 and says what
/// that risks; the daemon runs and drops its capabilities as ever.
#[test]
fn without_the_privilege_to_lower_it_the_drain_says_so() {
    let dev = LoopDev::file(128);
    let (d, log) = Daemon::start_ephemeral_via(
        &["setpriv", "--bounding-set", "-sys_nice,-sys_resource"],
        &["--device", &dev.name()],
        &[],
    );
    assert_no_capabilities(&d, "0");
    let nices = thread_nices(d.child.id());
    assert!(nices.iter().all(|(_, v)| *v == 0), "{nices:?}");
    poll_until(Duration::from_secs(10), Duration::from_millis(100), || {
        log.text()
            .contains("culprits: the drain runs at nice 0")
            .then_some(())
    })
    .unwrap_or_else(|| panic!("{}", log.text()));
    assert!(
        log.text().contains("reason=\"culprit_lost\""),
        "{}",
        log.text()
    );
    new_cgroup_is_seen(&d, &dev, "iowarden-privs-nice");
}

/// Started at nice 5 (a unit's Nice=5): the drain at -20 all the same,
/// every other thread back at 5, where it started.
#[test]
fn started_niced_the_rest_goes_back_to_where_it_was() {
    let dev = LoopDev::file(128);
    let (d, _log) =
        Daemon::start_ephemeral_via(&["nice", "-n", "5"], &["--device", &dev.name()], &[]);
    assert_only_the_drain_niced(&d, 5);
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
