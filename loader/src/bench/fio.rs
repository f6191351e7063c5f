//! fio for `iowarden bench`: the job files of bench/jobs (compiled in,
//! written next to the results so a run shows exactly what it ran), the
//! command line of one tenant, and fio's JSON output.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};

/// A job file of bench/jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobFile {
    Tenant,
    Lc,
    Be,
    Calibrate,
}

impl JobFile {
    pub const ALL: [JobFile; 4] = [
        JobFile::Tenant,
        JobFile::Lc,
        JobFile::Be,
        JobFile::Calibrate,
    ];

    pub fn file_name(self) -> &'static str {
        match self {
            JobFile::Tenant => "tenant.fio",
            JobFile::Lc => "lc.fio",
            JobFile::Be => "be.fio",
            JobFile::Calibrate => "calibrate.fio",
        }
    }

    pub fn text(self) -> &'static str {
        match self {
            JobFile::Tenant => include_str!("jobs/tenant.fio"),
            JobFile::Lc => include_str!("jobs/lc.fio"),
            JobFile::Be => include_str!("jobs/be.fio"),
            JobFile::Calibrate => include_str!("jobs/calibrate.fio"),
        }
    }
}

/// Writes every job file into `dir` (the run's `jobs/`).
pub fn write_job_files(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for j in JobFile::ALL {
        let p = dir.join(j.file_name());
        std::fs::write(&p, j.text()).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

/// One fio invocation: a job file, its variables and an optional section.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub file: JobFile,
    /// Section of the file to run (calibrate.fio has two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    pub bs: String,
    pub qd: u32,
}

impl Job {
    pub fn new(file: JobFile) -> Job {
        Job {
            file,
            section: None,
            bs: "4k".into(),
            qd: 16,
        }
    }

    pub fn bs(mut self, bs: &str) -> Job {
        self.bs = bs.into();
        self
    }

    pub fn qd(mut self, qd: u32) -> Job {
        self.qd = qd;
        self
    }

    pub fn section(mut self, s: &str) -> Job {
        self.section = Some(s.into());
        self
    }

    /// The environment fio expands in the job file.
    pub fn env(&self, dev: &Path, size: u64, runtime_s: f64) -> Vec<(String, String)> {
        vec![
            ("IOW_DEV".into(), dev.display().to_string()),
            ("IOW_SIZE".into(), size.to_string()),
            // fio takes fractional seconds with a unit.
            (
                "IOW_RUNTIME".into(),
                format!("{}ms", (runtime_s * 1000.0).round().max(1.0)),
            ),
            ("IOW_BS".into(), self.bs.clone()),
            ("IOW_QD".into(), self.qd.to_string()),
        ]
    }

    /// fio's arguments: JSON into `out`, the job file from `jobs_dir`.
    pub fn args(&self, jobs_dir: &Path, out: &Path) -> Vec<String> {
        let mut a = vec![
            "--output-format=json".to_string(),
            format!("--output={}", out.display()),
        ];
        if let Some(s) = &self.section {
            a.push(format!("--section={s}"));
        }
        a.push(jobs_dir.join(self.file.file_name()).display().to_string());
        a
    }
}

/// What fio measured for one job (reads and writes summed).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FioResult {
    pub io_bytes: u64,
    pub ios: u64,
    /// Job runtime, seconds (fio's own clock, from its first I/O).
    pub runtime_seconds: f64,
    /// io_bytes / runtime, as fio reports bw_bytes.
    pub bw_bytes: f64,
    pub iops: f64,
    /// Completion latency percentiles, seconds (fio's clat).
    pub clat_p50_seconds: Option<f64>,
    pub clat_p99_seconds: Option<f64>,
    /// CPU fio's own threads used, percent of one CPU.
    pub usr_cpu_pct: f64,
    pub sys_cpu_pct: f64,
}

fn percentile(side: &serde_json::Value, key: &str) -> Option<f64> {
    side["clat_ns"]["percentile"][key]
        .as_f64()
        .map(|ns| ns / 1e9)
}

