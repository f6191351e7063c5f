//! OpenMetrics for the iocost controller: vrate, QoS and adjustment state
//! per device; weights, budget, debt and donation events per cgroup.

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use super::family::{counter, gauge, labels, Rows};
use crate::model::{IocostCgroup, IocostDevice, Snapshot};

pub(crate) fn encode(enc: &mut DescriptorEncoder, snap: &Snapshot) -> std::fmt::Result {
    encode_devices(enc, &snap.iocost_devices)?;
    encode_missed(enc, &snap.iocost_devices)?;
    encode_cgroups(enc, &snap.iocost_cgroups)?;
    encode_events(enc, &snap.iocost_cgroups)
}

fn encode_devices(enc: &mut DescriptorEncoder, devices: &[IocostDevice]) -> std::fmt::Result {
    let rows = |f: fn(&IocostDevice) -> Option<f64>| -> Rows {
        devices
            .iter()
            .filter_map(|d| Some((labels(&[("device", d.device.name.clone())]), f(d)?)))
            .collect()
    };
    gauge(
        enc,
        "iowarden_iocost_vrate_ratio",
        "iocost base vrate (1.0 = 100%)",
        None,
        &rows(|d| Some(d.vrate_ratio)),
    )?;
    gauge(
        enc,
        "iowarden_iocost_busy_level",
        "iocost busy level (> 0: missing QoS targets, < 0: underused)",
        None,
        &rows(|d| Some(d.busy_level as f64)),
    )?;
    gauge(
        enc,
        "iowarden_iocost_rq_wait_ratio",
        "Share of the last period requests waited for a tag",
        None,
        &rows(|d| Some(d.rq_wait_ratio)),
    )?;
    gauge(
        enc,
        "iowarden_iocost_lagging_cgroups",
        "Cgroups lagging at the last vrate adjustment",
        None,
        &rows(|d| Some(d.nr_lagging as f64)),
    )?;
    gauge(
        enc,
        "iowarden_iocost_shortage_cgroups",
        "Cgroups short of budget at the last vrate adjustment",
        None,
        &rows(|d| Some(d.nr_shortages as f64)),
    )?;
    counter(
        enc,
        "iowarden_iocost_vrate_adjustments",
        "iocost vrate adjustments",
        None,
        &rows(|d| Some(d.vrate_adjustments as f64)),
    )?;
    gauge(
        enc,
        "iowarden_iocost_qos_vrate_min_ratio",
        "io.cost.qos min (1.0 = 100%)",
        None,
        &rows(|d| d.qos_vrate_min_ratio),
    )?;
    gauge(
        enc,
        "iowarden_iocost_qos_vrate_max_ratio",
        "io.cost.qos max (1.0 = 100%)",
        None,
        &rows(|d| d.qos_vrate_max_ratio),
    )
}

fn encode_missed(enc: &mut DescriptorEncoder, devices: &[IocostDevice]) -> std::fmt::Result {
    let missed: Rows = devices
        .iter()
        .flat_map(|d| {
            [("read", d.missed_ppm_read), ("write", d.missed_ppm_write)].map(|(op, v)| {
                (
                    labels(&[("device", d.device.name.clone()), ("op", op.into())]),
                    v as f64,
                )
            })
        })
        .collect();
    gauge(
        enc,
        "iowarden_iocost_missed_ppm",
        "Requests missing the QoS latency target, parts per million, at the last vrate adjustment",
        None,
        &missed,
    )
}

fn encode_cgroups(enc: &mut DescriptorEncoder, cgroups: &[IocostCgroup]) -> std::fmt::Result {
    let rows = |f: fn(&IocostCgroup) -> Option<f64>| -> Rows {
        cgroups
            .iter()
            .filter_map(|c| {
                let l = labels(&[
                    ("device", c.device.name.clone()),
                    ("cgroup", c.cgroup.path.clone()),
                ]);
                Some((l, f(c)?))
            })
            .collect()
    };
    gauge(
        enc,
        "iowarden_iocost_weight",
        "iocost active weight",
        None,
        &rows(|c| Some(c.weight)),
    )?;
    gauge(
        enc,
        "iowarden_iocost_inuse",
        "iocost in-use weight (after donation)",
        None,
        &rows(|c| Some(c.inuse)),
    )?;
    gauge(
        enc,
        "iowarden_iocost_hweight_active_ratio",
        "Hierarchical active weight share",
        None,
        &rows(|c| Some(c.hweight_active_ratio)),
    )?;
    gauge(
        enc,
        "iowarden_iocost_hweight_inuse_ratio",
        "Hierarchical in-use weight share",
        None,
        &rows(|c| Some(c.hweight_inuse_ratio)),
    )?;
    gauge(
        enc,
        "iowarden_iocost_vtime_budget",
        "Budget left (global vtime - the cgroup's) at its last event, device seconds at 100% vrate",
        Some(Unit::Seconds),
        &rows(|c| Some(c.vtime_budget_seconds)),
    )?;
    gauge(
        enc,
        "iowarden_iocost_debt",
        "iocost debt, device seconds at 100% vrate",
        Some(Unit::Seconds),
        &rows(|c| Some(c.debt_seconds)),
    )?;
    gauge(
        enc,
        "iowarden_iocost_delay",
        "iocost issue delay imposed for debt",
        Some(Unit::Seconds),
        &rows(|c| Some(c.delay_seconds)),
    )?;
    counter(
        enc,
        "iowarden_iocost_usage",
        "Device time charged by iocost (io.stat cost.usage)",
        Some(Unit::Seconds),
        &rows(|c| c.usage_seconds),
    )
}

fn encode_events(enc: &mut DescriptorEncoder, cgroups: &[IocostCgroup]) -> std::fmt::Result {
    let events: Rows = cgroups
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
                let l = labels(&[
                    ("device", c.device.name.clone()),
                    ("cgroup", c.cgroup.path.clone()),
                    ("kind", k.into()),
                ]);
                (l, v as f64)
            })
        })
        .collect();
    counter(enc, "iowarden_iocost_donation_events", "iocost per-cgroup events: activation/idle transitions, budget donation (shortage/transfer/adjust), debt forgiveness", None, &events)
}
