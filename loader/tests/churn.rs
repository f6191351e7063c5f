//! Fleet scale on the real kernel: a thousand live cgroups doing I/O on a
//! loop device stacked on another (each a series on both), and ten
//! thousand cgroups created, doing one read and removed. Nothing may be
//! dropped, the daemon stays small, and the series of removed cgroups are
//! released. Needs root and the io controller on cgroup v1 or v2.

use crate::fixtures;

use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fixtures::*;
use iowarden_exporters::Snapshot;

/// A parent cgroup for the test's children, removed (children first) on drop.
struct Parent {
    dir: PathBuf,
    v2: bool,
}

impl Parent {
    fn new(name: &str) -> Parent {
        let (root, v2) = io_root();
        let dir = root.join(name);
        remove_tree(&dir);
        std::fs::create_dir(&dir).unwrap();
        if v2 {
            std::fs::write(dir.join("cgroup.subtree_control"), "+io").unwrap();
        }
        Parent { dir, v2 }
    }
}

impl Drop for Parent {
    fn drop(&mut self) {
        move_self_to(&io_root().0, self.v2);
        remove_tree(&self.dir);
    }
}

fn remove_tree(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                remove_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

fn gettid() -> i64 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

/// Moves this thread into cgroup `dir`: the bios it submits are charged
/// there. v1 moves one thread (`tasks`); v2 needs a threaded cgroup for
/// that, so the test moves its process there only on v1.
fn move_self_to(dir: &Path, v2: bool) {
    let file = if v2 { "cgroup.procs" } else { "tasks" };
    let id = if v2 {
        std::process::id() as i64
    } else {
        gettid()
    };
    std::fs::write(dir.join(file), id.to_string()).unwrap();
}

/// One 4 KiB direct read at `offset` from `dev`.
fn read_4k(dev: &str, offset: u64) {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(dev)
        .unwrap();
    let mut buf = vec![0u8; 8192];
    let off = buf.as_ptr().align_offset(4096);
    f.read_exact_at(&mut buf[off..off + 4096], offset).unwrap();
}

/// A 64 MiB loop device whose blocks are all written, so that its reads
/// reach the backing disk (a hole would be read as zeros without I/O).
fn filled_loop() -> LoopDev {
    let dev = LoopDev::file(64);
    dev.fill(64);
    dev
}

fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{field}"))
}

/// The daemon's resident memory (heap, its binary's pages and the BPF
/// arrays it maps).
fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

fn metric(d: &Daemon, prefix: &str) -> f64 {
    sample(&d.get("/metrics").expect("/metrics"), prefix).unwrap_or_else(|| panic!("no {prefix}"))
}

