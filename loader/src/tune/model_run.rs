//! `tune --model`: the kernel-touching half of the io.cost.model
//! write-back. Cuts the monitor's cumulative cost classes into windows for
//! the estimator (costmodel/online), asks its guard once per
//! decision period, writes io.cost.model through the journaling writer
//! (which validates the line with the typed knob parser first), and logs
//! every decision as a JSON line and in the status behind the metrics.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};
use iowarden_exporters::{CostClass, DeviceRef, ModelParam, ModelTunerStatus, Snapshot};
use serde_json::json;

use super::decision_log::put_write_outcome;
use crate::costmodel::online::guard::{Guard, GuardConfig, ModelAction, ModelDecision, QosPeriod};
use crate::costmodel::online::solve::{Estimator, NAMES, START_MAX_RSE, START_WINDOWS};
use crate::costmodel::online::windows::{cost_of, Fit, FitConfig, Window, PARAMS};
use crate::costmodel::{LinearModel, AUTOP_HDD, AUTOP_SSD_DFL};
use crate::knobs::writer::Writer;

#[derive(Clone, Debug)]
pub struct ModelOptions {
    pub fit: FitConfig,
    pub guard: GuardConfig,
    /// Length of one measurement window.
    pub window: Duration,
}

pub struct ModelLoop {
    device: DeviceRef,
    model_path: PathBuf,
    window: Duration,
    estimator: Estimator,
    guard: Guard,
    current: LinearModel,
    /// The device's reading at the last window's end.
    prev: Option<Reading>,
    fit: Fit,
    decisions: BTreeMap<String, u64>,
    last: Option<(ModelDecision, Option<String>, Option<String>)>,
}

/// One device's cumulative counts at a poll: what a window is the
/// difference of.
struct Reading {
    classes: Vec<CostClass>,
    /// Milliseconds busy since boot (/proc/diskstats io_ticks).
    busy_ms: Option<u64>,
    at: f64,
}

impl Reading {
    fn of(dev: &DeviceRef, snap: &Snapshot) -> Reading {
        let is_dev = |d: &DeviceRef| d.major == dev.major && d.minor == dev.minor;
        Reading {
            classes: snap
                .cost_models
                .iter()
                .find(|m| is_dev(&m.device))
                .map(|m| m.classes.clone())
                .unwrap_or_default(),
            busy_ms: snap
                .kernel_diskstats
                .iter()
                .find(|k| is_dev(&k.device))
                .map(|k| k.busy_ms),
            at: snap.taken_at_unix_seconds,
        }
    }

    fn window_to(&self, later: &Reading) -> Window {
        let busy = match (self.busy_ms, later.busy_ms) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1e3),
            _ => None,
        };
        Window::between(&self.classes, &later.classes, later.at - self.at, busy)
    }
}

/// The model iocost charges the device with now: its io.cost.model line,
/// else the parameters the kernel sets up when iocost starts on it.
fn model_in_force(model_path: &Path, dev: &DeviceRef) -> Result<LinearModel> {
    let text = std::fs::read_to_string(model_path)?;
    if let Some(rest) = crate::knobs::lines::device_line(&text, &dev.devt()) {
        return crate::costmodel::parse_kernel_line(rest).map_err(|e| {
            anyhow::anyhow!(
                "io.cost.model of {} does not parse ({e}); nothing changed",
                dev.name
            )
        });
    }
    let rotational = std::fs::read_to_string(format!("/sys/block/{}/queue/rotational", dev.name))
        .is_ok_and(|s| s.trim() == "1");
    Ok(if rotational { AUTOP_HDD } else { AUTOP_SSD_DFL })
}

