//! Every device's requests replayed in time order: each request is three
//! events (queued in the scheduler, issued, completed) known only once it
//! completes, so events wait until the horizon (no request still in
//! flight started before it) and are then applied in order, each settling
//! its own series' charges (series.rs). At each advance every series is
//! settled at the horizon, its charges flushed into the totals, and the
//! device's busiest series named apart for the next span.

use std::collections::{BTreeSet, HashMap, VecDeque};

use iowarden_exporters::{Op, Stage};

use super::culprit::Culprit;
use super::series::{op_index, Integrals, NamedNow, NamedSet, Series, DEVICE, NAMED, OPS, QUEUE};

/// A series with nothing in flight or queued for this long leaves the
/// replay's tables (its totals stay).
const FORGET_IDLE_NS: u64 = 10_000_000_000;

/// One completed request, as logged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    /// Its series' slot, device index and op.
    pub slot: u32,
    pub dev: u32,
    pub op: Op,
    /// Its completion (CLOCK_MONOTONIC ns).
    pub done: u64,
    /// Issue -> completion.
    pub device_ns: u64,
    /// Allocation -> issue, in an I/O scheduler; 0: none.
    pub queue_ns: u64,
}

impl Request {
    fn issued(&self) -> u64 {
        self.done.saturating_sub(self.device_ns)
    }

    /// When it started: its allocation in a scheduler, else its issue.
    pub fn started(&self) -> u64 {
        self.issued().saturating_sub(self.queue_ns)
    }
}

/// What an event does, in the order events of one instant apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Done,
    /// Issued; `true`: out of the scheduler (it was queued).
    Issue(bool),
    Queue,
}

impl Kind {
    const ALL: [Kind; 4] = [
        Kind::Done,
        Kind::Issue(false),
        Kind::Issue(true),
        Kind::Queue,
    ];
}

/// An event packed in one sort key: (instant, kind, slot) order, the
/// series' op in the low bits. Sorting u128s is what the replay spends
/// most of its time on after the charges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Event(u128);

impl Event {
    fn new(at: u64, kind: Kind, slot: u32, op: usize) -> Event {
        let k = Kind::ALL.iter().position(|&x| x == kind).unwrap_or(0) as u128;
        Event((at as u128) << 64 | k << 32 | (slot as u128) << 2 | op as u128)
    }

    fn at(self) -> u64 {
        (self.0 >> 64) as u64
    }

    fn kind(self) -> Kind {
        Kind::ALL[(self.0 >> 32) as usize & 3]
    }

    fn slot(self) -> u32 {
        (self.0 as u32) >> 2
    }

    fn op(self) -> usize {
        self.0 as usize & 3
    }
}

/// The (victim slot, culprit, stage) totals, ns times requests.
pub type Totals = HashMap<(u32, Culprit, Stage), f64>;

/// One device's replay.
#[derive(Default)]
struct DeviceReplay {
    /// Events are applied up to here.
    clock: u64,
    in_flight: u32,
    in_flight_op: [u32; OPS],
    now: Integrals,
    /// The series issued last.
    ahead: Option<usize>,
    series: Vec<Series>,
    /// By slot: the series' index, u32::MAX for none.
    index: Vec<u32>,
    named: [Option<usize>; NAMED],
    /// The named ones' values, refreshed at each event.
    named_set: NamedSet,
    /// Events not applied yet: in order, and as they came since.
    pending: VecDeque<Event>,
    fresh: Vec<Event>,
    /// When the series were last scored.
    scored_at: u64,
}

impl DeviceReplay {
    /// Queues a request's events; false when part of it precedes events
    /// already applied (it is then counted from the clock on, or not at
    /// all when it completed before).
    fn add(&mut self, r: &Request) -> bool {
        let op = op_index(r.op);
        let at = |t: u64| t.max(self.clock);
        if r.done < self.clock {
            return false;
        }
        let ev = |at, kind| Event::new(at, kind, r.slot, op);
        let queued = r.queue_ns > 0 && r.issued() > self.clock;
        if queued {
            self.fresh.push(ev(at(r.started()), Kind::Queue));
        }
        self.fresh.push(ev(at(r.issued()), Kind::Issue(queued)));
        self.fresh.push(ev(r.done, Kind::Done));
        r.started() >= self.clock
    }

