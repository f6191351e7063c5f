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
use crate::costmodel::online::solve::{Estimator, NAMES};
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
    /// Cost classes and time of the last window's end.
    prev: Option<(Vec<CostClass>, f64)>,
    fit: Fit,
    decisions: BTreeMap<String, u64>,
    last: Option<(ModelDecision, Option<String>, Option<String>)>,
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

    /// Feeds the poll's cumulative snapshot: closes a window when one is due.
    pub fn observe(&mut self, snap: &Snapshot) -> Result<()> {
        let classes = snap
            .cost_models
            .iter()
            .find(|m| m.device.major == self.device.major && m.device.minor == self.device.minor)
            .map(|m| m.classes.clone())
            .unwrap_or_default();
        let now = snap.taken_at_unix_seconds;
        let Some((prev, then)) = &self.prev else {
            self.prev = Some((classes, now));
            return Ok(());
        };
        let seconds = now - then;
        if seconds >= self.window.as_secs_f64() {
            let w = Window::between(prev, &classes, seconds);
            let line = window_line(&w, self.estimator.push(w.clone()));
            let mut out = std::io::stdout().lock();
            writeln!(out, "{line}")?;
            out.flush()?;
            self.prev = Some((classes, now));
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

/// Saturated windows the start's fit needs: those of the period or two
/// observed with iocost off (1 s windows, 3 s periods), fewer than the
/// running fit's six. The start scales the terms the fit leaves
/// undetermined.
const START_WINDOWS: usize = 4;

/// The relative standard error a term of the start's fit may have: the
/// uniform scale it replaces keeps the model's shape, whose error nothing
/// bounds (26 % between 4 KiB and 128 KiB reads at m-47's 500/s point,
/// where six windows with iocost off put rbps at 8 %); the running fit
/// corrects the terms within `--model-max-error` once it has its windows.
const START_MAX_RSE: f64 = 0.15;

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
mod tests {
    use super::*;
    use crate::costmodel::online::solve::Estimator;

    /// A saturated window of 2 s on a device capped at 500 requests/s and
    /// 16 MiB/s (m-47's 500/s point): `small` 4 KiB and `large` 128 KiB
    /// random reads, taking max(requests / 500, bytes / 16 MiB) each.
    fn capped_window(small: f64, large: f64) -> Window {
        let bytes = small * 4096.0 + large * 131072.0;
        let mut w = Window {
            seconds: 2.0,
            mean_inflight: 32.0,
            ..Default::default()
        };
        w.x[0] = bytes / 4096.0;
        w.x[2] = small + large;
        w.bytes[2] = bytes;
        w
    }

    /// The start fits the terms the windows observed with iocost off
    /// determine (a 4 KiB read 2 ms, a 128 KiB one 7.8 ms: rrandiops 500,
    /// rbps 21.8 MB/s, the line through both) and scales the rest; vrate
    /// follows so that no window's mix is admitted more than before; the
    /// few reads counted as sequential go with the random ones. Without a
    /// determined term, every rate is scaled and vrate by the inverse.
    #[test]
    fn the_start_fits_what_the_observed_windows_determine() {
        let mut est = Estimator::new(FitConfig::default());
        for (small, large) in [(1000.0, 0.0), (0.0, 256.0), (500.0, 128.0), (1000.0, 0.0)] {
            assert!(est.push(capped_window(small, large)));
        }
        // A few of the reads iocost counts as sequential, at a cost the
        // windows' noise gives them: counted as random reads.
        let mut w = capped_window(990.0, 0.0);
        w.x[1] = 10.0;
        w.bytes[1] = 40960.0;
        w.seconds += 0.05;
        assert!(est.push(w));
        let fit = est.start_fit(START_WINDOWS, START_MAX_RSE);
        let d = start_model(AUTOP_SSD_DFL, 0.05, &fit);
        assert_eq!(d.action, ModelAction::Scale);
        assert!(
            (d.to.rrandiops as f64 / 500.0 - 1.0).abs() < 0.01,
            "{:?}",
            d.to
        );
        assert!(
            (d.to.rbps as f64 / (4096.0 / 0.1875e-3) - 1.0).abs() < 0.01,
            "{:?}",
            d.to
        );
        assert_eq!(d.to.wbps, (AUTOP_SSD_DFL.wbps as f64 * 0.05).round() as u64);
        assert_eq!(d.to.wrandiops, 1097);
        let charged = cost_of(&fit.work, &d.to);
        assert!((charged - 10.0).abs() < 0.1, "{charged}");
        // No window's mix is admitted more than under the pin: at the new
        // vrate each costs at least what it did, and the dearest-before one
        // exactly that.
        let admitted: Vec<f64> = fit
            .window_work
            .iter()
            .map(|w| d.vrate_factor * cost_of(w, &AUTOP_SSD_DFL) / cost_of(w, &d.to))
            .collect();
        assert!(admitted.iter().all(|&a| a <= 1.0 + 1e-9), "{admitted:?}");
        assert!(admitted.iter().any(|&a| a > 1.0 - 1e-9), "{admitted:?}");
        assert!(d.vrate_factor * cost_of(&fit.work, &AUTOP_SSD_DFL) < 10.0);
        assert_eq!(
            fit.params[1].reason,
            "10 samples, 223 needed: counted as rrandiops"
        );
        assert_eq!(
            d.to.rseqiops,
            (AUTOP_SSD_DFL.rseqiops as f64 * 0.05).round() as u64
        );
        assert!(
            d.reason
                .contains("fitted from the 5 saturated windows observed"),
            "{}",
            d.reason
        );

        let d = start_model(AUTOP_SSD_DFL, 0.05, &est.fit());
        assert_eq!(d.to.rrandiops, 426);
        assert_eq!(d.vrate_factor, 20.0);
        assert!(
            d.reason
                .contains("none fitted from the 5 saturated windows"),
            "{}",
            d.reason
        );
    }

    #[test]
    fn a_logged_window_reads_back_as_itself() {
        let w = Window {
            seconds: 1.25,
            mean_inflight: 9.5,
            x: [256.0, 10.0, 1500.0, 0.0, 0.0, 300.0],
            bytes: [0.0, 40960.0, 6144000.0, 0.0, 0.0, 1228800.0],
        };
        let line = window_line(&w, true);
        assert_eq!(window_from_line(&line), Some((w.clone(), true)));
        let text = serde_json::from_str(&line.to_string()).unwrap();
        assert_eq!(window_from_line(&text), Some((w, true)));
        assert_eq!(window_from_line(&json!({"model_action": "hold"})), None);
    }
}