fn series_entries(d: &Daemon) -> u64 {
    metric(d, r#"iowarden_map_entries{map="series"} "#) as u64
}

fn drops(s: &Snapshot) -> u64 {
    let d = &s.drops;
    d.slot_table_full + d.device_table_full
}

/// Polls until `done` holds (the daemon polls every 500 ms); panics with
/// `what` after 60 s, which only a broken release would take.
fn wait_for(d: &Daemon, what: &str, done: &dyn Fn(&Snapshot) -> bool) -> Snapshot {
    let mut s = Snapshot::default();
    poll_until(Duration::from_secs(60), Duration::from_millis(200), || {
        let snap = d.snapshot();
        if done(&snap) {
            return Some(snap);
        }
        s = snap;
        None
    })
    .unwrap_or_else(|| {
        panic!(
            "{what}: not after 60 s; {} series; drops {:?}; {:?}",
            s.io.len(),
            s.drops,
            s.io.iter()
                .fold(std::collections::BTreeMap::new(), |mut m, x| {
                    *m.entry(x.device.name.as_str()).or_insert(0) += x.ios;
                    m
                })
        )
    })
}

fn under(s: &Snapshot, prefix: &str) -> usize {
    s.io.iter()
        .filter(|x| x.cgroup.path.starts_with(prefix))
        .count()
}

/// Requests and bytes on device `name`, summed over every cgroup.
fn device_totals(s: &Snapshot, name: &str) -> (u64, u64) {
    s.io.iter()
        .filter(|x| x.device.name == name)
        .fold((0, 0), |(n, b), x| (n + x.ios, b + x.bytes))
}

#[test]
fn thousand_live_cgroups_lose_nothing() {
    // Reads go to `upper`, whose per-cgroup loop worker re-issues each on
    // `lower` under the same cgroup: both devices see only this test's I/O,
    // so their totals are the test's reads. (The backing disk also carries
    // the host's.)
    let lower = LoopDev::file(64);
    let upper = LoopDev::over(&lower);
    let daemon = Daemon::start(19641, &[]);
    let pid = daemon.child.id();
    let undelivered = Undelivered::start(pid);
    let name = "iowarden-fleet-live";
    let parent = Parent::new(name);
    let before = daemon.snapshot();
    let entries_before = series_entries(&daemon);
    let (root, _) = io_root();
    let n = 1000u64;
    for i in 0..n {
        let dir = parent.dir.join(format!("c{i}"));
        std::fs::create_dir(&dir).unwrap();
        move_self_to(&dir, parent.v2);
        read_4k(&upper.path, i * 4096);
        move_self_to(&root, parent.v2);
    }
    let prefix = format!("/{name}/");
    let (up, low) = (upper.name(), lower.name());
    // Every read has completed on both devices: a poll that starts now
    // counts them all, but for those the kernel did not deliver to BPF.
    let s = daemon.settled();
    let undelivered = undelivered.so_far();
    for dev in [&up, &low] {
        let (ios, bytes) = device_totals(&s, dev);
        assert!(
            ios <= n && n - ios <= undelivered && bytes == ios * 4096,
            "{dev}: {ios} reads, {bytes} bytes of {n}; {undelivered} not delivered to BPF"
        );
    }
    // The kernel charges a bio to its cgroup's closest ancestor when it
    // cannot allocate the cgroup's blkg (GFP_NOWAIT), and the loop driver
    // re-issues from its root worker when it cannot allocate a cgroup's
    // worker: such reads are in the totals above, under another cgroup.
    let children = |dev: &str| -> Vec<_> {
        s.io.iter()
            .filter(|x| x.cgroup.path.starts_with(&prefix) && x.device.name == dev)
            .collect()
    };
    let (on_upper, on_lower) = (children(&up), children(&low));
    assert!(
        on_upper
            .iter()
            .chain(&on_lower)
            .all(|x| x.ios == 1 && x.bytes == 4096),
        "{:?}",
        on_upper
            .iter()
            .chain(&on_lower)
            .find(|x| x.ios != 1 || x.bytes != 4096)
    );
    println!(
        "{n} cgroups: {} series on {up}, {} on {low} (the kernel charged {} and {} reads to other cgroups or did not deliver them, {undelivered} on all devices); table {} -> {} entries; drops {:?}; RSS {} KiB",
        on_upper.len(),
        on_lower.len(),
        n - on_upper.len() as u64,
        n - on_lower.len() as u64,
        entries_before,
        series_entries(&daemon),
        s.drops,
        rss_kib(pid)
    );
    println!(
        "RssAnon {} KiB, RssFile {} KiB",
        status_kib(pid, "RssAnon:"),
        status_kib(pid, "RssFile:")
    );
    assert_eq!(drops(&s), drops(&before), "drops: {:?}", s.drops);
    assert!(rss_kib(pid) <= 64 * 1024, "RSS {} KiB", rss_kib(pid));

    drop(parent);
    assert_released(&daemon, &before, entries_before, &prefix);
}

/// The table comes back to as many entries as before, but for series that
/// are new and not the test's (other I/O on this host while the test ran).
/// Polls until it does (a removed cgroup's slots go two polls after it is
/// gone); fails after 60 s.
fn assert_released(d: &Daemon, before: &Snapshot, entries_before: u64, prefix: &str) {
    let keys = |s: &Snapshot| -> std::collections::HashSet<(u64, String, String)> {
        s.io.iter()
            .filter(|x| !x.cgroup.path.is_empty() && !x.cgroup.path.starts_with(prefix))
            .map(|x| (x.cgroup.id, x.device.name.clone(), format!("{:?}", x.op)))
            .collect()
    };
    let (mut entries, mut new_others) = (0, 0);
    poll_until(Duration::from_secs(60), Duration::from_millis(200), || {
        let after = d.snapshot();
        new_others = keys(&after).difference(&keys(before)).count() as u64;
        entries = series_entries(d);
        (entries == entries_before + new_others && under(&after, prefix) == 0).then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "series table after release: {entries} entries, {entries_before} before, {new_others} other new series"
        )
    });
}

