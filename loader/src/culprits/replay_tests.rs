//! The replay against processor sharing computed the plain way: every
//! span between two events, every pair of series in it.

use std::collections::HashMap;

use super::*;

const DEV: u32 = 3;

fn req(slot: u32, op: Op, issued: u64, done: u64, queue_ns: u64) -> Request {
    Request {
        slot,
        dev: DEV,
        op,
        done,
        device_ns: done - issued,
        queue_ns,
    }
}

/// Processor sharing over every span between two events: O(spans x
/// series^2), the definition itself.
fn by_definition(reqs: &[Request]) -> Totals {
    let mut at: Vec<u64> = reqs
        .iter()
        .flat_map(|r| [r.started(), r.issued(), r.done])
        .collect();
    at.sort_unstable();
    at.dedup();
    let mut out = Totals::new();
    let mut add = |k, v: f64| {
        if v > 0.0 {
            *out.entry(k).or_default() += v;
        }
    };
    for w in at.windows(2) {
        let (t, dt) = (w[0], (w[1] - w[0]) as f64);
        let mut n: HashMap<u32, f64> = HashMap::new();
        let mut q: HashMap<u32, f64> = HashMap::new();
        for r in reqs {
            if r.issued() <= t && t < r.done {
                *n.entry(r.slot).or_default() += 1.0;
            }
            if r.queue_ns > 0 && r.started() <= t && t < r.issued() {
                *q.entry(r.slot).or_default() += 1.0;
            }
        }
        let all: f64 = n.values().sum();
        // The last issued before the span (the latest issue, ties by slot).
        let ahead = reqs
            .iter()
            .filter(|r| r.issued() <= t)
            .max_by_key(|r| (r.issued(), r.slot))
            .map(|r| r.slot);
        for (&s, &ns) in &n {
            add((s, Culprit::Service, Stage::Device), ns / all * dt);
            for (&c, &nc) in &n {
                let k = if c == s { ns - 1.0 } else { nc };
                add((s, Culprit::Series(c), Stage::Device), ns * k / all * dt);
            }
        }
        for (&s, &qs) in &q {
            if all > 0.0 {
                for (&c, &nc) in &n {
                    add((s, Culprit::Series(c), Stage::Queue), qs * nc / all * dt);
                }
            } else if let Some(a) = ahead.filter(|&a| a != s) {
                add((s, Culprit::Series(a), Stage::Queue), qs * dt);
            }
        }
    }
    out
}

/// A small deterministic generator (xorshift64).
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

/// `series` series, each issuing `per` requests at random (some queued
/// first), over a shared span: many overlaps, gaps, equal instants.
fn random_requests(seed: u64, series: u32, per: u32) -> Vec<Request> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    for s in 0..series {
        let op = Op::ALL[(s % 2) as usize];
        for _ in 0..per {
            let issued = 1_000 + rng.next(100_000);
            let done = issued + 1 + rng.next(20_000);
            let queue = if rng.next(3) == 0 { rng.next(5_000) } else { 0 };
            out.push(req(10 + s, op, issued, done, queue.min(issued - 1)));
        }
    }
    out
}

fn replayed(reqs: &[Request], horizons: &[u64]) -> Replay {
    let mut r = Replay::default();
    for q in reqs {
        r.add(q);
    }
    for &h in horizons {
        r.advance(h);
    }
    r
}

fn assert_close(got: &Totals, want: &Totals, what: &str) {
    let keys: std::collections::BTreeSet<_> = got.keys().chain(want.keys()).collect();
    for k in keys {
        let (g, w) = (
            got.get(k).copied().unwrap_or(0.0),
            want.get(k).copied().unwrap_or(0.0),
        );
        assert!(
            (g - w).abs() <= 1e-6 * w.max(1.0),
            "{what}: {k:?}: replayed {g}, by definition {w}"
        );
    }
}

#[test]
fn matches_processor_sharing_by_definition() {
    for seed in 1..=20 {
        let reqs = random_requests(seed * 7919, 1 + (seed % 6) as u32, 12);
        let r = replayed(&reqs, &[u64::MAX / 2]);
        assert_close(r.totals(), &by_definition(&reqs), &format!("seed {seed}"));
        assert_eq!(r.untold(), Untold::default());
    }
}

#[test]
fn the_same_whatever_the_horizons() {
    let reqs = random_requests(42, 5, 30);
    let once = replayed(&reqs, &[u64::MAX / 2]);
    // Every request is in before the first advance, so none is late.
    let steps: Vec<u64> = (0..40).map(|i| i * 3_000).chain([u64::MAX / 2]).collect();
    let stepped = replayed(&reqs, &steps);
    assert_close(stepped.totals(), once.totals(), "stepped");
}