    /// Applies the events up to `horizon`, settles every series there and
    /// flushes their charges into `totals`.
    fn advance(&mut self, horizon: u64, totals: &mut Totals) {
        let horizon = horizon.max(self.clock);
        self.take_fresh();
        while let Some(&e) = self.pending.front() {
            if e.at() > horizon {
                break;
            }
            self.pending.pop_front();
            self.apply(e);
        }
        self.run_clock(horizon);
        self.refresh_named();
        for (i, s) in self.series.iter_mut().enumerate() {
            s.settle(&self.now, &self.named_set, i);
        }
        self.flush(totals);
        self.forget_idle();
        self.rename();
    }

    /// Sorts the events that came since the last advance into the pending
    /// ones: each sorted once, then merged with the pending ones after the
    /// earliest of them only (those before stay where they are: with the
    /// horizon's lag, most of them).
    fn take_fresh(&mut self) {
        if self.fresh.is_empty() {
            return;
        }
        self.fresh.sort_unstable();
        let first = self.fresh[0];
        let keep = self.pending.partition_point(|e| *e <= first);
        let tail: Vec<Event> = self.pending.drain(keep..).collect();
        let (mut a, mut b) = (tail.into_iter().peekable(), self.fresh.drain(..).peekable());
        while let (Some(x), Some(y)) = (a.peek(), b.peek()) {
            self.pending
                .push_back(if x <= y { a.next() } else { b.next() }.unwrap());
        }
        self.pending.extend(a);
        self.pending.extend(b);
    }

    /// Moves the integrals to `t`.
    fn run_clock(&mut self, t: u64) {
        if t <= self.clock {
            return;
        }
        let dt = (t - self.clock) as f64;
        self.clock = t;
        if self.in_flight > 0 {
            // One division: the time each request in flight held.
            let each = dt / self.in_flight as f64;
            self.now.psi += each;
            for o in 0..OPS {
                self.now.phi_op[o] += each * self.in_flight_op[o] as f64;
            }
        } else if let Some(a) = self.ahead {
            let s = &mut self.series[a];
            s.omega += dt;
            self.now.omega_op[s.op] += dt;
        }
    }

    fn apply(&mut self, e: Event) {
        self.run_clock(e.at());
        let i = self.series_of(e.slot(), e.op());
        self.refresh_named();
        let psi = self.now.psi;
        let s = &mut self.series[i];
        s.settle(&self.now, &self.named_set, i);
        s.rebase(psi);
        s.last_event = e.at();
        match e.kind() {
            Kind::Queue => s.queued += 1,
            Kind::Issue(queued) => {
                if queued {
                    s.queued = s.queued.saturating_sub(1);
                }
                s.in_flight += 1;
                self.in_flight += 1;
                self.in_flight_op[e.op()] += 1;
                self.ahead = Some(i);
            }
            Kind::Done if s.in_flight > 0 => {
                s.in_flight -= 1;
                self.in_flight -= 1;
                self.in_flight_op[e.op()] -= 1;
            }
            Kind::Done => {}
        }
    }

    /// The index of the series in `slot`, added on first sight.
    fn series_of(&mut self, slot: u32, op: usize) -> usize {
        let at = slot as usize;
        if let Some(&i) = self.index.get(at).filter(|&&i| i != u32::MAX) {
            return i as usize;
        }
        self.refresh_named();
        self.series
            .push(Series::new(slot, op, &self.now, &self.named_set));
        let i = self.series.len() - 1;
        if self.index.len() <= at {
            self.index.resize(at + 1, u32::MAX);
        }
        self.index[at] = i as u32;
        // Named at once where a position is free: its Φ and Ω are 0, as
        // every series' mark of an empty position is.
        if let Some(free) = self.named.iter_mut().find(|c| c.is_none()) {
            *free = Some(i);
            self.restructure_named();
        }
        i
    }

