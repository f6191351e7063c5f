//! Whom each request waited behind on its device (`--culprits`,
//! bpf/culprits.bpf.h, queued.bpf.h). The culprit_ns table holds, per
//! (victim series slot, culprit series slot, stage), nanoseconds times
//! requests since the pair was first charged. Each read names the slots by the series keys the
//! same read found in them and adds the changes up; the pairs of a slot
//! whose cgroup is gone are deleted before the slot is released, so a
//! reused slot starts its pairs from zero.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use iowarden_exporters::{CgroupRef, CulpritSeries, ProbeStatus, Stage};
use libbpf_rs::btf::Btf;
use libbpf_rs::{MapCore, MapFlags};

use super::accumulate::SeriesKey;
use super::{Claims, RawSample};
use crate::host::devices::DeviceNames;
use crate::probes::{pod, pod_bytes, status};
use crate::skel::types::{iow_const, iow_culprit_key, iow_stage};

/// The status's name.
pub const STATUS: &str = "culprits";
/// The culprit slot of a victim's own service.
const NONE: u32 = iow_const::IOW_CULPRIT_NONE.0;

/// The program that takes out requests counted in flight whose completion
/// went unseen: loaded where the kernel has bpf_loop (5.17+).
pub const SWEEP: &str = "flight_sweep";

/// Whether the kernel can run the sweep: bpf_loop (5.17+; syscall
/// programs came before it).
pub fn can_sweep(btf: &Btf<'_>) -> bool {
    super::kernel_enum_value(btf, "BPF_FUNC_loop").is_some()
}

/// How often the sweep runs at the least: a request whose completion the
/// kernel did not deliver counts as in flight for at most about this long.
pub const SWEEP_EVERY: Duration = Duration::from_millis(100);

/// How often the sweeper looks for requests found stale at their tag's
/// reissue (the flight_stale count): undelivered completions come in a
/// softirq run's batch, and the rest of the batch is swept this soon.
pub const STALE_POLL_EVERY: Duration = Duration::from_millis(10);

/// Runs the sweep program every [`SWEEP_EVERY`], and within
/// [`STALE_POLL_EVERY`] of an issue finding a stale request, on a thread
/// of its own (a poll is too seldom: a request wrongly in flight is
/// charged time), until dropped. The first failure is kept for the log.
pub struct Sweeper {
    stop: Arc<AtomicBool>,
    failed: Arc<Mutex<Option<String>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sweeper {
    /// `prog`: the sweep program; `stale`: the flight_stale map.
    pub fn start(prog: OwnedFd, stale: libbpf_rs::MapHandle) -> Sweeper {
        let stop = Arc::new(AtomicBool::new(false));
        let failed = Arc::new(Mutex::new(None));
        let (s, f) = (Arc::clone(&stop), Arc::clone(&failed));
        let thread = std::thread::spawn(move || {
            if let Err(e) = sweep_until(&s, &prog, &stale) {
                f.lock().unwrap().get_or_insert(e);
            }
        });
        Sweeper {
            stop,
            failed,
            thread: Some(thread),
        }
    }

    /// Why the sweep stopped, once.
    pub fn failure(&self) -> Option<String> {
        self.failed.lock().unwrap().take()
    }
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sweeps when the stale count moved or [`SWEEP_EVERY`] passed, until `stop`.
fn sweep_until(
    stop: &AtomicBool,
    prog: &OwnedFd,
    stale: &libbpf_rs::MapHandle,
) -> Result<(), String> {
    let polls_per_sweep = (SWEEP_EVERY.as_millis() / STALE_POLL_EVERY.as_millis()) as u32;
    let (mut seen, mut polls) = (None, 0);
    while !stop.load(Ordering::Relaxed) {
        let now = stale_count(stale)?;
        if seen != Some(now) || polls >= polls_per_sweep {
            run_once(prog)?;
            (seen, polls) = (Some(now), 0);
        }
        polls += 1;
        std::thread::sleep(STALE_POLL_EVERY);
    }
    Ok(())
}

/// The flight_stale map's one count.
fn stale_count(map: &libbpf_rs::MapHandle) -> Result<u64, String> {
    match map.lookup(&0u32.to_ne_bytes(), MapFlags::ANY) {
        Ok(v) => Ok(v.map_or(0, |v| pod(&v))),
        Err(e) => Err(format!("reading flight_stale: {e}")),
    }
}

/// One BPF_PROG_RUN of the sweep (a syscall program: no context).
fn run_once(prog: &OwnedFd) -> Result<(), String> {
    let mut opts = libbpf_rs::libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_test_run_opts>() as _,
        ..Default::default()
    };
    // SAFETY: opts is sized and passes no buffers; the fd is a loaded
    // program's, held open by this thread.
    let ret = unsafe { libbpf_rs::libbpf_sys::bpf_prog_test_run_opts(prog.as_raw_fd(), &mut opts) };
    match ret {
        0 => Ok(()),
        e => Err(format!(
            "running {SWEEP}: {}",
            std::io::Error::from_raw_os_error(-e)
        )),
    }
}

/// Whether the programs charge culprits, and the status saying so (None
/// when not asked for). `sweeps`: the kernel can run the sweep.
pub fn plan(wanted: bool, claims: Claims, sweeps: bool) -> (bool, Option<ProbeStatus>) {
    match (wanted, claims) {
        (false, _) => (false, None),
        (true, Claims::CompareAndSwap) => {
            let reason = match sweeps {
                true => "",
                false => {
                    "no bpf_loop (Linux 5.17+): a request whose completion the kernel did not \
                     deliver counts as in flight until its tag is reused"
                }
            };
            (true, Some(status(STATUS, true, reason)))
        }
        (true, Claims::MapInsert) => (
            false,
            Some(status(
                STATUS,
                false,
                "the kernel's BPF has no compare-and-swap (Linux 5.12+): waits are not split \
                 by culprit",
            )),
        ),
    }
}

/// One (victim, culprit) pair of slots in one stage (enum iow_stage) and
/// its nanoseconds since claimed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RawPair {
    pub victim: u32,
    pub culprit: u32,
    pub stage: u32,
    pub ns: u64,
}

