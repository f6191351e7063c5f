//! Runs one phase of a suite: fresh cgroups for its tenants, the knob set
//! up, one fio per cgroup started on its schedule, the monitor sampled every
//! interval into per-tenant timelines, the tenants that are held or tied to
//! a partner stopped, fio's results collected, the knob restored and the
//! cgroups removed. Everything kernel-facing of the bench that is not a
//! knob lives here.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use iowarden_exporters::{DeviceRef, Histogram, Snapshot};
use nix::sys::signal::Signal;

use super::fio;
use super::phase::{cpu_busy_now, Ctx, PhaseRun, Sample, Setup, Tenant, TenantRun};

struct Running {
    child: Child,
    out: PathBuf,
    err: PathBuf,
    /// We sent SIGINT (stop_with): fio exits non-zero but reports.
    stopped: bool,
}

fn per_tenant(snap: &Snapshot, dev: &DeviceRef, ids: &[u64]) -> Vec<(u64, u64, Histogram)> {
    let mut out = vec![(0, 0, Histogram::default()); ids.len()];
    for s in &snap.io {
        if s.device.major != dev.major || s.device.minor != dev.minor {
            continue;
        }
        if let Some(i) = ids.iter().position(|&id| id == s.cgroup.id) {
            out[i].0 += s.ios;
            out[i].1 += s.bytes;
            out[i].2.add(&s.latency.total);
        }
    }
    out
}

fn sub_hist(a: &Histogram, b: &Histogram) -> Histogram {
    Histogram {
        counts: a
            .counts
            .iter()
            .enumerate()
            .map(|(i, &c)| c.saturating_sub(b.counts.get(i).copied().unwrap_or(0)))
            .collect(),
        sum_seconds: (a.sum_seconds - b.sum_seconds).max(0.0),
    }
}

/// Signals a tenant's fio (sh exec'd it: the child is fio); one that has
/// already exited is not an error.
fn signal_child(r: &Running, sig: Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(r.child.id() as i32), sig);
}

fn kill_all(running: &mut [Option<Running>]) {
    for r in running.iter_mut().flatten() {
        // sh exec'd fio: the child is fio. SIGTERM lets it stop its jobs.
        signal_child(r, Signal::SIGTERM);
    }
    for r in running.iter_mut().flatten() {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = r.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = r.child.kill();
        let _ = r.child.wait();
    }
}

/// One phase's state while it runs.
struct PhaseLoop<'a> {
    name: &'a str,
    tenants: &'a [Tenant],
    dirs: &'a [PathBuf],
    /// The tenants' cgroup ids.
    ids: Vec<u64>,
    base: Vec<(u64, u64, Histogram)>,
    t0: Instant,
    running: Vec<Option<Running>>,
    samples: Vec<Sample>,
    /// When each tenant's first I/O completed (seconds since t0).
    first_io: Vec<Option<f64>>,
}

