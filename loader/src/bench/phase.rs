//! What one phase of a suite is made of: its tenants, the context it runs
//! in, the samples and results it yields (running it: phase_loop.rs).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use iowarden_exporters::{DeviceRef, Histogram};

use super::fio::{FioResult, Job};
use super::knob::KnobCtl;
use super::params::Params;
use crate::monitor::Monitor;

/// One fio job in its own cgroup.
#[derive(Clone, Debug)]
pub struct Tenant {
    pub name: String,
    pub job: Job,
    /// Weight for scoring (and for the knob, where it has weights).
    pub weight: u32,
    /// Seconds after the phase starts, or after the first completed I/O of
    /// tenant `after` (fio's start-up takes seconds on a slow guest: the
    /// interference must have begun).
    pub start_s: f64,
    pub after: Option<usize>,
    /// Stopped (SIGINT; fio still reports) when tenant `stop_with` ends:
    /// a best-effort app that must outlast the priority app.
    pub stop_with: Option<usize>,
    /// Stopped (SIGINT) this long after every tenant of the phase completed
    /// its first I/O: tenants whose fio starts seconds apart still share
    /// that long a window (`runtime_s` is then only a cap).
    pub hold_s: Option<f64>,
    pub runtime_s: f64,
}

impl Tenant {
    pub fn new(name: &str, job: Job, runtime_s: f64) -> Tenant {
        Tenant {
            name: name.into(),
            job,
            weight: 100,
            start_s: 0.0,
            after: None,
            stop_with: None,
            hold_s: None,
            runtime_s,
        }
    }

    /// Runs with the others for `hold_s` once all have started (see `hold_s`).
    pub fn together(name: &str, job: Job, hold_s: f64) -> Tenant {
        Tenant {
            hold_s: Some(hold_s),
            // A cap for fio's start-up skew; short, should the bench die.
            ..Tenant::new(name, job, hold_s + 30.0)
        }
    }
}

/// What one tenant did, by iowarden (block layer) and by fio.
#[derive(Clone, Debug)]
pub struct TenantRun {
    pub tenant: Tenant,
    /// Path of its cgroup relative to the io hierarchy root.
    pub cgroup: String,
    pub fio: FioResult,
    pub ios: u64,
    pub bytes: u64,
    /// Allocation-to-completion latency of all its requests.
    pub latency: Histogram,
}

/// Per-tenant cumulative counters at one poll, since the phase started.
#[derive(Clone, Debug)]
pub struct Sample {
    pub t: f64,
    pub ios: Vec<u64>,
    pub bytes: Vec<u64>,
    pub latency: Vec<Histogram>,
}

#[derive(Clone, Debug)]
pub struct PhaseRun {
    pub name: String,
    pub tenants: Vec<TenantRun>,
    pub samples: Vec<Sample>,
    pub wall_s: f64,
    /// Busy CPU time of the whole machine (/proc/stat) during the phase.
    pub cpu_busy_s: f64,
    /// Lock wait of the tenants' tasks, seconds (None: no lock programs).
    pub lock_wait_s: Option<f64>,
    /// iocost's effective vrate at the end (root io.stat cost.vrate), % —
    /// where iocost is on.
    pub iocost_vrate_pct: Option<f64>,
    pub bounds: Vec<f64>,
}

impl PhaseRun {
    pub fn total_ios(&self) -> u64 {
        self.tenants.iter().map(|t| t.ios).sum()
    }

    pub fn quantile(&self, q: f64) -> Option<f64> {
        let mut h = Histogram::default();
        for t in &self.tenants {
            h.add(&t.latency);
        }
        h.quantile(&self.bounds, q)
    }

    /// CPU seconds fio's own tasks used (fio's usr+sys over its runtime).
    pub fn task_cpu_s(&self) -> f64 {
        self.tenants
            .iter()
            .map(|t| (t.fio.usr_cpu_pct + t.fio.sys_cpu_pct) / 100.0 * t.fio.runtime_seconds)
            .sum()
    }

    pub fn tenant(&self, name: &str) -> Option<&TenantRun> {
        self.tenants.iter().find(|t| t.tenant.name == name)
    }
}

/// Busy CPU seconds in /proc/stat's `cpu` line (user nice system idle
/// iowait irq softirq steal ...): all but idle, iowait and steal.
pub fn parse_proc_stat_busy(text: &str, ticks_per_s: f64) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 7 {
        return None;
    }
    Some((v[0] + v[1] + v[2] + v[5] + v[6]) / ticks_per_s)
}

pub(super) fn cpu_busy_now() -> f64 {
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100)
        .max(1) as f64;
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|t| parse_proc_stat_busy(&t, hz))
        .unwrap_or(0.0)
}

