//! `iowarden tune`: the kernel-touching half of the tuner. Validates
//! everything before changing anything, writes io.cost.qos (and optionally
//! io.weight) through the journaling writer, measures each decision period
//! from the monitor's snapshots, logs every decision (JSON lines on stdout,
//! a readable line on stderr, `iowarden_tune_*` metrics), and restores what
//! it changed when it stops.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use iowarden_exporters::{Snapshot, TunerDecision, TunerSlo, TunerStatus};
use serde_json::json;

use super::controller::{Action, Controller, Decision, Measurement, SloSample, LATE_AFTER_SECONDS};
use super::decision_log::{put_write_outcome, written_or_would};
use super::measure::{device_saturated, measure, Protected};
use super::model_run::{self, ModelLoop};
pub use super::setup::TuneOptions;
use super::setup::{check_options, initial_status, iocost_qos_path, resolve_protected};
use crate::costmodel::online::guard::QosPeriod;
use crate::costmodel::online::windows::FitConfig;
use crate::host::cgroups::CgroupResolver;
use crate::knobs::cost_model;
use crate::knobs::vrate_pin::{PinOutcome, VratePin};
use crate::knobs::writer::Writer;
use crate::knobs::DevNum;

pub struct Tuner {
    opts: TuneOptions,
    controller: Controller,
    writer: Writer,
    root: PathBuf,
    pin: VratePin,
    protected: Vec<Protected>,
    base: Option<Snapshot>,
    period_started: Instant,
    started: Instant,
    status: TunerStatus,
    decisions: BTreeMap<String, u64>,
    /// io.stat cost.wait (µs) of each protected cgroup at the period start.
    wait_base: Vec<Option<u64>>,
    model: Option<ModelLoop>,
    /// The period just decided on ran under an io.cost.model change being
    /// judged: its misses are the model's doing.
    under_model_change: bool,
    /// The QoS search raised vrate at the last decision (a model step
    /// waits for its climb).
    qos_raised: bool,
    /// The period after the first pin, or after a pin written with the
    /// settling step: the snapshot `LATE_AFTER_SECONDS` into it.
    late_base: Option<Snapshot>,
    /// The last pin was written with the settling step, which holds every
    /// cgroup while it lasts: the period after it is judged on its later
    /// part too.
    settling: bool,
}

/// A pin that did not take hold (no I/O completed while it settled, or the
/// kernel took vrate elsewhere) is pinned again next period. Returns the
/// line it left.
fn say_not_held(p: PinOutcome) -> Option<String> {
    if !p.held {
        crate::say!(
            "iowarden tune: {}; pinning again next period",
            p.shortfall()
        );
    }
    Some(p.line)
}

impl Tuner {
    /// Checks the device, the cgroups and the bounds. Changes nothing.
    pub fn prepare(opts: TuneOptions, resolver: &CgroupResolver) -> Result<Tuner> {
        check_options(&opts)?;
        let root = resolver.root().to_path_buf();
        iocost_qos_path(&root)?;
        let pin = VratePin::new(&root, DevNum::new(opts.device.major, opts.device.minor));
        let protected = resolve_protected(&opts, resolver, &root)?;
        let model = opts
            .model
            .as_ref()
            .map(|mo| ModelLoop::prepare(&opts.device, &root, mo))
            .transpose()?;
        let controller = Controller::new(opts.controller.clone());
        let status = initial_status(&opts, &protected);
        let writer = Writer::new(opts.writer.clone());
        Ok(Tuner {
            opts,
            controller,
            writer,
            root,
            pin,
            protected,
            base: None,
            period_started: Instant::now(),
            started: Instant::now(),
            status,
            decisions: BTreeMap::new(),
            wait_base: Vec::new(),
            model,
            under_model_change: false,
            qos_raised: false,
            late_base: None,
            settling: false,
        })
    }

    fn devnum(&self) -> String {
        format!("{}:{}", self.opts.device.major, self.opts.device.minor)
    }

    fn set_qos_status(&mut self, v: f64) {
        self.status.qos = vec![
            ("enable".into(), 1.0),
            ("rpct".into(), 100.0),
            ("wpct".into(), 100.0),
            ("min".into(), v),
            ("max".into(), v),
        ];
    }

    /// Restores what a killed run left changed, then applies the first setting.
    pub fn start(&mut self) -> Result<()> {
        for m in self.writer.recover()? {
            crate::say!("iowarden: {m}");
        }
        if let Some(w) = self.opts.protect_weight {
            for p in self.protected.clone() {
                let path = self.root.join(&p.path[1..]).join("io.weight");
                crate::say!(
                    "iowarden: {}",
                    self.writer.set(&path, &format!("default {w}"))?
                );
            }
        }
        // Without --start the first period measures iocost as found and
        // the first pin follows it (Action::Start).
        if !self.controller.observing() {
            let v = self.controller.vrate();
            say_not_held(self.pin(v)?);
            // iowarden_tune_qos_value exists only while the tuner holds the
            // qos (the pinned-vrate alert is inhibited by it): not in a dry run.
            if !self.writer.config().dry_run {
                self.set_qos_status(v);
            }
        }
        self.started = Instant::now();
        self.period_started = Instant::now();
        Ok(())
    }

