//! OpenMetrics for the kernel's I/O stall time of each cgroup
//! (io.pressure): one counter family, `kind` "some" or "full" as the
//! kernel's file names its lines.

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use super::expose::{Expose, Input};
use super::family::{counter, Rows};
use super::io::cgroup_id_label;
use crate::model::PressureSeries;

impl Expose for Vec<PressureSeries> {
    fn expose(&self, enc: &mut DescriptorEncoder, _: &Input) -> std::fmt::Result {
        let rows: Rows = self
            .iter()
            .flat_map(|p| {
                [("some", p.some_seconds), ("full", p.full_seconds)].map(|(kind, v)| {
                    let l = vec![
                        ("cgroup".to_string(), p.cgroup.path.clone()),
                        ("cgroup_id".to_string(), cgroup_id_label(p.cgroup.id)),
                        ("kind".to_string(), kind.to_string()),
                    ];
                    (l, v)
                })
            })
            .collect();
        counter(
            enc,
            "iowarden_io_pressure",
            "Time the cgroup's tasks stalled on I/O, from the kernel's io.pressure (PSI), since the \
             cgroup was created: kind=\"some\" while at least one task was, kind=\"full\" while all \
             its non-idle tasks were at once",
            Some(Unit::Seconds),
            &rows,
        )
    }
}
