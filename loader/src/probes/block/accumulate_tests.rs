//! The accumulator against hand-made reads of the BPF maps.

use super::*;
use crate::probes::block::sample::{RawHwq, RawSeries};

/// A shard that saw `ios` 4 KiB requests, `n` of them in total-stage bucket `bucket`.
fn shard(ios: u64, bucket: usize, n: u32) -> iow_series {
    let mut s = iow_series {
        bytes_rand: pack(0, ios * 4096),
        unmeasured: ios - n as u64,
        ..Default::default()
    };
    s.hist[2 * NBUCKETS + bucket] = n;
    s
}

/// `n` counted and a sum `sum`, packed as the BPF side adds them.
fn pack(n: u64, sum: u64) -> u64 {
    (sum << iow_const::IOW_PACK_COUNT_BITS.0) | n
}

#[test]
fn packed_counts_survive_their_field_and_the_word_wrapping() {
    let bits = iow_const::IOW_PACK_COUNT_BITS.0;
    // The count field two short of wrapping, the word one short of 2^64.
    let old = u64::MAX - 1;
    let cur = old.wrapping_add(pack(3, 4096 * 3));
    assert_eq!(unpack(cur, old), (3, 4096 * 3));
    let mut acc = Accumulator::default();
    let hwq = |busy_completed| RawSample {
        hwqs: vec![RawHwq {
            devt: 1,
            hctx: 0,
            shards: vec![iow_hwq_stats {
                busy_completed,
                ..Default::default()
            }],
        }],
        ..Default::default()
    };
    acc.add(&hwq(old), &|_| None);
    acc.add(&hwq(cur), &|_| None);
    let q = acc.hwq[&(1, 0)];
    let mask = (1 << bits) - 1;
    assert_eq!(
        (q.completed, q.busy_ns),
        ((old & mask) + 3, (old >> bits) + 4096 * 3)
    );
}

#[test]
fn key_decoding_matches_the_header_layout() {
    let key = (12345u64 << 9) | (5 << 3) | (1 << 1) | 1;
    assert_eq!(
        SeriesKey::decode(key),
        SeriesKey {
            cgroup_id: 12345,
            dev_idx: 5,
            op: Op::Write
        }
    );
}

#[test]
fn sums_shards_and_survives_u32_wrap() {
    let key = (7u64 << 9) | 1;
    let mut acc = Accumulator::default();
    let raw = |a: iow_series, b: iow_series| RawSample {
        series: vec![RawSeries {
            slot: 3,
            key,
            shards: vec![a, b],
        }],
        devs: vec![(0, (7 << 20) | 1)],
        ..Default::default()
    };
    let mut wrapped = shard(10, 4, 0);
    wrapped.hist[2 * NBUCKETS + 4] = u32::MAX - 1;
    acc.add(&raw(wrapped, shard(5, 4, 3)), &|_| None);
    let mut after = shard(12, 4, 0);
    after.hist[2 * NBUCKETS + 4] = 2; // shard 0's bucket wrapped: +4
    acc.add(&raw(after, shard(6, 4, 3)), &|_| None);
    let t = &acc.totals[&key];
    assert_eq!(t.hist[2 * NBUCKETS + 4], (u32::MAX as u64 - 1) + 3 + 4);
    // Requests: unmeasured (12 and 6 - 3) + total-stage samples.
    assert_eq!(t.ios, 12 + 3 + (u32::MAX as u64 - 1) + 4 + 3);
    assert_eq!(t.bytes, (12 + 6) * 4096);
}

#[test]
fn total_latency_sum_is_throttle_plus_queue_plus_device() {
    let key = (7u64 << 9) | 1;
    let mut s = shard(2, 5, 2);
    s.lat_sum_ns = [300, 1200];
    // Both requests timed from submission, held 200 ns together.
    s.held_timed = (200 << iow_const::IOW_PACK_COUNT_BITS.0) | 2;
    let mut acc = Accumulator::default();
    let raw = RawSample {
        series: vec![RawSeries {
            slot: 0,
            key,
            shards: vec![s],
        }],
        ..Default::default()
    };
    acc.add(&raw, &|_| None);
    assert_eq!(acc.totals[&key].lat_sum_ns, [300, 1200, 1700, 200]);
    assert_eq!(acc.totals[&key].held_timed, 2);
    assert_eq!(acc.totals[&key].ios, 2);
}

