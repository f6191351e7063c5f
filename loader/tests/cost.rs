//! The BPF-charged linear cost model against the real kernel: fio at QD1 on
//! a loop device from two cgroups (random and sequential reads, two sizes
//! each), the daemon charging a model given with --cost-model. Run as root.

use crate::fixtures;

use std::process::Command;

use fixtures::*;
use iowarden_exporters::{IoSeries, Op, Snapshot};

const MODEL: &str =
    "rbps=200000000 rseqiops=20000 rrandiops=5000 wbps=100000000 wseqiops=10000 wrandiops=4000";
/// blk-iocost.c calc_lcoefs of MODEL's read terms, worked out independently
/// (python3, integer ceilings): page = ceil(2^37 / ceil(rbps / 4096)),
/// base = ceil(2^37 / iops) - page.
const RPAGE: u64 = 2814700;
const RSEQIO: u64 = 4057248;
const RRANDIO: u64 = 24673091;
const VTIME_PER_SEC: f64 = (1u64 << 37) as f64;

/// Seconds back to vtime: exact in the daemon (a power of two), but
/// serde_json's default float parsing may be one ulp off.
fn vtime(seconds: f64) -> u64 {
    (seconds * VTIME_PER_SEC).round() as u64
}

fn fio(cg: &Cgroup, dev: &str, rw: &str, bs: &str, ios: u64, size: &str) -> (u64, u64) {
    let j = fio_json(&mut cg.command("fio", &fio_args(dev, rw, bs, 1, ios, "0", size)));
    let r = &j["jobs"][0]["read"];
    (
        r["total_ios"].as_u64().unwrap(),
        r["io_bytes"].as_u64().unwrap(),
    )
}

fn read_series<'a>(snap: &'a Snapshot, dev: &str, cg: &Cgroup) -> &'a IoSeries {
    snap.io
        .iter()
        .find(|s| s.device.name == dev && s.cgroup.id == cg.id() && s.op == Op::Read)
        .unwrap_or_else(|| panic!("no read series of {} on {dev}", cg.rel))
}

/// The model's cost of a series' reads, vtime: a base cost per request by
/// pattern plus a page cost per 4 KiB (every request here is a multiple).
fn expected_vtime(ios: u64, random: u64, bytes: u64) -> u64 {
    (ios - random) * RSEQIO + random * RRANDIO + bytes / 4096 * RPAGE
}