#[test]
fn ten_thousand_short_lived_cgroups_lose_nothing() {
    let dev = filled_loop();
    let daemon = Daemon::start(19642, &[]);
    let pid = daemon.child.id();
    let name = "iowarden-fleet-churn";
    let parent = Parent::new(name);
    let before = daemon.snapshot();
    let entries_before = series_entries(&daemon);
    let (root, _) = io_root();
    let n = 10_000u64;
    // At most 500 cgroups a second (fleets see hundreds; the requirement is
    // >= 200): the pace, not an assertion, so a slow machine only goes slower.
    let per_cycle = Duration::from_micros(2000);
    let t0 = Instant::now();
    let mut peak_rss = 0;
    for i in 0..n {
        if let Some(wait) = (per_cycle * i as u32).checked_sub(t0.elapsed()) {
            std::thread::sleep(wait);
        }
        let dir = parent.dir.join(format!("c{i}"));
        std::fs::create_dir(&dir).unwrap();
        move_self_to(&dir, parent.v2);
        read_4k(&dev.path, (i % 16384) * 4096);
        move_self_to(&root, parent.v2);
        std::fs::remove_dir(&dir).unwrap();
        if i % 1000 == 999 {
            peak_rss = peak_rss.max(rss_kib(pid));
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let prefix = format!("/{name}/");
    assert_released(&daemon, &before, entries_before, &prefix);
    let after = daemon.snapshot();
    println!(
        "{n} create/read/remove cycles in {secs:.1} s ({:.0} cgroups/s); drops {:?}; peak RSS {peak_rss} KiB; table {} -> {} entries",
        n as f64 / secs,
        after.drops,
        entries_before,
        series_entries(&daemon)
    );
    assert_eq!(drops(&after), drops(&before), "drops: {:?}", after.drops);
    assert!(peak_rss <= 64 * 1024, "RSS {peak_rss} KiB");
    assert_eq!(daemon.snapshot().schema, before.schema, "daemon alive");
}

#[test]
fn a_full_series_table_says_so_once_and_counts_the_drops() {
    let dev = filled_loop();
    let (daemon, log) = Daemon::start_logged(19643, "200ms", &["--max-series", "64"], &[]);
    let name = "iowarden-fleet-full";
    let parent = Parent::new(name);
    let (root, _) = io_root();
    // 200 cgroups, each a series on the loop device and on its disk: 400
    // series for 64 slots.
    for i in 0..200u64 {
        let dir = parent.dir.join(format!("c{i}"));
        std::fs::create_dir(&dir).unwrap();
        move_self_to(&dir, parent.v2);
        read_4k(&dev.path, i * 4096);
        move_self_to(&root, parent.v2);
    }
    let s = wait_for(&daemon, "drops counted", &|s| s.drops.slot_table_full > 0);
    std::thread::sleep(Duration::from_millis(600));
    let text = log.text();
    let said = text.matches("the series table is full (64 slots)").count();
    println!("{} drops; log:\n{text}", s.drops.slot_table_full);
    assert_eq!(said, 1, "{text}");
    assert!(
        metric(
            &daemon,
            r#"iowarden_dropped_total{reason="slot_table_full"} "#
        ) > 0.0
    );
    drop(parent);
}

#[test]
fn a_capacity_over_the_memory_budget_is_refused_with_the_numbers() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_iowarden"))
        .args([
            "run",
            "--listen",
            "127.0.0.1:19644",
            "--max-series",
            "16384",
            "--shards",
            "64",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("--max-series 16384 needs")
            && err.contains("16384 slots x 64 shards")
            && err.contains("budget"),
        "{err}"
    );
    for bad in [["--shards", "3"], ["--max-series", "0"]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_iowarden"))
            .args(["run", "--listen", "127.0.0.1:19644"])
            .args(bad)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(bad[0]),
            "{bad:?}: {err}"
        );
    }
}
