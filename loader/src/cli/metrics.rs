//! `iowarden metrics`: the metrics reference (docs/metrics.md is its
//! output): every family /metrics can serve, its type, labels and help, by
//! what turns it on.

use anyhow::Result;
use clap::Args;

use iowarden::host::container::{Attribution, Kind};

#[derive(Args)]
pub struct MetricsArgs {}

/// Every attribution label `iowarden_cgroup_info` can carry: an
/// attribution with every field known.
fn every_cgroup_label() -> Vec<(String, String)> {
    let known = || "x".to_string();
    Attribution {
        kind: Kind::Pod,
        pod_uid: known(),
        qos_class: known(),
        container_id: known(),
        runtime: known(),
        service: known(),
        uid: known(),
        session: known(),
        namespace: known(),
        pod: known(),
        container: known(),
    }
    .labels()
}

/// The reference as markdown.
pub fn reference() -> String {
    iowarden_exporters::reference::metrics_reference(&every_cgroup_label())
}

pub fn run(_: MetricsArgs) -> Result<()> {
    iowarden::out!("{}", reference())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/metrics.md is what `iowarden metrics` prints (`make docs`).
    #[test]
    fn docs_metrics_md_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/metrics.md");
        let written = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            written == reference(),
            "{path} is stale or missing: run `make docs` and commit it"
        );
    }
}
