//! OpenMetrics for the iocost controller: vrate, QoS and adjustment state
//! per device; weights, budget, debt and donation events per cgroup.

use prometheus_client::encoding::DescriptorEncoder;

use super::expose::{Expose, Input};
use super::family::{counter, encode_families, gauge, labels, Labels, Rows};
use crate::model::{IocostCgroup, IocostDevice};

impl Expose for Vec<IocostDevice> {
    fn expose(&self, enc: &mut DescriptorEncoder, _: &Input) -> std::fmt::Result {
        encode_devices(enc, self)?;
        encode_missed(enc, self)
    }
}

impl Expose for Vec<IocostCgroup> {
    fn expose(&self, enc: &mut DescriptorEncoder, _: &Input) -> std::fmt::Result {
        encode_cgroups(enc, self)?;
        encode_events(enc, self)
    }
}

fn encode_devices(enc: &mut DescriptorEncoder, devices: &[IocostDevice]) -> std::fmt::Result {
    let records: Vec<(Labels, &IocostDevice)> = devices
        .iter()
        .map(|d| (labels(&[("device", d.device.name.clone())]), d))
        .collect();
    encode_families(enc, &records)
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
    let records: Vec<(Labels, &IocostCgroup)> = cgroups
        .iter()
        .map(|c| {
            let l = labels(&[
                ("device", c.device.name.clone()),
                ("cgroup", c.cgroup.path.clone()),
            ]);
            (l, c)
        })
        .collect();
    encode_families(enc, &records)
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