    /// Each protected cgroup's cumulative iocost wait on the device, µs.
    fn iocost_waits(&self) -> Vec<Option<u64>> {
        let majmin = self.devnum();
        self.protected
            .iter()
            .map(|p| {
                let text =
                    std::fs::read_to_string(self.root.join(&p.path[1..]).join("io.stat")).ok()?;
                let line = crate::knobs::lines::device_line(&text, &majmin)?;
                crate::knobs::lines::field(line, "cost.wait")?.parse().ok()
            })
            .collect()
    }

    fn check_device(&self) -> Result<()> {
        let d = &self.opts.device;
        if !Path::new(&format!("/sys/dev/block/{}", d.devt())).exists() {
            bail!("device {} ({}) vanished", d.name, d.devt());
        }
        Ok(())
    }

    /// Pins vrate at `v`; a write that fails because the device went away
    /// says so.
    fn pin(&mut self, v: f64) -> Result<PinOutcome> {
        let pinned = self
            .pin
            .set(&mut self.writer, v)
            .or_else(|e| self.check_device().and(Err(e)))?;
        self.settling |= pinned.settled;
        Ok(pinned)
    }

    fn check_cgroups(&self) -> Result<()> {
        for p in &self.protected {
            if !self.root.join(&p.path[1..]).is_dir() {
                bail!("protected cgroup {} vanished", p.path);
            }
        }
        Ok(())
    }

    /// Called after every poll with the cumulative snapshot: decides once
    /// per period and attaches the tuner's status to the snapshot.
    pub fn on_poll(&mut self, snap: &mut Snapshot) -> Result<()> {
        self.check_device()?;
        self.check_cgroups()?;
        if let Some(ml) = self.model.as_mut() {
            ml.observe(snap, self.controller.observing())?;
        }
        let Some(base) = &self.base else {
            self.base = Some(snap.clone());
            self.wait_base = self.iocost_waits();
            self.period_started = Instant::now();
            snap.tuner = Some(self.status.clone());
            return Ok(());
        };
        let elapsed = self.period_started.elapsed();
        let late = Duration::from_secs_f64(LATE_AFTER_SECONDS);
        let later_part = self.controller.draining() || self.settling;
        if later_part && self.late_base.is_none() && elapsed >= late {
            self.late_base = Some(snap.clone());
        }
        if elapsed >= self.opts.period {
            let waits = self.iocost_waits();
            let mut m = self.measure_period(&snap.delta_since(base), &waits);
            self.settling = false;
            if let Some(late) = self.late_base.take() {
                let dev = (self.opts.device.major, self.opts.device.minor);
                let delta = snap.delta_since(&late);
                m.late_slos = measure(&delta, dev, &self.protected, &self.opts.slos).slos;
                // iocost's count is the period's: its mean hold stands for
                // the later part's.
                for (l, s) in m.late_slos.iter_mut().zip(&m.slos) {
                    if !l.held_in_observed {
                        l.throttle_seconds = s.throttle_seconds;
                    }
                }
            }
            self.decide(&m)?;
            self.wait_base = waits;
            self.base = Some(snap.clone());
            self.period_started = Instant::now();
        }
        snap.tuner = Some(self.status.clone());
        Ok(())
    }

    /// The protected cgroups' SLOs and the device over `delta`, each
    /// cgroup's mean hold from iocost's count (`waits` against the period
    /// start's) where iowarden's is not measured.
    fn measure_period(&self, delta: &Snapshot, waits: &[Option<u64>]) -> Measurement {
        let dev = (self.opts.device.major, self.opts.device.minor);
        let mut m = measure(delta, dev, &self.protected, &self.opts.slos);
        if self.controller.observing() {
            m.admitted = self.pin.admitted();
            let model = self.root.join("io.cost.model");
            m.model_declared = cost_model::user_set(&model, DevNum::new(dev.0, dev.1));
        }
        let fit = self.opts.model.as_ref().map(|mo| &mo.fit);
        let depth = fit.map_or(FitConfig::default().saturation_depth, |f| {
            f.saturation_depth
        });
        m.device_saturated = device_saturated(delta, dev, depth);
        let per_cgroup = self.opts.slos.len();
        for (i, ((p, now), then)) in self
            .protected
            .iter()
            .zip(waits)
            .zip(&self.wait_base)
            .enumerate()
        {
            let ios: u64 = delta
                .io
                .iter()
                .filter(|s| s.cgroup.id == p.id && (s.device.major, s.device.minor) == dev)
                .map(|s| s.ios)
                .sum();
            if let (Some(now), Some(then), true) = (now, then, ios > 0) {
                let w = now.saturating_sub(*then) as f64 / 1e6 / ios as f64;
                // iocost's own count, where iowarden's hold is not measured.
                for s in &mut m.slos[i * per_cgroup..(i + 1) * per_cgroup] {
                    if !s.held_in_observed {
                        s.throttle_seconds = w;
                    }
                }
            }
        }
        m
    }

