//! io.cost.model (root cgroup only): iocost's linear device cost model.
//!
//! Kernel output (ioc_cost_model_prfill):
//! `MAJ:MIN ctrl=auto|user model=linear rbps=%llu rseqiops=%llu rrandiops=%llu wbps=%llu wseqiops=%llu wrandiops=%llu`.
//! Writes take any subset; `model` must be `linear`; a coefficient makes the
//! model ctrl=user. Newer kernels may add keys: kept, in order.

use std::fmt;
use std::path::Path;

use super::cost_qos::Ctrl;
use super::devnum::DevNum;
use super::fields::KnobError;
use super::fields::{self, opt, parse_u64, write_fields, Layout};

const KNOB: &str = "io.cost.model";

/// The six coefficients, in the order the kernel prints them. The knob
/// parsers stand alone (the fuzz crate compiles them by themselves), so the
/// model type's `LinearModel::KEYS` is a second list, held equal by a test.
pub const COEFS: [&str; 6] = [
    "rbps",
    "rseqiops",
    "rrandiops",
    "wbps",
    "wseqiops",
    "wrandiops",
];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostModel {
    pub dev: DevNum,
    pub ctrl: Option<Ctrl>,
    /// Always `linear` today; kept as text for Display.
    pub model: Option<String>,
    /// rbps, rseqiops, rrandiops, wbps, wseqiops, wrandiops (see COEFS).
    pub coefs: [Option<u64>; 6],
    pub extra: Vec<(String, String)>,
    layout: Layout,
}

impl CostModel {
    pub fn new(dev: DevNum) -> CostModel {
        CostModel {
            dev,
            ctrl: None,
            model: None,
            coefs: [None; 6],
            extra: Vec::new(),
            layout: Layout::default(),
        }
    }

    pub fn coef(&self, name: &str) -> Option<u64> {
        COEFS
            .iter()
            .position(|c| *c == name)
            .and_then(|i| self.coefs[i])
    }

    pub fn parse(line: &str) -> Result<CostModel, KnobError> {
        let (dev, toks) = DevNum::split_line(KNOB, line)?;
        let mut m = CostModel::new(dev);
        let mut extra = Vec::new();
        m.layout = fields::parse_fields(KNOB, toks, &mut extra, |k, v| {
            Ok(Some(match k {
                "ctrl" => {
                    m.ctrl = Some(Ctrl::parse(KNOB, v)?);
                    "ctrl"
                }
                "model" => {
                    if v != "linear" {
                        return Err(KnobError::new(
                            KNOB,
                            format!("model={v} unsupported (only linear)"),
                        ));
                    }
                    m.model = Some(v.to_string());
                    "model"
                }
                _ => match COEFS.iter().position(|c| *c == k) {
                    // 0 is legal: the kernel (match_u64) takes it and then
                    // charges nothing for that term, and prints it back, so
                    // refusing it would make such a file unreadable/unrestorable.
                    Some(i) => {
                        m.coefs[i] = Some(parse_u64(KNOB, k, v)?);
                        COEFS[i]
                    }
                    None => return Ok(None),
                },
            }))
        })?;
        m.extra = extra;
        Ok(m)
    }

    /// The write that puts this state back.
    pub fn restore_line(&self) -> String {
        match self.ctrl {
            Some(Ctrl::Auto) => format!("{} ctrl=auto", self.dev),
            _ => {
                let mut m = self.clone();
                m.extra.clear();
                m.to_string()
            }
        }
    }
}

impl fmt::Display for CostModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.dev)?;
        let mut known = vec![("ctrl", opt(&self.ctrl)), ("model", self.model.clone())];
        for (i, c) in COEFS.iter().enumerate() {
            known.push((c, opt(&self.coefs[i])));
        }
        write_fields(f, &self.layout, &known, &self.extra)
    }
}

pub fn parse_all(content: &str) -> Result<Vec<CostModel>, KnobError> {
    fields::lines(content).map(CostModel::parse).collect()
}

