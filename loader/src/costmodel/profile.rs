//! `iowarden profile DEVICE`: the linear iocost model (rbps, rseqiops,
//! rrandiops, wbps, wseqiops, wrandiops) from saturating fio runs, as the
//! kernel's tools/cgroup/iocost_coef_gen.py derives it: sequential large
//! reads/writes at QD1 for bandwidth, 4 KiB sequential and random I/O at a
//! deep queue for IOPS, each write before its read so that reads find
//! written blocks (an SSD answers reads of never-written blocks without
//! touching flash). The write cases overwrite the region, so a device
//! that is mounted, held, partitioned or carries a filesystem is refused
//! unless forced.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use super::model::LinearModel;
use crate::host::devices;

/// One saturating fio run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Case {
    /// The io.cost.model key it measures.
    pub key: &'static str,
    pub rw: &'static str,
    pub block_size: u64,
    pub iodepth: u32,
}

impl Case {
    pub fn is_write(&self) -> bool {
        self.rw.contains("write")
    }
    /// Bandwidth keys keep bytes/s; IOPS keys divide by the 4 KiB block.
    pub fn value(&self, bytes_per_second: f64) -> u64 {
        if self.key.ends_with("bps") {
            bytes_per_second.round() as u64
        } else {
            (bytes_per_second / self.block_size as f64).round() as u64
        }
    }
}

/// iocost_coef_gen.py's defaults and order: 128 MiB sequential blocks at
/// QD1 (scaled down to the region when smaller), 4 KiB at QD64; each
/// write case before its read.
pub fn cases(seq_block: u64) -> [Case; 6] {
    let c = |key, rw, block_size, iodepth| Case {
        key,
        rw,
        block_size,
        iodepth,
    };
    [
        c("wbps", "write", seq_block, 1),
        c("rbps", "read", seq_block, 1),
        c("wseqiops", "write", 4096, 64),
        c("rseqiops", "read", 4096, 64),
        c("wrandiops", "randwrite", 4096, 64),
        c("rrandiops", "randread", 4096, 64),
    ]
}

/// fio's command line for one case on `dev` over [offset, offset + size).
pub fn fio_args(dev: &Path, case: &Case, runtime: Duration, offset: u64, size: u64) -> Vec<String> {
    vec![
        format!("--name=iowarden-profile-{}", case.key),
        format!("--filename={}", dev.display()),
        "--direct=1".into(),
        "--ioengine=libaio".into(),
        format!("--rw={}", case.rw),
        format!("--bs={}", case.block_size),
        format!("--iodepth={}", case.iodepth),
        format!("--offset={offset}"),
        format!("--size={size}"),
        "--time_based".into(),
        format!("--runtime={}ms", runtime.as_millis().max(1)),
        "--norandommap".into(),
        "--randrepeat=0".into(),
        "--output-format=json".into(),
    ]
}

/// What one fio run measured, from the read or write side of its JSON.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FioResult {
    pub bytes_per_second: f64,
    /// I/Os completed (blocks, for the bandwidth cases).
    pub ios: u64,
}

pub fn parse_fio(json: &str, write: bool) -> Result<FioResult> {
    let v: serde_json::Value = serde_json::from_str(json)
        .with_context(|| "fio's JSON output does not parse".to_string())?;
    let side = if write { "write" } else { "read" };
    let job = v["jobs"]
        .get(0)
        .ok_or_else(|| anyhow!("fio's JSON output has no job"))?;
    let field = |name: &str| {
        job[side][name]
            .as_f64()
            .ok_or_else(|| anyhow!("fio's JSON output has no {side}.{name}"))
    };
    Ok(FioResult {
        bytes_per_second: field("bw_bytes")?,
        ios: field("total_ios")? as u64,
    })
}

/// Fewer blocks than this in a bandwidth case and the set-up of the first
/// (faulting in fio's buffer) and the block cut off at the end weigh on
/// the figure: 128 MiB reads for 4 s on a 64 MiB/s device (two blocks)
/// measured 56 MB/s, for 12 s (six) 64 MB/s, sustained 67.6.
pub const MIN_BANDWIDTH_BLOCKS: u64 = 6;

