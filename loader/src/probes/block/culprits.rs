//! The culprit account's probe side (bpf/block/culprits.h): the completion
//! program logs every timed request in its CPU's ring, and a thread of its
//! own drains the rings, names each record's series from the slot table
//! and replays them ([`crate::culprits`]): the totals per (victim slot,
//! culprit, stage) the poll reads ([`RawPair`]), as the BPF side's
//! counters, cumulative. The thread starts once the command has settled
//! its privileges (capabilities are per thread).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use iowarden_exporters::{ProbeStatus, Stage};

use super::accumulate::SeriesKey;
use crate::culprits::{Culprit, Horizon, Replay, Request, Untold};
use crate::probes::mapped::MappedArray;
use crate::probes::objects::status;
use crate::skel::types::{bss, iow_const, iow_flight_head, iow_flight_rec, iow_tables};

/// The status's name.
pub const STATUS: &str = "culprits";

const DONE_BITS: u32 = iow_const::IOW_FLIGHT_DONE_BITS.0;
const SLOT_BITS: u32 = iow_const::IOW_FLIGHT_SLOT_BITS.0;
const MIN_BITS: u32 = iow_const::IOW_FLIGHT_RING_MIN_BITS.0;
const MAX_BITS: u32 = iow_const::IOW_FLIGHT_RING_MAX_BITS.0;
/// The rings of all CPUs together, at most (within the bounds per CPU):
/// 1.5 MiB at 192 possible CPUs, which keeps every map of the defaults
/// within 32 MiB there (guest t-60).
const LOG_BYTES: u64 = 2 << 20;
/// How often the rings are drained, at most and at least: often enough
/// that the fastest CPU fills a quarter of its ring in between.
const DRAIN_EVERY_MIN: Duration = Duration::from_millis(2);
const DRAIN_EVERY_MAX: Duration = Duration::from_millis(50);
/// The drain's nice level. Its work follows the I/O rate (about 200 ns a
/// request: 1 % of a CPU at 90 k requests/s), but where every CPU is busy a
/// thread at the level of the rest waits its turn behind every runnable
/// task: 256 loop workers and readers beside the host suite on 2 CPUs left
/// it unrun for up to 1.2 s, long enough for a ring to be lapped (34,162
/// records lost at once; in 3 of 23 runs). Ten levels below them it lost
/// none in 10 runs. At -20 it weighs as 87 tasks at 0, and takes no more
/// CPU than its work (docs/culprits.md).
pub const DRAIN_NICE: i32 = -20;

/// The status (None: not asked for, or switched off by `--no-culprits`).
pub fn plan(wanted: bool) -> Option<ProbeStatus> {
    match wanted {
        true => Some(status(STATUS, true, "")),
        false => Some(status(STATUS, false, "disabled by --no-culprits")),
    }
}

/// log2 of each CPU's ring, in records, for `cpus` possible CPUs.
pub fn ring_bits(cpus: u32) -> u32 {
    let per_cpu = LOG_BYTES / cpus.max(1) as u64 / std::mem::size_of::<iow_flight_rec>() as u64;
    (63 - per_cpu.max(1).leading_zeros()).clamp(MIN_BITS, MAX_BITS)
}

/// Kernel memory of the rings and counts for `cpus` possible CPUs.
pub fn log_bytes(cpus: u32) -> u64 {
    let page = |b: u64| b.div_ceil(4096) * 4096;
    let rec = std::mem::size_of::<iow_flight_rec>() as u64;
    let head = std::mem::size_of::<iow_flight_head>() as u64;
    page((cpus as u64) << ring_bits(cpus) << rec.trailing_zeros()) + page(cpus as u64 * head)
}

/// One (victim slot, culprit, stage) total: ns times requests since
/// start (or since the slots were last released).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RawPair {
    pub victim: u32,
    pub culprit: Culprit,
    pub stage: Stage,
    pub ns: u64,
}

/// The object's slot table in its .bss (iow_tables), mapped as words:
/// which series holds each slot.
struct Tables {
    words: MappedArray<u64>,
    /// Byte offset of slot_key.
    keys_at: usize,
}

impl Tables {
    fn map(bss_map: &impl std::os::fd::AsFd) -> Result<Tables> {
        let tables = std::mem::offset_of!(bss, tables);
        Ok(Tables {
            words: MappedArray::new(bss_map, std::mem::size_of::<bss>() / 8)?,
            keys_at: tables + std::mem::offset_of!(iow_tables, slot_key),
        })
    }

    /// The series key in `slot` (0: free).
    fn key(&self, slot: u32) -> u64 {
        self.words.get(self.keys_at / 8 + slot as usize)
    }
}

/// The rings and the tables, mapped for the draining thread.
pub struct FlightLog {
    log: MappedArray<iow_flight_rec>,
    heads: MappedArray<iow_flight_head>,
    tables: Tables,
    ring_bits: u32,
    /// Records taken from each CPU's ring so far.
    taken: Vec<u64>,
}