/// Per cgroup: the charged cost is exactly the model applied to the
/// requests (counts, sizes, sequential/random) and matches fio's own I/O
/// counts; random reads are classified random and sequential ones
/// sequential (>= 95 %); the refit gives finite positive read parameters and
/// reports both models' error for every class.
#[test]
fn charges_the_linear_model_and_refits_it() {
    let dev = LoopDev::file(2048);
    let name = dev.name();
    // Real blocks under the sequential region (reads of holes cost nothing).
    dev.fill(128);
    let rnd = Cgroup::new("iowarden-test-cost-rand");
    let seq = Cgroup::new("iowarden-test-cost-seq");
    let daemon = Daemon::start(
        19631,
        &[
            "--device",
            &name,
            "--cost-model",
            MODEL,
            "--io-counters",
            "all",
        ],
    );

    // Random over 2 GiB: two requests land within iocost's 16 MiB window
    // of each other ~1.6 % of the time.
    let undelivered = Undelivered::start(daemon.child.id());
    let k0 = kernel_reads(&name);
    let r4 = fio(&rnd, &dev.path, "randread", "4k", 1500, "2G");
    let r64 = fio(&rnd, &dev.path, "randread", "64k", 500, "2G");
    let s64 = fio(&seq, &dev.path, "read", "64k", 1500, "128M");
    let s4 = fio(&seq, &dev.path, "read", "4k", 1500, "128M");
    // The kernel's own count of the reads, independent of BPF.
    let kernel = kernel_reads(&name) - k0;
    let fio_total: u64 = [&r4, &r64, &s64, &s4].iter().map(|r| r.0).sum();
    assert_eq!(kernel, fio_total, "/sys/block/{name}/stat reads vs fio's");
    // fio is done: a poll that starts now counts every read the kernel
    // delivered to BPF.
    let snap = daemon.settled();
    let undelivered = undelivered.so_far();

    for (cg, runs, random) in [(&rnd, [r4, r64], true), (&seq, [s64, s4], false)] {
        let s = read_series(&snap, &name, cg);
        let vtime = vtime(s.cost_seconds);
        println!(
            "{}: ios {} random {} bytes {} cost {:.6}s ({vtime} vtime); fio {runs:?}",
            cg.rel, s.ios, s.random_ios, s.bytes, s.cost_seconds
        );
        assert_eq!(s.merged, 0, "QD1 direct reads do not merge");
        assert_eq!(
            vtime,
            expected_vtime(s.ios, s.random_ios, s.bytes),
            "{}: charged cost is not the model's",
            cg.rel
        );
        let (fio_ios, fio_bytes) = (runs[0].0 + runs[1].0, runs[0].1 + runs[1].1);
        // Only completions the kernel did not deliver to BPF may be missing
        // (fixtures::Undelivered).
        assert!(
            s.ios <= fio_ios && fio_ios - s.ios <= undelivered,
            "{}: {} ios, fio {fio_ios}, {undelivered} not delivered to BPF",
            cg.rel,
            s.ios
        );
        let rand = if random {
            s.random_ios
        } else {
            s.ios - s.random_ios
        };
        let frac = rand as f64 / s.ios as f64;
        assert!(
            frac >= 0.95,
            "{}: only {:.1} % classified {}",
            cg.rel,
            frac * 100.0,
            if random { "random" } else { "sequential" }
        );
        // The model applied to fio's counts, with the classification above;
        // a request not delivered to BPF costs at most a random 64 KiB read.
        let from_fio = expected_vtime(fio_ios, s.random_ios, fio_bytes) as f64;
        let slack = from_fio * 0.005 + ((fio_ios - s.ios) * (RRANDIO + 16 * RPAGE)) as f64;
        assert!(
            (vtime as f64 - from_fio).abs() <= slack,
            "{}: {vtime} vtime charged, the model gives {from_fio} for fio's I/O",
            cg.rel
        );
    }

    let m = snap
        .cost_models
        .iter()
        .find(|m| m.device.name == name)
        .expect("a cost model for the loop device");
    println!("{m:#?}");
    assert_eq!(m.source, "flag");
    assert_eq!(
        (m.configured.rbps, m.configured.rrandiops, m.configured.wbps),
        (200000000, 5000, 100000000)
    );
    let f = &m.fitted;
    assert!(
        f.rbps > 0 && f.rseqiops > 0 && f.rrandiops > 0,
        "fitted read terms: {f:?}"
    );
    assert_eq!(
        (f.wbps, f.wseqiops, f.wrandiops),
        (0, 0, 0),
        "no writes, no write terms"
    );
    assert!(m
        .fitted_line
        .starts_with(&format!("{} ctrl=user model=linear rbps=", dev.majmin())));
    for (random, size) in [(true, 4096), (true, 65536), (false, 4096), (false, 65536)] {
        let c = m
            .classes
            .iter()
            .find(|c| c.op == Op::Read && c.random == random && c.size_bytes == size)
            .unwrap_or_else(|| panic!("no class random={random} size={size}: {:?}", m.classes));
        assert!(c.ios >= 400, "{c:?}");
        let e = c.error.expect("configured error");
        let want = (c.model_seconds - c.device_seconds) / c.device_seconds;
        assert!((e - want).abs() < 1e-9 && e.is_finite(), "{c:?}");
        assert!(c.fitted_error.is_some_and(f64::is_finite), "{c:?}");
        // What the configured model charged the class, by its definition.
        let base = if random { RRANDIO } else { RSEQIO };
        let vt = c.ios * base + c.bytes / 4096 * RPAGE;
        assert_eq!(vtime(c.model_seconds), vt, "{c:?}");
    }

    let metrics = daemon.get("/metrics").unwrap();
    assert_promtool_accepts(&metrics);
    for fam in [
        "iowarden_io_cost_seconds_total{",
        "iowarden_io_random_requests_total{",
        "iowarden_cost_model_error_ratio{",
        "iowarden_cost_class_requests_total{",
        "iowarden_cost_model_bandwidth_bytes_per_second{",
        "iowarden_cost_model_iops{",
    ] {
        assert!(metrics.contains(fam), "{fam} missing");
    }
    assert!(metrics.contains(&format!(
        r#"iowarden_cost_model_iops{{device="{name}",devt="{}",op="read",model="configured",pattern="random"}} 5000"#,
        dev.majmin()
    )));
    // --io-counters all includes the throttle stage's sum (bio submission
    // to request allocation): what the snapshot holds, a series only where
    // the stage was measured (not on a kernel that stamps bios only for
    // io.latency, as this host's: there the guest's t-16 measures it).
    for cg in [&rnd, &seq] {
        let s = read_series(&snap, &name, cg);
        let want = s.latency.throttle.sum_seconds;
        let prefix = format!(
            r#"iowarden_io_throttle_seconds_total{{cgroup="{}",cgroup_id="{}",device="{name}",op="read"}} "#,
            s.cgroup.path, s.cgroup.id
        );
        let line = metrics.lines().find(|l| l.starts_with(&prefix));
        println!("{}: throttle stage {want:.6} s; /metrics: {line:?}", cg.rel);
        let got: Option<f64> = line.map(|l| l.trim_start_matches(&prefix).parse().unwrap());
        match got {
            None => assert_eq!(want, 0.0, "{}: no throttle series for {want} s", cg.rel),
            Some(got) => assert!(
                want > 0.0 && (got - want).abs() <= 1e-9 * want.max(1.0),
                "{}: {got} exported, {want} measured",
                cg.rel
            ),
        }
    }
}