    fn decide(&mut self, m: &Measurement) -> Result<()> {
        let at = self.started.elapsed().as_secs_f64();
        let d = self.model_then_qos(m, at)?;
        self.qos_raised = d.action == Action::Increase;
        let (written, would_write) = self.write_qos(&d)?;
        self.update_status(m, &d, at, &written, &would_write);
        self.log_decision(m, &d, at, written, would_write)
    }

    /// Writes the decision's io.cost.qos line when vrate moves. Returns it
    /// as (written, would_write).
    fn write_qos(&mut self, d: &Decision) -> Result<(Option<String>, Option<String>)> {
        // In a dry run the writer writes nothing: the line is what it would write.
        let dry_run = self.writer.config().dry_run;
        let mut line = None;
        if d.to != d.from || d.action == Action::Start {
            line = say_not_held(self.pin(d.to)?);
            if !dry_run {
                self.set_qos_status(d.to);
            }
        } else if d.action != Action::Insufficient {
            // A period with I/O enough to judge has I/O for the pin to settle on.
            let retried = self.pin.retry(&mut self.writer);
            if let Some(pinned) = retried.or_else(|e| self.check_device().and(Err(e)))? {
                self.settling |= pinned.settled;
                say_not_held(pinned);
            }
        }
        Ok(written_or_would(dry_run, line))
    }

    /// Counts the decision and brings the status (SLOs, convergence, the
    /// last decision) up to date.
    fn update_status(
        &mut self,
        m: &Measurement,
        d: &Decision,
        at: f64,
        written: &Option<String>,
        would_write: &Option<String>,
    ) {
        // This period ran after the first convergence (the decision that
        // converged judged the period before it).
        let settled = self.decisions.contains_key(Action::Converged.as_str());
        *self
            .decisions
            .entry(d.action.as_str().to_string())
            .or_default() += 1;
        if d.action != Action::Insufficient {
            for (st, s) in self.status.slos.iter_mut().zip(&m.slos) {
                record_period(st, s, settled, self.under_model_change);
            }
        }
        // The latest convergence: a miss reopens the search, and the time
        // that matters is when it last settled.
        if d.action == Action::Converged {
            self.status.converged_after_seconds = Some(at);
        }
        self.status.converged = self.controller.converged();
        (self.status.vrate_good, self.status.vrate_bad) = self.controller.bracket();
        self.status.throughput_bytes_per_second = m.throughput_bytes_per_second;
        self.status.iops = m.iops;
        self.status.decisions = self
            .decisions
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        self.status.last = Some(TunerDecision {
            at_seconds: at,
            action: d.action.as_str().into(),
            reason: d.reason.clone(),
            vrate_from: d.from,
            vrate_to: d.to,
            written: written.clone(),
            would_write: would_write.clone(),
        });
    }

