//! The suite on a machine that has run nothing before: no tracefs, debugfs
//! or bpffs mounted. A machine where another tool mounted them must still
//! exercise that path, so the test re-runs itself in a private mount
//! namespace (`unshare -m`) with every such mount removed there, and runs
//! the daemon and the ftrace-dependent fixture (fixtures::Undelivered) in it.

use crate::fixtures;

use std::process::Command;

use fixtures::*;

/// Set, to the mount namespace it was started from, in the copy of this
/// test that runs inside the private namespace.
const INSIDE: &str = "IOWARDEN_TEST_PRIVATE_MOUNT_NS";
const TEST: &str = "daemon_and_ftrace_fixture_need_no_mounted_tracefs_debugfs_or_bpffs";
/// Filesystems a tool may have mounted that a fresh machine lacks.
const UNMOUNTED: [&str; 3] = ["tracefs", "debugfs", "bpf"];

#[test]
fn daemon_and_ftrace_fixture_need_no_mounted_tracefs_debugfs_or_bpffs() {
    if let Some(outer) = std::env::var_os(INSIDE) {
        inside_private_namespace(&outer.to_string_lossy());
        return;
    }
    // The test's name in the harness: its module path without the crate's.
    let name = format!("{}::{TEST}", module_path!().split_once("::").unwrap().1);
    let out = succeed(
        Command::new("unshare")
            .args(["--mount", "--propagation", "private"])
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", &name, "--nocapture", "--test-threads=1"])
            .env(INSIDE, mount_namespace()),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    // A filter matching nothing would also exit 0.
    assert!(
        text.contains("test result: ok. 1 passed"),
        "the copy in the private namespace did not run: {text}"
    );
}

fn mount_namespace() -> String {
    let ns = std::fs::read_link("/proc/self/ns/mnt").unwrap();
    ns.to_string_lossy().into_owned()
}

fn inside_private_namespace(outer: &str) {
    assert_ne!(
        mount_namespace(),
        outer,
        "{INSIDE} is set but this is the mount namespace it was started from: refusing to unmount"
    );
    // Deepest first: tracefs may sit on debugfs.
    for target in mounts_of(&UNMOUNTED).iter().rev() {
        succeed(Command::new("umount").arg("-l").arg(target));
    }
    assert_eq!(mounts_of(&UNMOUNTED), Vec::<String>::new());

    let dev = LoopDev::file(64);
    let cg = Cgroup::new(&format!("iowarden-test-fresh-{}", std::process::id()));
    let daemon = Daemon::start(free_port(), &["--device", &dev.name()]);
    let undelivered = Undelivered::start(daemon.child.id());
    let reads = 200;
    succeed(&mut cg.command(
        "dd",
        &[
            format!("if={}", dev.path),
            "of=/dev/null".into(),
            "bs=4k".into(),
            format!("count={reads}"),
            "iflag=direct".into(),
            "status=none".into(),
        ],
    ));
    assert!(
        undelivered.events() >= reads,
        "the fixture's ftrace instance recorded {} completions for {reads} reads",
        undelivered.events()
    );
    let counted: u64 = daemon
        .settled()
        .io
        .iter()
        .filter(|s| s.cgroup.id == cg.id())
        .map(|s| s.ios)
        .sum();
    assert!(
        counted + undelivered.so_far() >= reads,
        "iowarden counted {counted} of {reads} reads, {} undelivered",
        undelivered.so_far()
    );
    drop(undelivered);
    assert_eq!(
        mounts_of(&["tracefs"]),
        Vec::<String>::new(),
        "the fixture left its tracefs mounted"
    );
}

/// Mount points of filesystems of the types `fstypes`, in mount order.
fn mounts_of(fstypes: &[&str]) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let fstype = right.split_whitespace().next()?;
            fstypes
                .contains(&fstype)
                .then(|| left.split_whitespace().nth(4).unwrap().to_string())
        })
        .collect()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
