//! OpenMetrics for blk-mq hardware queues: request counts and occupancy per
//! queue, and the CPUs mapped to each queue.

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use super::family::{counter, gauge, labels, Labels, Rows};
use crate::model::{CpuQueueMap, QueueSeries};

/// One row per queue that has a value. inserted/issued/inflight are counted
/// only with --hwq-events: queues without them are left out, and a family
/// with none is not written.
fn per_queue(queues: &[QueueSeries], value: impl Fn(&QueueSeries) -> Option<f64>) -> Rows {
    queues
        .iter()
        .filter_map(|q| {
            let l: Labels = vec![
                ("device".into(), q.device.name.clone()),
                ("devt".into(), q.device.devt()),
                ("hctx".into(), q.hctx.to_string()),
            ];
            Some((l, value(q)?))
        })
        .collect()
}

pub(crate) fn encode_hw_queues(
    enc: &mut DescriptorEncoder,
    queues: &[QueueSeries],
) -> std::fmt::Result {
    let rows = |f: fn(&QueueSeries) -> Option<f64>| per_queue(queues, f);
    counter(
        enc,
        "iowarden_hwq_inserted",
        "Requests inserted into the I/O scheduler",
        None,
        &rows(|q| q.inserted.map(|v| v as f64)),
    )?;
    counter(
        enc,
        "iowarden_hwq_issued",
        "Requests issued on the hardware queue",
        None,
        &rows(|q| q.issued.map(|v| v as f64)),
    )?;
    counter(
        enc,
        "iowarden_hwq_completed",
        "Requests completed on the hardware queue",
        None,
        &rows(|q| Some(q.completed as f64)),
    )?;
    counter(
        enc,
        "iowarden_hwq_requeued",
        "Requests requeued on the hardware queue",
        None,
        &rows(|q| Some(q.requeued as f64)),
    )?;
    counter(
        enc,
        "iowarden_hwq_busy",
        "Sum of in-flight time on the hardware queue; its rate is the mean occupancy",
        Some(Unit::Seconds),
        &rows(|q| Some(q.busy_seconds)),
    )?;
    gauge(
        enc,
        "iowarden_hwq_inflight",
        "Requests in flight on the hardware queue",
        None,
        &rows(|q| q.inflight.map(|v| v as f64)),
    )
}

/// 1 per (queue, CPU) mapped to it.
pub(crate) fn encode_cpu_map(enc: &mut DescriptorEncoder, map: &[CpuQueueMap]) -> std::fmt::Result {
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