    /// The decision as a JSON line on stdout and a readable line on stderr.
    fn log_decision(
        &self,
        m: &Measurement,
        d: &Decision,
        at: f64,
        written: Option<String>,
        would_write: Option<String>,
    ) -> Result<()> {
        let dry_run = self.writer.config().dry_run;
        let mut line = json!({
            "at_seconds": (at * 1000.0).round() / 1000.0,
            "action": d.action.as_str(),
            "vrate_from": d.from,
            "vrate_to": d.to,
            "reason": d.reason,
            "converged": self.status.converged,
            "slos": m.slos.iter().map(|s| json!({
                "name": s.name,
                "target_seconds": s.target_seconds,
                "observed_seconds": s.observed_seconds,
                "samples": s.samples,
                "throttle_seconds": s.throttle_seconds,
                "throttle_tail_seconds": s.throttle_tail_seconds,
                "own_need": s.own_need,
            })).collect::<Vec<_>>(),
            "throughput_bytes_per_second": m.throughput_bytes_per_second.round(),
            "iops": m.iops.round(),
            "cost_rate": (m.cost_rate * 1e4).round() / 1e4,
            "device_saturated": m.device_saturated,
        });
        put_write_outcome(&mut line, dry_run, written, would_write.clone());
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}")?;
        out.flush()?;
        crate::say!(
            "iowarden tune: {:>7.1}s {:<12} vrate {:>7.2}% -> {:>7.2}%  {}{}",
            at,
            d.action.as_str(),
            d.from,
            d.to,
            d.reason,
            if would_write.is_some() {
                " (dry run: would write, not written)"
            } else {
                ""
            }
        );
        Ok(())
    }

    /// With `--model`, the model decides first; while it steps, watches or
    /// rolls back a change, the QoS controller holds (vrate only rescaled
    /// with the model), so an SLO change is the model's doing.
    fn model_then_qos(&mut self, m: &Measurement, at: f64) -> Result<Decision> {
        let Some(ml) = self.model.as_mut() else {
            return Ok(self.controller.decide(m));
        };
        // The model's loop judges vrates the tuner set; none yet. Where the
        // model is so optimistic that the first pin falls below
        // --vrate-min, its rates are scaled to what the device did first.
        if self.controller.observing() {
            let mut d = self.controller.decide(m);
            if let Some(factor) = self.controller.start_below_floor() {
                let md = ml.scale(factor, &mut self.writer, at)?;
                self.status.model = Some(ml.status());
                d.to = self.controller.rescale(md.vrate_factor);
                d.from = d.to;
                d.reason = format!("{}; io.cost.model scaled to it", d.reason);
            }
            return Ok(d);
        }
        let period = QosPeriod {
            slo_ratio: worst_slo_ratio(m, self.opts.controller.min_samples),
            vrate: self.controller.vrate(),
            raising: self.qos_raised,
            at_floor: self.controller.at_floor(),
        };
        let md = ml.decide(period, &mut self.writer, at)?;
        self.status.model = Some(ml.status());
        self.under_model_change = md.action.measured_a_change();
        if !md.action.holds_qos() {
            return Ok(self.controller.decide(m));
        }
        let from = self.controller.vrate();
        let to = if model_run::changed(&md) {
            self.controller.rescale(md.vrate_factor)
        } else {
            from
        };
        Ok(Decision {
            action: Action::Hold,
            from,
            to,
            reason: format!(
                "held while io.cost.model {} (vrate x{:.3}): {}",
                md.action.as_str(),
                md.vrate_factor,
                md.reason
            ),
        })
    }

    /// A summary for the end of the run.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "vrate {:.2}%, {}",
            self.controller.vrate(),
            match self.status.converged_after_seconds {
                Some(t) => format!("converged after {t:.1} s"),
                None => "not converged".into(),
            }
        );
        for t in &self.status.slos {
            s.push_str(&format!(
                "; {} {}: met in {} of {} periods",
                t.cgroup, t.slo, t.periods_met, t.periods
            ));
            if self.model.is_some() {
                s.push_str(&format!(
                    " ({} of the misses under an io.cost.model change being judged)",
                    t.periods_missed_under_model_change
                ));
            }
            if let Some(worst) = t.worst_after_convergence_seconds {
                s.push_str(&format!(
                    ", missed in {} of {} after first converging (worst {:.3}ms)",
                    t.periods_missed_after_convergence,
                    t.periods_after_convergence,
                    worst * 1e3
                ));
            }
        }
        if let Some(ml) = &self.model {
            s.push_str(&format!("; {}", ml.summary()));
        }
        s
    }

    /// Puts back every knob this run changed.
    pub fn finish(&mut self) -> Result<Vec<String>> {
        self.writer.restore_all()
    }
}

/// The worst observed (with iocost throttling) / target of the SLOs; None
/// when one of them has too few samples to judge.
fn worst_slo_ratio(m: &Measurement, min_samples: u64) -> Option<f64> {
    m.slos.iter().try_fold(0.0f64, |w, s| {
        (s.samples >= min_samples).then(|| w.max(s.effective() / s.target_seconds))
    })
}

/// One judged period of an SLO into its status; `settled`: the search had
/// converged before the period; `under_model_change`: the period ran under
/// an io.cost.model change being judged.
fn record_period(st: &mut TunerSlo, s: &SloSample, settled: bool, under_model_change: bool) {
    st.observed_seconds = s.observed_seconds;
    st.samples = s.samples;
    st.met = s.observed_seconds.is_some_and(|o| o <= s.target_seconds);
    st.periods += 1;
    st.periods_met += st.met as u64;
    st.periods_missed_under_model_change += (!st.met && under_model_change) as u64;
    if settled {
        st.periods_after_convergence += 1;
        st.periods_missed_after_convergence += !st.met as u64;
        st.worst_after_convergence_seconds = st
            .worst_after_convergence_seconds
            .into_iter()
            .chain(s.observed_seconds)
            .reduce(f64::max);
    }
}

#[cfg(test)]
#[path = "runner_tests.rs"]
mod tests;