    /// The named set after a position changed hands.
    fn restructure_named(&mut self) {
        self.named_set = NamedSet::default();
        for (pos, c) in self.named.iter().enumerate() {
            if let Some(index) = *c {
                self.named_set.push(NamedNow {
                    pos,
                    index,
                    op: self.series[index].op,
                    ..Default::default()
                });
            }
        }
    }

    /// The named ones' Φ and Ω now.
    fn refresh_named(&mut self) {
        let psi = self.now.psi;
        for x in self.named_set.held_mut() {
            let s = &self.series[x.index];
            x.phi = s.phi(psi);
            x.omega = s.omega;
        }
    }

    /// Moves every series' charges into the totals.
    fn flush(&mut self, totals: &mut Totals) {
        let named: Vec<Option<u32>> = self
            .named
            .iter()
            .map(|c| c.map(|i| self.series[i].slot))
            .collect();
        for s in &mut self.series {
            let c = std::mem::take(&mut s.charged);
            let victim = s.slot;
            let mut put = |culprit, st: usize, ns: f64| {
                // Below a nanosecond: the rounding of a remainder (its
                // integrals are ~1e14 ns after a day), not a wait.
                if ns >= 1.0 {
                    let stage = if st == DEVICE {
                        Stage::Device
                    } else {
                        Stage::Queue
                    };
                    *totals.entry((victim, culprit, stage)).or_default() += ns;
                }
            };
            put(Culprit::Service, DEVICE, c.service);
            for st in [DEVICE, QUEUE] {
                put(Culprit::Series(victim), st, c.own[st]);
                for (j, part) in c.named.iter().enumerate() {
                    if let Some(slot) = named[j] {
                        put(Culprit::Series(slot), st, part[st]);
                    }
                }
                for (o, part) in c.other.iter().enumerate() {
                    put(Culprit::Other(Op::ALL[o]), st, part[st]);
                }
            }
        }
    }

    /// Names the busiest series (by their decayed device time share) for
    /// the next span; every series was just settled, so a position that
    /// changes hands owes its previous holder nothing.
    fn rename(&mut self) {
        let elapsed = self.clock.saturating_sub(self.scored_at);
        self.scored_at = self.clock;
        let psi = self.now.psi;
        for s in &mut self.series {
            s.rescore(psi, elapsed);
        }
        let mut by_score: Vec<usize> = (0..self.series.len()).collect();
        by_score.sort_by(|&a, &b| {
            let (x, y) = (&self.series[a], &self.series[b]);
            y.score.total_cmp(&x.score).then(x.slot.cmp(&y.slot))
        });
        by_score.truncate(NAMED);
        let keep: BTreeSet<usize> = by_score.iter().copied().collect();
        let newcomers: Vec<usize> = by_score
            .iter()
            .copied()
            .filter(|i| !self.named.contains(&Some(*i)))
            .collect();
        let mut newcomers = newcomers.into_iter();
        let mut changed = Vec::new();
        for j in 0..NAMED {
            if self.named[j].is_some_and(|i| keep.contains(&i)) {
                continue;
            }
            let next = newcomers.next();
            if self.named[j] != next {
                self.named[j] = next;
                changed.push(j);
            }
        }
        if !changed.is_empty() {
            self.restructure_named();
        }
        let psi = self.now.psi;
        let now: Vec<(usize, f64, f64)> = changed
            .iter()
            .map(|&j| match self.named[j] {
                Some(i) => (j, self.series[i].phi(psi), self.series[i].omega),
                None => (j, 0.0, 0.0),
            })
            .collect();
        for s in &mut self.series {
            for &(j, phi, omega) in &now {
                s.mark_named(j, phi, omega);
            }
        }
    }

    /// Drops the series idle for long (settled and flushed: they owe and
    /// are owed nothing; a position one held is free again).
    fn forget_idle(&mut self) {
        let clock = self.clock;
        let keep = |i: usize, s: &Series| {
            !s.idle()
                || self.ahead == Some(i)
                || clock.saturating_sub(s.last_event) < FORGET_IDLE_NS
        };
        let kept: Vec<bool> = self
            .series
            .iter()
            .enumerate()
            .map(|(i, s)| keep(i, s))
            .collect();
        if kept.iter().all(|&k| k) {
            return;
        }
        self.reindex(&kept);
    }

