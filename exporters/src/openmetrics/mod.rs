//! OpenMetrics text encoding of a [`Snapshot`], through prometheus-client's
//! collector API (it escapes label values and writes the exposition format).
//!
//! This file walks the snapshot, domain by domain, in exposition order; each
//! domain's families are written by a file of their own (io, queues,
//! runtime, nvme, iocost, locks, cost, tuner) with the helpers of `family`.

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;

use crate::model::{SelfMetrics, Snapshot, Stage};

mod cost;
mod culprits;
mod diskstats;
mod family;
mod io;
mod iocost;
mod limits;
mod locks;
mod nvme;
mod queues;
mod runtime;
mod tune_model;
mod tuner;

pub(crate) use family::unit_of;
pub use family::{collapse_buckets, ClassicBuckets};
pub(crate) use io::io_labels;
pub use io::IoCounter;
pub(crate) use io::LATENCY_HELP;
pub use nvme::hol_extra_latency;

/// Which counters and latency stages go out per series, and how coarse the classic
/// (text) buckets are: what a series costs the Prometheus that stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpositionOptions {
    pub counters: Vec<IoCounter>,
    pub stages: Vec<Stage>,
    pub classic: ClassicBuckets,
}

/// Fleet defaults: requests, bytes and device time, the total stage only,
/// classic buckets at powers of four.
impl Default for ExpositionOptions {
    fn default() -> Self {
        ExpositionOptions {
            counters: IoCounter::fleet(),
            stages: vec![Stage::Total],
            classic: ClassicBuckets::PowersOfFour,
        }
    }
}

/// What one encoding reads, borrowed from the collector.
struct Input<'a> {
    snap: &'a Snapshot,
    extra: &'a SelfMetrics,
    opts: &'a ExpositionOptions,
}

/// Every family, in exposition order.
fn encode_families(enc: &mut DescriptorEncoder, input: &Input) -> std::fmt::Result {
    let Input { snap, extra, opts } = *input;
    io::encode_counters(enc, &snap.io, &opts.counters)?;
    io::encode_latency(enc, snap, &opts.stages, opts.classic)?;
    io::encode_volumes(enc, &snap.volumes)?;
    io::encode_task_delays(enc, &snap.task_delays)?;
    culprits::encode(enc, &snap.culprits)?;
    queues::encode_hw_queues(enc, &snap.queues)?;
    diskstats::encode(enc, &snap.kernel_diskstats)?;
    runtime::encode_probes(enc, &snap.probes)?;
    io::encode_drops(enc, &snap.drops)?;
    runtime::encode_polls(enc, extra)?;
    runtime::encode_build_info(enc, extra, &snap.kernel, &snap.hostname)?;
    runtime::encode_runtime(enc, &extra.runtime, extra.scrape_count)?;
    queues::encode_cpu_map(enc, &snap.cpu_queue_map)?;
    nvme::encode(enc, snap)?;
    iocost::encode(enc, snap)?;
    locks::encode(enc, snap.locks.as_ref())?;
    cost::encode(enc, &snap.cost_models)?;
    limits::encode(enc, &snap.limits)?;
    if let Some(t) = &snap.tuner {
        tuner::encode(enc, t)?;
    }
    Ok(())
}

/// prometheus-client takes only `'static` collectors: this one owns what it
/// encodes, the snapshot shared (an `Arc`, not a copy: megabytes at
/// thousands of cgroups, on every scrape).
#[derive(Debug)]
struct SnapshotCollector {
    snap: Arc<Snapshot>,
    extra: Arc<SelfMetrics>,
    opts: ExpositionOptions,
}

impl Collector for SnapshotCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let input = Input {
            snap: &self.snap,
            extra: &self.extra,
            opts: &self.opts,
        };
        encode_families(&mut enc, &input)
    }
}

/// The snapshot as OpenMetrics text, ending in `# EOF`.
pub fn encode_openmetrics(
    snap: &Arc<Snapshot>,
    extra: &Arc<SelfMetrics>,
    opts: &ExpositionOptions,
) -> Result<String, std::fmt::Error> {
    let mut reg = Registry::default();
    reg.register_collector(Box::new(SnapshotCollector {
        snap: Arc::clone(snap),
        extra: Arc::clone(extra),
        opts: opts.clone(),
    }));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &reg)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    use crate::test_layout::bounds;

    #[test]
    fn families_have_help_unit_and_escaped_labels() {
        let io = IoSeries {
            cgroup: CgroupRef {
                id: 9,
                path: "/a \"q\" \\b".into(),
            },
            device: DeviceRef {
                name: "loop0".into(),
                major: 7,
                minor: 0,
            },
            op: Op::Read,
            ios: 3,
            bytes: 12288,
            latency: StageHistograms {
                total: Histogram {
                    counts: {
                        let mut v = vec![0; 88];
                        v[9] = 3;
                        v
                    },
                    sum_seconds: 3e-5,
                },
                ..Default::default()
            },
            ..Default::default()
        };
        let snap = Snapshot {
            hist_lower_bounds_seconds: bounds(),
            io: vec![io],
            ..Default::default()
        };
        let text = encode_openmetrics(
            &snap.clone().into(),
            &Default::default(),
            &Default::default(),
        )
        .unwrap();
        assert!(text.ends_with("# EOF\n"));
        for fam in [
            "iowarden_io_requests",
            "iowarden_io_bytes",
            "iowarden_io_latency_seconds",
            "iowarden_io_device_seconds",
        ] {
            assert!(
                text.contains(&format!("# HELP {fam} ")),
                "{fam} HELP in\n{text}"
            );
        }
        assert!(text.contains("# UNIT iowarden_io_bytes bytes"));
        assert!(text.contains("# UNIT iowarden_io_latency_seconds seconds"));
        assert!(
            text.contains(r#"cgroup="/a \"q\" \\b""#),
            "escaped label in\n{text}"
        );
        assert!(text.contains(r#"iowarden_io_latency_seconds_bucket{le="0.000016",cgroup="/a \"q\" \\b",cgroup_id="9",device="loop0",op="read",stage="total"} 3"#), "{text}");
        assert!(text.contains(r#"iowarden_io_latency_seconds_count{cgroup="/a \"q\" \\b",cgroup_id="9",device="loop0",op="read",stage="total"} 3"#), "{text}");
    }
}
