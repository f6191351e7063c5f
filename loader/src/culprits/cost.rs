//! What the replay costs in user space, per request: a synthetic stream
//! of completed requests (QD1 each, `series` series on one device, every
//! other one queued in a scheduler first) replayed as the drain does, in
//! batches with a horizon trailing them. `iowarden bench-shards` prints it
//! beside the BPF side's costs.

use std::time::Instant;

use iowarden_exporters::Op;

use super::replay::{Replay, Request};

/// ns of one thread's time per request replayed.
pub fn ns_per_request(series: u32, requests: u64) -> f64 {
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |below: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % below
    };
    let mut t = 0;
    let reqs: Vec<Request> = (0..requests)
        .map(|i| {
            t += 20_000;
            let device_ns = 80_000 + next(40_000);
            Request {
                slot: (i % series as u64) as u32,
                dev: 0,
                op: Op::Read,
                done: t + device_ns,
                device_ns,
                queue_ns: if i % 2 == 0 { 5_000 } else { 0 },
            }
        })
        .collect();
    let mut r = Replay::default();
    let start = Instant::now();
    // As the drain runs at this rate: a batch every 50 ms (its longest
    // pace), the horizon its least lag (100 ms) behind the batch's last.
    for batch in reqs.chunks(2_500) {
        for q in batch {
            r.add(q);
        }
        let last = batch[batch.len() - 1].done;
        r.advance(last.saturating_sub(100_000_000));
    }
    r.advance(u64::MAX / 2);
    start.elapsed().as_nanos() as f64 / requests as f64
}