    /// Keeps the series marked in `kept`, their indices renumbered.
    fn reindex(&mut self, kept: &[bool]) {
        let mut new_index = vec![None; self.series.len()];
        let mut n = 0;
        for (i, &k) in kept.iter().enumerate() {
            if k {
                new_index[i] = Some(n);
                n += 1;
            }
        }
        let mut i = 0;
        self.series.retain(|_| {
            i += 1;
            kept[i - 1]
        });
        self.index.fill(u32::MAX);
        for (i, s) in self.series.iter().enumerate() {
            self.index[s.slot as usize] = i as u32;
        }
        self.ahead = self.ahead.and_then(|a| new_index[a]);
        let mut vacated = Vec::new();
        for (j, c) in self.named.iter_mut().enumerate() {
            if c.is_some_and(|i| new_index[i].is_none()) {
                vacated.push(j);
            }
            *c = c.and_then(|i| new_index[i]);
        }
        // Settled and flushed: a vacated position is marked empty (0).
        for s in &mut self.series {
            for &j in &vacated {
                s.mark_named(j, 0.0, 0.0);
            }
        }
        self.restructure_named();
    }

    /// Drops the series of `slots` that hold nothing (their cgroups are gone).
    fn forget(&mut self, slots: &BTreeSet<u32>) {
        let kept: Vec<bool> = self
            .series
            .iter()
            .map(|s| !(slots.contains(&s.slot) && s.idle()))
            .collect();
        if kept.iter().any(|&k| !k) {
            self.reindex(&kept);
        }
    }
}

/// The replay of every device, and its totals since start.
#[derive(Default)]
pub struct Replay {
    /// By device index (the probe's, small and dense).
    devices: Vec<DeviceReplay>,
    totals: Totals,
    untold: Untold,
}

/// Requests whose time the account did not (wholly) split, since start,
/// by why: the two call for different remedies (docs/culprits.md).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Untold {
    /// Logged after the span they started in was replayed: they outlived
    /// the horizon (their earlier part is not split).
    pub late: u64,
    /// Lost from the log before they were read: overwritten in their
    /// CPU's ring, or their series released meanwhile.
    pub lost: u64,
}

impl Replay {
    /// Takes a completed request in; one that precedes events already
    /// applied is counted late (its earlier part is not split).
    pub fn add(&mut self, r: &Request) {
        let at = r.dev as usize;
        if self.devices.len() <= at {
            self.devices.resize_with(at + 1, DeviceReplay::default);
        }
        if !self.devices[at].add(r) {
            self.untold.late += 1;
        }
    }

    /// Applies every event up to `horizon` and totals the charges.
    pub fn advance(&mut self, horizon: u64) {
        for d in &mut self.devices {
            d.advance(horizon, &mut self.totals);
        }
    }

    /// Counts requests lost from the log before they were read.
    pub fn lost(&mut self, n: u64) {
        self.untold.lost += n;
    }

    /// Requests whose time was not (wholly) split, since start.
    pub fn untold(&self) -> Untold {
        self.untold
    }

    /// The totals since start, ns times requests.
    pub fn totals(&self) -> &Totals {
        &self.totals
    }

    /// Events waiting for the horizon.
    pub fn pending(&self) -> usize {
        self.devices
            .iter()
            .map(|d| d.pending.len() + d.fresh.len())
            .sum()
    }

    /// Forgets the series of released slots and every total naming them.
    pub fn forget(&mut self, slots: &BTreeSet<u32>) {
        for d in &mut self.devices {
            d.forget(slots);
        }
        self.totals.retain(|(v, c, _), _| {
            !slots.contains(v) && !matches!(c, Culprit::Series(s) if slots.contains(s))
        });
    }
}

#[cfg(test)]
#[path = "replay_tests.rs"]
mod tests;