/// The bench's parent cgroup and the tenants' cgroups under it.
pub struct Cgroups {
    pub io_root: PathBuf,
    pub v2: bool,
    pub parent: PathBuf,
}

impl Cgroups {
    pub fn create(io_root: &Path, v2: bool) -> Result<Cgroups> {
        if v2 {
            enable_io(io_root)?;
        }
        remove_stale(io_root);
        let parent = io_root.join(format!("iowarden-bench-{}", std::process::id()));
        std::fs::create_dir(&parent)
            .with_context(|| format!("creating the bench's cgroup {}", parent.display()))?;
        let cg = Cgroups {
            io_root: io_root.to_path_buf(),
            v2,
            parent,
        };
        if v2 {
            enable_io(&cg.parent)?;
        }
        Ok(cg)
    }

    pub fn make(&self, name: &str) -> Result<PathBuf> {
        let d = self.parent.join(name);
        std::fs::create_dir(&d).with_context(|| format!("creating cgroup {}", d.display()))?;
        Ok(d)
    }

    pub fn rel(&self, dir: &Path) -> String {
        format!(
            "/{}",
            dir.strip_prefix(&self.io_root)
                .unwrap_or(dir)
                .to_string_lossy()
                .trim_matches('/')
        )
    }

    /// Removes a tenant cgroup once its tasks are gone (they may still be
    /// exiting for a moment after fio's parent reaped them).
    pub fn remove(&self, dir: &Path) {
        for _ in 0..100 {
            if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        crate::say!(
            "iowarden: warning: could not remove cgroup {}",
            dir.display()
        );
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        if let Ok(rd) = std::fs::read_dir(&self.parent) {
            for e in rd.flatten() {
                if e.path().is_dir() {
                    self.remove(&e.path());
                }
            }
        }
        self.remove(&self.parent.clone());
    }
}

/// Removes the cgroups of benches that are gone (killed): `iowarden-bench-PID`
/// with no such process. The fio jobs they left (running until their
/// runtime cap) are stopped first: they are that bench's, not anyone's.
fn remove_stale(io_root: &Path) {
    let Ok(rd) = std::fs::read_dir(io_root) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("iowarden-bench-") else {
            continue;
        };
        if Path::new("/proc").join(pid).exists() {
            continue;
        }
        let dir = e.path();
        let children: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.flatten()
                    .map(|c| c.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        let procs = |c: &PathBuf| -> Vec<i32> {
            std::fs::read_to_string(c.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect()
        };
        for c in &children {
            for p in procs(c) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        for _ in 0..50 {
            if children.iter().all(|c| procs(c).is_empty()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let ok = children.iter().all(|c| std::fs::remove_dir(c).is_ok())
            && std::fs::remove_dir(&dir).is_ok();
        if ok {
            crate::say!(
                "iowarden: removed {} (left by pid {pid}, which did not exit cleanly)",
                dir.display()
            );
        } else {
            crate::say!(
                "iowarden: warning: could not remove {} (left by pid {pid})",
                dir.display()
            );
        }
    }
}

/// Enables the io controller for the children of `dir` (cgroup v2). The
/// root's subtree_control is left with io on: other cgroups may use it.
fn enable_io(dir: &Path) -> Result<()> {
    let p = dir.join("cgroup.subtree_control");
    let cur = std::fs::read_to_string(&p).unwrap_or_default();
    if cur.split_whitespace().any(|c| c == "io") {
        return Ok(());
    }
    std::fs::write(&p, "+io")
        .with_context(|| format!("enabling the io controller in {}", p.display()))
}

/// What the phases share.
pub struct Ctx {
    pub monitor: Monitor,
    pub cgroups: Cgroups,
    pub ctl: KnobCtl,
    pub dev: DeviceRef,
    pub dev_path: PathBuf,
    pub jobs_dir: PathBuf,
    pub fio_dir: PathBuf,
    pub params: Params,
    pub stop: Arc<AtomicBool>,
}

/// Knob setup of a phase: called with the tenants' cgroup directories
/// after they exist and before any fio starts.
pub type Setup<'a> = &'a mut dyn FnMut(&mut KnobCtl, &[PathBuf]) -> Result<()>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_busy_counts_user_system_and_interrupts() {
        let text = "cpu  100 5 50 1000 40 3 2 7 0 0\ncpu0 1 2 3 4 5 6 7\n";
        // user 100 + nice 5 + system 50 + irq 3 + softirq 2 = 160 ticks.
        assert_eq!(parse_proc_stat_busy(text, 100.0), Some(1.6));
        assert_eq!(parse_proc_stat_busy("cpu0 1 2\n", 100.0), None);
    }
}