/// `iowarden model` traces, then prints the charged model, the refitted
/// io.cost.model line and both models' error per class.
#[test]
fn model_subcommand_prints_the_fit() {
    let dev = LoopDev::file(2048);
    let name = dev.name();
    let cg = Cgroup::new("iowarden-test-cost-cli");
    let mut child = Command::new(env!("CARGO_BIN_EXE_iowarden"))
        .args([
            "model",
            "--device",
            &name,
            "--duration",
            "600s",
            "--cost-model",
            MODEL,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The workload starts once the programs are attached, and SIGINT ends
    // the trace once it is done: no timing assumed either way.
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut said = Vec::new();
    for line in std::io::BufRead::lines(stderr) {
        let line = line.unwrap();
        let ready = line.starts_with("iowarden model: tracing");
        said.push(line);
        if ready {
            break;
        }
    }
    assert!(
        said.last()
            .is_some_and(|l| l.starts_with("iowarden model: tracing")),
        "iowarden model never said it was tracing: {said:?}"
    );
    fio(&cg, &dev.path, "randread", "4k", 300, "2G");
    fio(&cg, &dev.path, "randread", "64k", 300, "2G");
    signal(&child, nix::sys::signal::Signal::SIGINT);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert!(out.status.success(), "{:?}", out.status);
    assert!(
        text.contains(&format!("{name} ({})", dev.majmin())),
        "{text}"
    );
    assert!(
        text.contains(&format!("charged with (flag): {MODEL}")),
        "{text}"
    );
    assert!(
        text.contains(&format!("{} ctrl=user model=linear rbps=", dev.majmin())),
        "{text}"
    );
    for size in ["4K", "64K"] {
        let row = text
            .lines()
            .find(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.len() == 8 && w[0] == "read" && w[1] == "random" && w[2] == size
            })
            .unwrap_or_else(|| panic!("no read random {size} row in\n{text}"));
        assert!(row.trim_end().ends_with('%'), "{row}");
    }
}

/// Without --cost-model a device is charged with the model the kernel
/// would use for it (no io.cost.model on this cgroup v1 host: blk-iocost's
/// default for its type) from its very first request: the poll that first
/// sees the device resolves its model before pricing what it was charged.
#[test]
fn host_default_model_from_the_first_request() {
    use iowarden::costmodel::{request_cost, AUTOP_HDD, AUTOP_SSD_DFL};
    let dev = LoopDev::file(2048);
    let name = dev.name();
    let cg = Cgroup::new("iowarden-test-cost-host");
    let daemon = Daemon::start(19632, &["--device", &name]);
    fio(&cg, &dev.path, "randread", "4k", 300, "2G");
    let snap = daemon.settled();
    let rotational = std::fs::read_to_string(format!("/sys/block/{name}/queue/rotational"))
        .unwrap()
        .trim()
        == "1";
    let (model, source) = if rotational {
        (AUTOP_HDD, "default-hdd")
    } else {
        (AUTOP_SSD_DFL, "default-ssd")
    };
    let m = snap
        .cost_models
        .iter()
        .find(|m| m.device.name == name)
        .unwrap();
    assert_eq!(m.source, source);
    let s = read_series(&snap, &name, &cg);
    let lc = iowarden::costmodel::lcoefs(&model);
    let want = (s.ios - s.random_ios) * request_cost(&lc, false, false, 4096)
        + s.random_ios * request_cost(&lc, false, true, 4096);
    assert!(s.ios > 0);
    assert_eq!(vtime(s.cost_seconds), want, "{source}: {s:?}");
}

/// Reads completed + merged on a device, from the kernel's /sys/block stat.
fn kernel_reads(dev: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/sys/block/{dev}/stat")).unwrap();
    let f: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    f[0] + f[1]
}