/// The victim's parts: service, behind itself, behind each named series
/// and behind the others by op, on the device.
fn device_parts(t: &Totals, victim: u32) -> f64 {
    t.iter()
        .filter(|((v, _, st), _)| *v == victim && *st == Stage::Device)
        .map(|(_, ns)| ns)
        .sum()
}

#[test]
fn beyond_the_named_the_others_are_told_by_op_and_every_victim_tiles() {
    // Three times as many series as are named, each at QD1 back to back.
    let mut reqs = Vec::new();
    let mut rng = Rng(99);
    for s in 0..(3 * NAMED as u32) {
        let mut t = rng.next(1_000);
        let op = if s % 3 == 0 { Op::Write } else { Op::Read };
        for _ in 0..40 {
            let done = t + 100 + rng.next(3_000) * (1 + (s % 4) as u64);
            reqs.push(req(s, op, t, done, 0));
            t = done + rng.next(50);
        }
    }
    let steps: Vec<u64> = (1..30).map(|i| i * 20_000).chain([u64::MAX / 2]).collect();
    let r = replayed(&reqs, &steps);
    let want = by_definition(&reqs);
    for v in 0..(3 * NAMED as u32) {
        let device: f64 = reqs
            .iter()
            .filter(|q| q.slot == v)
            .map(|q| q.device_ns as f64)
            .sum();
        let parts = device_parts(r.totals(), v);
        assert!(
            (parts - device).abs() <= 1e-6 * device,
            "victim {v}: parts {parts}, device time {device}"
        );
        // Named and other of one op add up to the definition's whole op.
        for op in [Op::Read, Op::Write] {
            let of_op = |t: &Totals, with_other: bool| -> f64 {
                t.iter()
                    .filter(|((vv, c, st), _)| {
                        *vv == v
                            && *st == Stage::Device
                            && match c {
                                Culprit::Series(c) => {
                                    *c != v && (if c % 3 == 0 { Op::Write } else { Op::Read }) == op
                                }
                                Culprit::Other(o) => with_other && *o == op,
                                Culprit::Service => false,
                            }
                    })
                    .map(|(_, ns)| ns)
                    .sum()
            };
            let (got, defined) = (of_op(r.totals(), true), of_op(&want, false));
            assert!(
                (got - defined).abs() <= 1e-6 * defined.max(1.0),
                "victim {v}, behind {op:?}: {got} against {defined}"
            );
        }
    }
    let others = r
        .totals()
        .keys()
        .filter(|(_, c, _)| matches!(c, Culprit::Other(_)))
        .count();
    assert!(others > 0, "some waits told as other cgroups");
}

#[test]
fn a_late_request_is_counted_late_and_split_from_the_clock_on() {
    let mut r = Replay::default();
    r.add(&req(1, Op::Read, 1_000, 2_000, 0));
    r.advance(5_000);
    // Issued before the replay's clock (5,000), completed after.
    r.add(&req(2, Op::Read, 4_000, 9_000, 0));
    r.add(&req(1, Op::Read, 6_000, 8_000, 0));
    r.advance(10_000);
    assert_eq!(r.untold().late, 1);
    let t = r.totals();
    assert_eq!(t[&(2, Culprit::Service, Stage::Device)], 3_000.0);
    assert_eq!(t[&(1, Culprit::Series(2), Stage::Device)], 1_000.0);
    // Completed before the clock: not split at all.
    r.add(&req(3, Op::Read, 100, 200, 0));
    assert_eq!(r.untold().late, 2);
}

#[test]
fn queued_behind_the_series_the_scheduler_kept_the_device_for() {
    // 2's request waits in the scheduler 0..10,000; 1's requests hold
    // the device 0..4,000, then the device idles for 1 (BFQ waiting for
    // its next), which comes at 6,000..8,000.
    let reqs = [
        req(1, Op::Write, 0, 4_000, 0),
        req(1, Op::Write, 6_000, 8_000, 0),
        req(2, Op::Read, 10_000, 11_000, 10_000),
    ];
    let r = replayed(&reqs, &[20_000]);
    let t = r.totals();
    assert_eq!(t[&(2, Culprit::Series(1), Stage::Queue)], 10_000.0);
    assert_close(t, &by_definition(&reqs), "idling");
}

#[test]
fn forgets_released_slots_and_their_pairs() {
    let reqs = [req(1, Op::Read, 0, 4_000, 0), req(2, Op::Read, 0, 4_000, 0)];
    let mut r = replayed(&reqs, &[5_000]);
    assert!(r
        .totals()
        .contains_key(&(1, Culprit::Series(2), Stage::Device)));
    r.forget(&[2].into());
    assert!(r
        .totals()
        .keys()
        .all(|(v, c, _)| *v != 2 && *c != Culprit::Series(2)));
    assert_eq!(r.totals()[&(1, Culprit::Service, Stage::Device)], 2_000.0);
}