/// The device's model in `path` (the root's io.cost.model) was set by the
/// user (ctrl=user); false where the file does not read or parse, or has
/// no line for the device.
pub fn user_set(path: &Path, dev: DevNum) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    parse_all(&text)
        .ok()
        .and_then(|v| v.into_iter().find(|m| m.dev == dev))
        .is_some_and(|m| m.ctrl == Some(Ctrl::User))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_type_names_the_coefficients_as_the_kernel_does() {
        assert_eq!(COEFS, iowarden_exporters::LinearModel::KEYS);
    }
    use crate::knobs::fields::format_lines;

    const KERNEL: &str = "259:0 ctrl=auto model=linear rbps=2706339840 rseqiops=89698 rrandiops=110036 wbps=1063126016 wseqiops=135560 wrandiops=130734\n";

    #[test]
    fn kernel_output_round_trips() {
        let v = parse_all(KERNEL).unwrap();
        assert_eq!(v[0].ctrl, Some(Ctrl::Auto));
        assert_eq!(v[0].coef("rbps"), Some(2706339840));
        assert_eq!(v[0].coef("wrandiops"), Some(130734));
        assert_eq!(format_lines(&v), KERNEL);
        assert_eq!(v[0].restore_line(), "259:0 ctrl=auto");
    }

    #[test]
    fn write_side_and_unknown() {
        let m = CostModel::parse("8:0 rbps=1000000 wrandiops=500").unwrap();
        assert_eq!(m.to_string(), "8:0 rbps=1000000 wrandiops=500");
        let s = "8:0 ctrl=user model=linear rbps=1 rseqiops=2 rrandiops=3 wbps=4 wseqiops=5 wrandiops=6 dbps=7";
        let m = CostModel::parse(s).unwrap();
        assert_eq!(m.to_string(), s);
        assert_eq!(m.restore_line(), s.strip_suffix(" dbps=7").unwrap());
    }

    #[test]
    fn rejects() {
        let e = |s: &str| CostModel::parse(s).unwrap_err().to_string();
        assert_eq!(e("8:0 rbps=x"), "io.cost.model: rbps=x is not a number");
        assert_eq!(
            e("8:0 model=quadratic"),
            "io.cost.model: model=quadratic unsupported (only linear)"
        );
        assert!(e("8:0 wbps=-1").contains("not a number"));
        assert!(e("8:0 wbps=18446744073709551616").contains("not a number"));
    }

    #[test]
    fn user_set_reads_the_devices_ctrl() {
        let dir = std::env::temp_dir().join(format!("iow-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("io.cost.model");
        let dev = DevNum::new(259, 0);
        assert!(!user_set(&p, dev), "no file");
        let user = "259:0 ctrl=user model=linear rbps=1 rseqiops=2 rrandiops=3 wbps=4 wseqiops=5 wrandiops=6\n";
        std::fs::write(&p, KERNEL.replace("259:0", "8:0") + user).unwrap();
        assert!(user_set(&p, dev));
        assert!(!user_set(&p, DevNum::new(8, 0)), "another device's line");
        std::fs::write(&p, KERNEL).unwrap();
        assert!(!user_set(&p, dev), "ctrl=auto");
        std::fs::write(&p, "259:0 model=quadratic\n").unwrap();
        assert!(!user_set(&p, dev), "does not parse");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn zero_coefficients_the_kernel_prints() {
        // 6.1 accepts `rbps=0` (match_u64) and prints it back.
        let s = "259:0 ctrl=user model=linear rbps=0 rseqiops=0 rrandiops=1 wbps=2 wseqiops=3 wrandiops=4\n";
        let v = parse_all(s).unwrap();
        assert_eq!(v[0].coef("rbps"), Some(0));
        assert_eq!(format_lines(&v), s);
        assert_eq!(v[0].restore_line(), s.trim_end());
    }
}
