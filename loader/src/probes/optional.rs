//! The optional BPF objects, described once in [`ALL`]: the command line's
//! switches, the monitor's configuration, the statuses of probes left off
//! and the support table's columns follow from it. (Above the objects it
//! starts: none of them imports this file.)

use std::collections::BTreeSet;

use anyhow::Result;
use iowarden_exporters::ProbeStatus;

use super::objects::status;
use super::probe::Probe;
use super::{iocost, locks, nvme};

/// An optional BPF object, described once: its name (as
/// `iowarden_probe_active` and the statuses say it), its command-line
/// switch, whether it loads by default, and how it starts.
pub struct OptionalProbe {
    pub name: &'static str,
    /// `--no-NAME` for a probe on by default, `--NAME` for one off.
    pub switch: &'static str,
    pub default_on: bool,
    /// The switch's help, which says what the probe needs and costs.
    pub help: &'static str,
    /// Why it is off by default (for a probe that is).
    pub off_by_default: &'static str,
    pub start: fn(&OptionalConfig) -> Result<Started>,
}

/// A started object (None when the kernel lacks what it needs) and its
/// status.
pub type Started = (Option<Box<dyn Probe>>, ProbeStatus);

/// Every optional BPF object.
pub const ALL: &[OptionalProbe] = &[
    OptionalProbe {
        name: nvme::NAME,
        switch: "nvme",
        default_on: false,
        help: "Load the NVMe queue programs (nvme_setup_cmd, nvme_complete_rq, nvme_sq): \
               commands, bytes and in-flight per NVMe queue and cgroup, submission-queue \
               occupancy, head-of-line interference by culprit. Off by default: three more \
               programs per NVMe command, together about as much BPF time per read as \
               biolatency (overhead/RESULTS.md); each hardware queue's completions, busy \
               time and occupancy are counted without them",
        off_by_default: "three more programs per NVMe command",
        start: |_| boxed(nvme::NvmeProbe::start(&nvme::NvmeConfig::default())),
    },
    OptionalProbe {
        name: iocost::NAME,
        switch: "no-iocost",
        default_on: true,
        help: "Do not load the iocost programs (the kernel formats a cgroup path \
               under a global lock for every iocost event while they are attached)",
        off_by_default: "",
        start: |_| boxed(iocost::IocostProbe::start()),
    },
    OptionalProbe {
        name: locks::NAME,
        switch: "locks",
        default_on: false,
        help: "Load the lock contention programs (lock:contention_begin/end): wait \
               time per lock site and cgroup, stacks through the block layer only. \
               Off by default: every contention costs a kernel stack walk (~2 us)",
        off_by_default: "a kernel stack walk per contention",
        start: |cfg| boxed(locks::LockProbe::start(&cfg.locks)),
    },
];

fn boxed<P: Probe + 'static>(started: Result<(Option<P>, ProbeStatus)>) -> Result<Started> {
    let (probe, status) = started?;
    Ok((probe.map(|p| Box::new(p) as Box<dyn Probe>), status))
}

/// Which optional objects load, and their options.
#[derive(Debug, Clone)]
pub struct OptionalConfig {
    /// Names from [`ALL`].
    pub enabled: BTreeSet<&'static str>,
    pub locks: locks::LockConfig,
}

/// What [`ALL`] loads by default.
impl Default for OptionalConfig {
    fn default() -> Self {
        OptionalConfig {
            enabled: ALL
                .iter()
                .filter(|p| p.default_on)
                .map(|p| p.name)
                .collect(),
            locks: Default::default(),
        }
    }
}

impl OptionalProbe {
    /// The status of this probe when its switch left it off.
    pub fn off_status(&self) -> ProbeStatus {
        let reason = if self.default_on {
            format!("disabled by --{}", self.switch)
        } else {
            format!(
                "off by default: --{} to load ({})",
                self.switch, self.off_by_default
            )
        };
        status(self.name, false, reason)
    }
}

/// Starts the optional objects `cfg` enables; those it leaves off say so.
pub fn start_optional(cfg: &OptionalConfig) -> Result<Vec<Started>> {
    ALL.iter()
        .map(|p| match cfg.enabled.contains(p.name) {
            true => (p.start)(cfg),
            false => Ok((None, p.off_status())),
        })
        .collect()
}
