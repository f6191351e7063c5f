//! `iowarden profile`: measure a device's linear iocost model with fio.

use std::time::Duration;

use anyhow::Result;
use clap::Args;

use iowarden::duration::parse_duration;
use iowarden::host::devices::resolve_device;

#[derive(Args)]
pub struct ProfileArgs {
    /// A whole disk by name (nvme0n1, loop3) or MAJ:MIN
    device: String,
    /// Run time of each of the six fio cases
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Start of the region to use, bytes (K, M, G suffixes)
    #[arg(long, default_value = "0", value_parser = iowarden::costmodel::profile::parse_size)]
    offset: u64,
    /// Length of the region (default: to the end of the device)
    #[arg(long, value_parser = iowarden::costmodel::profile::parse_size)]
    size: Option<u64>,
    /// Profile even a device that is mounted, partitioned or holds data
    #[arg(long)]
    force: bool,
    /// Write the model to io.cost.model (journaled; kept)
    #[arg(long)]
    apply: bool,
    #[arg(long, default_value = iowarden::knobs::writer::DEFAULT_STATE_DIR)]
    state_dir: std::path::PathBuf,
}

pub fn run(a: ProfileArgs) -> Result<()> {
    let d = resolve_device(&a.device)?;
    // Checked before the runs: the profile takes minutes.
    let model_path = iowarden::host::cgroups::cgroup2_root().map(|r| r.join("io.cost.model"));
    if a.apply && !model_path.as_ref().is_some_and(|p| p.exists()) {
        anyhow::bail!("--apply: no io.cost.model on this host (iocost needs the io controller on cgroup v2); nothing measured or changed");
    }
    let (line, report) =
        iowarden::costmodel::profile::profile(&iowarden::costmodel::profile::ProfileOptions {
            name: d.name.clone(),
            devnum: format!("{}:{}", d.major, d.minor),
            runtime: a.duration,
            offset: a.offset,
            size: a.size,
            force: a.force,
        })?;
    for r in report {
        iowarden::say!("iowarden profile: {r}");
    }
    iowarden::outln!("{line}")?;
    if a.apply {
        let mut w = iowarden::knobs::writer::Writer::new(iowarden::knobs::writer::WriterConfig {
            state_dir: a.state_dir,
            ..Default::default()
        });
        let path = model_path.expect("checked above");
        iowarden::say!("iowarden: {}", w.set(&path, &line)?);
        w.keep_all()?;
    }
    Ok(())
}
