//! OpenMetrics text encoding of a [`Snapshot`], through prometheus-client's
//! collector API (it escapes label values and writes the exposition format).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::iocounters::IoCounter;
use crate::model::{Histogram, Snapshot, Stage};

/// Facts about the exporter itself.
#[derive(Debug, Clone, Default)]
pub struct SelfMetrics {
    pub poll_duration_seconds: f64,
    pub polls_total: u64,
    pub scrape_count: u64,
    pub build_version: String,
    /// BPF program cost, table fill, scrape cost, cgroup attribution.
    pub runtime: crate::selfmetrics::RuntimeMetrics,
}

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
            counters: IoCounter::FLEET.to_vec(),
            stages: vec![Stage::Total],
            classic: ClassicBuckets::PowersOfFour,
        }
    }
}

/// Upper bounds of the classic histogram buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassicBuckets {
    /// Every power of two of the BPF layout, 1 us to 4 s (24 buckets with +Inf).
    PowersOfTwo,
    /// Powers of four from 4 us to 1.05 s (11 buckets with +Inf).
    PowersOfFour,
}

impl ClassicBuckets {
    /// Whether a bucket boundary (in seconds) closes a classic bucket.
    fn is_bound(self, seconds: f64) -> bool {
        let us = (seconds * 1e6).round() as u64;
        match self {
            ClassicBuckets::PowersOfTwo => us > 0 && us.is_power_of_two(),
            ClassicBuckets::PowersOfFour => {
                us.is_power_of_two()
                    && us.trailing_zeros().is_multiple_of(2)
                    && (4..=1 << 20).contains(&us)
            }
        }
    }
}

/// Collapses the fine log-linear buckets to the classic boundaries, keeping
/// Prometheus cardinality sane. Returns (upper bound, count in bucket) pairs,
/// non-cumulative, ending with +Inf.
pub fn collapse_buckets(
    h: &Histogram,
    lower_bounds: &[f64],
    classic: ClassicBuckets,
) -> Vec<(f64, u64)> {
    let mut out: Vec<(f64, u64)> = Vec::new();
    let mut acc = 0u64;
    for (i, &c) in h.counts.iter().enumerate() {
        // Bucket i ends where bucket i+1 starts; close a group there if that is a classic bound.
        match lower_bounds.get(i + 1) {
            Some(&next) if classic.is_bound(next) => {
                out.push((next, acc + c));
                acc = 0;
            }
            _ => acc += c,
        }
    }
    out.push((f64::INFINITY, acc));
    out
}

#[derive(Debug)]
struct SnapshotCollector {
    snap: Snapshot,
    extra: SelfMetrics,
    opts: ExpositionOptions,
}

fn cgroup_id_label(id: u64) -> String {
    match id {
        crate::cardinality::OTHER_CGROUP_ID => crate::cardinality::OTHER_CGROUP.into(),
        id => id.to_string(),
    }
}

pub(crate) fn io_labels(s: &crate::model::IoSeries) -> Labels {
    vec![
        ("cgroup".into(), s.cgroup.path.clone()),
        ("cgroup_id".into(), cgroup_id_label(s.cgroup.id)),
        ("device".into(), s.device.name.clone()),
        ("op".into(), s.op.as_str().into()),
    ]
}

pub(crate) type Labels = Vec<(String, String)>;

pub(crate) fn counter(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    rows: &[(Labels, f64)],
) -> std::fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    let mut d = enc.encode_descriptor(name, help, unit.as_ref(), MetricType::Counter)?;
    for (l, v) in rows {
        d.encode_family(l)?
            .encode_counter::<Labels, f64, f64>(v, None)?;
    }
    Ok(())
}

pub(crate) fn gauge(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    rows: &[(Labels, f64)],
) -> std::fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    let mut d = enc.encode_descriptor(name, help, unit.as_ref(), MetricType::Gauge)?;
    for (l, v) in rows {
        d.encode_family(l)?.encode_gauge(v)?;
    }
    Ok(())
}

