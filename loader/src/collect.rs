//! Turns raw per-CPU map contents into cumulative per-series totals and
//! snapshots. Pure bookkeeping: no BPF calls here.

use std::collections::HashMap;

use iowarden_exporters::{
    CgroupRef, DropCounters, Histogram, IoSeries, Op, ProbeStatus, QueueSeries, Snapshot,
    StageHistograms, SCHEMA_VERSION, UNATTRIBUTED_CGROUP_ID,
};

use crate::costmodel::{ClassSample, SIZES, VTIME_PER_SEC};
use crate::devices::DeviceNames;
use crate::hist::{NBUCKETS, NSTAGES};
use crate::skel::types::{iow_drop, iow_io_stats, iow_update};
use crate::tracer::RawSample;
use crate::tracer::{COST_CLASSES_PER_DEV, MAX_HWQ, NO_BUCKET, NO_SLOT};

/// The fields of a series key; see bpf/iowarden.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SeriesKey {
    pub cgroup_id: u64,
    pub dev_idx: u32,
    pub op: Op,
}

impl SeriesKey {
    pub fn decode(key: u64) -> SeriesKey {
        let op = match (key >> 1) & 3 {
            0 => Op::Read,
            1 => Op::Write,
            2 => Op::Discard,
            _ => Op::Flush,
        };
        SeriesKey {
            cgroup_id: key >> 9,
            dev_idx: ((key >> 3) & 0x3f) as u32,
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
    cost: u64,
    rand_ios: u64,
    lat_sum_ns: [u64; NSTAGES],
    hist: Vec<u64>,
}

/// Accumulates deltas of the per-CPU counters into u64 totals. Histogram
/// buckets are u32 per CPU on the BPF side; wrapping subtraction against the
/// previous read keeps the totals right as long as a bucket does not wrap
/// between two reads.
#[derive(Default)]
pub struct Accumulator {
    /// slot -> (key, previous per-CPU values)
    prev: HashMap<u32, (u64, Vec<iow_io_stats>)>,
    totals: HashMap<u64, Totals>,
    dev_of_idx: HashMap<u32, u32>,
    hwq: HashMap<(u32, u32), QueueTotals>,
    /// Hardware-queue counts that came through the nested-update ring
    /// buffer, by (devt, hctx); added to the per-CPU sums.
    nested_hwq: HashMap<(u32, u32), QueueTotals>,
    /// Cost class samples by (devt, class within the device), and those
    /// that came through the ring buffer, as for the hardware queues.
    cost_classes: HashMap<(u32, u32), ClassTotals>,
    nested_cost: HashMap<(u32, u32), ClassTotals>,
    drops: DropCounters,
}

#[derive(Default, Clone, Copy)]
struct ClassTotals {
    ios: u64,
    bytes: u64,
    device_ns: u64,
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

impl Accumulator {
    pub fn add(&mut self, raw: &RawSample) {
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
            for (cpu, cur) in s.per_cpu.iter().enumerate() {
                let old = prev.1.get(cpu).copied().unwrap_or_default();
                t.ios += cur.ios.wrapping_sub(old.ios);
                t.bytes += cur.bytes.wrapping_sub(old.bytes);
                t.merged += cur.merged.wrapping_sub(old.merged);
                t.requeued += cur.requeued.wrapping_sub(old.requeued);
                t.cost += cur.cost.wrapping_sub(old.cost);
                t.rand_ios += cur.rand_ios.wrapping_sub(old.rand_ios);
                for st in 0..NSTAGES {
                    t.lat_sum_ns[st] += cur.lat_sum_ns[st].wrapping_sub(old.lat_sum_ns[st]);
                }
                for (b, v) in t.hist.iter_mut().enumerate() {
                    *v += cur.hist[b].wrapping_sub(old.hist[b]) as u64;
                }
            }
            prev.1 = s.per_cpu.clone();
        }
        for &(idx, devt) in &raw.devs {
            self.dev_of_idx.insert(idx, devt);
        }
        for u in &raw.nested {
            self.add_update(u);
        }
        // Hardware queue and drop counters are u64 and never reset: sum them.
        for h in &raw.hwqs {
            let mut q = self
                .nested_hwq
                .get(&(h.devt, h.hctx))
                .copied()
                .unwrap_or_default();
            for c in &h.per_cpu {
                q.inserted += c.inserted;
                q.issued += c.issued;
                q.completed += c.completed;
                q.requeued += c.requeued;
                q.busy_ns += c.busy_ns;
            }
            self.hwq.insert((h.devt, h.hctx), q);
        }
        for (k, q) in &self.nested_hwq {
            self.hwq.entry(*k).or_insert(*q);
        }
        for c in &raw.cost_classes {
            let mut t = self
                .nested_cost
                .get(&(c.devt, c.class))
                .copied()
                .unwrap_or_default();
            for v in &c.per_cpu {
                t.ios += v.ios;
                t.bytes += v.bytes;
                t.device_ns += v.device_ns;
                t.cost += v.cost;
            }
            self.cost_classes.insert((c.devt, c.class), t);
        }
        for (k, t) in &self.nested_cost {
            self.cost_classes.entry(*k).or_insert(*t);
        }
        let sum = |what: iow_drop| raw.drops.iter().map(|d| d.n[what.0 as usize]).sum::<u64>();
        self.drops = DropCounters {
            slot_table_full: sum(iow_drop::IOW_DROP_SLOT_FULL),
            device_table_full: sum(iow_drop::IOW_DROP_DEV_FULL),
            no_issue_stamp: sum(iow_drop::IOW_DROP_NO_ISSUE_STAMP),
            no_start_stamp: sum(iow_drop::IOW_DROP_NO_START_STAMP),
            nested_updates: sum(iow_drop::IOW_DROP_NESTED),
            nested_lost: sum(iow_drop::IOW_DROP_NESTED_LOST),
        };
    }

    /// Adds one update that the BPF side could not apply in place (it
    /// interrupted another program's update on the same CPU).
    fn add_update(&mut self, u: &iow_update) {
        if u.slot != NO_SLOT && u.key != 0 {
            let t = self.totals.entry(u.key).or_insert_with(|| Totals {
                hist: vec![0; NSTAGES * NBUCKETS],
                ..Default::default()
            });
            t.ios += u.ios as u64;
            t.bytes += u.bytes;
            t.merged += u.merged as u64;
            t.requeued += u.requeued as u64;
            t.cost += u.cost;
            t.rand_ios += u.rand_ios as u64;
            for st in 0..NSTAGES {
                let b = u.bucket[st];
                if b != NO_BUCKET && (b as usize) < NBUCKETS {
                    t.lat_sum_ns[st] += u.lat_ns[st];
                    t.hist[st * NBUCKETS + b as usize] += 1;
                }
            }
        }
        if u.cost_class != NO_SLOT && u.bucket[1] != NO_BUCKET {
            let dev = u.cost_class / COST_CLASSES_PER_DEV;
            if let Some(&devt) = self.dev_of_idx.get(&dev) {
                let t = self
                    .nested_cost
                    .entry((devt, u.cost_class % COST_CLASSES_PER_DEV))
                    .or_default();
                t.ios += 1;
                t.bytes += u.bytes;
                t.device_ns += u.lat_ns[1];
                t.cost += u.cost;
            }
        }
        if u.hwq != NO_SLOT {
            let Some(&devt) = self.dev_of_idx.get(&(u.hwq / MAX_HWQ)) else {
                return;
            };
            let q = self.nested_hwq.entry((devt, u.hwq % MAX_HWQ)).or_default();
            q.inserted += u.hwq_inserted as u64;
            q.issued += u.hwq_issued as u64;
            q.completed += u.hwq_completed as u64;
            q.requeued += u.hwq_requeued as u64;
            q.busy_ns += u.busy_ns;
        }
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
                // (op * 2 + random) * SIZES + size, as the BPF side indexes.
                let c = class as usize;
                let sample = ClassSample {
                    write: c / SIZES / 2 == 1,
                    random: (c / SIZES) % 2 == 1,
                    size: c % SIZES,
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

    /// Cgroup ids that have recorded I/O.
    pub fn cgroup_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.totals.keys().map(|&k| SeriesKey::decode(k).cgroup_id)
    }

    /// A cumulative snapshot. `cgroup_path` resolves ids to paths.
    pub fn snapshot(
        &self,
        cgroup_path: &dyn Fn(u64) -> Option<String>,
        devices: &mut DeviceNames,
        probes: &[ProbeStatus],
        window_seconds: f64,
    ) -> Snapshot {
        let bounds = crate::hist::lower_bounds_seconds();
        let mut io = Vec::new();
        for (&key, t) in &self.totals {
            let k = SeriesKey::decode(key);
            let Some(&devt) = self.dev_of_idx.get(&k.dev_idx) else {
                continue;
            };
            let path = if k.cgroup_id == UNATTRIBUTED_CGROUP_ID {
                "(unattributed)".to_string()
            } else {
                cgroup_path(k.cgroup_id).unwrap_or_default()
            };
            let stage = |s: usize| Histogram {
                counts: t.hist[s * NBUCKETS..(s + 1) * NBUCKETS].to_vec(),
                sum_seconds: t.lat_sum_ns[s] as f64 / 1e9,
            };
            io.push(IoSeries {
                cgroup: CgroupRef {
                    id: k.cgroup_id,
                    path,
                },
                device: devices.get(devt),
                op: k.op,
                ios: t.ios,
                bytes: t.bytes,
                merged: t.merged,
                requeued: t.requeued,
                cost_seconds: t.cost as f64 / VTIME_PER_SEC as f64,
                random_ios: t.rand_ios,
                latency: StageHistograms {
                    queue: stage(0),
                    device: stage(1),
                    total: stage(2),
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
                inserted: q.inserted,
                issued: q.issued,
                completed: q.completed,
                requeued: q.requeued,
                inflight: q.issued.saturating_sub(q.completed + q.requeued),
                busy_seconds: q.busy_ns as f64 / 1e9,
            })
            .collect();
        queues.sort_by(|a, b| (&a.device, a.hctx).cmp(&(&b.device, b.hctx)));
        Snapshot {
            schema: SCHEMA_VERSION,
            taken_at_unix_seconds: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            window_seconds,
            hostname: crate::sysinfo::hostname(),
            kernel: crate::sysinfo::kernel_release(),
            hist_lower_bounds_seconds: bounds,
            io,
            queues,
            probes: probes.to_vec(),
            drops: self.drops.clone(),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracer::RawSeries;

    fn stats(ios: u64, bucket: usize, n: u32) -> iow_io_stats {
        let mut s = iow_io_stats {
            ios,
            bytes: ios * 4096,
            ..Default::default()
        };
        s.hist[2 * NBUCKETS + bucket] = n;
        s
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
    fn sums_cpus_and_survives_u32_wrap() {
        let key = (7u64 << 9) | 1;
        let mut acc = Accumulator::default();
        let raw = |a: iow_io_stats, b: iow_io_stats| RawSample {
            series: vec![RawSeries {
                slot: 3,
                key,
                per_cpu: vec![a, b],
            }],
            devs: vec![(0, (7 << 20) | 1)],
            ..Default::default()
        };
        acc.add(&raw(stats(10, 4, u32::MAX - 1), stats(5, 4, 3)));
        acc.add(&raw(stats(12, 4, 2), stats(6, 4, 3))); // CPU 0's bucket wrapped: +4
        let t = &acc.totals[&key];
        assert_eq!(t.ios, 18);
        assert_eq!(t.hist[2 * NBUCKETS + 4], (u32::MAX as u64 - 1) + 3 + 4);
    }

    #[test]
    fn cost_classes_sum_cpus_and_nested_updates() {
        use crate::skel::types::iow_cost_class;
        use crate::tracer::RawCostClass;
        let devt = (7 << 20) | 1;
        // Device 0, write (op 1), random, 64 KiB (size 4): (1 * 2 + 1) * 9 + 4.
        let class = 3 * SIZES as u32 + 4;
        let c = |ios, ns| iow_cost_class {
            ios,
            bytes: ios * 65536,
            device_ns: ns,
            cost: ios * 100,
        };
        let mut nested = iow_update {
            slot: NO_SLOT,
            hwq: NO_SLOT,
            cost_class: class,
            bytes: 65536,
            cost: 100,
            ..Default::default()
        };
        nested.lat_ns[1] = 7;
        nested.bucket = [NO_BUCKET, 0, NO_BUCKET];
        let raw = |per_cpu, nested: Vec<iow_update>| RawSample {
            devs: vec![(0, devt)],
            cost_classes: vec![RawCostClass {
                devt,
                class,
                per_cpu,
            }],
            nested,
            ..Default::default()
        };
        let mut acc = Accumulator::default();
        acc.add(&raw(vec![c(2, 10), c(3, 20)], vec![nested]));
        acc.add(&raw(vec![c(4, 30), c(3, 20)], vec![]));
        let v = acc.cost_classes();
        assert_eq!(v.len(), 1);
        let (d, s) = v[0];
        assert_eq!(d, devt);
        assert!(s.write && s.random && s.size == 4, "{s:?}");
        assert_eq!((s.ios, s.device_ns, s.cost), (8, 57, 800));
        assert_eq!(s.bytes, 8 * 65536);
    }

    #[test]
    fn reused_slot_starts_from_zero() {
        let mut acc = Accumulator::default();
        let one = |key, ios| RawSample {
            series: vec![RawSeries {
                slot: 1,
                key,
                per_cpu: vec![stats(ios, 0, 0)],
            }],
            ..Default::default()
        };
        acc.add(&one(3, 100));
        acc.forget(1, 3);
        acc.add(&one(5, 7));
        assert_eq!(acc.totals[&5].ios, 7);
        assert!(!acc.totals.contains_key(&3));
    }
}
