//! Which knobs a host offers, and setting them for a run: cgroup io knobs
//! through the journaled writer (restored after each knob, on exit, on
//! Ctrl-C, and by the next run after a kill -9), the device's I/O
//! scheduler through a guard that puts the original back.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use iowarden_exporters::DeviceRef;

use super::params::Knob;
use crate::host::devices::parse_scheduler_list;
use crate::knobs::writer::{Writer, WriterConfig};

/// What the host offers, gathered once (see [`HostFacts::probe`]).
#[derive(Clone, Debug, PartialEq)]
pub struct HostFacts {
    /// Root of the io controller's hierarchy.
    pub io_root: PathBuf,
    /// cgroup v2 (false: the v1 blkio hierarchy).
    pub v2: bool,
    /// io.cost.qos at the v2 root (CONFIG_BLK_CGROUP_IOCOST).
    pub iocost: bool,
    /// io.latency in a child cgroup (CONFIG_BLK_CGROUP_IOLATENCY).
    pub iolatency: bool,
    /// io.max in a child cgroup (CONFIG_BLK_DEV_THROTTLING).
    pub iomax: bool,
    /// I/O schedulers the device can switch to (loaded or loadable).
    pub schedulers: Vec<String>,
}

/// Why `knob` cannot be benchmarked here, or None.
pub fn unavailable(knob: Knob, f: &HostFacts) -> Option<String> {
    let v1 = || {
        format!(
            "the io controller is on cgroup v1 here ({}); {knob} is a cgroup v2 knob",
            f.io_root.display()
        )
    };
    match knob {
        Knob::None => None,
        Knob::IoCost if !f.v2 => Some(v1()),
        Knob::IoCost if !f.iocost => Some(
            "no io.cost.qos at the cgroup2 root (kernel without CONFIG_BLK_CGROUP_IOCOST)".into(),
        ),
        Knob::IoMax if !f.v2 => Some(v1()),
        Knob::IoMax if !f.iomax => {
            Some("no io.max in child cgroups (kernel without CONFIG_BLK_DEV_THROTTLING)".into())
        }
        Knob::IoLatency if !f.v2 => Some(v1()),
        Knob::IoLatency if !f.iolatency => Some(
            "no io.latency in child cgroups (kernel without CONFIG_BLK_CGROUP_IOLATENCY)".into(),
        ),
        k if k.is_scheduler() && !f.schedulers.iter().any(|s| s == k.scheduler()) => Some(format!(
            "the device cannot use the {} scheduler (offered: {}; module not found)",
            k.scheduler(),
            f.schedulers.join(", ")
        )),
        _ => None,
    }
}

/// Knobs left out, with the reason.
pub type Skipped = Vec<(Knob, String)>;

