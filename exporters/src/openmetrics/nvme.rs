//! OpenMetrics for NVMe queues: commands per queue and cgroup,
//! submission-queue occupancy, and head-of-line interference.

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use super::expose::{Expose, Input};
use super::family::{counter, encode_families, gauge, labels, Labels, Rows};
use crate::model::{HolSeries, NvmeQueue, NvmeQueueCgroup};

/// Per (device, qid, victim): mean submit -> complete time of the victim's
/// small requests that had a large request of another cgroup in flight on
/// that queue, minus the mean of the victim's small requests that had none
/// (on any queue of the device). None without both.
pub fn hol_extra_latency(hol: &[HolSeries]) -> Vec<(String, u32, String, f64)> {
    use std::collections::BTreeMap;
    // (device, victim) -> (count, sum) of unobstructed requests
    let mut clean: BTreeMap<(String, String), (u64, f64)> = BTreeMap::new();
    // (device, qid, victim) -> (count, sum) behind large ones
    let mut behind: BTreeMap<(String, u32, String), (u64, f64)> = BTreeMap::new();
    for h in hol {
        let e = if h.culprit.is_some() {
            behind
                .entry((h.device.name.clone(), h.qid, h.victim.path.clone()))
                .or_default()
        } else {
            clean
                .entry((h.device.name.clone(), h.victim.path.clone()))
                .or_default()
        };
        e.0 += h.count;
        e.1 += h.latency_sum_seconds;
    }
    behind
        .into_iter()
        .filter_map(|((d, q, v), (n, sum))| {
            let &(cn, csum) = clean.get(&(d.clone(), v.clone()))?;
            (n > 0 && cn > 0).then(|| (d, q, v, sum / n as f64 - csum / cn as f64))
        })
        .collect()
}

impl Expose for Vec<NvmeQueueCgroup> {
    fn expose(&self, enc: &mut DescriptorEncoder, _: &Input) -> std::fmt::Result {
        encode_queue_cgroups(enc, self)
    }
}

impl Expose for Vec<NvmeQueue> {
    fn expose(&self, enc: &mut DescriptorEncoder, _: &Input) -> std::fmt::Result {
        encode_sq_occupancy(enc, self)
    }
}

impl Expose for Vec<HolSeries> {
    fn expose(&self, enc: &mut DescriptorEncoder, _: &Input) -> std::fmt::Result {
        encode_hol(enc, self)
    }
}

fn encode_queue_cgroups(enc: &mut DescriptorEncoder, qcg: &[NvmeQueueCgroup]) -> std::fmt::Result {
    let records: Vec<(Labels, &NvmeQueueCgroup)> = qcg
        .iter()
        .map(|q| {
            let l = labels(&[
                ("device", q.device.name.clone()),
                ("qid", q.qid.to_string()),
                ("cgroup", q.cgroup.path.clone()),
            ]);
            (l, q)
        })
        .collect();
    encode_families(enc, &records)
}

fn encode_sq_occupancy(enc: &mut DescriptorEncoder, queues: &[NvmeQueue]) -> std::fmt::Result {
    let records: Vec<(Labels, &NvmeQueue)> = queues
        .iter()
        .map(|q| {
            let l = labels(&[
                ("device", q.device.name.clone()),
                ("qid", q.qid.to_string()),
            ]);
            (l, q)
        })
        .collect();
    encode_families(enc, &records)
}

fn hol_labels(h: &HolSeries, culprit: String) -> Labels {
    labels(&[
        ("device", h.device.name.clone()),
        ("qid", h.qid.to_string()),
        ("victim", h.victim.path.clone()),
        ("culprit", culprit),
    ])
}

