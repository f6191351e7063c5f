//! `iowarden bench-shards` (hidden; `make bench` runs it): the counter
//! updates of one completed request (bpf/block/run_on_demand.h
//! completion_adds_bench) run on 1, 2, 4, ... and all N CPUs this process
//! may use at once, with a shard per CPU (plain adds) and with one shard
//! all CPUs share (atomic adds, the path of hosts with more CPUs than
//! shards); and the culprit account's part of one request
//! (flight_log_bench: its record in its CPU's ring), which no two CPUs
//! write, so it should stay flat from 1 to N. Prints ns per request above
//! BPF_PROG_RUN's own loop, and a `shards-summary {json}` line.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use iowarden::probes::block::bench::{ShardBench, Update};
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

/// ns per request of `update` above the empty program, on `cpus` at once:
/// the median over rounds of the mean over CPUs.
fn per_request(b: &ShardBench, update: Update, cpus: &[usize], a: &BenchShardsArgs) -> Result<f64> {
    let mut rounds = Vec::new();
    for _ in 0..a.rounds {
        let (work, empty) = b.run(update, cpus, a.repeat)?;
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        rounds.push(mean(&work) - mean(&empty));
    }
    Ok(median(rounds))
}

/// How many CPUs run at once, row by row: 1, 2, 4, ... below `n`, and `n`.
fn cpu_counts(n: usize) -> Vec<usize> {
    let mut counts: Vec<usize> = std::iter::successors(Some(1), |k| Some(k * 2))
        .take_while(|&k| k < n)
        .collect();
    counts.push(n.max(1));
    counts
}

pub fn run(a: BenchShardsArgs) -> Result<()> {
    let allowed = iowarden::host::sysinfo::allowed_cpus()?;
    let own = ShardBench::load((allowed.len() as u32).next_power_of_two().min(MAX_SHARDS))?;
    let shared = ShardBench::load(1)?;
    iowarden::outln!(
        "one request's counter updates (completion_adds_bench) and culprit record (flight_log_bench), \
         ns per request above BPF_PROG_RUN's loop, median of {} rounds x {} runs per CPU",
        a.rounds, a.repeat
    )?;
    iowarden::outln!(
        "  CPUs at once   a shard per CPU ({})   one shared shard (atomic)   culprit record (a ring per CPU)",
        if own.exclusive {
            "plain adds"
        } else {
            "atomic: fewer shards than CPUs"
        }
    )?;
    let mut rows = Vec::new();
    for n in cpu_counts(allowed.len()) {
        let cpus = &allowed[..n];
        let o = per_request(&own, Update::Counters, cpus, &a)?;
        let s = per_request(&shared, Update::Counters, cpus, &a)?;
        let f = per_request(&own, Update::FlightLog, cpus, &a)?;
        iowarden::outln!("  {n:>12}   {o:>28.1}   {s:>25.1}   {f:>31.1}")?;
        rows.push(json!({"cpus": n, "own_shard_ns": o, "shared_shard_ns": s, "flight_log_ns": f}));
    }
    let replay = replay_cost()?;
    let memory = memory_by_shards()?;
    iowarden::outln!(
        "shards-summary {}",
        json!({"rows": rows, "own_shard_plain": own.exclusive, "memory": memory, "replay": replay})
    )?;
    Ok(())
}

/// The culprit account's user-space side: its replay's time per request,
/// with a few series on the device and with more than it names apart.
fn replay_cost() -> Result<serde_json::Value> {
    let mut rows = Vec::new();
    for series in [3, 64] {
        let ns = iowarden::culprits::cost::ns_per_request(series, 1_000_000);
        iowarden::outln!(
            "the culprit replay (user space, one thread): {ns:.0} ns per request, {series} series on the device"
        )?;
        rows.push(json!({"series": series, "ns_per_request": ns}));
    }
    Ok(serde_json::Value::Array(rows))
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

#[cfg(test)]
mod tests {
    use super::cpu_counts;

    #[test]
    fn cpu_counts_are_powers_of_two_then_all() {
        assert_eq!(cpu_counts(1), [1]);
        assert_eq!(cpu_counts(2), [1, 2]);
        assert_eq!(cpu_counts(6), [1, 2, 4, 6]);
        assert_eq!(cpu_counts(16), [1, 2, 4, 8, 16]);
    }
}
