//! iowarden's command line: parses the arguments and dispatches to the
//! subcommand's file in cli/.
// See lib.rs: say!, out! and outln! instead of std's panicking print macros.
#![deny(clippy::print_stdout, clippy::print_stderr)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod cli;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "iowarden",
    version,
    about = "Per-cgroup block I/O isolation observability (eBPF)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the daemon: poll the BPF maps, serve /metrics and /snapshot.json
    Run(cli::run::RunArgs),
    /// Live view of cgroups sorted by device-time share, naming the noisy neighbour:
    /// measured from the culprit account, or inferred from device-time shares without one
    Top(cli::top::TopArgs),
    /// Trace for a while, print one snapshot and exit
    Snapshot(cli::snapshot::SnapshotArgs),
    /// Every io limit and weight set on the cgroups, judged over a window:
    /// acting (it held I/O), idle, or not in effect and why
    Limits(cli::limits::LimitsArgs),
    /// Where I/O waits on kernel locks: wait time per lock site and cgroup over a window
    Locks(cli::locks::LocksArgs),
    /// The metrics reference: every family /metrics can serve, its type,
    /// labels and help, by what turns it on (markdown: docs/metrics.md)
    Metrics(cli::metrics::MetricsArgs),
    /// Trace for a while, then print each device's linear cost model: the
    /// one requests are charged with, its error per class against measured
    /// device time, and the model refitted from those measurements
    Model(cli::model::ModelArgs),
    /// Tune io.cost.qos online so the protected cgroups meet their latency
    /// SLOs while the device keeps as much throughput as it can
    Tune(cli::tune::TuneArgs),
    /// Measure a device's linear iocost model with saturating fio runs
    /// (overwrites the region: refuses a device in use unless --force)
    Profile(cli::profile::ProfileArgs),
    /// Isolation desiderata (isol-bench D1-D4) and scheduler cost per knob,
    /// scored from the block layer and cross-checked against fio
    Bench(cli::bench::BenchArgs),
    /// What CPUs adding to one shared counter shard cost per request
    /// (`make bench` runs it)
    #[command(hide = true)]
    BenchShards(cli::bench_shards::BenchShardsArgs),
    /// The best linear io.cost.model of a QEMU-capped device over the
    /// windows a `tune --model` run logged (the guest's model proofs run it)
    #[command(hide = true)]
    CappedModel(cli::capped_model::CappedModelArgs),
    /// Read, set and restore cgroup v2 io.* knobs (journaled, restorable)
    Knob {
        #[command(subcommand)]
        cmd: cli::knob::KnobCmd,
    },
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = real_main(cli) {
        iowarden::say!("iowarden: error: {e:#}");
        std::process::exit(1);
    }
    if cli::trace::hung_up() {
        // 128 + SIGHUP, as a shell reports a process the hangup killed.
        iowarden::say!("iowarden: stopped by SIGHUP (the terminal or session went away)");
        std::process::exit(129);
    }
}

fn real_main(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Run(a) => cli::run::run(a),
        Cmd::Top(a) => cli::top::run(a),
        Cmd::Snapshot(a) => cli::snapshot::run(a),
        Cmd::Limits(a) => cli::limits::run(a),
        Cmd::Locks(a) => cli::locks::run(a),
        Cmd::Metrics(a) => cli::metrics::run(a),
        Cmd::Model(a) => cli::model::run(a),
        Cmd::Tune(a) => cli::tune::tune(a),
        Cmd::Profile(a) => cli::profile::run(a),
        Cmd::Bench(a) => cli::bench::run(a),
        Cmd::BenchShards(a) => cli::bench_shards::run(a),
        Cmd::CappedModel(a) => cli::capped_model::run(a),
        Cmd::Knob { cmd } => cli::knob::run(cmd),
    }
}
