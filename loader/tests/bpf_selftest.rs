//! Runs the kernel's copy of the histogram bucketing (a BPF syscall program)
//! and checks it against the bounds user space reports.

use std::mem::MaybeUninit;

use iowarden::bpf_consts::IOW_SELFTEST_N;
use iowarden::probes::block::hist::{lower_us, NBUCKETS};
use iowarden::skel::types::iow_bucket_probe;
use iowarden::skel::IowardenSkelBuilder;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};

#[test]
fn bpf_bucketing_matches_user_space_bounds() {
    let mut obj = MaybeUninit::uninit();
    let mut open = IowardenSkelBuilder::default().open(&mut obj).unwrap();
    for mut p in open.open_object_mut().progs_mut() {
        p.set_autoload(false);
    }
    open.progs.hist_bucket_selftest.set_autoload(true);
    let skel = open
        .load()
        .expect("loading the selftest program (needs root)");

    // Every bucket boundary, one ns below it, and values far past the last.
    let mut values: Vec<u64> = Vec::new();
    for i in 1..NBUCKETS {
        values.push(lower_us(i) * 1000);
        values.push(lower_us(i) * 1000 - 1);
    }
    values.extend([0, 999, 1000, 30_000_000_000, u64::MAX / 2]);
    // Both sides of where the BPF side stops dividing by multiplication (2^32 ns).
    values.extend([(1 << 32) - 1, 1 << 32, (1 << 32) + 999, (1 << 32) + 1000]);
    // A spread of values in between: every multiple of 999_999 ns below 2^32.
    values.extend((1..4295u64).map(|i| i * 999_999));
    for chunk in values.chunks(IOW_SELFTEST_N as usize) {
        let mut probe = iow_bucket_probe::default();
        probe.ns[..chunk.len()].copy_from_slice(chunk);
        // SAFETY: plain-old-data struct viewed as bytes for the syscall context.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(
                &mut probe as *mut _ as *mut u8,
                std::mem::size_of::<iow_bucket_probe>(),
            )
        };
        let input = libbpf_rs::ProgramInput {
            context_in: Some(bytes),
            ..Default::default()
        };
        skel.progs
            .hist_bucket_selftest
            .test_run(input)
            .expect("BPF_PROG_RUN");
        for (i, &ns) in chunk.iter().enumerate() {
            let b = probe.bucket[i] as usize;
            let us = ns / 1000;
            assert!(b < NBUCKETS, "{ns} ns -> bucket {b}");
            assert!(
                lower_us(b) <= us,
                "{ns} ns in bucket {b} starting at {} us",
                lower_us(b)
            );
            if b + 1 < NBUCKETS {
                assert!(
                    us < lower_us(b + 1),
                    "{ns} ns in bucket {b} ending at {} us",
                    lower_us(b + 1)
                );
            }
        }
    }
}

/// The completion's counter updates stay exact when two CPUs add to one
/// shared shard at once (atomic adds), and land in each CPU's own shard
/// when every CPU has one (plain adds): 4096 bytes and one random request
/// per run, packed in one word.
#[test]
fn counter_updates_are_exact_on_shared_and_own_shards() {
    use iowarden::probes::block::bench::{ShardBench, Update};
    let cpus: Vec<usize> =
        (0..std::thread::available_parallelism().unwrap().get().min(2)).collect();
    const RUNS: u32 = 100_000;
    for shards in [1, 2] {
        let b = ShardBench::load(shards).expect("loading the bench program (needs root)");
        b.run(Update::Counters, &cpus, RUNS).unwrap();
        let bytes = b.series_bytes().unwrap();
        // Each run adds 4096 and 1 to its CPU's shard (cpu & (shards - 1)).
        let mut want = vec![(0u64, 0u64); shards as usize];
        for &c in &cpus {
            let w = &mut want[c & (shards as usize - 1)];
            w.0 += 4096 * RUNS as u64;
            w.1 += RUNS as u64;
        }
        assert_eq!(bytes, want, "{shards} shard(s), CPUs {cpus:?}");
    }
}

/// The culprit account's log is per CPU: the bench's record, run on two
/// CPUs at once, lands in each running CPU's own ring, every run counted
/// once, and in no other CPU's.
#[test]
fn flight_log_runs_count_in_their_own_cpus_ring() {
    use iowarden::probes::block::bench::{ShardBench, Update};
    let cpus: Vec<usize> =
        (0..std::thread::available_parallelism().unwrap().get().min(2)).collect();
    const RUNS: u32 = 100_000;
    let b = ShardBench::load(1).expect("loading the bench program (needs root)");
    b.run(Update::FlightLog, &cpus, RUNS).unwrap();
    let counts = b.flight_log_counts().unwrap();
    // BPF_PROG_RUN runs the program `repeat` times; the empty program
    // beside it writes nothing.
    let want: Vec<u64> = (0..counts.len())
        .map(|c| if cpus.contains(&c) { RUNS as u64 } else { 0 })
        .collect();
    assert_eq!(
        counts, want,
        "records per CPU after {RUNS} runs on CPUs {cpus:?}"
    );
}