#[test]
fn uncounted_stages_have_sums_and_no_counts() {
    let key = (7u64 << 9) | 1;
    let mut s = shard(2, 5, 2);
    s.lat_sum_ns = [300, 1200];
    let raw = RawSample {
        series: vec![RawSeries {
            slot: 0,
            key,
            shards: vec![s],
        }],
        devs: vec![(0, (7 << 20) | 1)],
        ..Default::default()
    };
    let snap = |stage_histograms| {
        let mut acc = Accumulator::new(false, stage_histograms);
        acc.add(&raw, &|_| None);
        let mut names = DeviceNames::default();
        let cg = |id| CgroupRef {
            id,
            ..Default::default()
        };
        let mut snap = Snapshot::default();
        acc.fill(&mut snap, &cg, &mut names);
        snap.io.remove(0).latency
    };
    let only_total = snap(false);
    assert!(only_total.queue.counts.is_empty() && only_total.device.counts.is_empty());
    assert_eq!(only_total.queue.sum_seconds, 300e-9);
    assert_eq!(only_total.device.sum_seconds, 1200e-9);
    assert_eq!(only_total.total.counts.iter().sum::<u64>(), 2);
    let all = snap(true);
    assert_eq!(all.queue.counts.len(), NBUCKETS);
    assert_eq!(all.total, only_total.total);
}

#[test]
fn cost_classes_sum_shards() {
    use crate::probes::block::sample::RawCostClass;
    use crate::skel::types::iow_cost_class;
    let devt = (7 << 20) | 1;
    // Device 0, write (op 1), random, 64 KiB (size 4): (1 * 2 + 1) * 9 + 4.
    let class = 3 * SIZES as u32 + 4;
    let c = |ios, ns| iow_cost_class {
        bytes_ios: pack(ios, ios * 65536),
        device_ns: ns,
        pages: ios * 16,
        ..Default::default()
    };
    let raw = |shards| RawSample {
        devs: vec![(0, devt)],
        cost_classes: vec![RawCostClass {
            devt,
            class,
            shards,
        }],
        ..Default::default()
    };
    let mut acc = Accumulator::default();
    // A write page 10 vtime, a random write 100 (write, random, 16 pages).
    let model = |_| Some([0, 0, 0, 10, 0, 100]);
    acc.add(&raw(vec![c(2, 10), c(3, 20)]), &model);
    acc.add(&raw(vec![c(4, 30), c(3, 20)]), &model);
    let v = acc.cost_classes();
    assert_eq!(v.len(), 1);
    let (d, s) = v[0];
    assert_eq!(d, devt);
    assert!(s.write && s.random && s.size == 4, "{s:?}");
    assert_eq!((s.ios, s.device_ns, s.cost), (7, 50, 7 * 100 + 7 * 16 * 10));
    assert_eq!(s.bytes, 7 * 65536);
}

#[test]
fn reused_slot_starts_from_zero() {
    let mut acc = Accumulator::default();
    let one = |key, ios| RawSample {
        series: vec![RawSeries {
            slot: 1,
            key,
            shards: vec![shard(ios, 0, 0)],
        }],
        ..Default::default()
    };
    acc.add(&one(3, 100), &|_| None);
    acc.forget(1, 3);
    acc.add(&one(5, 7), &|_| None);
    assert_eq!(acc.totals[&5].ios, 7);
    assert!(!acc.totals.contains_key(&3));
}

#[test]
fn charges_are_priced_with_the_model_of_each_read() {
    // A write series on device 0: (cgroup 7, dev 0, op 1).
    let key = (7u64 << 9) | (1 << 1) | 1;
    let devt = (7 << 20) | 1;
    // `n` requests of which `rand` random, `pages` pages, counted so far.
    let read = |n: u64, rand: u64, pages: u64| RawSample {
        series: vec![RawSeries {
            slot: 0,
            key,
            shards: vec![iow_series {
                bytes_rand: pack(rand, pages * 4096),
                charged: pack(n, pages),
                unmeasured: n,
                ..Default::default()
            }],
        }],
        devs: vec![(0, devt)],
        ..Default::default()
    };
    let mut acc = Accumulator::default();
    acc.add(&read(3, 1, 5), &|d| {
        (d == devt).then_some([0, 0, 0, 1, 10, 100])
    });
    // The model changed between the reads: what was counted since is
    // priced with the new one, what was before keeps its price.
    acc.add(&read(4, 2, 9), &|_| Some([0, 0, 0, 2, 20, 200]));
    let t = &acc.totals[&key];
    assert_eq!(t.cost, (5 + 2 * 10 + 100) + (4 * 2 + 200));
    assert_eq!(
        t.charged,
        Charged {
            requests: 4,
            random: 2,
            pages: 9
        }
    );
    // Cost off: nothing priced.
    let mut off = Accumulator::default();
    off.add(&read(3, 1, 5), &|_| None);
    assert_eq!(off.totals[&key].cost, 0);
}