/// Splits the requested knobs into available ones and (knob, reason) for
/// the rest. Explicitly requested knobs that are unavailable are an error
/// naming every one of them (nothing is changed); `all` skips them.
pub fn select(requested: &[Knob], explicit: bool, f: &HostFacts) -> Result<(Vec<Knob>, Skipped)> {
    let mut ok = Vec::new();
    let mut missing = Vec::new();
    for &k in requested {
        match unavailable(k, f) {
            None => ok.push(k),
            Some(why) => missing.push((k, why)),
        }
    }
    if explicit && !missing.is_empty() {
        bail!(
            "knobs unavailable on this host: {}; nothing changed",
            missing
                .iter()
                .map(|(k, w)| format!("{k}: {w}"))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok((ok, missing))
}

impl HostFacts {
    /// Looks at the running host. `probe_dir` is a child cgroup of the
    /// io hierarchy (the bench's own) where per-cgroup files show up.
    pub fn probe(io_root: &Path, v2: bool, probe_dir: &Path, dev: &DeviceRef) -> HostFacts {
        let sched_path = sched_file(dev);
        let (mut schedulers, _) =
            parse_scheduler_list(&std::fs::read_to_string(sched_path).unwrap_or_default());
        // Writing a scheduler's name loads its module: count the loadable ones.
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mods = std::fs::read_to_string(format!("/lib/modules/{}/modules.dep", release.trim()))
            .unwrap_or_default();
        for (name, module) in [
            ("bfq", "/bfq.ko"),
            ("kyber", "/kyber-iosched.ko"),
            ("mq-deadline", "/mq-deadline.ko"),
        ] {
            if !schedulers.iter().any(|s| s == name) && mods.contains(module) {
                schedulers.push(name.to_string());
            }
        }
        HostFacts {
            io_root: io_root.to_path_buf(),
            v2,
            iocost: v2 && io_root.join("io.cost.qos").exists(),
            iolatency: v2 && probe_dir.join("io.latency").exists(),
            iomax: v2 && probe_dir.join("io.max").exists(),
            schedulers,
        }
    }
}

fn sched_file(dev: &DeviceRef) -> PathBuf {
    Path::new("/sys/block")
        .join(&dev.name)
        .join("queue/scheduler")
}

/// Sets knobs for the runs of one knob and undoes them afterwards.
pub struct KnobCtl {
    writer: Writer,
    state_dir: PathBuf,
    pub io_root: PathBuf,
    pub v2: bool,
    pub dev: DeviceRef,
    /// The scheduler found at start, put back on drop if it was changed.
    original_sched: Option<String>,
    sched_changed: bool,
    pub log: Vec<String>,
}

impl KnobCtl {
    pub fn new(io_root: &Path, v2: bool, dev: &DeviceRef, state_dir: &Path) -> KnobCtl {
        KnobCtl {
            state_dir: state_dir.to_path_buf(),
            writer: Writer::new(WriterConfig {
                state_dir: state_dir.to_path_buf(),
                ..Default::default()
            }),
            io_root: io_root.to_path_buf(),
            v2,
            dev: dev.clone(),
            original_sched: None,
            sched_changed: false,
            log: Vec::new(),
        }
    }

    /// Restores what killed runs left changed: their journaled knobs, and
    /// the schedulers they noted (`bench-scheduler-DEV`, "PID ORIGINAL").
    pub fn recover(&mut self) -> Result<()> {
        for m in self.writer.recover()? {
            crate::say!("iowarden: {m}");
        }
        let Ok(rd) = std::fs::read_dir(&self.state_dir) else {
            return Ok(());
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(dev) = name.strip_prefix("bench-scheduler-") else {
                continue;
            };
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            let Some((pid, sched)) = text.trim().split_once(' ') else {
                continue;
            };
            if Path::new("/proc").join(pid).exists() {
                continue; // a live bench owns it
            }
            let p = Path::new("/sys/block").join(dev).join("queue/scheduler");
            if p.exists() {
                std::fs::write(&p, sched).with_context(|| {
                    format!("restoring the {sched} scheduler of {dev} (left changed by pid {pid})")
                })?;
                crate::say!("iowarden: restored the {sched} scheduler of {dev} (left changed by pid {pid}, which did not exit cleanly)");
            }
            let _ = std::fs::remove_file(e.path());
        }
        Ok(())
    }

    fn sched_note(&self) -> PathBuf {
        self.state_dir
            .join(format!("bench-scheduler-{}", self.dev.name))
    }

    pub fn devnum(&self) -> String {
        format!("{}:{}", self.dev.major, self.dev.minor)
    }

    /// One journaled write.
    pub fn set(&mut self, path: &Path, value: &str) -> Result<()> {
        let m = self.writer.set(path, value)?;
        self.log.push(m);
        Ok(())
    }

    /// Switches the device's scheduler (remembering the original once).
    pub fn set_scheduler(&mut self, name: &str) -> Result<()> {
        let p = sched_file(&self.dev);
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        let (_, cur) = parse_scheduler_list(&text);
        if self.original_sched.is_none() {
            self.original_sched = cur.clone();
        }
        if cur.as_deref() == Some(name) {
            return Ok(());
        }
        if !self.sched_changed {
            // Noted (fsynced) before the change, for a run after a kill -9.
            let orig = self.original_sched.clone().unwrap_or_else(|| "none".into());
            std::fs::create_dir_all(&self.state_dir)?;
            let mut f = std::fs::File::create(self.sched_note())?;
            std::io::Write::write_all(
                &mut f,
                format!("{} {orig}\n", std::process::id()).as_bytes(),
            )?;
            f.sync_all()?;
        }
        self.sched_changed = true;
        std::fs::write(&p, name)
            .with_context(|| format!("switching {} to the {name} scheduler", self.dev.name))?;
        self.log
            .push(format!("scheduler of {} set to {name}", self.dev.name));
        Ok(())
    }

    /// The state every phase starts from: the given scheduler and no
    /// iocost on the device (a run's "none" must not measure an iocost
    /// someone left enabled; io.cost phases enable it after this).
    pub fn baseline(&mut self, sched: &str) -> Result<()> {
        self.set_scheduler(sched)?;
        let qos = self.io_root.join("io.cost.qos");
        let on = std::fs::read_to_string(&qos).ok().is_some_and(|t| {
            crate::knobs::lines::device_line(&t, &self.devnum())
                .and_then(|l| crate::knobs::lines::field(l, "enable"))
                == Some("1")
        });
        if on {
            let line = format!("{} enable=0", self.devnum());
            self.set(&qos, &line)?;
        }
        Ok(())
    }

    /// io.weight (iocost) or io.bfq.weight (bfq) of one of the bench's
    /// cgroups. The bfq file is not a knob the writer journals; it lives
    /// and dies with the bench's own cgroup.
    pub fn set_weight(&mut self, knob: Knob, cgroup: &Path, w: u32) -> Result<()> {
        match knob {
            Knob::IoCost => self.set(&cgroup.join("io.weight"), &format!("default {w}")),
            Knob::Bfq => {
                // bfq's weights are 1..1000.
                let w = w.clamp(1, 1000);
                let (file, value) = if self.v2 {
                    ("io.bfq.weight", format!("default {w}"))
                } else {
                    ("blkio.bfq.weight", w.to_string())
                };
                std::fs::write(cgroup.join(file), value)
                    .with_context(|| format!("writing {}/{file}", cgroup.display()))
            }
            _ => Ok(()),
        }
    }

    /// Undoes every journaled write (the scheduler stays until drop).
    pub fn restore(&mut self) -> Result<()> {
        for m in self.writer.restore_all()? {
            self.log.push(m);
        }
        Ok(())
    }
}

impl Drop for KnobCtl {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            crate::say!("iowarden: error: {e:#}");
        }
        if let (Some(s), true) = (self.original_sched.take(), self.sched_changed) {
            match std::fs::write(sched_file(&self.dev), &s) {
                Ok(()) => {
                    let _ = std::fs::remove_file(self.sched_note());
                    crate::say!("iowarden: scheduler of {} restored to {s}", self.dev.name)
                }
                Err(e) => crate::say!(
                    "iowarden: error: restoring the {s} scheduler of {}: {e}",
                    self.dev.name
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1_host() -> HostFacts {
        HostFacts {
            io_root: "/sys/fs/cgroup/blkio".into(),
            v2: false,
            iocost: false,
            iolatency: false,
            iomax: false,
            schedulers: vec!["none".into(), "mq-deadline".into(), "bfq".into()],
        }
    }

    #[test]
    fn a_v1_host_names_its_unavailable_knobs() {
        let f = v1_host();
        for k in [Knob::IoCost, Knob::IoMax, Knob::IoLatency] {
            let why = unavailable(k, &f).unwrap();
            assert!(
                why.contains("cgroup v1") && why.contains("/sys/fs/cgroup/blkio"),
                "{why}"
            );
        }
        assert_eq!(unavailable(Knob::None, &f), None);
        assert_eq!(unavailable(Knob::Bfq, &f), None);
        let why = unavailable(Knob::Kyber, &f).unwrap();
        assert!(
            why.contains("kyber") && why.contains("none, mq-deadline, bfq"),
            "{why}"
        );

        // Asked for by name: one error naming each, nothing selected.
        let e = select(&[Knob::None, Knob::IoCost, Knob::IoMax], true, &f)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("io.cost: the io controller is on cgroup v1")
                && e.contains("io.max:")
                && e.contains("nothing changed"),
            "{e}"
        );
        // `all`: skipped with their reasons.
        let (ok, skipped) = select(&Knob::ALL, false, &f).unwrap();
        assert_eq!(ok, vec![Knob::None, Knob::Bfq, Knob::MqDeadline]);
        assert_eq!(skipped.len(), 4);
    }

    #[test]
    fn a_v2_host_without_a_config_option_says_which() {
        let f = HostFacts {
            io_root: "/sys/fs/cgroup".into(),
            v2: true,
            iocost: true,
            iolatency: false,
            iomax: true,
            schedulers: vec!["none".into()],
        };
        assert_eq!(unavailable(Knob::IoCost, &f), None);
        assert_eq!(unavailable(Knob::IoMax, &f), None);
        assert!(unavailable(Knob::IoLatency, &f)
            .unwrap()
            .contains("CONFIG_BLK_CGROUP_IOLATENCY"));
    }
}