fn encode_hol(enc: &mut DescriptorEncoder, hol: &[HolSeries]) -> std::fmt::Result {
    let events: Rows = hol
        .iter()
        .filter_map(|h| {
            Some((
                hol_labels(h, h.culprit.as_ref()?.path.clone()),
                h.count as f64,
            ))
        })
        .collect();
    counter(enc, "iowarden_nvme_hol_events", "Small requests of `victim` submitted while a large request of `culprit` was in flight on the same NVMe queue", None, &events)?;
    let small: Rows = hol
        .iter()
        .map(|h| {
            let culprit = h
                .culprit
                .as_ref()
                .map_or_else(|| "none".into(), |c| c.path.clone());
            (hol_labels(h, culprit), h.latency_sum_seconds)
        })
        .collect();
    counter(enc, "iowarden_nvme_small_latency", "Submission-to-completion time of small requests, by the large-request owner in flight at submission (culprit=\"none\": none)", Some(Unit::Seconds), &small)?;
    let extra: Rows = hol_extra_latency(hol)
        .into_iter()
        .map(|(d, q, c, v)| {
            (
                labels(&[("device", d), ("qid", q.to_string()), ("cgroup", c)]),
                v,
            )
        })
        .collect();
    gauge(enc, "iowarden_nvme_hol_extra_latency", "Mean latency of a cgroup's small requests queued behind another cgroup's large ones minus that of its unobstructed ones", Some(Unit::Seconds), &extra)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CgroupRef, DeviceRef, IocostCgroup, IocostDevice, Snapshot};
    use crate::openmetrics::test_text::text_of;

    fn hol(culprit: Option<&str>, count: u64, sum: f64) -> HolSeries {
        HolSeries {
            device: DeviceRef {
                name: "nvme0n1".into(),
                major: 259,
                minor: 0,
            },
            qid: 1,
            victim: CgroupRef {
                id: 5,
                path: "/v".into(),
            },
            culprit: culprit.map(|p| CgroupRef {
                id: 6,
                path: p.into(),
            }),
            count,
            latency_sum_seconds: sum,
        }
    }

    #[test]
    fn extra_latency_is_the_difference_of_means() {
        let mut other_q = hol(None, 10, 0.010);
        other_q.qid = 2;
        let x = hol_extra_latency(&[other_q, hol(Some("/hog"), 5, 0.025)]);
        assert_eq!(x.len(), 1);
        assert!((x[0].3 - 0.004).abs() < 1e-12, "{x:?}");
        assert!(hol_extra_latency(&[hol(Some("/hog"), 5, 0.025)]).is_empty());
    }

    #[test]
    fn iocost_and_nvme_metrics_render() {
        let mut s = Snapshot::default();
        let dev = DeviceRef {
            name: "nvme0n1".into(),
            major: 259,
            minor: 0,
        };
        s.iocost_devices.push(IocostDevice {
            device: dev.clone(),
            vrate_ratio: 1.25,
            qos_vrate_min_ratio: Some(0.5),
            ..Default::default()
        });
        s.iocost_cgroups.push(IocostCgroup {
            device: dev.clone(),
            cgroup: CgroupRef {
                id: 5,
                path: "/a".into(),
            },
            hweight_active_ratio: 0.25,
            usage_seconds: Some(1.5),
            ..Default::default()
        });
        s.nvme_hol.push(hol(Some("/hog"), 3, 0.003));
        let text = text_of(s);
        for want in [
            r#"iowarden_iocost_vrate_ratio{device="nvme0n1"} 1.25"#,
            r#"iowarden_iocost_qos_vrate_min_ratio{device="nvme0n1"} 0.5"#,
            r#"iowarden_iocost_hweight_active_ratio{device="nvme0n1",cgroup="/a"} 0.25"#,
            r#"iowarden_iocost_usage_seconds_total{device="nvme0n1",cgroup="/a"} 1.5"#,
            r#"iowarden_nvme_hol_events_total{device="nvme0n1",qid="1",victim="/v",culprit="/hog"} 3"#,
        ] {
            assert!(text.contains(want), "{want} not in\n{text}");
        }
        assert!(
            !text.contains("iowarden_iocost_qos_vrate_max_ratio"),
            "absent values are not exported"
        );
    }
}
