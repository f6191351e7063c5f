//! What CPUs sharing a counter shard cost, and what the culprit account's
//! log costs on several CPUs: bpf/block/run_on_demand.h's
//! completion_adds_bench (one timed request's counter updates, through the
//! completion's own helpers) and flight_log_bench (its record in the
//! CPU's ring) run by BPF_PROG_RUN on several CPUs at once, with the shard
//! layout and the rings the daemon would use. `iowarden bench-shards`
//! prints it; `make bench` runs it.

use std::os::fd::{AsFd, AsRawFd};

use anyhow::{Context, Result};
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::{MapCore, MapFlags};
use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;

use super::capacity::Capacity;
use super::config::BlockConfig;
use super::load;
use super::programs::Claims;
use crate::probes::block::accumulate::unpack;
use crate::probes::skeleton::open_skel;
use crate::skel::types::{iow_flight_head, iow_series};
use crate::skel::{IowardenSkel, IowardenSkelBuilder};

const EMPTY: &str = "empty_bench";

/// One request's work that the bench times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Update {
    /// The completion's counter updates, in the object's shards.
    Counters,
    /// The culprit account's record in the running CPU's ring.
    FlightLog,
}

impl Update {
    fn program(self) -> &'static str {
        match self {
            Update::Counters => "completion_adds_bench",
            Update::FlightLog => "flight_log_bench",
        }
    }
}

/// The object loaded with `shards` counter shards and the culprit
/// account's rings, only its bench programs.
pub struct ShardBench {
    skel: IowardenSkel<'static>,
    /// Whether each CPU has a shard of its own (plain adds) or shares one
    /// (atomic adds).
    pub exclusive: bool,
}

impl ShardBench {
    pub fn load(shards: u32) -> Result<ShardBench> {
        let btf = libbpf_rs::btf::Btf::from_vmlinux().context("cannot read kernel BTF")?;
        let mut open = open_skel::<IowardenSkelBuilder>("block")?;
        let cfg = BlockConfig {
            capacity: Capacity { slots: 1, shards },
            // What `run` measures by default.
            ..Default::default()
        };
        load::configure(&mut open, &cfg, &btf, Claims::CompareAndSwap)?;
        load::configure_culprits(&mut open, true)?;
        let progs = [
            Update::Counters.program(),
            Update::FlightLog.program(),
            EMPTY,
        ];
        crate::probes::objects::load_only(open.open_object_mut(), &progs)?;
        let skel = open
            .load()
            .map_err(|e| crate::probes::objects::load_error("the bench", e))?;
        let exclusive = shards as usize >= libbpf_rs::num_possible_cpus()?;
        Ok(ShardBench { skel, exclusive })
    }

    /// ns per run of `update` and of the empty program, each run `repeat`
    /// times on every CPU of `cpus` at once (one thread per CPU): one
    /// figure per CPU.
    pub fn run(&self, update: Update, cpus: &[usize], repeat: u32) -> Result<(Vec<f64>, Vec<f64>)> {
        Ok((
            self.run_prog(update.program(), cpus, repeat)?,
            self.run_prog(EMPTY, cpus, repeat)?,
        ))
    }

    /// (bytes, random requests) counted in series slot 0, shard by shard:
    /// what the runs added (4096 and 1 each, in one packed word), exact or
    /// not under contention.
    pub fn series_bytes(&self) -> Result<Vec<(u64, u64)>> {
        let map = &self.skel.maps.series;
        let n = map.max_entries();
        (0..n)
            .map(|i| {
                let v = map
                    .lookup(&i.to_ne_bytes(), MapFlags::ANY)?
                    .context("series entry missing")?;
                let (random, bytes) =
                    unpack(crate::probes::tables::pod::<iow_series>(&v).bytes_rand, 0);
                Ok((bytes, random))
            })
            .collect()
    }

    /// Records logged in each possible CPU's ring (flight_heads), in CPU
    /// order: what the flight log runs wrote, each CPU in its own.
    pub fn flight_log_counts(&self) -> Result<Vec<u64>> {
        let map = &self.skel.maps.flight_heads;
        (0..map.max_entries())
            .map(|i| {
                let v = map
                    .lookup(&i.to_ne_bytes(), MapFlags::ANY)?
                    .context("flight_heads entry missing")?;
                Ok(crate::probes::tables::pod::<iow_flight_head>(&v).logged)
            })
            .collect()
    }

    fn run_prog(&self, name: &str, cpus: &[usize], repeat: u32) -> Result<Vec<f64>> {
        let obj = libbpf_rs::skel::Skel::object(&self.skel);
        let prog = obj
            .progs()
            .find(|p| p.name() == name)
            .with_context(|| format!("the BPF object has no program {name}"))?;
        let fd = prog.as_fd().as_raw_fd();
        let barrier = std::sync::Barrier::new(cpus.len());
        std::thread::scope(|sc| {
            let runs: Vec<_> = cpus
                .iter()
                .map(|&cpu| {
                    let barrier = &barrier;
                    sc.spawn(move || -> Result<f64> {
                        let mut set = CpuSet::new();
                        set.set(cpu)?;
                        sched_setaffinity(Pid::from_raw(0), &set)
                            .with_context(|| format!("pinning a thread to CPU {cpu}"))?;
                        barrier.wait();
                        test_run(fd, repeat)
                    })
                })
                .collect();
            runs.into_iter()
                .map(|h| h.join().expect("bench thread panicked"))
                .collect()
        })
    }
}

/// BPF_PROG_RUN of the XDP program `fd` on the smallest Ethernet frame,
/// `repeat` times on this CPU: the kernel's mean ns per run.
fn test_run(fd: i32, repeat: u32) -> Result<f64> {
    let mut data = [0u8; 64];
    let mut opts = libbpf_rs::libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_test_run_opts>() as _,
        data_in: data.as_mut_ptr() as *const _,
        data_size_in: data.len() as u32,
        repeat: repeat as _,
        ..Default::default()
    };
    // SAFETY: opts is sized and points at `data`, which outlives the call;
    // fd is a loaded program's, held open by the skeleton.
    let ret = unsafe { libbpf_rs::libbpf_sys::bpf_prog_test_run_opts(fd, &mut opts) };
    if ret < 0 {
        anyhow::bail!("BPF_PROG_RUN: {}", std::io::Error::from_raw_os_error(-ret));
    }
    Ok(opts.duration as f64)
}
