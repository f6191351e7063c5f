//! OpenMetrics for the optional snapshot parts: CPU -> queue map, NVMe
//! queues and head-of-line interference, iocost state.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use crate::blockext::HolSeries;
use crate::model::Snapshot;
use crate::openmetrics::{counter, gauge};

type Labels = Vec<(String, String)>;

fn l(pairs: &[(&str, String)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

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

#[derive(Debug)]
pub(crate) struct BlockExtCollector {
    pub(crate) snap: Snapshot,
}

impl Collector for BlockExtCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let s = &self.snap;
        let cpus: Vec<(Labels, f64)> = s
            .cpu_queue_map
            .iter()
            .flat_map(|m| {
                m.cpus.iter().map(move |c| {
                    (
                        l(&[
                            ("device", m.device.clone()),
                            ("hctx", m.hctx.to_string()),
                            ("cpu", c.to_string()),
                        ]),
                        1.0,
                    )
                })
            })
            .collect();
        gauge(&mut enc, "iowarden_hwq_cpu", "CPUs mapped to each blk-mq hardware queue (1 per CPU): tenants on those CPUs share the queue", None, &cpus)?;

        // NVMe
        let qcg = |f: &dyn Fn(&crate::blockext::NvmeQueueCgroup) -> f64| -> Vec<(Labels, f64)> {
            s.nvme_queue_cgroups
                .iter()
                .map(|q| {
                    (
                        l(&[
                            ("device", q.device.name.clone()),
                            ("qid", q.qid.to_string()),
                            ("cgroup", q.cgroup.path.clone()),
                        ]),
                        f(q),
                    )
                })
                .collect()
        };
        counter(
            &mut enc,
            "iowarden_nvme_commands",
            "NVMe commands set up per queue and cgroup",
            None,
            &qcg(&|q| q.commands as f64),
        )?;
        counter(
            &mut enc,
            "iowarden_nvme_completions",
            "NVMe commands completed per queue and cgroup",
            None,
            &qcg(&|q| q.completions as f64),
        )?;
        counter(
            &mut enc,
            "iowarden_nvme_command",
            "Bytes of the NVMe commands set up per queue and cgroup",
            Some(Unit::Bytes),
            &qcg(&|q| q.bytes as f64),
        )?;
        gauge(
            &mut enc,
            "iowarden_nvme_inflight",
            "NVMe commands in flight per queue and cgroup",
            None,
            &qcg(&|q| q.inflight as f64),
        )?;
        counter(
            &mut enc,
            "iowarden_nvme_large_commands",
            "NVMe commands of at least the large size (128 KiB) per queue and cgroup",
            None,
            &qcg(&|q| q.large_commands as f64),
        )?;
        let sq = |f: &dyn Fn(&crate::blockext::NvmeQueue) -> f64| -> Vec<(Labels, f64)> {
            s.nvme_queues
                .iter()
                .map(|q| {
                    (
                        l(&[
                            ("device", q.device.name.clone()),
                            ("qid", q.qid.to_string()),
                        ]),
                        f(q),
                    )
                })
                .collect()
        };
        gauge(
            &mut enc,
            "iowarden_nvme_sq_occupancy",
            "Submission-queue entries not yet fetched by the controller, at the last completion",
            None,
            &sq(&|q| q.sq_occupancy_last as f64),
        )?;
        gauge(
            &mut enc,
            "iowarden_nvme_sq_occupancy_mean",
            "Mean submission-queue occupancy over all completions",
            None,
            &sq(&|q| q.sq_occupancy_mean),
        )?;
        gauge(
            &mut enc,
            "iowarden_nvme_sq_occupancy_max",
            "Largest submission-queue occupancy seen",
            None,
            &sq(&|q| q.sq_occupancy_max as f64),
        )?;
        let hol: Vec<(Labels, f64)> = s
            .nvme_hol
            .iter()
            .filter_map(|h| {
                let c = h.culprit.as_ref()?;
                Some((
                    l(&[
                        ("device", h.device.name.clone()),
                        ("qid", h.qid.to_string()),
                        ("victim", h.victim.path.clone()),
                        ("culprit", c.path.clone()),
                    ]),
                    h.count as f64,
                ))
            })
            .collect();
        counter(&mut enc, "iowarden_nvme_hol_events", "Small requests of `victim` submitted while a large request of `culprit` was in flight on the same NVMe queue", None, &hol)?;
        let small: Vec<(Labels, f64)> = s
            .nvme_hol
            .iter()
            .map(|h| {
                (
                    l(&[
                        ("device", h.device.name.clone()),
                        ("qid", h.qid.to_string()),
                        ("victim", h.victim.path.clone()),
                        (
                            "culprit",
                            h.culprit
                                .as_ref()
                                .map(|c| c.path.clone())
                                .unwrap_or_else(|| "none".into()),
                        ),
                    ]),
                    h.latency_sum_seconds,
                )
            })
            .collect();
        counter(&mut enc, "iowarden_nvme_small_latency", "Submission-to-completion time of small requests, by the large-request owner in flight at submission (culprit=\"none\": none)", Some(Unit::Seconds), &small)?;
        let extra: Vec<(Labels, f64)> = hol_extra_latency(&s.nvme_hol)
            .into_iter()
            .map(|(d, q, c, v)| {
                (
                    l(&[("device", d), ("qid", q.to_string()), ("cgroup", c)]),
                    v,
                )
            })
            .collect();
        gauge(&mut enc, "iowarden_nvme_hol_extra_latency", "Mean latency of a cgroup's small requests queued behind another cgroup's large ones minus that of its unobstructed ones", Some(Unit::Seconds), &extra)?;

        // iocost, device-wide
        let dev =
            |f: &dyn Fn(&crate::blockext::IocostDevice) -> Option<f64>| -> Vec<(Labels, f64)> {
                s.iocost_devices
                    .iter()
                    .filter_map(|d| Some((l(&[("device", d.device.name.clone())]), f(d)?)))
                    .collect()
            };
        gauge(
            &mut enc,
            "iowarden_iocost_vrate_ratio",
            "iocost base vrate (1.0 = 100%)",
            None,
            &dev(&|d| Some(d.vrate_ratio)),
        )?;
        gauge(
            &mut enc,
            "iowarden_iocost_busy_level",
            "iocost busy level (> 0: missing QoS targets, < 0: underused)",
            None,
            &dev(&|d| Some(d.busy_level as f64)),
        )?;
        gauge(
            &mut enc,
            "iowarden_iocost_rq_wait_ratio",
            "Share of the last period requests waited for a tag",
            None,
            &dev(&|d| Some(d.rq_wait_ratio)),
        )?;
        gauge(
            &mut enc,
            "iowarden_iocost_lagging_cgroups",
            "Cgroups lagging at the last vrate adjustment",
            None,
            &dev(&|d| Some(d.nr_lagging as f64)),
        )?;
        gauge(
            &mut enc,
            "iowarden_iocost_shortage_cgroups",
            "Cgroups short of budget at the last vrate adjustment",
            None,
            &dev(&|d| Some(d.nr_shortages as f64)),
        )?;
        counter(
            &mut enc,
            "iowarden_iocost_vrate_adjustments",
            "iocost vrate adjustments",
            None,
            &dev(&|d| Some(d.vrate_adjustments as f64)),
        )?;
        gauge(
            &mut enc,
            "iowarden_iocost_qos_vrate_min_ratio",
            "io.cost.qos min (1.0 = 100%)",
            None,
            &dev(&|d| d.qos_vrate_min_ratio),
        )?;
        gauge(
            &mut enc,
            "iowarden_iocost_qos_vrate_max_ratio",
            "io.cost.qos max (1.0 = 100%)",
            None,
            &dev(&|d| d.qos_vrate_max_ratio),
        )?;
        let missed: Vec<(Labels, f64)> = s
            .iocost_devices
            .iter()
            .flat_map(|d| {
                [("read", d.missed_ppm_read), ("write", d.missed_ppm_write)].map(|(op, v)| {
                    (
                        l(&[("device", d.device.name.clone()), ("op", op.into())]),
                        v as f64,
                    )
                })
            })
            .collect();
        gauge(&mut enc, "iowarden_iocost_missed_ppm", "Requests missing the QoS latency target, parts per million, at the last vrate adjustment", None, &missed)?;

        // iocost, per cgroup
        let cg = |f: &dyn Fn(&crate::blockext::IocostCgroup) -> Option<f64>| -> Vec<(Labels, f64)> {
            s.iocost_cgroups
                .iter()
                .filter_map(|c| {
                    Some((
                        l(&[
                            ("device", c.device.name.clone()),
                            ("cgroup", c.cgroup.path.clone()),
                        ]),
                        f(c)?,
                    ))
                })
                .collect()
        };
        gauge(
            &mut enc,
            "iowarden_iocost_weight",
            "iocost active weight",
            None,
            &cg(&|c| Some(c.weight)),
        )?;
        gauge(
            &mut enc,
            "iowarden_iocost_inuse",
            "iocost in-use weight (after donation)",
            None,
            &cg(&|c| Some(c.inuse)),
        )?;
        gauge(
            &mut enc,
            "iowarden_iocost_hweight_active_ratio",
            "Hierarchical active weight share",
            None,
            &cg(&|c| Some(c.hweight_active_ratio)),
        )?;
        gauge(
            &mut enc,
            "iowarden_iocost_hweight_inuse_ratio",
            "Hierarchical in-use weight share",
            None,
            &cg(&|c| Some(c.hweight_inuse_ratio)),
        )?;
        gauge(&mut enc, "iowarden_iocost_vtime_budget", "Budget left (global vtime - the cgroup's) at its last event, device seconds at 100% vrate", Some(Unit::Seconds), &cg(&|c| Some(c.vtime_budget_seconds)))?;
        gauge(
            &mut enc,
            "iowarden_iocost_debt",
            "iocost debt, device seconds at 100% vrate",
            Some(Unit::Seconds),
            &cg(&|c| Some(c.debt_seconds)),
        )?;
        gauge(
            &mut enc,
            "iowarden_iocost_delay",
            "iocost issue delay imposed for debt",
            Some(Unit::Seconds),
            &cg(&|c| Some(c.delay_seconds)),
        )?;
        counter(
            &mut enc,
            "iowarden_iocost_usage",
            "Device time charged by iocost (io.stat cost.usage)",
            Some(Unit::Seconds),
            &cg(&|c| c.usage_seconds),
        )?;
        let events: Vec<(Labels, f64)> = s
            .iocost_cgroups
            .iter()
            .flat_map(|c| {
                [
                    ("activate", c.activations),
                    ("idle", c.idles),
                    ("shortage", c.shortages),
                    ("transfer", c.transfers),
                    ("adjust", c.adjusts),
                    ("forgive_debt", c.forgives),
                ]
                .map(|(k, v)| {
                    (
                        l(&[
                            ("device", c.device.name.clone()),
                            ("cgroup", c.cgroup.path.clone()),
                            ("kind", k.into()),
                        ]),
                        v as f64,
                    )
                })
            })
            .collect();
        counter(&mut enc, "iowarden_iocost_donation_events", "iocost per-cgroup events: activation/idle transitions, budget donation (shortage/transfer/adjust), debt forgiveness", None, &events)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blockext::*;
    use crate::model::{CgroupRef, DeviceRef};

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
        let text =
            crate::openmetrics::encode_openmetrics(&s, &Default::default(), &Default::default())
                .unwrap();
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
