//! Which linear cost model each traced device is charged with, and the
//! per-device report (configured model, samples per class, refit, error).
//! Pure: the block object reads what the host configures.
//!
//! A device's model is, in order: `--cost-model` (every device), its line in
//! io.cost.model (cgroup v2 with iocost initialised on the device), or the
//! parameters blk-iocost.c assumes before any is set (autop: HDD for a
//! rotational device, SSD otherwise). The BPF side counts what the model
//! charges; each poll prices it with the model of the device as the host
//! configures it at that poll, before its counts are priced.

use std::collections::HashMap;

use iowarden_exporters::{CostClass, DeviceCostModel, DeviceRef, Op};

use super::charge::size_class_bytes;
use super::fit::{ClassSample, DeviceFit};
use super::model::{default_model, LinearModel};
use super::units::VTIME_PER_SEC;

pub struct CostModels {
    flag: Option<LinearModel>,
    /// devt -> (model, source)
    per_dev: HashMap<u32, (LinearModel, &'static str)>,
}

impl CostModels {
    pub fn new(flag: Option<LinearModel>) -> CostModels {
        CostModels {
            flag,
            per_dev: HashMap::new(),
        }
    }

    /// The model of devices without their own yet.
    pub fn default_model(&self) -> LinearModel {
        default_model(self.flag)
    }

    /// The model `devt` is charged with: its own once followed, else the
    /// default.
    pub fn model_of(&self, devt: u32) -> LinearModel {
        self.per_dev
            .get(&devt)
            .map_or_else(|| self.default_model(), |m| m.0)
    }

    /// Whether --cost-model charges every device.
    pub fn flagged(&self) -> bool {
        self.flag.is_some()
    }

    /// Whether `devt` has its model.
    pub fn known(&self, devt: u32) -> bool {
        self.per_dev.contains_key(&devt)
    }

    /// Follows the model the host charges `devt` with now: iocost charges
    /// each request with the io.cost.model in force, which `tune --model`
    /// or an operator may rewrite while iowarden runs. The flag's model
    /// stays. True when the device's model is new or changed.
    pub fn follow(
        &mut self,
        devt: u32,
        host: impl FnOnce() -> (LinearModel, &'static str),
    ) -> bool {
        let now = match self.flag {
            Some(m) => (m, "flag"),
            None => host(),
        };
        self.per_dev.insert(devt, now) != Some(now)
    }

    /// The report of every device with a model or samples.
    pub fn report(
        &self,
        classes: &[(u32, ClassSample)],
        name: &mut dyn FnMut(u32) -> DeviceRef,
    ) -> Vec<DeviceCostModel> {
        let mut devts: Vec<u32> = self.per_dev.keys().copied().collect();
        devts.extend(classes.iter().map(|c| c.0));
        devts.sort_unstable();
        devts.dedup();
        devts
            .into_iter()
            .map(|devt| {
                let (model, source) = self
                    .per_dev
                    .get(&devt)
                    .copied()
                    .unwrap_or((self.default_model(), "default"));
                let mine: Vec<ClassSample> = classes
                    .iter()
                    .filter(|c| c.0 == devt)
                    .map(|c| c.1)
                    .collect();
                device_report(name(devt), model, source, &mine)
            })
            .collect()
    }
}

/// The configured and fitted model of one device over its class samples.
pub fn device_report(
    device: DeviceRef,
    model: LinearModel,
    source: &str,
    classes: &[ClassSample],
) -> DeviceCostModel {
    let fit = DeviceFit::from_classes(classes);
    let fitted = fit.model();
    let any_fit = fit.read.is_some() || fit.write.is_some();
    DeviceCostModel {
        fitted_line: if any_fit {
            fitted.line(&device.devt())
        } else {
            String::new()
        },
        device,
        configured: model,
        source: source.to_string(),
        fitted,
        classes: classes
            .iter()
            .map(|c| CostClass {
                op: if c.write { Op::Write } else { Op::Read },
                random: c.random,
                size_bytes: size_class_bytes(c.size),
                ios: c.ios,
                bytes: c.bytes,
                device_seconds: c.device_ns as f64 / 1e9,
                model_seconds: c.cost as f64 / VTIME_PER_SEC as f64,
                error: c.error(),
                fitted_error: fit.error(c),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::costmodel::model::AUTOP_SSD_DFL;

    const FIT: LinearModel = LinearModel {
        rbps: 21_946_646,
        rseqiops: 504,
        rrandiops: 504,
        wbps: 21_946_646,
        wseqiops: 504,
        wrandiops: 504,
    };

    /// `tune --model` rewrites io.cost.model while iowarden runs: the next
    /// poll prices with the new model, as iocost charges it (issue 56: a
    /// 4 KiB read stayed priced at the default's 0.12 ms, not the fit's 2 ms).
    #[test]
    fn a_rewritten_model_is_followed_and_the_flags_is_kept() {
        let mut m = CostModels::new(None);
        assert!(m.follow(7, || (AUTOP_SSD_DFL, "default-ssd")));
        assert!(!m.follow(7, || (AUTOP_SSD_DFL, "default-ssd")), "unchanged");
        assert!(m.follow(7, || (FIT, "io.cost.model")));
        assert_eq!(m.model_of(7), FIT);
        let mut flagged = CostModels::new(Some(FIT));
        assert!(flagged.follow(7, || (AUTOP_SSD_DFL, "io.cost.model")));
        assert!(!flagged.follow(7, || (AUTOP_SSD_DFL, "io.cost.model")));
        assert_eq!(flagged.model_of(7), FIT);
    }
}