/// Parses fio's `--output-format=json` (the first job; fio may print
/// warnings before the JSON, which are skipped).
pub fn parse_fio_json(text: &str) -> Result<FioResult> {
    let start = text
        .find('{')
        .ok_or_else(|| anyhow!("fio's output holds no JSON"))?;
    let v: serde_json::Value =
        serde_json::from_str(&text[start..]).context("fio's JSON output does not parse")?;
    let job = v["jobs"]
        .get(0)
        .ok_or_else(|| anyhow!("fio's JSON output has no job"))?;
    let sides = [&job["read"], &job["write"]];
    let num = |s: &serde_json::Value, k: &str| s[k].as_f64().unwrap_or(0.0);
    let io_bytes: f64 = sides.iter().map(|s| num(s, "io_bytes")).sum();
    let ios: f64 = sides.iter().map(|s| num(s, "total_ios")).sum();
    let runtime_ms = sides.iter().map(|s| num(s, "runtime")).fold(0.0, f64::max);
    if job["read"].is_null() && job["write"].is_null() {
        return Err(anyhow!("fio's JSON job has neither read nor write"));
    }
    // The busier side's percentiles: the suites run one kind of I/O per job.
    let main = if num(&job["write"], "io_bytes") > num(&job["read"], "io_bytes") {
        &job["write"]
    } else {
        &job["read"]
    };
    let runtime = runtime_ms / 1000.0;
    Ok(FioResult {
        io_bytes: io_bytes as u64,
        ios: ios as u64,
        runtime_seconds: runtime,
        bw_bytes: if runtime > 0.0 {
            io_bytes / runtime
        } else {
            0.0
        },
        iops: if runtime > 0.0 { ios / runtime } else { 0.0 },
        clat_p50_seconds: percentile(main, "50.000000"),
        clat_p99_seconds: percentile(main, "99.000000"),
        usr_cpu_pct: num(job, "usr_cpu"),
        sys_cpu_pct: num(job, "sys_cpu"),
    })
}

/// `sh -c` that moves itself into `cgroup_dir` before exec'ing fio: fio and
/// every thread it starts are in the cgroup from their first I/O.
pub fn command_in_cgroup(
    cgroup_dir: &Path,
    job: &Job,
    jobs_dir: &Path,
    out: &Path,
    env: &[(String, String)],
) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!(
            "echo $$ > '{}/cgroup.procs' && exec fio \"$@\"",
            cgroup_dir.display()
        ))
        .arg("fio")
        .args(job.args(jobs_dir, out))
        .envs(env.iter().map(|(k, v)| (k, v)));
    c
}

/// Output path of a tenant's JSON in the run's `fio/` directory.
pub fn out_path(dir: &Path, phase: &str, tenant: &str) -> PathBuf {
    dir.join(format!("{phase}.{tenant}.json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIO: &str = r#"fio: some warning
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "tenant",
      "read" : {
        "io_bytes" : 40960000, "bw_bytes" : 20480000, "iops" : 5000.0,
        "runtime" : 2000, "total_ios" : 10000,
        "clat_ns" : { "percentile" : { "50.000000" : 150000, "99.000000" : 900000 } }
      },
      "write" : { "io_bytes" : 0, "runtime" : 0, "total_ios" : 0 },
      "usr_cpu" : 3.5, "sys_cpu" : 20.25
    }
  ]
}"#;

    #[test]
    fn parses_fio_json() {
        let r = parse_fio_json(FIO).unwrap();
        assert_eq!(r.io_bytes, 40_960_000);
        assert_eq!(r.ios, 10_000);
        assert_eq!(r.runtime_seconds, 2.0);
        assert_eq!(r.bw_bytes, 20_480_000.0);
        assert_eq!(r.iops, 5000.0);
        assert_eq!(r.clat_p50_seconds, Some(150e-6));
        assert_eq!(r.clat_p99_seconds, Some(900e-6));
        assert_eq!((r.usr_cpu_pct, r.sys_cpu_pct), (3.5, 20.25));
        assert!(parse_fio_json("no json").is_err());
        assert!(parse_fio_json(r#"{"jobs":[]}"#)
            .unwrap_err()
            .to_string()
            .contains("no job"));
        assert!(parse_fio_json(r#"{"jobs":[{}]}"#).is_err());
    }

    #[test]
    fn job_files_use_the_variables_the_bench_sets() {
        let env =
            Job::new(JobFile::Tenant)
                .bs("64k")
                .qd(8)
                .env(Path::new("/dev/loop3"), 1 << 30, 2.5);
        let get = |k: &str| env.iter().find(|e| e.0 == k).map(|e| e.1.as_str());
        assert_eq!(get("IOW_RUNTIME"), Some("2500ms"));
        assert_eq!(get("IOW_BS"), Some("64k"));
        assert_eq!(get("IOW_QD"), Some("8"));
        for j in JobFile::ALL {
            let text = j.text();
            for (k, _) in &env {
                // Every job reads the device, size and runtime from the bench;
                // only tenant.fio takes its request size and depth from it.
                let needed = !matches!(k.as_str(), "IOW_BS" | "IOW_QD") || j == JobFile::Tenant;
                assert_eq!(
                    text.contains(&format!("${{{k}}}")),
                    needed,
                    "{k} in {}",
                    j.file_name()
                );
            }
            assert!(text.contains("direct=1"), "{}", j.file_name());
        }
        let a = Job::new(JobFile::Calibrate)
            .section("iops")
            .args(Path::new("/o/jobs"), Path::new("/o/x.json"));
        assert_eq!(
            a,
            [
                "--output-format=json",
                "--output=/o/x.json",
                "--section=iops",
                "/o/jobs/calibrate.fio"
            ]
        );
    }
}