/// The stage of a pair's wait: the queue (IOW_STAGE_QUEUE), else the device.
fn stage_of(raw: u32) -> Stage {
    match raw {
        s if s == iow_stage::IOW_STAGE_QUEUE.0 => Stage::Queue,
        _ => Stage::Device,
    }
}

/// Every entry of the culprit_ns table.
pub fn read(map: &dyn MapCore) -> Result<Vec<RawPair>> {
    let mut out = Vec::new();
    for k in map.keys() {
        if let Some(v) = map.lookup(&k, MapFlags::ANY)? {
            let key: iow_culprit_key = pod(&k);
            out.push(RawPair {
                victim: key.victim,
                culprit: key.culprit,
                stage: key.stage,
                ns: pod(&v),
            });
        }
    }
    Ok(out)
}

/// Deletes the pairs that name any of `slots`, as victim or culprit.
pub fn release(map: &dyn MapCore, pairs: &[RawPair], slots: &BTreeSet<u32>) {
    for p in pairs
        .iter()
        .filter(|p| slots.contains(&p.victim) || slots.contains(&p.culprit))
    {
        let key = iow_culprit_key {
            victim: p.victim,
            culprit: p.culprit,
            stage: p.stage,
        };
        // SAFETY: a skeleton type, its padding spelled out and zeroed.
        let bytes = unsafe { pod_bytes(&key) };
        let _ = map.delete(bytes);
    }
}

/// A pair named by series keys: (victim, culprit; None: its service), and
/// its stage.
type PairKey = (u64, Option<u64>, Stage);

/// The pairs' nanoseconds since start, by series keys.
#[derive(Default)]
pub struct CulpritTotals {
    /// Each slot pair's keys and value at the last read.
    prev: HashMap<(u32, u32, u32), (PairKey, u64)>,
    totals: BTreeMap<PairKey, u64>,
    dev_of_idx: HashMap<u32, u32>,
}

impl CulpritTotals {
    /// Adds the pairs' changes since the last read; `raw` names the slots.
    pub fn add(&mut self, pairs: &[RawPair], raw: &RawSample) {
        let key_of: HashMap<u32, u64> = raw.series.iter().map(|s| (s.slot, s.key)).collect();
        self.dev_of_idx.extend(raw.devs.iter().copied());
        for p in pairs {
            let Some(&victim) = key_of.get(&p.victim) else {
                continue;
            };
            let culprit = match p.culprit {
                NONE => None,
                c => match key_of.get(&c) {
                    Some(&k) => Some(k),
                    None => continue,
                },
            };
            let key = (victim, culprit, stage_of(p.stage));
            let slots = (p.victim, p.culprit, p.stage);
            let before = match self.prev.get(&slots) {
                // The same pair of series, not one that reused the slots.
                Some(&(k, ns)) if k == key && ns <= p.ns => ns,
                _ => 0,
            };
            *self.totals.entry(key).or_default() += p.ns - before;
            self.prev.insert(slots, (key, p.ns));
        }
    }

    /// Forgets the pairs of series whose slots were released.
    pub fn forget(&mut self, slots: &BTreeSet<u32>, keys: &BTreeSet<u64>) {
        self.prev
            .retain(|(v, c, _), _| !slots.contains(v) && !slots.contains(c));
        self.totals
            .retain(|(v, c, _), _| !keys.contains(v) && c.is_none_or(|c| !keys.contains(&c)));
    }