/// Why a bandwidth case's figure is coarse, with the --duration that
/// would complete MIN_BANDWIDTH_BLOCKS blocks, if it is.
pub fn too_few_blocks(case: &Case, r: &FioResult, runtime: Duration) -> Option<String> {
    if !case.key.ends_with("bps") || r.ios >= MIN_BANDWIDTH_BLOCKS {
        return None;
    }
    let block_seconds = case.block_size as f64 / r.bytes_per_second.max(1.0);
    let want = (block_seconds * (MIN_BANDWIDTH_BLOCKS + 1) as f64)
        .max(runtime.as_secs_f64())
        .ceil();
    Some(format!(
        "{}: only {} blocks of {} MiB completed in {:?}, too few for a steady rate; use --duration {want}s or more",
        case.key,
        r.ios,
        case.block_size >> 20,
        runtime
    ))
}

/// The model of the measured values (`values[i]` from `cases[i]`).
pub fn measured_model(cases: &[Case], values: &[u64]) -> LinearModel {
    LinearModel::from_values(LinearModel::KEYS.map(|key| {
        cases
            .iter()
            .position(|c| c.key == key)
            .map_or(0, |i| values[i])
    }))
}

/// Why the device must not be overwritten, if it must not.
pub fn in_use(name: &str, mountinfo: &str) -> Option<String> {
    if let Some(why) = devices::mounted_or_held(name, mountinfo) {
        return Some(why);
    }
    let sys = Path::new("/sys/block").join(name);
    let parts = devices::partitions(&sys, name);
    if !parts.is_empty() {
        return Some(format!(
            "has partitions ({})",
            parts
                .iter()
                .map(|p| p.0.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // blkid -p probes the device itself for any known signature.
    let out = Command::new("blkid")
        .args(["-p", "-o", "export"])
        .arg(Path::new("/dev").join(name))
        .output()
        .ok()?;
    if out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout);
        let kind = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("TYPE=")
                    .or_else(|| l.strip_prefix("PTTYPE="))
            })
            .unwrap_or("a signature");
        return Some(format!("holds data ({kind})"));
    }
    None
}

/// `4096`, `64K`, `512M`, `2G` (binary units).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&t[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&t[..i], 1 << 30),
        Some((i, 'T' | 't')) => (&t[..i], 1 << 40),
        _ => (t, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("invalid size '{s}': bytes, or with K, M, G or T"))
}

pub struct ProfileOptions {
    pub name: String,
    pub devnum: String,
    pub runtime: Duration,
    pub offset: u64,
    /// Bytes of the region to use (None: up to the device's end).
    pub size: Option<u64>,
    pub force: bool,
}

