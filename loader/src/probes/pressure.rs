//! Not a BPF object: the kernel's own I/O stall time (PSI, io.pressure)
//! of each cgroup the block programs have series for, read at every poll
//! where the io controller's hierarchy is cgroup v2 and the kernel has
//! PSI; elsewhere its status says what is missing and it exports nothing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Result;
use iowarden_exporters::{
    BpfProgramStats, CgroupRef, IoSeries, PressureSeries, ProbeStatus, Snapshot, TableFill,
    UNATTRIBUTED_CGROUP_ID,
};

use crate::host::cgroups::CgroupResolver;
use crate::host::pressure::{io_pressure_unavailable, read_io_pressure};
use crate::knobs::pressure::stall_totals_us;
use crate::probes::objects::status;
use crate::probes::probe::{HostNames, Probe};

/// Its name, as `iowarden_probe_active` and the statuses say it.
pub const NAME: &str = "io_pressure";

pub struct PressureProbe {
    /// The io controller's hierarchy; None where it has no io.pressure.
    root: Option<PathBuf>,
    status: ProbeStatus,
}

impl PressureProbe {
    pub fn start(resolver: &CgroupResolver) -> PressureProbe {
        match io_pressure_unavailable(resolver.root()) {
            None => PressureProbe {
                root: Some(resolver.root().to_path_buf()),
                status: status(NAME, true, ""),
            },
            Some(why) => PressureProbe {
                root: None,
                status: status(NAME, false, why),
            },
        }
    }
}

/// The io.pressure of each cgroup with a series in `io` (resolved, and
/// not the unattributed bucket) under `root`; a cgroup whose file is gone
/// or unreadable meanwhile is left out.
fn read_series(root: &Path, io: &[IoSeries]) -> Vec<PressureSeries> {
    let cgroups: BTreeSet<&CgroupRef> = io
        .iter()
        .map(|s| &s.cgroup)
        .filter(|c| c.id != UNATTRIBUTED_CGROUP_ID && !c.path.is_empty())
        .collect();
    cgroups
        .into_iter()
        .filter_map(|c| {
            let text = read_io_pressure(root, &c.path).ok()?;
            let (some_us, full_us) = stall_totals_us(&text).ok()?;
            Some(PressureSeries {
                cgroup: c.clone(),
                some_seconds: some_us as f64 / 1e6,
                full_seconds: full_us as f64 / 1e6,
            })
        })
        .collect()
}

impl Probe for PressureProbe {
    /// Nothing to copy: the files are read when the snapshot is filled,
    /// for the cgroups the block programs' part names.
    fn read(&mut self, _: &mut HostNames) -> Result<()> {
        Ok(())
    }

    fn statuses(&self) -> Vec<ProbeStatus> {
        vec![self.status.clone()]
    }

    fn cgroup_ids(&self) -> BTreeSet<u64> {
        BTreeSet::new()
    }

    fn release(&mut self, _: &BTreeSet<u64>) -> Result<()> {
        Ok(())
    }

    fn fill(&mut self, snap: &mut Snapshot, _: &mut HostNames) -> Result<()> {
        if let Some(root) = &self.root {
            snap.io_pressure = read_series(root, &snap.io);
        }
        Ok(())
    }

    fn prog_stats(&self) -> Vec<BpfProgramStats> {
        Vec::new()
    }

    fn table_fill(&self) -> Vec<TableFill> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(id: u64, path: &str) -> IoSeries {
        IoSeries {
            cgroup: CgroupRef {
                id,
                path: path.into(),
            },
            ..Default::default()
        }
    }

    #[test]
    fn each_cgroup_with_series_once_in_seconds() {
        // A directory tree stands in for the cgroup2 hierarchy (this host's
        // io controller is on v1): the guest's t-16 reads the kernel's.
        let t = tempfile::tempdir().unwrap();
        let write = |dir: &str, some: u64, full: u64| {
            let d = t.path().join(dir);
            std::fs::create_dir_all(&d).unwrap();
            let text = format!(
                "some avg10=0.00 avg60=0.00 avg300=0.00 total={some}\n\
                 full avg10=0.00 avg60=0.00 avg300=0.00 total={full}\n"
            );
            std::fs::write(d.join("io.pressure"), text).unwrap();
        };
        write("", 9, 8);
        write("a/b", 2_500_000, 1_000_000);
        write("c", 1, 0);
        std::fs::create_dir_all(t.path().join("gone")).unwrap();
        let io = [
            series(5, "/a/b"),
            series(5, "/a/b"),
            series(1, "/"),
            series(UNATTRIBUTED_CGROUP_ID, "(unattributed)"),
            series(6, ""),
            series(7, "/gone"),
        ];
        let got: Vec<(String, f64, f64)> = read_series(t.path(), &io)
            .into_iter()
            .map(|p| (p.cgroup.path, p.some_seconds, p.full_seconds))
            .collect();
        assert_eq!(
            got,
            vec![
                ("/".to_string(), 9e-6, 8e-6),
                ("/a/b".to_string(), 2.5, 1.0)
            ],
            "/c has no series; unresolved, unattributed and file-less cgroups none"
        );
    }
}
