//! OpenMetrics for blk-mq hardware queues: request counts and occupancy per
//! queue, and the CPUs mapped to each queue.

use prometheus_client::encoding::DescriptorEncoder;

use super::expose::{Expose, Input};
use super::family::{encode_families, gauge, labels, Labels, Rows};
use crate::model::{CpuQueueMap, QueueSeries};

impl Expose for Vec<QueueSeries> {
    fn expose(&self, enc: &mut DescriptorEncoder, _: &Input) -> std::fmt::Result {
        encode_hw_queues(enc, self)
    }
}

impl Expose for Vec<CpuQueueMap> {
    fn expose(&self, enc: &mut DescriptorEncoder, _: &Input) -> std::fmt::Result {
        encode_cpu_map(enc, self)
    }
}

/// The queue families model/queues.rs declares. inserted/issued/inflight
/// are counted only with --hwq-events: queues without them are left out,
/// and a family with none is not written.
fn encode_hw_queues(enc: &mut DescriptorEncoder, queues: &[QueueSeries]) -> std::fmt::Result {
    let records: Vec<(Labels, &QueueSeries)> = queues
        .iter()
        .map(|q| {
            let l: Labels = vec![
                ("device".into(), q.device.name.clone()),
                ("devt".into(), q.device.devt()),
                ("hctx".into(), q.hctx.to_string()),
            ];
            (l, q)
        })
        .collect();
    encode_families(enc, &records)
}

/// 1 per (queue, CPU) mapped to it.
fn encode_cpu_map(enc: &mut DescriptorEncoder, map: &[CpuQueueMap]) -> std::fmt::Result {
    let cpus: Rows = map
        .iter()
        .flat_map(|m| {
            m.cpus.iter().map(move |c| {
                let l = labels(&[
                    ("device", m.device.clone()),
                    ("hctx", m.hctx.to_string()),
                    ("cpu", c.to_string()),
                ]);
                (l, 1.0)
            })
        })
        .collect();
    gauge(
        enc,
        "iowarden_hwq_cpu",
        "CPUs mapped to each blk-mq hardware queue (1 per CPU): tenants on those CPUs share the queue",
        None,
        &cpus,
    )
}
