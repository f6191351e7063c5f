//! Turns raw per-CPU map contents into cumulative per-series totals and
//! their part of the snapshot. Pure bookkeeping: no BPF calls here.

use std::collections::HashMap;

use iowarden_exporters::{
    CgroupRef, DropCounters, Histogram, IoSeries, Op, QueueSeries, Snapshot, StageHistograms,
};

use crate::costmodel::{price, Charged, ClassSample, SIZES, VTIME_PER_SEC};
use crate::host::devices::DeviceNames;
use crate::probes::block::hist::{NBUCKETS, NSTAGES, THROTTLE_STAGE, TOTAL_STAGE};
use crate::probes::block::sample::RawSample;
use crate::skel::types::{
    iow_const, iow_cost_class, iow_drop, iow_hwq_stats, iow_key_layout, iow_series,
};

/// The fields of a series key; see bpf/iowarden.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SeriesKey {
    pub cgroup_id: u64,
    pub dev_idx: u32,
    pub op: Op,
}

impl SeriesKey {
    pub fn decode(key: u64) -> SeriesKey {
        let op = match (key >> iow_key_layout::IOW_KEY_OP_SHIFT.0) & 3 {
            0 => Op::Read,
            1 => Op::Write,
            2 => Op::Discard,
            _ => Op::Flush,
        };
        let cgid_shift = iow_key_layout::IOW_KEY_CGID_SHIFT.0;
        let dev_shift = iow_key_layout::IOW_KEY_DEV_SHIFT.0;
        SeriesKey {
            cgroup_id: key >> cgid_shift,
            dev_idx: ((key >> dev_shift) & ((1 << (cgid_shift - dev_shift)) - 1)) as u32,
            op,
        }
    }
}

#[derive(Default, Clone)]
struct Totals {
    ios: u64,
    bytes: u64,
    merged: u64,
    requeued: u64,
    /// What the model charges, as counted, and its price (vtime).
    charged: Charged,
    cost: u64,
    /// By enum iow_stage.
    lat_sum_ns: [u64; NSTAGES],
    /// Requests timed from their first bio's submission (the others have
    /// no throttle sample).
    held_timed: u64,
    held_io_max_ns: u64,
    hist: Vec<u64>,
}

/// Accumulates deltas of the sharded counters into u64 totals. Histogram
/// buckets are u32 on the BPF side; wrapping subtraction against the
/// previous read keeps the totals right as long as a bucket does not wrap
/// between two reads.
#[derive(Default)]
pub struct Accumulator {
    /// slot -> (key, previous values of its shards)
    prev: HashMap<u32, (u64, Vec<iow_series>)>,
    totals: HashMap<u64, Totals>,
    dev_of_idx: HashMap<u32, u32>,
    hwq: HashMap<(u32, u32), QueueTotals>,
    /// The shards of each hardware queue as last read.
    hwq_prev: HashMap<(u32, u32), Vec<iow_hwq_stats>>,
    /// Cost class samples by (devt, class within the device).
    cost_classes: HashMap<(u32, u32), ClassTotals>,
    /// The shards of each cost class as last read.
    class_prev: HashMap<(u32, u32), Vec<iow_cost_class>>,
    drops: DropCounters,
    /// inserted/issued are counted per hardware queue (--hwq-events).
    hwq_events: bool,
    /// The queue and device stages' buckets are counted (else their
    /// histograms have sums and no counts).
    stage_histograms: bool,
}

#[derive(Default, Clone, Copy)]
struct ClassTotals {
    ios: u64,
    bytes: u64,
    device_ns: u64,
    pages: u64,
    cost: u64,
}

#[derive(Default, Clone, Copy)]
struct QueueTotals {
    inserted: u64,
    issued: u64,
    completed: u64,
    requeued: u64,
    busy_ns: u64,
}

/// The change of a counter between two reads (counters wrap).
fn d(cur: u64, old: u64) -> u64 {
    cur.wrapping_sub(old)
}

/// The (count, sum) a packed word (bpf/iowarden.h IOW_PACK_COUNT_BITS)
/// changed by between two reads.
pub(crate) fn unpack(cur: u64, old: u64) -> (u64, u64) {
    let bits = iow_const::IOW_PACK_COUNT_BITS.0;
    let change = d(cur, old);
    (change & ((1 << bits) - 1), change >> bits)
}

/// Adds the change of every shard since the previous read (`prev`, empty
/// for an entry not read before) to `total` with `add`, and keeps the
/// shards as read.
fn add_shard_changes<S: Copy + Default, T>(
    prev: &mut Vec<S>,
    total: &mut T,
    shards: &[S],
    add: fn(&mut T, &S, &S),
) {
    for (i, cur) in shards.iter().enumerate() {
        add(total, cur, &prev.get(i).copied().unwrap_or_default());
    }
    *prev = shards.to_vec();
}

/// (write, random, size class) of a class within its device: (op * 2 +
/// random) * SIZES + size, as the BPF side indexes.
fn class_of(class: u32) -> (bool, bool, usize) {
    let c = class as usize;
    (c / SIZES / 2 == 1, (c / SIZES) % 2 == 1, c % SIZES)
}