/// Runs the six cases; returns the model line and one line per case.
pub fn profile(o: &ProfileOptions) -> Result<(String, Vec<String>)> {
    let dev = Path::new("/dev").join(&o.name);
    let sectors: u64 = std::fs::read_to_string(Path::new("/sys/block").join(&o.name).join("size"))
        .with_context(|| format!("{}: not a whole disk in /sys/block", o.name))?
        .trim()
        .parse()?;
    let dev_bytes = sectors * 512;
    let size = o.size.unwrap_or(dev_bytes.saturating_sub(o.offset));
    if !o.offset.is_multiple_of(4096) || size < 4 << 20 || o.offset + size > dev_bytes {
        bail!(
            "region offset {} size {size} does not fit {} ({dev_bytes} bytes): 4 KiB-aligned, at least 4 MiB",
            o.offset,
            o.name
        );
    }
    if !o.force {
        let mi = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        if let Some(why) = in_use(&o.name, &mi) {
            bail!(
                "{} is {why}: profiling writes over it. Use a scratch device, or --force if its contents may be destroyed",
                o.name
            );
        }
    }
    // 128 MiB blocks as the kernel's script uses, but never above a quarter of the region.
    let seq_block = (128u64 << 20).min((size / 4) & !4095);
    let cases = cases(seq_block);
    let mut values = Vec::new();
    let mut report = Vec::new();
    for c in &cases {
        let out = Command::new("fio")
            .args(fio_args(&dev, c, o.runtime, o.offset, size))
            .output()
            .context("running fio (apt install fio)")?;
        if !out.status.success() {
            bail!(
                "fio failed for {}: {}",
                c.key,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let r = parse_fio(&String::from_utf8_lossy(&out.stdout), c.is_write())?;
        let v = c.value(r.bytes_per_second);
        report.push(format!(
            "{:<10} {:<9} bs={:<10} qd={:<3} {:>12.1} MB/s {:>9} I/Os -> {}={v}",
            c.key,
            c.rw,
            c.block_size,
            c.iodepth,
            r.bytes_per_second / 1e6,
            r.ios,
            c.key
        ));
        report.extend(too_few_blocks(c, &r, o.runtime).map(|w| format!("warning: {w}")));
        values.push(v.max(1));
    }
    Ok((measured_model(&cases, &values).line(&o.devnum), report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert!(parse_size("12Q")
            .unwrap_err()
            .contains("invalid size '12Q'"));
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn cases_follow_iocost_coef_gen() {
        let c = cases(128 << 20);
        let keys: Vec<_> = c.iter().map(|c| c.key).collect();
        assert_eq!(
            keys,
            [
                "wbps",
                "rbps",
                "wseqiops",
                "rseqiops",
                "wrandiops",
                "rrandiops"
            ]
        );
        assert_eq!(
            (c[1].rw, c[1].block_size, c[1].iodepth),
            ("read", 128 << 20, 1)
        );
        assert_eq!(
            (c[5].rw, c[5].block_size, c[5].iodepth),
            ("randread", 4096, 64)
        );
        assert!(c[0].is_write() && !c[3].is_write());
        assert_eq!(c[1].value(1e9), 1_000_000_000);
        assert_eq!(c[3].value(4096.0 * 1000.4), 1000);
    }

    #[test]
    fn a_bandwidth_case_of_few_blocks_says_how_long_to_run() {
        let c = cases(128 << 20);
        let two = FioResult {
            bytes_per_second: 56.1e6,
            ios: 2,
        };
        let w = too_few_blocks(&c[1], &two, Duration::from_secs(4)).unwrap();
        // 134 MB at 56.1 MB/s is 2.39 s a block; seven of them 16.7 s.
        assert_eq!(
            w,
            "rbps: only 2 blocks of 128 MiB completed in 4s, too few for a steady rate; use --duration 17s or more"
        );
        let six = FioResult { ios: 6, ..two };
        assert_eq!(too_few_blocks(&c[1], &six, Duration::from_secs(12)), None);
        // The IOPS cases count 4 KiB requests, never blocks.
        assert_eq!(too_few_blocks(&c[5], &two, Duration::from_secs(4)), None);
    }

    #[test]
    fn fio_args_bound_the_region() {
        let c = cases(1 << 20)[4];
        let a = fio_args(
            Path::new("/dev/loop3"),
            &c,
            Duration::from_secs(2),
            4096,
            1 << 26,
        );
        for want in [
            "--filename=/dev/loop3",
            "--rw=randwrite",
            "--bs=4096",
            "--iodepth=64",
            "--offset=4096",
            "--size=67108864",
            "--runtime=2000ms",
            "--direct=1",
        ] {
            assert!(a.iter().any(|x| x == want), "{want} not in {a:?}");
        }
    }

    #[test]
    fn parses_fio_json_and_formats_a_model_the_parser_accepts() {
        let json = r#"{"jobs":[{"read":{"bw_bytes":409600,"total_ios":100},"write":{"bw_bytes":8192,"total_ios":2}}]}"#;
        let read = parse_fio(json, false).unwrap();
        assert_eq!((read.bytes_per_second, read.ios), (409600.0, 100));
        assert_eq!(parse_fio(json, true).unwrap().ios, 2);
        assert!(parse_fio("{}", false)
            .unwrap_err()
            .to_string()
            .contains("no job"));
        assert!(parse_fio(r#"{"jobs":[{"read":{"bw_bytes":1}}]}"#, false)
            .unwrap_err()
            .to_string()
            .contains("no read.total_ios"));
        assert!(parse_fio("not json", false).is_err());
        // Measured in run order, written in io.cost.model's.
        let line = measured_model(&cases(1 << 20), &[1, 2, 3, 4, 5, 6]).line("259:0");
        assert_eq!(
            line,
            "259:0 ctrl=user model=linear rbps=2 rseqiops=4 rrandiops=6 wbps=1 wseqiops=3 wrandiops=5"
        );
        crate::knobs::KnobKind::CostModel
            .check_write(&line)
            .unwrap();
    }
}
