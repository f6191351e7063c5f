//! What iowarden reports it costs is what it runs: with `--bpf-stats` and
//! every optional object switched on (read from `probes::optional::ALL`, so
//! a new probe is in this test by its one entry there), every BPF program
//! the daemon has attached, whichever object loaded it (block, iocost where
//! the kernel has its tracepoints, locks), has its run time, run count and
//! recursion misses in /metrics, under the program's name, and every
//! optional object says in `iowarden_probe_active` whether it loaded.
//! (block_rq_issue and block_rq_insert are loaded but attached only when
//! needed: until then they do not run.)
//! The nvme object is the guest's (t-01 prints its time per read).
//! Needs root (BPF, loop devices).

use crate::fixtures;

use std::collections::BTreeSet;

use fixtures::*;
use iowarden::probes::optional::ALL;

/// The `program` label of every sample of `family` in `metrics`.
fn programs_in(metrics: &str, family: &str) -> BTreeSet<String> {
    let prefix = format!("{family}{{program=\"");
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .filter_map(|rest| rest.split_once('"').map(|(p, _)| p.to_string()))
        .collect()
}

#[test]
fn every_program_the_daemon_attached_has_its_run_time_exported() {
    let dev = LoopDev::file(64);
    // Every optional object on: the switches of those off by default.
    let on: Vec<String> = ALL
        .iter()
        .filter(|p| !p.default_on)
        .map(|p| format!("--{}", p.switch))
        .collect();
    let name = dev.name();
    let mut args = vec!["--device", name.as_str(), "--bpf-stats"];
    args.extend(on.iter().map(String::as_str));
    let (daemon, _log) = Daemon::start_ephemeral(&args, &[]);
    // Serving means every object is loaded and attached.
    let metrics = daemon.get("/metrics").expect("/metrics");
    let held = attached_program_names(daemon.child.id());
    for family in [
        "iowarden_bpf_program_run_seconds_total",
        "iowarden_bpf_program_runs_total",
        "iowarden_bpf_program_recursion_misses_total",
    ] {
        let exported = programs_in(&metrics, family);
        let unreported: Vec<&String> = held
            .iter()
            .filter(|k| !exported.iter().any(|e| e.starts_with(k.as_str())))
            .collect();
        assert!(
            unreported.is_empty() && exported.len() == held.len(),
            "{family}: the daemon attached {held:?}; exported {exported:?}, without {unreported:?}"
        );
    }
    for p in ALL {
        let line = format!("iowarden_probe_active{{probe=\"{}\",", p.name);
        let status = metrics.lines().find(|l| l.starts_with(&line));
        assert!(
            status.is_some_and(|l| !l.contains("disabled by --") && !l.contains("off by default")),
            "the optional object {} switched on ({on:?}): its iowarden_probe_active is {status:?}",
            p.name
        );
    }
    // The host's kernel has iocost's tracepoints: its programs are among them.
    assert!(
        held.iter().any(|k| k.starts_with("iocost_")),
        "no iocost program attached: {held:?}"
    );
}