impl ModelLoop {
    /// Checks that iocost can model the device. Changes nothing.
    pub fn prepare(device: &DeviceRef, root: &Path, opts: &ModelOptions) -> Result<ModelLoop> {
        opts.fit.validate().map_err(anyhow::Error::msg)?;
        opts.guard.validate().map_err(anyhow::Error::msg)?;
        let model_path = root.join("io.cost.model");
        if !model_path.exists() {
            bail!(
                "--model: {} does not exist: iocost needs the io controller on cgroup v2 and a kernel built with CONFIG_BLK_CGROUP_IOCOST; nothing changed",
                model_path.display()
            );
        }
        let sys = PathBuf::from("/sys/block").join(&device.name);
        if !sys.exists() {
            bail!(
                "--model: {} is not a whole disk (no {}): iocost models whole disks; nothing changed",
                device.name,
                sys.display()
            );
        }
        if !sys.join("mq").exists() {
            bail!(
                "--model: {} has no blk-mq queue ({}/mq missing): iocost only runs on request-based (blk-mq) devices; nothing changed",
                device.name,
                sys.display()
            );
        }
        let current = model_in_force(&model_path, device)?;
        Ok(ModelLoop {
            device: device.clone(),
            model_path,
            window: opts.window,
            estimator: Estimator::new(opts.fit.clone()),
            guard: Guard::new(opts.guard.clone()),
            current,
            prev: None,
            fit: Fit::default(),
            decisions: BTreeMap::new(),
            last: None,
        })
    }

    pub fn current(&self) -> LinearModel {
        self.current
    }

    /// Feeds the poll's cumulative snapshot: closes a window when one is
    /// due, half as long while the tuner observes the device with iocost
    /// off (`found`): the one time the workload saturates it unthrottled,
    /// and the start's fit has only those windows (at m-47's 500/s point
    /// 6.6 s made four windows of 1-1.5 s, one of them the hog's switch
    /// between phases, idle: three left, one of the 128 KiB phase).
    pub fn observe(&mut self, snap: &Snapshot, found: bool) -> Result<()> {
        let now = Reading::of(&self.device, snap);
        let Some(prev) = &self.prev else {
            self.prev = Some(now);
            return Ok(());
        };
        let due = self.window.as_secs_f64() / if found { 2.0 } else { 1.0 };
        if now.at - prev.at >= due {
            let w = prev.window_to(&now);
            let line = window_line(&w, self.estimator.push(w.clone()));
            let mut out = std::io::stdout().lock();
            writeln!(out, "{line}")?;
            out.flush()?;
            self.prev = Some(now);
        }
        Ok(())
    }

    /// One decision period, measured as `period` says: fit, guard, and the
    /// write.
    pub fn decide(
        &mut self,
        period: QosPeriod,
        writer: &mut Writer,
        at: f64,
    ) -> Result<ModelDecision> {
        self.fit = self.estimator.fit();
        let d = self.guard.decide(self.current, &self.fit, period);
        self.apply(d, writer, at)
    }

    /// Writes a decision's model when it moves, then counts and logs it.
    fn apply(&mut self, d: ModelDecision, writer: &mut Writer, at: f64) -> Result<ModelDecision> {
        let line = (d.to != d.from).then(|| d.to.line(&self.device.devt()));
        if let Some(line) = &line {
            writer.set(&self.model_path, line)?;
            self.current = d.to;
        }
        let (written, would) = if writer.config().dry_run {
            (None, line)
        } else {
            (line, None)
        };
        *self.decisions.entry(d.action.as_str().into()).or_default() += 1;
        self.log(&d, at, writer.config().dry_run, &written, &would)?;
        self.last = Some((d.clone(), written, would));
        Ok(d)
    }

    /// The start's model, before the first pin: every rate of the model in
    /// force scaled by `factor` (the cost rate the device completed with
    /// iocost as found, in seconds of the model's device time per second:
    /// the model's capacity becomes what the device did), and the terms
    /// the saturated windows observed with iocost off determine fitted
    /// (the scale alone keeps the model's shape: at 500 requests/s and
    /// 16 MiB/s the kernel's default prices a 128 KiB read 3.1x a 4 KiB
    /// one where the device takes 4x, and m-47's 128 KiB phases missed by
    /// 4-5x at every vrate that let the reader through iocost's throttle).
    pub fn scale(&mut self, factor: f64, writer: &mut Writer, at: f64) -> Result<ModelDecision> {
        self.fit = self.estimator.start_fit(START_WINDOWS, START_MAX_RSE);
        let d = start_model(self.current, factor, &self.fit);
        self.apply(d, writer, at)
    }