/// Runs one phase; see the module comment.
pub fn run_phase(
    ctx: &mut Ctx,
    name: &str,
    tenants: &[Tenant],
    interval_s: f64,
    setup: Setup<'_>,
) -> Result<PhaseRun> {
    if ctx.stop.load(Ordering::Relaxed) {
        bail!("interrupted");
    }
    crate::say!(
        "iowarden bench: {name}: {}",
        tenants
            .iter()
            .map(|t| match t.job.file {
                fio::JobFile::Tenant => format!(
                    "{} ({} bs={} qd={} weight {})",
                    t.name,
                    t.job.file.file_name(),
                    t.job.bs,
                    t.job.qd,
                    t.weight
                ),
                f => format!("{} ({}, from {:.1}s)", t.name, f.file_name(), t.start_s),
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
    let dirs: Vec<PathBuf> = tenants
        .iter()
        .map(|t| ctx.cgroups.make(&t.name))
        .collect::<Result<_>>()?;
    let result = run_in(ctx, name, tenants, &dirs, interval_s, setup);
    let restored = ctx.ctl.restore();
    for d in &dirs {
        ctx.cgroups.remove(d);
    }
    let run = result?;
    restored?;
    Ok(run)
}

pub(super) fn run_in(
    ctx: &mut Ctx,
    name: &str,
    tenants: &[Tenant],
    dirs: &[PathBuf],
    interval_s: f64,
    setup: Setup<'_>,
) -> Result<PhaseRun> {
    setup(&mut ctx.ctl, dirs)?;
    let ids: Vec<u64> = dirs
        .iter()
        .map(|d| std::fs::metadata(d).map(|m| m.ino()))
        .collect::<std::io::Result<_>>()?;
    let base_snap = ctx.monitor.poll()?;
    let cpu0 = cpu_busy_now();
    let mut l = PhaseLoop {
        name,
        tenants,
        dirs,
        base: per_tenant(&base_snap, &ctx.dev, &ids),
        ids,
        t0: Instant::now(),
        running: tenants.iter().map(|_| None).collect(),
        samples: Vec::new(),
        first_io: vec![None; tenants.len()],
    };
    let deadline = tenants
        .iter()
        .map(|t| t.start_s + t.runtime_s)
        .fold(0.0, f64::max)
        + 60.0;
    let interval = Duration::from_secs_f64(interval_s);
    let mut next = l.t0;
    let mut last_snap;
    loop {
        l.start_due(ctx)?;
        next += interval;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let snap = ctx.monitor.poll()?;
        let t = l.sample(&snap, &ctx.dev);
        last_snap = snap;
        if ctx.stop.load(Ordering::Relaxed) {
            kill_all(&mut l.running);
            bail!("interrupted");
        }
        if t > deadline {
            kill_all(&mut l.running);
            bail!("{name}: fio did not finish within {deadline:.0} s");
        }
        let (all_done, exited) = l.reap()?;
        l.stop_held(t, &exited);
        if all_done {
            break;
        }
    }
    l.finish(ctx, &base_snap, &last_snap, cpu_busy_now() - cpu0)
}

impl PhaseLoop<'_> {
    /// Starts the fio of every tenant whose start time has come.
    fn start_due(&mut self, ctx: &Ctx) -> Result<()> {
        let now = self.t0.elapsed().as_secs_f64();
        for (i, t) in self.tenants.iter().enumerate() {
            let origin = match t.after {
                None => Some(0.0),
                Some(k) => self.first_io[k],
            };
            if self.running[i].is_none() && origin.is_some_and(|o| now >= o + t.start_s) {
                let out = fio::out_path(&ctx.fio_dir, self.name, &t.name);
                let err = out.with_extension("stderr");
                let env = t.job.env(&ctx.dev_path, ctx.params.size, t.runtime_s);
                let child =
                    fio::command_in_cgroup(&self.dirs[i], &t.job, &ctx.jobs_dir, &out, &env)
                        .stdout(Stdio::null())
                        .stderr(File::create(&err)?)
                        .spawn()
                        .context("running fio (apt install fio)")?;
                self.running[i] = Some(Running {
                    child,
                    out,
                    err,
                    stopped: false,
                });
            }
        }
        Ok(())
    }

    /// Records the tenants' counts since the phase began; returns the
    /// sample's time.
    fn sample(&mut self, snap: &Snapshot, dev: &DeviceRef) -> f64 {
        let t = self.t0.elapsed().as_secs_f64();
        let cur = per_tenant(snap, dev, &self.ids);
        let base = &self.base;
        self.samples.push(Sample {
            t,
            ios: cur
                .iter()
                .zip(base)
                .map(|(c, b)| c.0 - b.0.min(c.0))
                .collect(),
            bytes: cur
                .iter()
                .zip(base)
                .map(|(c, b)| c.1 - b.1.min(c.1))
                .collect(),
            latency: cur
                .iter()
                .zip(base)
                .map(|(c, b)| sub_hist(&c.2, &b.2))
                .collect(),
        });
        let last = self.samples.last().expect("just pushed");
        for (k, f) in self.first_io.iter_mut().enumerate() {
            if f.is_none() && last.ios[k] > 0 {
                *f = Some(t);
            }
        }
        t
    }

    /// Which fio have exited (a failed one fails the phase), and whether
    /// all have.
    fn reap(&mut self) -> Result<(bool, Vec<bool>)> {
        let mut all_done = true;
        let mut exited = vec![false; self.tenants.len()];
        let mut failed = None;
        for (i, r) in self.running.iter_mut().enumerate() {
            let Some(r) = r else {
                all_done = false;
                continue;
            };
            match r.child.try_wait()? {
                None => all_done = false,
                Some(_) if r.stopped => exited[i] = true,
                Some(st) if !st.success() => {
                    let msg = std::fs::read_to_string(&r.err).unwrap_or_default();
                    failed = Some((i, st, msg));
                    break;
                }
                Some(_) => exited[i] = true,
            }
        }
        if let Some((i, st, msg)) = failed {
            kill_all(&mut self.running);
            bail!(
                "{}: fio of {} failed ({st}): {}",
                self.name,
                self.tenants[i].name,
                msg.trim()
            );
        }
        Ok((all_done, exited))
    }

    /// Stops (SIGINT) the tenants held for their time after every tenant
    /// started, and those whose partner exited.
    fn stop_held(&mut self, t: f64, exited: &[bool]) {
        let all_started = self
            .first_io
            .iter()
            .try_fold(0.0, |m: f64, f| f.map(|f| m.max(f)));
        for (i, tenant) in self.tenants.iter().enumerate() {
            // An exited child is reaped: its pid may belong to another process.
            let Some(r) = self.running[i].as_mut().filter(|_| !exited[i]) else {
                continue;
            };
            let held = match (tenant.hold_s, all_started) {
                (Some(h), Some(a)) => t >= a + h,
                _ => false,
            };
            let partner_done = tenant.stop_with.is_some_and(|k| exited[k]);
            if (held || partner_done) && !r.stopped {
                signal_child(r, Signal::SIGINT);
                r.stopped = true;
            }
        }
    }

    /// The phase's result: fio's per-tenant reports beside iowarden's.
    fn finish(
        self,
        ctx: &Ctx,
        base_snap: &Snapshot,
        last_snap: &Snapshot,
        cpu_busy_s: f64,
    ) -> Result<PhaseRun> {
        let name = self.name;
        let wall_s = self.t0.elapsed().as_secs_f64();
        let iocost_vrate_pct = std::fs::read_to_string(ctx.cgroups.io_root.join("io.stat"))
            .ok()
            .and_then(|t| {
                let dev = format!("{}:{}", ctx.dev.major, ctx.dev.minor);
                crate::knobs::lines::field(
                    crate::knobs::lines::device_line(&t, &dev)?,
                    "cost.vrate",
                )?
                .parse()
                .ok()
            });
        let delta = last_snap.delta_since(base_snap);
        let lock_wait_s = delta.locks.as_ref().map(|l| {
            l.series
                .iter()
                .filter(|s| self.ids.contains(&s.cgroup.id))
                // fold, not sum: an empty f64 sum is -0.0.
                .fold(0.0, |a, s| a + s.wait_seconds)
        });
        let last = self
            .samples
            .last()
            .ok_or_else(|| anyhow!("{name}: no sample"))?;
        let mut runs = Vec::new();
        for (i, t) in self.tenants.iter().enumerate() {
            let r = self.running[i].as_ref().expect("all started");
            let text = std::fs::read_to_string(&r.out)
                .with_context(|| format!("reading fio's output {}", r.out.display()))?;
            let fio = fio::parse_fio_json(&text)
                .with_context(|| format!("{name}: fio's output for {}", t.name))?;
            runs.push(TenantRun {
                tenant: t.clone(),
                cgroup: ctx.cgroups.rel(&self.dirs[i]),
                fio,
                ios: last.ios[i],
                bytes: last.bytes[i],
                latency: last.latency[i].clone(),
            });
        }
        Ok(PhaseRun {
            name: name.into(),
            tenants: runs,
            wall_s,
            cpu_busy_s,
            lock_wait_s,
            iocost_vrate_pct,
            bounds: last_snap.hist_lower_bounds_seconds.clone(),
            samples: self.samples,
        })
    }
}
