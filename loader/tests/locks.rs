//! Lock contention against the real kernel: many fio threads doing direct
//! I/O on one loop device whose I/O scheduler (of that loop device only)
//! is switched between none, mq-deadline, bfq and kyber. The scheduler's
//! lock must show up as the workload cgroup's top lock site, named by its
//! symbolized function, and the workload's lock wait per I/O must drop with
//! scheduler none. Run as root.
//!
//! On this 2-vCPU VM, 8 jobs at queue depth 4 left the scheduler's lock
//! behind the loop driver's own (lo_work_lock, loop_queue_rq) and wake-ups;
//! 16 jobs at depth 16 make the scheduler lock the most contended one.

use crate::fixtures;

use std::process::{Command, Stdio};
use std::time::Duration;

use fixtures::*;
use iowarden::monitor::{Monitor, MonitorConfig, TraceOptions};
use iowarden::probes::locks::sites::strip_clone_suffix;
use iowarden::views::locks::{fmt_wait, lock_wait_per_io, site_rows};
use iowarden_exporters::Snapshot;

const JOBS: u32 = 16;
const QD: u32 = 16;
const RUNTIME_S: u32 = 5;

fn set_scheduler(dev: &LoopDev, sched: &str) -> bool {
    let p = format!("/sys/block/{}/queue/scheduler", dev.name());
    let avail = std::fs::read_to_string(&p).unwrap();
    if !avail
        .split_whitespace()
        .any(|s| s.trim_matches(['[', ']']) == sched)
    {
        return false;
    }
    std::fs::write(&p, sched).unwrap();
    assert!(std::fs::read_to_string(&p)
        .unwrap()
        .contains(&format!("[{sched}]")));
    true
}

/// Many threads of 4 KiB direct random reads in `cg`, for RUNTIME_S seconds.
fn hammer(dev: &LoopDev, cg: &Cgroup) {
    let args: Vec<String> = [
        "--name=locks".to_string(),
        format!("--filename={}", dev.path),
        "--direct=1".into(),
        "--ioengine=libaio".into(),
        "--rw=randread".into(),
        "--bs=4k".into(),
        format!("--iodepth={QD}"),
        format!("--numjobs={JOBS}"),
        "--time_based".into(),
        format!("--runtime={RUNTIME_S}"),
        "--size=1G".into(),
        "--group_reporting".into(),
        "--output-format=terse".into(),
    ]
    .to_vec();
    succeed(cg.command("fio", &args).stdout(Stdio::null()));
}

fn scheduler_site(site: &str, sched: &str) -> bool {
    let prefixes: &[&str] = match sched {
        "mq-deadline" => &["dd_", "deadline_"],
        "bfq" => &["bfq_"],
        "kyber" => &["kyber_"],
        _ => &[],
    };
    prefixes.iter().any(|p| site.starts_with(p))
}