impl Collector for SnapshotCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let s = &self.snap;
        let per_io = |f: &dyn Fn(&crate::model::IoSeries) -> f64| -> Vec<(Labels, f64)> {
            s.io.iter().map(|x| (io_labels(x), f(x))).collect()
        };
        for &c in &self.opts.counters {
            let (name, help, unit) = c.family();
            counter(&mut enc, name, help, unit, &per_io(&|x| c.value(x)))?;
        }
        if !s.io.is_empty() && !self.opts.stages.is_empty() {
            let mut d = enc.encode_descriptor(
                "iowarden_io_latency",
                "Request latency by stage: queue (allocation to issue), device (issue to completion), total",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?;
            for x in &s.io {
                for &stage in &self.opts.stages {
                    let h = x.latency.get(stage);
                    let mut l = io_labels(x);
                    l.push(("stage".into(), stage.as_str().into()));
                    let buckets =
                        collapse_buckets(h, &s.hist_lower_bounds_seconds, self.opts.classic);
                    d.encode_family(&l)?.encode_histogram::<Labels>(
                        h.sum_seconds,
                        h.count(),
                        &buckets,
                        None,
                    )?;
                }
            }
        }
        // Queues without a value (inserted/issued/inflight are counted only
        // with --hwq-events) are left out; a family with none is not written.
        let per_q = |f: &dyn Fn(&crate::model::QueueSeries) -> Option<f64>| -> Vec<(Labels, f64)> {
            s.queues
                .iter()
                .filter_map(|q| {
                    let l = vec![
                        ("device".into(), q.device.name.clone()),
                        ("devt".into(), q.device.devt()),
                        ("hctx".into(), q.hctx.to_string()),
                    ];
                    Some((l, f(q)?))
                })
                .collect()
        };
        counter(
            &mut enc,
            "iowarden_hwq_inserted",
            "Requests inserted into the I/O scheduler",
            None,
            &per_q(&|q| q.inserted.map(|v| v as f64)),
        )?;
        counter(
            &mut enc,
            "iowarden_hwq_issued",
            "Requests issued on the hardware queue",
            None,
            &per_q(&|q| q.issued.map(|v| v as f64)),
        )?;
        counter(
            &mut enc,
            "iowarden_hwq_completed",
            "Requests completed on the hardware queue",
            None,
            &per_q(&|q| Some(q.completed as f64)),
        )?;
        counter(
            &mut enc,
            "iowarden_hwq_requeued",
            "Requests requeued on the hardware queue",
            None,
            &per_q(&|q| Some(q.requeued as f64)),
        )?;
        counter(
            &mut enc,
            "iowarden_hwq_busy",
            "Sum of in-flight time on the hardware queue; its rate is the mean occupancy",
            Some(Unit::Seconds),
            &per_q(&|q| Some(q.busy_seconds)),
        )?;
        gauge(
            &mut enc,
            "iowarden_hwq_inflight",
            "Requests in flight on the hardware queue",
            None,
            &per_q(&|q| q.inflight.map(|v| v as f64)),
        )?;

        let probes: Vec<(Labels, f64)> = s
            .probes
            .iter()
            .map(|p| {
                (
                    vec![
                        ("probe".into(), p.name.clone()),
                        ("reason".into(), p.reason.clone()),
                    ],
                    if p.active { 1.0 } else { 0.0 },
                )
            })
            .collect();
        gauge(
            &mut enc,
            "iowarden_probe_active",
            "Whether a BPF probe is attached (1) or not (0, with the reason)",
            None,
            &probes,
        )?;
        let drops: Vec<(Labels, f64)> = [
            ("slot_table_full", s.drops.slot_table_full),
            ("device_table_full", s.drops.device_table_full),
            ("no_issue_stamp", s.drops.no_issue_stamp),
            ("no_start_stamp", s.drops.no_start_stamp),
        ]
        .iter()
        .map(|(r, v)| (vec![("reason".to_string(), r.to_string())], *v as f64))
        .collect();
        counter(
            &mut enc,
            "iowarden_dropped",
            "Events the BPF side could not record fully",
            None,
            &drops,
        )?;
        gauge(
            &mut enc,
            "iowarden_poll_duration",
            "Duration of the last map poll",
            Some(Unit::Seconds),
            &[(vec![], self.extra.poll_duration_seconds)],
        )?;
        counter(
            &mut enc,
            "iowarden_polls",
            "Map polls",
            None,
            &[(vec![], self.extra.polls_total as f64)],
        )?;
        let info = vec![
            ("version".to_string(), self.extra.build_version.clone()),
            ("kernel".to_string(), s.kernel.clone()),
            ("hostname".to_string(), s.hostname.clone()),
        ];
        gauge(
            &mut enc,
            "iowarden_build_info",
            "iowarden build and host",
            None,
            &[(info, 1.0)],
        )?;
        Ok(())
    }
}

