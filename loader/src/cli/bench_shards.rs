//! `iowarden bench-shards` (hidden; `make bench` runs it): the counter
//! updates of one completed request (bpf/iowarden.bpf.c
//! completion_adds_bench) run on 1..N CPUs at once, with a shard per CPU
//! (plain adds) and with one shard all CPUs share (atomic adds, the path of
//! hosts with more CPUs than shards). Prints ns per request above
//! BPF_PROG_RUN's own loop, and a `shards-summary {json}` line.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use iowarden::probes::block::bench::ShardBench;
use iowarden::probes::block::capacity::{
    map_bytes, series_bytes, Capacity, DEFAULT_MAX_SHARDS, DEFAULT_SERIES, MAX_SHARDS,
};

#[derive(Args)]
pub struct BenchShardsArgs {
    /// Runs per CPU per round
    #[arg(long, default_value_t = 2_000_000)]
    repeat: u32,
    /// Rounds (the median is reported)
    #[arg(long, default_value_t = 5)]
    rounds: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// ns per request above the empty program, on `n` CPUs at once: the median
/// over rounds of the mean over CPUs.
fn per_request(b: &ShardBench, n: usize, a: &BenchShardsArgs) -> Result<f64> {
    let cpus: Vec<usize> = (0..n).collect();
    let mut rounds = Vec::new();
    for _ in 0..a.rounds {
        let (adds, empty) = b.run(&cpus, a.repeat)?;
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        rounds.push(mean(&adds) - mean(&empty));
    }
    Ok(median(rounds))
}

pub fn run(a: BenchShardsArgs) -> Result<()> {
    let cpus = std::thread::available_parallelism()?.get();
    let own = ShardBench::load((cpus as u32).next_power_of_two().min(MAX_SHARDS))?;
    let shared = ShardBench::load(1)?;
    iowarden::outln!(
        "one request's counter updates (completion_adds_bench), ns per request above BPF_PROG_RUN's loop, \
         median of {} rounds x {} runs per CPU",
        a.rounds, a.repeat
    )?;
    iowarden::outln!(
        "  CPUs at once   a shard per CPU ({})   one shared shard (atomic)",
        if own.exclusive {
            "plain adds"
        } else {
            "atomic: fewer shards than CPUs"
        }
    )?;
    let mut rows = Vec::new();
    for n in 1..=cpus {
        let (o, s) = (per_request(&own, n, &a)?, per_request(&shared, n, &a)?);
        iowarden::outln!("  {n:>12}   {o:>22.1}   {s:>25.1}")?;
        rows.push(json!({"cpus": n, "own_shard_ns": o, "shared_shard_ns": s}));
    }
    let memory = memory_by_shards()?;
    iowarden::outln!(
        "shards-summary {}",
        json!({"rows": rows, "own_shard_plain": own.exclusive, "memory": memory})
    )?;
    Ok(())
}

/// What the shard count costs in map memory at the default series
/// capacity, and the default's rule.
fn memory_by_shards() -> Result<serde_json::Value> {
    iowarden::outln!(
        "map memory of the I/O tables: {DEFAULT_SERIES} series x shards x {} B + fixed(shards) \
         (loader/src/probes/block/capacity.rs); default shards = min(CPUs rounded up to a power of two, {})",
        series_bytes(),
        DEFAULT_MAX_SHARDS
    )?;
    let mut rows = Vec::new();
    let mut shards = 1;
    while shards <= MAX_SHARDS {
        let b = map_bytes(Capacity {
            slots: DEFAULT_SERIES,
            shards,
        });
        iowarden::outln!(
            "  {shards:>4} shards: {:7.1} MiB",
            b as f64 / f64::from(1 << 20)
        )?;
        rows.push(json!({"shards": shards, "bytes": b}));
        shards *= 2;
    }
    Ok(serde_json::Value::Array(rows))
}
