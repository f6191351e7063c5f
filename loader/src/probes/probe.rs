//! What every probe is: the [`Probe`] trait the monitor drives, and the
//! host's names (cgroups, devices) probes label their series with.

use std::collections::BTreeSet;

use anyhow::Result;
use iowarden_exporters::{
    BpfProgramStats, CgroupRef, ProbeStatus, Snapshot, TableFill, UNATTRIBUTED_CGROUP_ID,
};

use crate::host::cgroups::CgroupResolver;
use crate::host::devices::DeviceNames;

/// What probes name cgroups and devices with.
pub struct HostNames<'a> {
    pub resolver: &'a CgroupResolver,
    pub devices: &'a mut DeviceNames,
}

/// A loaded BPF object. The optional ones are loaded where the host has
/// what they trace, and absent (with a ProbeStatus saying why) elsewhere.
pub trait Probe {
    /// Starts the threads it runs beside the programs, if any: called once
    /// the command has settled its privileges (a thread keeps the
    /// capabilities it was started with).
    fn start_threads(&mut self) -> Result<()> {
        Ok(())
    }
    /// Copies the maps; the copy is what `cgroup_ids`, `release` and `fill`
    /// see until the next read.
    fn read(&mut self, names: &mut HostNames) -> Result<()>;
    /// Statuses that change while it runs (those at start are returned by
    /// its start).
    fn statuses(&self) -> Vec<ProbeStatus> {
        Vec::new()
    }
    /// Cgroups the last read has series for (input of the release policy).
    /// Required, as are release, prog_stats and table_fill: a probe that
    /// forgot one would silently keep gone cgroups or report no cost.
    fn cgroup_ids(&self) -> BTreeSet<u64>;
    /// Frees the table entries of cgroups that are gone and drops them from
    /// the last read.
    fn release(&mut self, gone: &BTreeSet<u64>) -> Result<()>;
    /// Writes this object's part of `snap` from the last read.
    fn fill(&mut self, snap: &mut Snapshot, names: &mut HostNames) -> Result<()>;
    /// Run count and time of the attached programs.
    fn prog_stats(&self) -> Vec<BpfProgramStats>;
    /// How full the tables the BPF side claims entries in are.
    fn table_fill(&self) -> Vec<TableFill>;
}

/// A cgroup id as the snapshot names it: its path on the hierarchy, or
/// "(unattributed)" for requests that carry no cgroup.
pub fn cgroup_ref(resolver: &CgroupResolver, id: u64) -> CgroupRef {
    CgroupRef {
        id,
        path: if id == UNATTRIBUTED_CGROUP_ID {
            "(unattributed)".into()
        } else {
            resolver.path_of(id).unwrap_or_default().to_string()
        },
    }
}
