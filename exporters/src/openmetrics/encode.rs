//! The exposition: every domain's part in the order model/snapshot.rs's
//! `snapshot_domains!` gives, iowarden's own families among them, written
//! through prometheus-client's collector API.

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;

use super::expose::{Expose, ExpositionOptions, Input};
use super::runtime;
use crate::model::{snapshot_domains, SelfMetrics, Snapshot};

/// A part of the exposition: one domain's families, or iowarden's own.
type Part = fn(&mut DescriptorEncoder, &Input) -> std::fmt::Result;

/// iowarden's own families (polls, build, BPF programs, ...): between the
/// snapshot's drops (exposed 80) and CPU map (100).
const SELF_METRICS_AT: u32 = 90;

macro_rules! domain_parts {
    ($(
        $(#[$attr:meta])*
        $field:ident: $ty:ty, $window:ident, exposed $at:literal, families [$($fam:ty),*];
    )+) => {
        /// Every domain's part, with its place.
        fn domain_parts() -> Vec<(u32, Part)> {
            vec![$(($at, |enc, input| Expose::expose(&input.snap.$field, enc, input))),+]
        }
    };
}
snapshot_domains!(domain_parts);

/// Every family, in exposition order.
fn encode_families(enc: &mut DescriptorEncoder, input: &Input) -> std::fmt::Result {
    let mut parts = domain_parts();
    parts.push((SELF_METRICS_AT, runtime::encode_self));
    parts.sort_by_key(|(at, _)| *at);
    for (_, part) in parts {
        part(enc, input)?;
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
    use crate::model::*;
    use crate::openmetrics::test_text::text_of;

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
        let text = text_of(snap);
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
