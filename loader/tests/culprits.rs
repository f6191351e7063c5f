//! The culprit account, as the shipped defaults measure it, against
//! experiments whose culprit is known: a QD1 4 KiB reader (the victim) on
//! a loop device beside no neighbour, a 128 KiB sequential writer at QD16,
//! a QD32 4 KiB random reader, or both, each phase twice in a shuffled
//! order, all in cgroups of their own; and the victim beside the writer
//! with each of them issuing from every CPU (a reader or writer pinned to
//! each), so requests complete on all of them. The
//! account must put the victim's excess (its device time beyond its own
//! service share) on the active culprits (at least 80 %), next to nothing
//! on the idle one (at most 10 %), split a two-culprit phase as the
//! culprits shared the device (each one's share of their device time,
//! measured per request apart from the account), and put nothing on
//! others alone.
//! `top` runs beside a last writer phase and must say so in its verdict.
//! No I/O scheduler; the same checks hold under mq-deadline (each phase
//! once, a loop device's default); under BFQ (where the kernel has it),
//! where the victim waits in the scheduler, they hold for its waits there
//! and on the device together.
//! The victim's io.max is not here: this host's kernel refuses the fexit
//! that times blk-throttle's hold (the guest's t-22 checks it).

use crate::fixtures;

use std::process::{Child, Command};

use fixtures::*;
use iowarden_exporters::{CulpritSeries, Op, Snapshot, Stage};

const BIN: &str = env!("CARGO_BIN_EXE_iowarden");

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Alone,
    Writer,
    Reader,
    Both,
    /// The writer beside the victim, each issuing from every CPU.
    WriterEveryCpu,
}

/// The host's online CPUs (the kernel's list, e.g. "0-1") and how many:
/// one reader or writer pinned to each.
fn online_cpus() -> (String, usize) {
    let list = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let count = list
        .trim()
        .split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum();
    (list.trim().to_string(), count)
}

/// The cgroups and what each runs.
struct Experiment {
    dev: LoopDev,
    victim: Cgroup,
    writer: Cgroup,
    reader: Cgroup,
}

/// Runs a command to its end on a thread of its own: its stdout.
trait SpawnOutput {
    fn spawn_output(&mut self) -> std::thread::JoinHandle<String>;
}

impl SpawnOutput for Command {
    fn spawn_output(&mut self) -> std::thread::JoinHandle<String> {
        let child = self
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        std::thread::spawn(move || {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{:?}", out.status);
            String::from_utf8_lossy(&out.stdout).into_owned()
        })
    }
}