impl FlightLog {
    pub fn map(
        log: &impl std::os::fd::AsFd,
        heads: &impl std::os::fd::AsFd,
        bss_map: &impl std::os::fd::AsFd,
        cpus: usize,
        ring_bits: u32,
    ) -> Result<FlightLog> {
        Ok(FlightLog {
            log: MappedArray::new(log, cpus << ring_bits)?,
            heads: MappedArray::new(heads, cpus)?,
            tables: Tables::map(bss_map)?,
            ring_bits,
            taken: vec![0; cpus],
        })
    }

    /// Every record logged since the last drain, as requests (`now`: the
    /// monotonic clock, which restores their completions' high bits).
    /// Returns the records lost (overwritten before they were read, or
    /// whose slot was released) and the largest part of one CPU's ring
    /// that filled since the last drain.
    pub fn drain(&mut self, now: u64, out: &mut Vec<Request>) -> (u64, f64) {
        let (mut lost, mut fullest) = (0, 0.0f64);
        for cpu in 0..self.taken.len() {
            let (l, filled) = self.drain_cpu(cpu, now, out);
            lost += l;
            fullest = fullest.max(filled);
        }
        (lost, fullest)
    }

    /// One CPU's ring since the last drain: its records lost, and the part
    /// of the ring that filled.
    fn drain_cpu(&mut self, cpu: usize, now: u64, out: &mut Vec<Request>) -> (u64, f64) {
        let ring = 1u64 << self.ring_bits;
        let head = self.heads.get(cpu).logged;
        std::sync::atomic::fence(Ordering::Acquire);
        let taken = self.taken[cpu];
        let from = taken.max(head.saturating_sub(ring));
        let mut lost = from - taken;
        let base = cpu << self.ring_bits;
        let recs: Vec<iow_flight_rec> = (from..head)
            .map(|i| self.log.get(base | (i & (ring - 1)) as usize))
            .collect();
        std::sync::atomic::fence(Ordering::Acquire);
        // Those the writer may have overwritten while they were read.
        let reused = self.heads.get(cpu).logged.saturating_sub(ring);
        let skip = reused.saturating_sub(from).min(head - from);
        lost += skip;
        let mut next = head;
        for (i, r) in (from..head).zip(&recs).skip(skip as usize) {
            match lap_of(r).wrapping_sub(lap_at(i, self.ring_bits)) & 3 {
                0 => match self.request(r, now) {
                    Some(q) => out.push(q),
                    None => lost += 1,
                },
                // Its stores do not show yet: read it (and what follows)
                // at the next drain.
                3 => {
                    next = i;
                    break;
                }
                // Overwritten by a later lap meanwhile.
                _ => lost += 1,
            }
        }
        self.taken[cpu] = next;
        (lost, (head - taken) as f64 / ring as f64)
    }

    /// A record as a request: None when its slot holds no series now.
    fn request(&self, r: &iow_flight_rec, now: u64) -> Option<Request> {
        let slot = ((r.done_slot >> DONE_BITS) & ((1 << SLOT_BITS) - 1)) as u32;
        let key = self.tables.key(slot);
        if key == 0 {
            return None;
        }
        let k = SeriesKey::decode(key);
        Some(Request {
            slot,
            dev: k.dev_idx,
            op: k.op,
            done: restore(r.done_slot & ((1 << DONE_BITS) - 1), now),
            device_ns: r.device_queue_ns & 0xffff_ffff,
            queue_ns: r.device_queue_ns >> 32,
        })
    }
}

/// The lap a record says it was written in (bpf/block/culprits.h).
fn lap_of(r: &iow_flight_rec) -> u64 {
    r.done_slot >> (DONE_BITS + SLOT_BITS)
}

/// The lap the record at index `i` of a ring of 2^bits is written in.
fn lap_at(i: u64, bits: u32) -> u64 {
    ((i >> bits) + 1) & 3
}

/// A completion time from its low DONE_BITS bits, the latest such time
/// not after `now` (records are drained within seconds, and the wrap is
/// 78 hours).
fn restore(low: u64, now: u64) -> u64 {
    let wrap = 1u64 << DONE_BITS;
    let t = (now & !(wrap - 1)) | low;
    // A record logged a moment after `now` was read is not from the past.
    if t > now.saturating_add(wrap / 2) {
        t.saturating_sub(wrap)
    } else {
        t
    }
}

/// CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns.
fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill; CLOCK_MONOTONIC cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The replay and what stopped the thread, shared with the poll.
#[derive(Default)]
struct Shared {
    replay: Replay,
}