/// The snapshot as OpenMetrics text, ending in `# EOF`.
pub fn encode_openmetrics(
    snap: &Snapshot,
    extra: &SelfMetrics,
    opts: &ExpositionOptions,
) -> Result<String, std::fmt::Error> {
    let mut reg = Registry::default();
    reg.register_collector(Box::new(SnapshotCollector {
        snap: snap.clone(),
        extra: extra.clone(),
        opts: opts.clone(),
    }));
    reg.register_collector(Box::new(crate::selfmetrics::RuntimeCollector {
        m: extra.runtime.clone(),
        scrapes: extra.scrape_count,
    }));
    reg.register_collector(Box::new(crate::blockext_metrics::BlockExtCollector {
        snap: snap.clone(),
    }));
    reg.register_collector(Box::new(crate::locks_metrics::LocksCollector {
        snap: snap.clone(),
    }));
    if !snap.cost_models.is_empty() {
        reg.register_collector(Box::new(crate::costmodel::CostModelCollector {
            models: snap.cost_models.clone(),
        }));
    }
    if let Some(t) = &snap.tuner {
        reg.register_collector(Box::new(crate::tuner::TunerCollector { t: t.clone() }));
    }
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &reg)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    /// The loader's layout: 1 us buckets below 4 us, then 4 per power of two.
    fn bounds() -> Vec<f64> {
        (0..88usize)
            .map(|i| {
                if i < 4 {
                    i as u64
                } else {
                    (4 + (i % 4) as u64) << (i / 4 + 1 - 2)
                }
            })
            .map(|us| us as f64 / 1e6)
            .collect()
    }

    #[test]
    fn collapses_to_power_of_two_bounds() {
        let b = bounds();
        let mut counts = vec![0u64; 88];
        counts[0] = 1; // [0,1us)
        counts[9] = 5; // [10,12us) -> le 16us
        counts[87] = 2; // open last bucket -> +Inf
        let h = Histogram {
            counts,
            sum_seconds: 1.0,
        };
        let c = collapse_buckets(&h, &b, ClassicBuckets::PowersOfTwo);
        assert_eq!(c.iter().map(|x| x.1).sum::<u64>(), 8);
        assert!(c.windows(2).all(|w| w[0].0 < w[1].0), "bounds increase");
        assert_eq!(c.last().unwrap(), &(f64::INFINITY, 2));
        assert!(
            c.iter()
                .any(|&(le, n)| (le - 16e-6).abs() < 1e-12 && n == 5),
            "{c:?}"
        );
        assert!(c
            .iter()
            .all(|&(le, _)| le.is_infinite() || ((le * 1e6).round() as u64).is_power_of_two()));
    }

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
            merged: 0,
            requeued: 0,
            cost_seconds: 0.0,
            random_ios: 0,
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
        };
        let snap = Snapshot {
            hist_lower_bounds_seconds: bounds(),
            io: vec![io],
            ..Default::default()
        };
        let text = encode_openmetrics(&snap, &SelfMetrics::default(), &Default::default()).unwrap();
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