    fn log(
        &self,
        d: &ModelDecision,
        at: f64,
        dry_run: bool,
        written: &Option<String>,
        would: &Option<String>,
    ) -> Result<()> {
        let mut line = json!({
            "at_seconds": (at * 1000.0).round() / 1000.0,
            "model_action": d.action.as_str(),
            "reason": d.reason,
            "from": d.from,
            "to": d.to,
            "vrate_factor": (d.vrate_factor * 1e4).round() / 1e4,
            "fit": {
                "saturated_windows": self.fit.windows,
                "unsaturated_windows": self.fit.unsaturated,
                "stalled_windows": self.fit.stalled,
                "error": self.fit.error,
                "params": self.param_status(),
            },
        });
        put_write_outcome(&mut line, dry_run, written.clone(), would.clone());
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}")?;
        out.flush()?;
        crate::say!(
            "iowarden tune: {:>7.1}s model {:<12} {}{}",
            at,
            d.action.as_str(),
            d.reason,
            if would.is_some() {
                " (dry run: would write, not written)"
            } else {
                ""
            }
        );
        Ok(())
    }

    fn param_status(&self) -> Vec<ModelParam> {
        self.fit
            .params
            .iter()
            .zip(NAMES)
            .map(|(p, n)| ModelParam {
                name: n.into(),
                fitted: p.value,
                estimate: p.estimate,
                relative_error: p.rse,
                samples: p.samples,
                reason: p.reason.clone(),
            })
            .collect()
    }

    pub fn status(&self) -> ModelTunerStatus {
        let (action, reason, written, would) = match &self.last {
            Some((d, w, ww)) => (
                d.action.as_str().to_string(),
                d.reason.clone(),
                w.clone(),
                ww.clone(),
            ),
            None => (String::new(), String::new(), None, None),
        };
        ModelTunerStatus {
            current: self.current,
            params: self.param_status(),
            saturated_windows: self.fit.windows as u64,
            unsaturated_windows: self.fit.unsaturated,
            fit_error: self.fit.error,
            decisions: self
                .decisions
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            last_action: action,
            last_reason: reason,
            written,
            would_write: would,
        }
    }

    /// A summary for the end of the run.
    pub fn summary(&self) -> String {
        let det: Vec<String> = self
            .fit
            .params
            .iter()
            .zip(NAMES)
            .filter_map(|(p, n)| p.value.map(|v| format!("{n}={v}")))
            .collect();
        format!(
            "model {} in force; fit over {} saturated windows ({} not): {}",
            self.current,
            self.fit.windows,
            self.fit.unsaturated,
            if det.is_empty() {
                "nothing determined".to_string()
            } else {
                det.join(" ")
            }
        )
    }
}

/// The start's decision (see `ModelLoop::scale`): `from` scaled by
/// `factor`, the terms `fit` determined replacing the scaled ones; vrate
/// follows as the guard's steps have it (`Fit::vrate_factor`): no mix the
/// windows observed is admitted more than under the pin the scale
/// replaces (by the ratio of the windows' total work, a mix whose cost
/// fell less than the total's was).
fn start_model(from: LinearModel, factor: f64, fit: &Fit) -> ModelDecision {
    let scaled = LinearModel::from_values(
        from.values()
            .map(|rate| ((rate as f64 * factor).round() as u64).max(1)),
    );
    let to = fit.model_over(scaled);
    let fitted: Vec<String> = fit
        .params
        .iter()
        .zip(NAMES)
        .filter_map(|(p, n)| p.value.map(|v| format!("{n}={v}")))
        .collect();
    let (vrate_factor, how) = match (fitted.is_empty(), cost_of(&fit.work, &from)) {
        (false, old) if old > 0.0 => (
            fit.vrate_factor(&from, &to),
            format!(
                "{} fitted from the {} saturated windows observed",
                fitted.join(" "),
                fit.windows
            ),
        ),
        _ => (
            1.0 / factor,
            format!(
                "none fitted from the {} saturated windows observed",
                fit.windows
            ),
        ),
    };
    ModelDecision {
        action: ModelAction::Scale,
        reason: format!(
            "the device completed {:.1}% of the model's capacity with iocost as found: every rate x{factor:.4}, {how}",
            factor * 100.0
        ),
        from,
        to,
        vrate_factor,
    }
}