/// A time-based fio job (direct I/O) in `cg`, for `secs` seconds.
fn fio(cg: &Cgroup, dev: &str, job: &[&str], secs: u32) -> Child {
    let mut args: Vec<String> = [
        "--name=job",
        "--direct=1",
        "--time_based",
        "--output=/dev/null",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(format!("--filename={dev}"));
    args.push(format!("--runtime={secs}"));
    args.extend(job.iter().map(|s| s.to_string()));
    cg.command("fio", &args).spawn().expect("fio")
}

fn wait_ok(mut c: Child, what: &str) {
    let st = c.wait().unwrap();
    assert!(st.success(), "{what}'s fio failed: {st}");
}

impl Experiment {
    fn new() -> Experiment {
        let dev = LoopDev::file(1024);
        // Real blocks under both readers' regions.
        dev.fill(512);
        Experiment {
            dev,
            victim: Cgroup::new("iowarden-test-victim"),
            writer: Cgroup::new("iowarden-test-writer"),
            reader: Cgroup::new("iowarden-test-reader"),
        }
    }

    /// Runs each phase for 3 s and checks the daemon's window over it.
    fn run_each(&self, daemon: &Daemon, phases: &[Phase], check: impl Fn(Phase, &Snapshot)) {
        let mut before = daemon.settled_account();
        for &phase in phases {
            self.run(phase, 3);
            let after = daemon.settled_account();
            check(phase, &after.delta_since(&before));
            before = after;
        }
    }

    /// Runs one phase: the victim for `secs`, its neighbours beside it.
    fn run(&self, phase: Phase, secs: u32) {
        let dev = &self.dev.path;
        // One job per CPU, each pinned to its own (fio's split policy).
        let (online, n) = online_cpus();
        let (jobs, allowed) = (format!("--numjobs={n}"), format!("--cpus_allowed={online}"));
        let every_cpu: Vec<&str> = match phase {
            Phase::WriterEveryCpu => vec![&jobs, &allowed, "--cpus_allowed_policy=split"],
            _ => Vec::new(),
        };
        let writer =
            matches!(phase, Phase::Writer | Phase::Both | Phase::WriterEveryCpu).then(|| {
                let job = [
                    "--ioengine=libaio",
                    "--rw=write",
                    "--bs=128k",
                    "--iodepth=16",
                ];
                fio(
                    &self.writer,
                    dev,
                    &[&job[..], &["--offset=768M", "--size=256M"], &every_cpu].concat(),
                    secs + 1,
                )
            });
        let reader = matches!(phase, Phase::Reader | Phase::Both).then(|| {
            let job = [
                "--ioengine=libaio",
                "--rw=randread",
                "--bs=4k",
                "--iodepth=32",
            ];
            fio(
                &self.reader,
                dev,
                &[&job[..], &["--offset=256M", "--size=256M"]].concat(),
                secs + 1,
            )
        });
        let job = [
            "--ioengine=psync",
            "--rw=randread",
            "--bs=4k",
            "--size=256M",
        ];
        wait_ok(
            fio(&self.victim, dev, &[&job[..], &every_cpu].concat(), secs),
            "the victim",
        );
        writer.into_iter().for_each(|c| wait_ok(c, "the writer"));
        reader.into_iter().for_each(|c| wait_ok(c, "the reader"));
    }
}

/// The victim's account in one window: its device time's seconds by
/// culprit cgroup path ("" for its own service), its queue stage's split
/// by culprit (the I/O scheduler's), and its device and queue stages'
/// times summed over requests.
struct Account {
    by_culprit: Vec<(String, f64)>,
    queued_by_culprit: Vec<(String, f64)>,
    device_seconds: f64,
    queue_seconds: f64,
}

impl Account {
    fn of(window: &Snapshot, victim: &str) -> Account {
        let by_culprit = |stage: Stage| -> Vec<(String, f64)> {
            window
                .culprits
                .iter()
                .filter(|c| c.victim.path == victim && c.op == Op::Read && c.stage == stage)
                .map(|c: &CulpritSeries| {
                    let culprit = c.culprit.as_ref().map_or("", |p| p.path.as_str());
                    (culprit.to_string(), c.seconds)
                })
                .collect()
        };
        let mine = || {
            window
                .io
                .iter()
                .filter(|s| s.cgroup.path == victim && s.op == Op::Read)
        };
        Account {
            by_culprit: by_culprit(Stage::Device),
            queued_by_culprit: by_culprit(Stage::Queue),
            device_seconds: mine().map(|s| s.latency.device.sum_seconds).sum(),
            queue_seconds: mine().map(|s| s.latency.queue.sum_seconds).sum(),
        }
    }

    /// On the device behind `culprit`.
    fn behind(&self, culprit: &str) -> f64 {
        sum_of(&self.by_culprit, culprit)
    }

    /// On the device and in the scheduler behind `culprit`.
    fn waited_behind(&self, culprit: &str) -> f64 {
        self.behind(culprit) + sum_of(&self.queued_by_culprit, culprit)
    }

    /// The queue stage's part split by culprit.
    fn queued_split(&self) -> f64 {
        self.queued_by_culprit.iter().map(|(_, s)| s).sum()
    }

    /// Device time beyond its own service share: behind anyone, itself included.
    fn excess(&self) -> f64 {
        self.by_culprit
            .iter()
            .filter(|(c, _)| !c.is_empty())
            .map(|(_, s)| s)
            .sum()
    }
}

fn sum_of(parts: &[(String, f64)], culprit: &str) -> f64 {
    parts
        .iter()
        .filter(|(c, _)| c == culprit)
        .map(|(_, s)| s)
        .sum()
}

/// A culprit's device time (its requests' issue-to-completion sums) in the window.
fn device_seconds(window: &Snapshot, cgroup: &str) -> f64 {
    window
        .io
        .iter()
        .filter(|s| s.cgroup.path == cgroup)
        .map(|s| s.latency.device.sum_seconds)
        .sum()
}

fn check(phase: Phase, window: &Snapshot, x: &Experiment) {
    let (v, w, r) = (&x.victim.rel, &x.writer.rel, &x.reader.rel);
    let a = Account::of(window, v);
    let excess = a.excess();
    let said = format!(
        "{phase:?}: victim's device time {:.3} s, its account {:?}; queue stage {:.3} s, \
         in the scheduler {:?}",
        a.device_seconds, a.by_culprit, a.queue_seconds, a.queued_by_culprit
    );
    eprintln!("{said}");
    // Its service and its waits (behind others and its own) tile its
    // device time: the replay splits each request's time whole, and the
    // settled windows hold the same requests on both sides (a request is
    // counted at its completion, and replayed within a second of it).
    // Not within 10 %: a request left out of the account (untold), or
    // charged to the wrong series.
    let own_queue = a.behind(v);
    let parts: f64 = a.by_culprit.iter().map(|(_, s)| s).sum();
    assert!(
        (parts - a.device_seconds).abs() <= 0.1 * a.device_seconds,
        "{said}: service and waits add up to {parts:.3} s"
    );
    let share = |c: &str| a.behind(c) / excess;
    match phase {
        Phase::Alone => {
            assert!(
                excess - own_queue <= 0.01 * a.device_seconds,
                "{said}: behind others while alone"
            );
            // A QD1 reader alone has one request in flight: nothing to
            // wait behind, its own included.
            assert!(
                own_queue <= 0.01 * a.device_seconds,
                "{said}: its own queue while alone at QD1"
            );
        }
        Phase::Writer | Phase::Reader | Phase::WriterEveryCpu => {
            assert_on_the_active(phase, share, x, &said)
        }
        Phase::Both => {
            assert!(share(w) + share(r) >= 0.8, "{said}: not on the two");
            // Each culprit's part of what the two hold, against its part
            // of their device time: processor sharing splits the wait as
            // they shared the device.
            let (dw, dr) = (device_seconds(window, w), device_seconds(window, r));
            let split = a.behind(w) / (a.behind(w) + a.behind(r));
            let occupancy = dw / (dw + dr);
            assert!(
                (split - occupancy).abs() <= 0.1,
                "{said}: the writer's part {split:.3} of the two, its part of their device time {occupancy:.3}"
            );
        }
    }
}

/// A one-neighbour phase's bounds: at least 80 % of the victim's wait on
/// the active neighbour, at most 10 % on the idle one.
fn assert_on_the_active(phase: Phase, share: impl Fn(&str) -> f64, x: &Experiment, said: &str) {
    let (active, idle, active_is, idle_is) = match phase {
        Phase::Writer | Phase::WriterEveryCpu => (&x.writer.rel, &x.reader.rel, "writer", "reader"),
        Phase::Reader => (&x.reader.rel, &x.writer.rel, "reader", "writer"),
        _ => unreachable!("{phase:?} has no single neighbour"),
    };
    assert!(share(active) >= 0.8, "{said}: not on the {active_is}");
    assert!(share(idle) <= 0.1, "{said}: on the idle {idle_is}");
}

/// Under BFQ: it serves one cgroup's queue at a time, so the victim waits
/// mostly in the scheduler (the queue stage) and is mostly alone on the
/// device. Its waits there and on the device together must name the
/// culprits as check()'s device waits do.
fn check_waits(phase: Phase, window: &Snapshot, x: &Experiment) {
    let (v, w, r) = (&x.victim.rel, &x.writer.rel, &x.reader.rel);
    let a = Account::of(window, v);
    let waits = a.excess() + a.queued_split();
    let said = format!(
        "{phase:?}: victim's device time {:.3} s, queue stage {:.3} s; on the device {:?}, \
         in the scheduler {:?}",
        a.device_seconds, a.queue_seconds, a.by_culprit, a.queued_by_culprit
    );
    eprintln!("{said}");
    let share = |c: &str| a.waited_behind(c) / waits;
    assert!(
        phase == Phase::Alone || waits > 0.0,
        "{said}: no wait at all beside a neighbour"
    );
    match phase {
        Phase::Alone => assert!(
            waits - a.waited_behind(v) <= 0.01 * (a.device_seconds + a.queue_seconds),
            "{said}: behind others while alone"
        ),
        Phase::Writer | Phase::Reader | Phase::WriterEveryCpu => {
            assert_on_the_active(phase, share, x, &said)
        }
        Phase::Both => {
            assert!(share(w) + share(r) >= 0.8, "{said}: not on the two");
            let (dw, dr) = (device_seconds(window, w), device_seconds(window, r));
            let split = a.waited_behind(w) / (a.waited_behind(w) + a.waited_behind(r));
            // Both named; the writer's part is not held to its device-time
            // share here: BFQ's slices include idling for the queue in
            // service, charged to it (0.03-0.09 above that share in 4 runs,
            // 2026-11-29; docs/culprits.md).
            assert!(
                (0.1..=0.9).contains(&split),
                "{said}: the writer's part {split:.3} of the two, its part of their device time {:.3}",
                dw / (dw + dr)
            );
        }
    }
}

/// The I/O scheduler of the experiment's loop device. A scheduler the
/// kernel does not offer fails the test.
fn use_scheduler(x: &Experiment, sched: &str) {
    let file = format!("/sys/block/{}/queue/scheduler", x.dev.name());
    let offered = std::fs::read_to_string(&file).unwrap();
    assert!(
        offered
            .split_whitespace()
            .any(|s| s.trim_matches(['[', ']']) == sched),
        "{file} offers no {sched}: {offered}"
    );
    std::fs::write(&file, sched).unwrap_or_else(|e| panic!("writing {sched} to {file}: {e}"));
}

/// Whether the running kernel was built without BFQ, as its own config
/// says (/proc/config.gz): then no module can offer it, and the guest's
/// t-22 (Debian's kernels have BFQ) checks the account under it. None
/// when the config is not readable: the test then runs, and fails if BFQ
/// is not offered.
fn kernel_lacks_bfq() -> Option<bool> {
    let out = std::process::Command::new("zcat")
        .arg("/proc/config.gz")
        .output()
        .ok()?;
    let config = String::from_utf8_lossy(&out.stdout);
    out.status.success().then(|| {
        config
            .lines()
            .any(|l| l == "# CONFIG_IOSCHED_BFQ is not set")
    })
}

/// The same account under mq-deadline: requests then carry a scheduler
/// tag (the identity bpf/block/culprits.h keys a request by) and wait in the
/// scheduler before the device.
#[test]
fn culprits_named_under_mq_deadline() {
    let x = Experiment::new();
    let daemon = Daemon::start(19652, &["--device", &x.dev.name()]);
    use_scheduler(&x, "mq-deadline");
    let phases = [Phase::Both, Phase::Writer, Phase::Alone, Phase::Reader];
    x.run_each(&daemon, &phases, |phase, window| {
        eprint!("mq-deadline: ");
        check(phase, window, &x);
    });
}

/// The account under BFQ (each phase once): the victim's waits in the
/// scheduler, behind the requests it issued first, name the culprits.
#[test]
fn culprits_named_under_bfq() {
    if kernel_lacks_bfq() == Some(true) {
        eprintln!(
            "NOT RUN: this kernel is built without BFQ (# CONFIG_IOSCHED_BFQ is not set in \
             /proc/config.gz); the guest's t-22 checks the account under BFQ"
        );
        return;
    }
    let x = Experiment::new();
    let daemon = Daemon::start(19653, &["--device", &x.dev.name()]);
    use_scheduler(&x, "bfq");
    let phases = [Phase::Writer, Phase::Both, Phase::Alone, Phase::Reader];
    x.run_each(&daemon, &phases, |phase, window| {
        eprint!("bfq: ");
        check_waits(phase, window, &x);
    });
}

#[test]
fn culprits_named_in_known_experiments() {
    let x = Experiment::new();
    let daemon = Daemon::start(19651, &["--device", &x.dev.name()]);
    // No scheduler (a loop device's default is mq-deadline, tested in
    // culprits_named_under_mq_deadline).
    use_scheduler(&x, "none");
    // Every phase twice, in an order fixed here but shuffled once.
    let order = [
        Phase::Writer,
        Phase::Alone,
        Phase::Both,
        Phase::WriterEveryCpu,
        Phase::Reader,
        Phase::Alone,
        Phase::Reader,
        Phase::Writer,
        Phase::WriterEveryCpu,
        Phase::Both,
    ];
    x.run_each(&daemon, &order, |phase, window| check(phase, window, &x));
    // top's verdict, measured: the victim behind the writer's writes.
    let top = Command::new(BIN)
        .args(["top", "--device", &x.dev.name()])
        .args(["--interval", "1s", "--duration", "4s"])
        .stderr(std::process::Stdio::null())
        .spawn_output();
    x.run(Phase::Writer, 5);
    let text = top.join().unwrap();
    let verdict = format!(
        "measured: noisy neighbour on {}: {} waited behind {} for ",
        x.dev.name(),
        x.victim.rel,
        x.writer.rel
    );
    assert!(
        text.lines().any(|l| l.starts_with(&verdict)),
        "top's verdict names neither the victim nor the writer: {text}"
    );
    // The account, once a window, under the table. (The loop device merges
    // the writer's sequential 128 KiB writes: the size top names is their
    // mean after merging.)
    let account = format!("culprits {} on {}: ", x.victim.rel, x.dev.name());
    let writer = format!("behind {}'s ", x.writer.rel);
    assert!(
        text.lines()
            .any(|l| l.starts_with(&account) && l.contains(&writer)),
        "top's account does not name the writer: {text}"
    );
    let windows = text
        .lines()
        .filter(|l| l.starts_with("iowarden top "))
        .count();
    let accounts = text.lines().filter(|l| l.starts_with(&account)).count();
    assert!(
        accounts <= windows,
        "the account said more than once a window: {text}"
    );
    let m = daemon.get("/metrics").unwrap();
    assert!(
        m.contains(&format!(
            "iowarden_culprit_seconds_total{{device=\"{}\",victim=\"{}\",op=\"read\",stage=\"device\",culprit=\"{}\",culprit_op=\"write\"}}",
            x.dev.name(),
            x.victim.rel,
            x.writer.rel
        )),
        "the victim's wait behind the writer is exported"
    );
}
