//! Which linear cost model each traced device is charged with, and the
//! per-device report (configured model, samples per class, refit, error).
//! Pure: the block object reads what the host configures.
//!
//! A device's model is, in order: `--cost-model` (every device), its line in
//! io.cost.model (cgroup v2 with iocost initialised on the device), or the
//! parameters blk-iocost.c assumes before any is set (autop: HDD for a
//! rotational device, SSD otherwise). The BPF side counts what the model
//! charges; each poll prices it with the model of the device, resolved at
//! the poll that first sees the device, before its counts are priced.

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

    /// The model `devt` is charged with: its own once resolved, else the
    /// default.
    pub fn model_of(&self, devt: u32) -> LinearModel {
        self.per_dev
            .get(&devt)
            .map_or_else(|| self.default_model(), |m| m.0)
    }

    /// Whether `devt` has been given its model.
    pub fn known(&self, devt: u32) -> bool {
        self.per_dev.contains_key(&devt)
    }

    /// Decides (once) the model of a device and returns it: the flag's,
    /// else the one `host` says the kernel charges (and where it is from).
    pub fn resolve(
        &mut self,
        devt: u32,
        host: impl FnOnce() -> (LinearModel, &'static str),
    ) -> LinearModel {
        let flag = self.flag;
        self.per_dev
            .entry(devt)
            .or_insert_with(|| match flag {
                Some(m) => (m, "flag"),
                None => host(),
            })
            .0
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