/// Drains the log and replays it on a thread of its own, until dropped.
pub struct Drain {
    stop: Arc<AtomicBool>,
    shared: Arc<Mutex<Shared>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drain {
    pub fn start(mut log: FlightLog) -> Drain {
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (s, sh) = (Arc::clone(&stop), Arc::clone(&shared));
        let thread = std::thread::Builder::new()
            .name("iowarden-culprits".into())
            .spawn(move || {
                use crate::host::privileges::{renice_thread, thread_nice};
                if thread_nice() > DRAIN_NICE {
                    if let Err(e) = renice_thread(DRAIN_NICE) {
                        crate::say!(
                            "iowarden: culprits: the drain runs at nice {} ({e:#}): where every \
                             CPU is busy it may fall behind its rings and lose records \
                             (iowarden_dropped_total{{reason=\"culprit_lost\"}})",
                            thread_nice()
                        );
                    }
                }
                drain_until(&s, &mut log, &sh)
            })
            .expect("spawning the culprits' thread");
        Drain {
            stop,
            shared,
            thread: Some(thread),
        }
    }

    /// Every total so far, and the requests untold.
    pub fn read(&self) -> (Vec<RawPair>, Untold) {
        let sh = self.shared.lock().unwrap();
        let pairs = sh
            .replay
            .totals()
            .iter()
            .map(|(&(victim, culprit, stage), &ns)| RawPair {
                victim,
                culprit,
                stage,
                ns: ns.round() as u64,
            })
            .collect();
        (pairs, sh.replay.untold())
    }

    /// Forgets released slots (before they are released).
    pub fn forget(&self, slots: &BTreeSet<u32>) {
        self.shared.lock().unwrap().replay.forget(slots);
    }
}

impl Drop for Drain {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Drains, replays up to the horizon and waits, until `stop`.
fn drain_until(stop: &AtomicBool, log: &mut FlightLog, shared: &Mutex<Shared>) {
    let mut horizon = Horizon::default();
    let mut requests = Vec::new();
    let mut lost = 0;
    let mut last = monotonic_ns();
    while !stop.load(Ordering::Relaxed) {
        let now = monotonic_ns();
        let seen = requests.len();
        let (lost_now, fullest) = log.drain(now, &mut requests);
        lost += lost_now;
        for r in &requests[seen..] {
            horizon.saw(now, r.device_ns + r.queue_ns);
        }
        // The poll thread (at nice 0, preempted where every CPU is busy)
        // may hold the totals: drain on, and replay at the next round,
        // rather than wait for it while the rings fill (167 ms once).
        if let Ok(mut sh) = shared.try_lock() {
            for r in requests.drain(..) {
                sh.replay.add(&r);
            }
            sh.replay.lost(std::mem::take(&mut lost));
            sh.replay.advance(horizon.at(now));
        }
        std::thread::sleep(pace(fullest, Duration::from_nanos(now - last)));
        last = now;
    }
}

/// The wait before the next drain: the time the fastest CPU takes to fill
/// a quarter of its ring at the rate `fullest` of it filled in `elapsed`.
fn pace(fullest: f64, elapsed: Duration) -> Duration {
    if fullest <= 0.0 {
        return DRAIN_EVERY_MAX;
    }
    elapsed
        .mul_f64((0.25 / fullest).min(1e3))
        .clamp(DRAIN_EVERY_MIN, DRAIN_EVERY_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_take_at_most_two_mib_within_their_bounds() {
        assert_eq!(ring_bits(2), MAX_BITS);
        assert_eq!(ring_bits(4), 15);
        assert_eq!(ring_bits(16), 13);
        assert_eq!(ring_bits(192), 9);
        assert_eq!(ring_bits(384), 8);
        assert_eq!(ring_bits(100_000), MIN_BITS);
        assert_eq!(log_bytes(192), (192 << 9) * 16 + 192 * 64);
        assert!(log_bytes(384) <= LOG_BYTES + 384 * 64);
    }

    #[test]
    fn a_record_one_lap_old_is_waited_for_and_one_lap_ahead_is_lost() {
        let bits = 4;
        let ring = 1u64 << bits;
        let stale =
            |i: u64, written_at: u64| lap_at(written_at, bits).wrapping_sub(lap_at(i, bits)) & 3;
        assert_eq!(lap_at(0, bits), 1, "untouched entries (lap 0) are no lap's");
        assert_eq!(stale(5, 5), 0);
        assert_eq!(stale(5 + ring, 5), 3, "not written yet: read again");
        assert_eq!(stale(5, 5 + ring), 1, "overwritten: lost");
        assert_eq!(stale(5 + 4 * ring, 5 + 3 * ring), 3, "the laps wrap");
    }

    #[test]
    fn completions_get_their_high_bits_back() {
        let wrap = 1u64 << DONE_BITS;
        let now = 5 * wrap + 1_000;
        assert_eq!(restore(400, now), 5 * wrap + 400);
        // Logged just before the clock's low bits wrapped.
        assert_eq!(restore(wrap - 10, now), 5 * wrap - 10);
        // Logged a moment after `now` was read.
        assert_eq!(restore(1_500, now), 5 * wrap + 1_500);
    }

    #[test]
    fn drains_as_often_as_the_fastest_ring_needs() {
        let ms = Duration::from_millis;
        assert_eq!(pace(0.0, ms(10)), DRAIN_EVERY_MAX);
        assert_eq!(pace(0.25, ms(10)), ms(10));
        assert_eq!(pace(0.5, ms(10)), ms(5));
        assert_eq!(pace(1.0, ms(4)), DRAIN_EVERY_MIN);
        assert_eq!(pace(0.001, ms(50)), DRAIN_EVERY_MAX);
    }
}