/// Adds the change of one shard of a hardware queue since the previous read.
fn add_queue_delta(q: &mut QueueTotals, cur: &iow_hwq_stats, old: &iow_hwq_stats) {
    let (completed, busy_ns) = unpack(cur.busy_completed, old.busy_completed);
    q.completed += completed;
    q.busy_ns += busy_ns;
    q.inserted += d(cur.inserted, old.inserted);
    q.issued += d(cur.issued, old.issued);
    q.requeued += d(cur.requeued, old.requeued);
}

/// Adds the change of one shard of a cost class since the previous read.
fn add_class_delta(t: &mut ClassTotals, cur: &iow_cost_class, old: &iow_cost_class) {
    let (ios, bytes) = unpack(cur.bytes_ios, old.bytes_ios);
    t.ios += ios;
    t.bytes += bytes;
    t.device_ns += d(cur.device_ns, old.device_ns);
    t.pages += d(cur.pages, old.pages);
}

/// Adds the change of one shard of a series since the previous read.
fn add_series_delta(t: &mut Totals, cur: &iow_series, old: &iow_series) {
    let (rand, bytes) = unpack(cur.bytes_rand, old.bytes_rand);
    let (charged, pages) = unpack(cur.charged, old.charged);
    t.bytes += bytes;
    t.charged.random += rand;
    t.charged.requests += charged;
    t.charged.pages += pages;
    t.merged += d(cur.merged, old.merged);
    t.requeued += d(cur.requeued, old.requeued);
    // Requests: every measured one is in the total-stage histogram once,
    // every other one in `unmeasured`.
    t.ios += d(cur.unmeasured, old.unmeasured);
    let queue = d(cur.lat_sum_ns[0], old.lat_sum_ns[0]);
    let device = d(cur.lat_sum_ns[1], old.lat_sum_ns[1]);
    let (timed, held) = unpack(cur.held_timed, old.held_timed);
    t.lat_sum_ns[0] += queue;
    t.lat_sum_ns[1] += device;
    t.lat_sum_ns[TOTAL_STAGE] += held + queue + device;
    t.lat_sum_ns[THROTTLE_STAGE] += held;
    t.held_timed += timed;
    t.held_io_max_ns += d(cur.held_io_max_ns, old.held_io_max_ns);
    for (b, v) in t.hist.iter_mut().enumerate() {
        let n = cur.hist[b].wrapping_sub(old.hist[b]) as u64;
        *v += n;
        if b / NBUCKETS == TOTAL_STAGE {
            t.ios += n;
        }
    }
}

impl Accumulator {
    pub fn new(hwq_events: bool, stage_histograms: bool) -> Accumulator {
        Accumulator {
            hwq_events,
            stage_histograms,
            ..Default::default()
        }
    }

    /// Adds a read; `lcoefs` gives a device's model (by dev_t) to price
    /// what was charged since the previous read (None: cost is off).
    pub fn add(&mut self, raw: &RawSample, lcoefs: &dyn Fn(u32) -> Option<[u64; 6]>) {
        for &(idx, devt) in &raw.devs {
            self.dev_of_idx.insert(idx, devt);
        }
        for s in &raw.series {
            let prev = self
                .prev
                .entry(s.slot)
                .or_insert_with(|| (s.key, Vec::new()));
            if prev.0 != s.key {
                // The slot was released and claimed by another series.
                *prev = (s.key, Vec::new());
            }
            let t = self.totals.entry(s.key).or_insert_with(|| Totals {
                hist: vec![0; NSTAGES * NBUCKETS],
                ..Default::default()
            });
            let before = t.charged;
            add_shard_changes(&mut prev.1, t, &s.shards, add_series_delta);
            let k = SeriesKey::decode(s.key);
            if let Some(lc) = self.dev_of_idx.get(&k.dev_idx).and_then(|&d| lcoefs(d)) {
                let cost = price(&lc, k.op == Op::Write, t.charged.since(before));
                t.cost = t.cost.wrapping_add(cost);
            }
        }
        // Hardware queue and class entries are never released: their
        // shards' changes since the previous read add up.
        for h in &raw.hwqs {
            let key = (h.devt, h.hctx);
            let prev = self.hwq_prev.entry(key).or_default();
            let q = self.hwq.entry(key).or_default();
            add_shard_changes(prev, q, &h.shards, add_queue_delta);
        }
        for c in &raw.cost_classes {
            let key = (c.devt, c.class);
            let prev = self.class_prev.entry(key).or_default();
            let t = self.cost_classes.entry(key).or_default();
            let before = *t;
            add_shard_changes(prev, t, &c.shards, add_class_delta);
            if let Some(lc) = lcoefs(c.devt) {
                let (write, random, _) = class_of(c.class);
                let ios = t.ios - before.ios;
                let charged = Charged {
                    requests: ios,
                    random: if random { ios } else { 0 },
                    pages: t.pages.wrapping_sub(before.pages),
                };
                t.cost = t.cost.wrapping_add(price(&lc, write, charged));
            }
        }
        let n = |what: iow_drop| raw.drops.n[what.0 as usize];
        self.drops = DropCounters {
            slot_table_full: n(iow_drop::IOW_DROP_SLOT_FULL),
            device_table_full: n(iow_drop::IOW_DROP_DEV_FULL),
            no_issue_stamp: n(iow_drop::IOW_DROP_NO_ISSUE_STAMP),
            no_start_stamp: n(iow_drop::IOW_DROP_NO_START_STAMP),
            culprit_late: raw.culprit_untold.late,
            culprit_lost: raw.culprit_untold.lost,
        };
    }