#[test]
fn scheduler_lock_contention_by_site_and_cgroup() {
    // Lock contentions of the cgroup over its I/Os on the device.
    fn contentions_per_io(delta: &Snapshot, cg: &str, dev: &str) -> f64 {
        let n: u64 = site_rows(delta, Some(dev))
            .iter()
            .filter(|r| r.cgroup == cg)
            .map(|r| r.count)
            .sum();
        let ios: u64 = delta
            .io
            .iter()
            .filter(|s| s.cgroup.path == cg && s.device.name == dev)
            .map(|s| s.ios)
            .sum();
        n as f64 / ios.max(1) as f64
    }
    // Backed by tmpfs: a backing file on this host's disk re-issues the
    // reads through the disk's own scheduler (mq-deadline here), whose
    // locks would then show under "none" by chance.
    let dev = LoopDev::file_in("/dev/shm", 1024);
    let cg = Cgroup::new("iowarden-test-locks");
    let name = dev.name();
    let cfg = MonitorConfig::new(&TraceOptions {
        device: Some(dev.majmin()),
        probes: [iowarden::probes::locks::NAME].into(),
        ..Default::default()
    })
    .expect("the options are valid");
    let mut mon = Monitor::start(&cfg).expect("BPF programs load");
    let mut per_io = Vec::new();
    let run = |sched: &str, mon: &mut Monitor| -> Option<(f64, Snapshot)> {
        if !set_scheduler(&dev, sched) {
            eprintln!("{sched}: not available for {name}, skipped");
            return None;
        }
        let before = mon.poll().unwrap();
        hammer(&dev, &cg);
        let delta = mon.poll().unwrap().delta_since(&before);
        let w =
            lock_wait_per_io(&delta, &cg.rel, Some(&name)).expect("the workload's I/O was seen");
        let rows: Vec<_> = site_rows(&delta, Some(&name))
            .into_iter()
            .filter(|r| r.cgroup == cg.rel)
            .collect();
        eprintln!(
            "{sched:<12} lock wait per I/O {:>8}  top sites of {}: {}",
            fmt_wait(Some(w)),
            cg.rel,
            rows.iter()
                .take(4)
                .map(|r| format!(
                    "{} {} ({} x)",
                    r.site,
                    fmt_wait(Some(r.wait_seconds)),
                    r.count
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
        Some((w, delta))
    };
    let (none_w, none_d) = run("none", &mut mon).unwrap();
    // Only this cgroup's: the other tests of this file run at the same time
    // with schedulers of their own.
    let none_rows: Vec<_> = site_rows(&none_d, Some(&name))
        .into_iter()
        .filter(|r| r.cgroup == cg.rel)
        .collect();
    for sched in ["mq-deadline", "bfq", "kyber"] {
        assert!(
            !none_rows.iter().any(|r| scheduler_site(&r.site, sched)),
            "scheduler none shows a {sched} site: {none_rows:?}"
        );
    }
    for sched in ["mq-deadline", "bfq", "kyber"] {
        let Some((w, delta)) = run(sched, &mut mon) else {
            assert_ne!(
                sched, "mq-deadline",
                "mq-deadline is built into this kernel"
            );
            continue;
        };
        per_io.push((sched, w));
        let rows: Vec<_> = site_rows(&delta, Some(&name))
            .into_iter()
            .filter(|r| r.cgroup == cg.rel)
            .collect();
        let sched_rows: Vec<_> = rows
            .iter()
            .filter(|r| scheduler_site(&r.site, sched))
            .collect();
        assert!(
            !sched_rows.is_empty(),
            "{sched}: no contention inside the scheduler attributed to {}: {rows:?}",
            cg.rel
        );
        // The scheduler's lock sites as symbolized functions with their stacks.
        let locks = delta.locks.as_ref().unwrap();
        let s = locks
            .series
            .iter()
            .find(|s| s.cgroup.path == cg.rel && scheduler_site(&s.site, sched))
            .unwrap();
        let st = locks.stack(s.stack_id).expect("stack of the site");
        // A frame is "function+0xoffset"; the site drops the compiler's
        // clone suffix ("kyber_dispatch_cur_domain.isra.0").
        assert!(
            st.frames.iter().any(|f| f
                .split_once("+0x")
                .is_some_and(|(func, _)| strip_clone_suffix(func) == s.site)),
            "site {} not in its stack {:?}",
            s.site,
            st.frames
        );
        assert!(s.kind == "spin", "{sched}'s lock is a spinlock: {s:?}");
        if sched != "kyber" {
            // mq-deadline's and bfq's single per-queue lock is the most
            // contended of the workload's; kyber splits its locks per domain
            // and CPU, so its lock only has to be there. Ranked by how often
            // it is contended: on this VM a vCPU preempted while holding
            // some other lock (e.g. a runqueue's in try_to_wake_up) can add
            // milliseconds of wait in a handful of events, so wait time
            // alone is not a stable ranking.
            let top = rows.iter().max_by_key(|r| r.count).unwrap();
            assert!(
                scheduler_site(&top.site, sched),
                "{sched}: most contended site of {} is {} ({rows:?})",
                cg.rel,
                top.site
            );
            let (c, none_c) = (
                contentions_per_io(&delta, &cg.rel, &name),
                contentions_per_io(&none_d, &cg.rel, &name),
            );
            assert!(
                c >= 1.5 * none_c,
                "{sched}: {c:.2} contentions per I/O, not clearly above none's {none_c:.2} (wait per I/O {} vs {})",
                fmt_wait(Some(w)),
                fmt_wait(Some(none_w))
            );
        }
    }
    set_scheduler(&dev, "none");
    eprintln!(
        "lock wait per I/O of {} on {name} ({JOBS} jobs x QD{QD}, 4 KiB randread):",
        cg.rel
    );
    eprintln!("  none         {}", fmt_wait(Some(none_w)));
    for (s, w) in &per_io {
        eprintln!(
            "  {s:<12} {} ({:.1}x none)",
            fmt_wait(Some(*w)),
            w / none_w.max(1e-12)
        );
    }
}

/// A removed cgroup's lock series are freed: after it stays gone for a few
/// polls its rows leave the report and its slots return to the table (a
/// host with short-lived cgroups would fill it otherwise).
#[test]
fn removed_cgroup_frees_its_lock_slots() {
    let dev = LoopDev::file(1024);
    let cfg = MonitorConfig::new(&TraceOptions {
        probes: [iowarden::probes::locks::NAME].into(),
        ..Default::default()
    })
    .expect("the options are valid");
    let mut mon = Monitor::start(&cfg).expect("BPF programs load");
    let used = |mon: &Monitor| -> u64 {
        mon.runtime_stats(false)
            .tables
            .iter()
            .find(|t| t.table == "lock_series")
            .expect("lock table reported")
            .entries
    };
    assert!(set_scheduler(&dev, "mq-deadline"));
    let (rel, id, ours) = {
        let cg = Cgroup::new("iowarden-test-locks-gone");
        hammer(&dev, &cg);
        let snap = mon.poll().unwrap();
        let rows: Vec<u64> = snap
            .locks
            .as_ref()
            .unwrap()
            .series
            .iter()
            .filter(|s| s.cgroup.path == cg.rel)
            .map(|s| s.cgroup.id)
            .collect();
        (cg.rel.clone(), rows.first().copied(), rows.len() as u64)
        // the cgroup is removed here
    };
    set_scheduler(&dev, "none");
    assert!(ours > 0, "no lock series for {rel} while it ran");
    let before = used(&mon);
    let mut snap = mon.poll().unwrap();
    for _ in 0..5 {
        snap = mon.poll().unwrap();
    }
    let left: Vec<_> = snap
        .locks
        .as_ref()
        .unwrap()
        .series
        .iter()
        .filter(|s| Some(s.cgroup.id) == id)
        .map(|s| (s.cgroup.id, s.site.clone()))
        .collect();
    let after = used(&mon);
    eprintln!("{rel}: {ours} series; slots in use {before} -> {after}; left {left:?}");
    assert!(
        left.is_empty(),
        "series of the removed cgroup remain: {left:?}"
    );
    assert!(
        after + ours <= before + 4,
        "its {ours} slots were not freed: {before} -> {after} in use"
    );
}

/// `iowarden locks --folded`: flame-graph lines rooted at the workload's
/// cgroup, through the scheduler's function, valued in ns.
#[test]
fn locks_command_prints_folded_stacks() {
    let dev = LoopDev::file(1024);
    let cg = Cgroup::new("iowarden-test-locks-cli");
    assert!(set_scheduler(&dev, "mq-deadline"));
    let cli = Command::new(env!("CARGO_BIN_EXE_iowarden"))
        .args([
            "locks",
            "--device",
            &dev.name(),
            "--duration",
            "6s",
            "--folded",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    hammer(&dev, &cg);
    let out = cli.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let ours: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(&format!("{};", cg.rel)))
        .collect();
    assert!(
        ours.iter().any(|l| l.contains(";dd_")),
        "no folded stack of {} through mq-deadline:\n{text}",
        cg.rel
    );
    for l in &ours {
        let (stack, v) = l.rsplit_once(' ').unwrap();
        assert!(v.parse::<u64>().is_ok(), "value of {l}");
        assert!(!stack.contains(' '), "{l}");
    }
    set_scheduler(&dev, "none");
}

/// Metrics: wait time per site and cgroup, bounded to the top sites plus
/// "other"; drop counters exported.
#[test]
fn lock_metrics_are_bounded_and_name_the_scheduler() {
    let dev = LoopDev::file(1024);
    let cg = Cgroup::new("iowarden-test-locks-metrics");
    assert!(set_scheduler(&dev, "mq-deadline"));
    let d = Daemon::start(19631, &["--device", &dev.name(), "--locks-all"]);
    hammer(&dev, &cg);
    // The metrics of a poll that started after the hammering.
    d.settled();
    let m = d.get("/metrics").unwrap();
    set_scheduler(&dev, "none");
    let sites: std::collections::BTreeSet<&str> = m
        .lines()
        .filter(|l| l.starts_with("iowarden_lock_wait_seconds_total{"))
        .filter_map(|l| l.split("site=\"").nth(1)?.split('"').next())
        .collect();
    assert!(sites.contains("other"), "{sites:?}");
    assert!(sites.len() <= 11, "top 10 + other: {sites:?}");
    let ours = m.lines().find(|l| {
        l.starts_with("iowarden_lock_wait_seconds_total{site=\"dd_")
            && l.contains(&format!("cgroup=\"{}\"", cg.rel))
    });
    let v: f64 = ours
        .unwrap_or_else(|| panic!("no dd_* site for {}:\n{m}", cg.rel))
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(v > 0.0);
    assert!(m.contains("iowarden_lock_dropped_total{reason=\"stack\"}"));
    assert!(m.contains("iowarden_lock_filtered_total{mode=\"all\"}"));
    assert_promtool_accepts(&m);
}

/// A kernel without the lock tracepoints: the rest runs, the probe says why.
#[test]
fn missing_lock_tracepoints_degrade() {
    let out = Command::new(env!("CARGO_BIN_EXE_iowarden"))
        .args(["snapshot", "--json", "--wait", "200ms", "--locks"])
        .env("IOWARDEN_HIDE_TRACEPOINTS", "contention_end")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("locks inactive: kernel has no tracepoint lock:contention_end"),
        "{err}"
    );
    let snap = iowarden_exporters::decode_json(&String::from_utf8_lossy(&out.stdout)).unwrap();
    assert!(snap.locks.is_none());
    let p = snap.probes.iter().find(|p| p.name == "locks").unwrap();
    assert!(!p.active);
    // Off unless asked for, and it says so.
    let out = Command::new(env!("CARGO_BIN_EXE_iowarden"))
        .args(["snapshot", "--json", "--wait", "100ms"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("locks inactive: off by default: --locks")
    );
}