    /// The snapshot's records, by device, victim and culprit.
    pub fn fill(
        &self,
        cgroup: &dyn Fn(u64) -> CgroupRef,
        devices: &mut DeviceNames,
    ) -> Vec<CulpritSeries> {
        let mut out: Vec<CulpritSeries> = self
            .totals
            .iter()
            .filter_map(|(&(victim, culprit, stage), &ns)| {
                let v = SeriesKey::decode(victim);
                let devt = *self.dev_of_idx.get(&v.dev_idx)?;
                let c = culprit.map(SeriesKey::decode);
                Some(CulpritSeries {
                    device: devices.get(devt),
                    victim: cgroup(v.cgroup_id),
                    op: v.op,
                    culprit: c.map(|c| cgroup(c.cgroup_id)),
                    culprit_op: c.map(|c| c.op),
                    stage,
                    seconds: ns as f64 / 1e9,
                })
            })
            .collect();
        out.sort_by_key(CulpritSeries::key);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::block::RawSeries;
    use crate::skel::types::iow_key_layout;

    fn key(cgroup: u64, op: u64) -> u64 {
        (cgroup << iow_key_layout::IOW_KEY_CGID_SHIFT.0)
            | (op << iow_key_layout::IOW_KEY_OP_SHIFT.0)
            | 1
    }

    fn sample(slots: &[(u32, u64)]) -> RawSample {
        RawSample {
            series: slots
                .iter()
                .map(|&(slot, key)| RawSeries {
                    slot,
                    key,
                    shards: Vec::new(),
                })
                .collect(),
            devs: vec![(0, 7 << 20)],
            ..Default::default()
        }
    }

    fn pair(victim: u32, culprit: u32, ns: u64) -> RawPair {
        RawPair {
            victim,
            culprit,
            stage: iow_stage::IOW_STAGE_DEVICE.0,
            ns,
        }
    }

    fn seconds(t: &CulpritTotals) -> Vec<(u64, Option<u64>, f64)> {
        let cgroup = |id| CgroupRef {
            id,
            path: format!("/c{id}"),
        };
        t.fill(&cgroup, &mut DeviceNames::default())
            .iter()
            .map(|c| (c.victim.id, c.culprit.as_ref().map(|c| c.id), c.seconds))
            .collect()
    }

    #[test]
    fn adds_changes_names_slots_and_skips_unknown_ones() {
        let raw = sample(&[(1, key(10, 0)), (2, key(20, 1))]);
        let mut t = CulpritTotals::default();
        t.add(
            &[pair(1, 2, 3_000), pair(1, NONE, 1_000), pair(1, 9, 5)],
            &raw,
        );
        t.add(&[pair(1, 2, 7_000), pair(1, NONE, 1_000)], &raw);
        assert_eq!(
            seconds(&t),
            [(10, None, 1e-6), (10, Some(20), 7e-6)],
            "the pair with an unknown slot is left out"
        );
    }

    #[test]
    fn a_reused_slot_starts_from_zero_and_gone_series_are_forgotten() {
        let mut t = CulpritTotals::default();
        t.add(
            &[pair(1, 2, 5_000)],
            &sample(&[(1, key(10, 0)), (2, key(20, 1))]),
        );
        t.forget(&BTreeSet::from([2]), &BTreeSet::from([key(20, 1)]));
        assert_eq!(seconds(&t), []);
        t.add(
            &[pair(1, 2, 2_000)],
            &sample(&[(1, key(10, 0)), (2, key(30, 1))]),
        );
        assert_eq!(seconds(&t), [(10, Some(30), 2e-6)]);
    }

    #[test]
    fn a_pairs_two_stages_are_two_records() {
        let raw = sample(&[(1, key(10, 0)), (2, key(20, 1))]);
        let queued = RawPair {
            stage: iow_stage::IOW_STAGE_QUEUE.0,
            ..pair(1, 2, 4_000)
        };
        let mut t = CulpritTotals::default();
        t.add(&[pair(1, 2, 3_000), queued], &raw);
        t.add(
            &[
                pair(1, 2, 5_000),
                RawPair {
                    ns: 6_000,
                    ..queued
                },
            ],
            &raw,
        );
        let cgroup = |id| CgroupRef {
            id,
            path: format!("/c{id}"),
        };
        let stages: Vec<(Stage, f64)> = t
            .fill(&cgroup, &mut DeviceNames::default())
            .iter()
            .map(|c| (c.stage, c.seconds))
            .collect();
        assert_eq!(stages, [(Stage::Queue, 6e-6), (Stage::Device, 5e-6)]);
    }
}