    /// Forgets a series whose slot was released (its cgroup is gone).
    pub fn forget(&mut self, slot: u32, key: u64) {
        self.prev.remove(&slot);
        self.totals.remove(&key);
    }

    /// Cost class samples of every device, by kernel dev_t.
    pub fn cost_classes(&self) -> Vec<(u32, ClassSample)> {
        let mut v: Vec<(u32, ClassSample)> = self
            .cost_classes
            .iter()
            .map(|(&(devt, class), t)| {
                let (write, random, size) = class_of(class);
                let sample = ClassSample {
                    write,
                    random,
                    size,
                    ios: t.ios,
                    bytes: t.bytes,
                    device_ns: t.device_ns,
                    cost: t.cost,
                };
                (devt, sample)
            })
            .collect();
        v.sort_by_key(|(d, c)| (*d, c.write, c.random, c.size));
        v
    }

    /// Of the requests timed so far (reads and writes), how many were
    /// timed from their bio's submission: (from submission, all timed).
    pub fn submission_stamped(&self) -> (u64, u64) {
        self.totals
            .iter()
            .filter(|(&k, _)| matches!(SeriesKey::decode(k).op, Op::Read | Op::Write))
            .fold((0, 0), |(s, a), (_, t)| {
                let timed: u64 = t.hist[TOTAL_STAGE * NBUCKETS..][..NBUCKETS].iter().sum();
                (s + t.held_timed, a + timed)
            })
    }

    /// Cgroup ids that have recorded I/O.
    pub fn cgroup_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.totals.keys().map(|&k| SeriesKey::decode(k).cgroup_id)
    }

    /// Writes the cumulative io, queues and drops of `snap`. `cgroup` names
    /// cgroup ids.
    pub fn fill(
        &self,
        snap: &mut Snapshot,
        cgroup: &dyn Fn(u64) -> CgroupRef,
        devices: &mut DeviceNames,
    ) {
        let bounds = crate::probes::block::hist::lower_bounds_seconds();
        let mut io = Vec::new();
        for (&key, t) in &self.totals {
            let k = SeriesKey::decode(key);
            let Some(&devt) = self.dev_of_idx.get(&k.dev_idx) else {
                continue;
            };
            // Uncounted stages: no counts rather than zeros, which would
            // say no request was measured.
            let counted = |s: usize| self.stage_histograms || s == TOTAL_STAGE;
            let stage = |s: usize| Histogram {
                counts: match counted(s) {
                    true => t.hist[s * NBUCKETS..(s + 1) * NBUCKETS].to_vec(),
                    false => Vec::new(),
                },
                sum_seconds: t.lat_sum_ns[s] as f64 / 1e9,
            };
            io.push(IoSeries {
                cgroup: cgroup(k.cgroup_id),
                device: devices.get(devt),
                op: k.op,
                ios: t.ios,
                bytes: t.bytes,
                merged: t.merged,
                requeued: t.requeued,
                cost_seconds: t.cost as f64 / VTIME_PER_SEC as f64,
                random_ios: t.charged.random,
                held_io_max_seconds: t.held_io_max_ns as f64 / 1e9,
                latency: StageHistograms {
                    throttle: stage(THROTTLE_STAGE),
                    queue: stage(0),
                    device: stage(1),
                    total: stage(TOTAL_STAGE),
                },
            });
        }
        io.sort_by(|a, b| (&a.device, a.cgroup.id, a.op).cmp(&(&b.device, b.cgroup.id, b.op)));
        let mut queues: Vec<QueueSeries> = self
            .hwq
            .iter()
            .map(|(&(devt, hctx), q)| QueueSeries {
                device: devices.get(devt),
                hctx,
                inserted: self.hwq_events.then_some(q.inserted),
                issued: self.hwq_events.then_some(q.issued),
                completed: q.completed,
                requeued: q.requeued,
                inflight: self
                    .hwq_events
                    .then(|| q.issued.saturating_sub(q.completed + q.requeued)),
                busy_seconds: q.busy_ns as f64 / 1e9,
            })
            .collect();
        queues.sort_by(|a, b| (&a.device, a.hctx).cmp(&(&b.device, b.hctx)));
        snap.hist_lower_bounds_seconds = bounds;
        snap.io = io;
        snap.queues = queues;
        snap.drops = self.drops.clone();
    }
}

#[cfg(test)]
#[path = "accumulate_tests.rs"]
mod tests;