/// A measurement window as a JSON line: what the fit is made of.
fn window_line(w: &Window, saturated: bool) -> serde_json::Value {
    let r = |v: f64| (v * 1000.0).round() / 1000.0;
    let named = |v: &[f64; 6], pages: bool| -> BTreeMap<&str, f64> {
        v.iter()
            .zip(NAMES)
            .filter(|(_, n)| pages || !n.ends_with("bps"))
            .map(|(v, n)| (n, *v))
            .collect()
    };
    json!({
        "model_window": {
            "seconds": r(w.seconds),
            "mean_inflight": r(w.mean_inflight),
            "busy_seconds": w.busy_seconds.map(r),
            "saturated": saturated,
            "requests_or_pages": named(&w.x, true),
            "bytes": named(&w.bytes, false),
        }
    })
}

/// A window back from its JSON line (what the guest's proofs read), with
/// whether it was saturated; None for any other line.
pub fn window_from_line(line: &serde_json::Value) -> Option<(Window, bool)> {
    let w = line.get("model_window")?;
    let named = |key: &str| -> [f64; PARAMS] {
        std::array::from_fn(|c| w[key][NAMES[c]].as_f64().unwrap_or(0.0))
    };
    Some((
        Window {
            seconds: w["seconds"].as_f64()?,
            mean_inflight: w["mean_inflight"].as_f64()?,
            busy_seconds: w["busy_seconds"].as_f64(),
            x: named("requests_or_pages"),
            bytes: named("bytes"),
        },
        w["saturated"].as_bool()?,
    ))
}

/// Whether a decision moved the model (and so vrate).
pub fn changed(d: &ModelDecision) -> bool {
    matches!(d.action, ModelAction::Step | ModelAction::Rollback) && d.to != d.from
}

/// `tune --model` flags.
#[derive(clap::Args, Clone, Debug)]
pub struct ModelArgs {
    /// Also fit io.cost.model online from device occupancy and write it back
    /// (bounded steps, hysteresis, rolled back when the SLOs get worse)
    #[arg(long)]
    pub model: bool,
    /// Measurement window of the model fit
    #[arg(long, default_value = "1s", value_parser = crate::duration::parse_duration)]
    pub model_window: Duration,
    /// Mean requests in the device from which a window counts as saturated
    /// (above the device's internal parallelism)
    #[arg(long, default_value_t = 8.0)]
    pub saturation_depth: f64,
    /// Fewest requests (pages for bps) a parameter needs in saturated windows
    #[arg(long, default_value_t = 2000)]
    pub model_min_samples: u64,
    /// Largest relative standard error of a parameter that may be written
    #[arg(long, default_value_t = 0.05)]
    pub model_max_error: f64,
    /// Largest factor one change moves a parameter by
    #[arg(long, default_value_t = 2.0)]
    pub model_max_step: f64,
    /// Relative difference from the fit below which a parameter stays
    #[arg(long, default_value_t = 0.10)]
    pub model_hysteresis: f64,
}

impl ModelArgs {
    /// The options, or None without `--model`.
    pub fn options(&self) -> Option<ModelOptions> {
        self.model.then(|| ModelOptions {
            fit: FitConfig {
                saturation_depth: self.saturation_depth,
                min_samples: self.model_min_samples,
                max_rse: self.model_max_error,
                ..FitConfig::default()
            },
            guard: GuardConfig {
                max_step: self.model_max_step,
                hysteresis: self.model_hysteresis,
                ..GuardConfig::default()
            },
            window: self.model_window,
        })
    }
}

#[cfg(test)]
#[path = "model_run_tests.rs"]
mod tests;
