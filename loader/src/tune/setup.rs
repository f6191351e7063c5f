//! What `iowarden tune` checks before it changes anything: its options,
//! the device's io.cost.qos, the cgroups to protect.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use iowarden_exporters::{DeviceRef, TunerSlo, TunerStatus};

use super::controller::ControllerConfig;
use super::measure::Protected;
use super::model_run::ModelOptions;
use super::slo::Slo;
use crate::host::cgroups::CgroupResolver;
use crate::knobs::writer::WriterConfig;

/// What `iowarden tune` is asked to do.
pub struct TuneOptions {
    pub device: DeviceRef,
    /// Cgroup paths, relative to the io hierarchy's root or absolute.
    pub protect: Vec<String>,
    pub slos: Vec<Slo>,
    pub controller: ControllerConfig,
    pub period: Duration,
    /// io.weight `default W` for the protected cgroups.
    pub protect_weight: Option<u32>,
    pub writer: WriterConfig,
    /// `--model`: also fit io.cost.model and write it back.
    pub model: Option<ModelOptions>,
}

/// `/lc`, `lc` and `/sys/fs/cgroup/lc` all name the same cgroup.
pub(super) fn relative_path(root: &Path, p: &str) -> String {
    let rel = Path::new(p)
        .strip_prefix(root)
        .map(|r| r.to_string_lossy().into_owned())
        .unwrap_or_else(|_| p.to_string());
    format!("/{}", rel.trim_matches('/'))
}

/// The options that need no kernel: the controller's bounds, something to
/// protect and judge, a period iocost lets us write at.
pub(super) fn check_options(opts: &TuneOptions) -> Result<()> {
    opts.controller.validate().map_err(|e| anyhow!(e))?;
    if opts.slos.is_empty() {
        bail!("no SLO given: say what to protect, e.g. --slo read-p99=2ms");
    }
    if opts.protect.is_empty() {
        bail!("no cgroup to protect: give --protect PATH (e.g. --protect /lc)");
    }
    if opts.period < opts.writer.iocost_min_interval {
        bail!(
            "--period {:?} is shorter than the {:?} between io.cost.qos writes",
            opts.period,
            opts.writer.iocost_min_interval
        );
    }
    Ok(())
}

/// The root's io.cost.qos, which exists only where iocost can run.
pub(super) fn iocost_qos_path(root: &Path) -> Result<PathBuf> {
    let qos_path = root.join("io.cost.qos");
    if !qos_path.exists() {
        bail!(
            "{} does not exist: iocost needs the io controller on cgroup v2 (on this host the io controller's hierarchy is {}); nothing changed",
            qos_path.display(),
            root.display()
        );
    }
    Ok(qos_path)
}

/// Each `--protect` as an existing cgroup other than the root (with an
/// io.weight when `--protect-weight` is given), then the weight's range.
pub(super) fn resolve_protected(
    opts: &TuneOptions,
    resolver: &CgroupResolver,
    root: &Path,
) -> Result<Vec<Protected>> {
    let mut protected = Vec::new();
    for p in &opts.protect {
        let path = relative_path(root, p);
        if path == "/" {
            bail!("--protect {p}: the root cgroup cannot be protected against itself");
        }
        let id = resolver.id_of(&path).ok_or_else(|| {
            anyhow!(
                "--protect {p}: no cgroup {path} under {}; nothing changed",
                root.display()
            )
        })?;
        if opts.protect_weight.is_some() && !root.join(&path[1..]).join("io.weight").exists() {
            bail!("--protect-weight: {path} has no io.weight (enable +io in its parent's cgroup.subtree_control); nothing changed");
        }
        protected.push(Protected { path, id });
    }
    if let Some(w) = opts.protect_weight {
        if !(1..=10000).contains(&w) {
            bail!("--protect-weight {w} out of range (1 to 10000)");
        }
    }
    Ok(protected)
}

/// The status before the first period: one entry per (cgroup, SLO).
pub(super) fn initial_status(opts: &TuneOptions, protected: &[Protected]) -> TunerStatus {
    TunerStatus {
        device: opts.device.clone(),
        slos: protected
            .iter()
            .flat_map(|p| {
                opts.slos.iter().map(move |s| TunerSlo {
                    cgroup: p.path.clone(),
                    slo: s.spec.clone(),
                    target_seconds: s.target.as_secs_f64(),
                    ..Default::default()
                })
            })
            .collect(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_paths_normalise() {
        let root = Path::new("/sys/fs/cgroup");
        assert_eq!(relative_path(root, "/lc"), "/lc");
        assert_eq!(relative_path(root, "lc/"), "/lc");
        assert_eq!(relative_path(root, "/sys/fs/cgroup/a/b"), "/a/b");
        assert_eq!(relative_path(root, "/sys/fs/cgroup"), "/");
    }
}
