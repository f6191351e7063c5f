//! io.cost.qos (root cgroup only): the iocost controller's QoS per device.
//!
//! Kernel output (ioc_qos_prfill):
//! `MAJ:MIN enable=%d ctrl=auto|user rpct=%u.%02u rlat=%u wpct=%u.%02u wlat=%u min=%u.%02u max=%u.%02u`.
//! Writes (ioc_qos_write) take any subset; percentages 0–100 with two
//! decimals, latencies in µs (u32), min/max vrate 1–10000 %, min ≤ max.
//! Writing any QoS parameter switches the device to ctrl=user.

use std::fmt;

use super::devnum::DevNum;
use super::fields::KnobError;
use super::fields::{
    self, opt, parse_fixed_in, parse_in, write_fields, Fixed2, Layout, PCT_MAX, VRATE_MAX,
    VRATE_MIN,
};

const KNOB: &str = "io.cost.qos";

/// Who sets the parameters: the kernel's per-device-class defaults, or a user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ctrl {
    Auto,
    User,
}

impl Ctrl {
    pub(crate) fn parse(knob: &'static str, s: &str) -> Result<Ctrl, KnobError> {
        match s {
            "auto" => Ok(Ctrl::Auto),
            "user" => Ok(Ctrl::User),
            _ => Err(KnobError::new(
                knob,
                format!("ctrl={s} invalid (auto or user)"),
            )),
        }
    }
}

impl fmt::Display for Ctrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Ctrl::Auto => "auto",
            Ctrl::User => "user",
        })
    }
}

/// One line of io.cost.qos; fields absent from a write-side line are None.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostQos {
    pub dev: DevNum,
    pub enable: Option<bool>,
    pub ctrl: Option<Ctrl>,
    /// Read latency percentile (0.00–100.00).
    pub rpct: Option<Fixed2>,
    /// Read latency target, µs.
    pub rlat: Option<u32>,
    pub wpct: Option<Fixed2>,
    pub wlat: Option<u32>,
    /// vrate bounds, percent (1.00–10000.00).
    pub min: Option<Fixed2>,
    pub max: Option<Fixed2>,
    pub extra: Vec<(String, String)>,
    layout: Layout,
}

impl CostQos {
    pub fn new(dev: DevNum) -> CostQos {
        CostQos {
            dev,
            enable: None,
            ctrl: None,
            rpct: None,
            rlat: None,
            wpct: None,
            wlat: None,
            min: None,
            max: None,
            extra: Vec::new(),
            layout: Layout::default(),
        }
    }

    pub fn parse(line: &str) -> Result<CostQos, KnobError> {
        let (dev, toks) = DevNum::split_line(KNOB, line)?;
        let mut q = CostQos::new(dev);
        let mut extra = Vec::new();
        q.layout = fields::parse_fields(KNOB, toks, &mut extra, |k, v| {
            Ok(Some(match k {
                "enable" => {
                    q.enable = Some(parse_in(KNOB, k, v, 0, 1)? == 1);
                    "enable"
                }
                "ctrl" => {
                    q.ctrl = Some(Ctrl::parse(KNOB, v)?);
                    "ctrl"
                }
                "rpct" => {
                    q.rpct = Some(parse_fixed_in(KNOB, k, v, 0, PCT_MAX)?);
                    "rpct"
                }
                "wpct" => {
                    q.wpct = Some(parse_fixed_in(KNOB, k, v, 0, PCT_MAX)?);
                    "wpct"
                }
                "rlat" => {
                    q.rlat = Some(parse_in(KNOB, k, v, 0, u32::MAX as u64)? as u32);
                    "rlat"
                }
                "wlat" => {
                    q.wlat = Some(parse_in(KNOB, k, v, 0, u32::MAX as u64)? as u32);
                    "wlat"
                }
                "min" => {
                    q.min = Some(parse_fixed_in(KNOB, k, v, VRATE_MIN, VRATE_MAX)?);
                    "min"
                }
                "max" => {
                    q.max = Some(parse_fixed_in(KNOB, k, v, VRATE_MIN, VRATE_MAX)?);
                    "max"
                }
                _ => return Ok(None),
            }))
        })?;
        q.extra = extra;
        if let (Some(min), Some(max)) = (q.min, q.max) {
            if min > max {
                return Err(KnobError::new(
                    KNOB,
                    format!("min={min} greater than max={max}"),
                ));
            }
        }
        Ok(q)
    }

    /// The write that puts this state back: with ctrl=auto only the switch
    /// (any parameter written would make it ctrl=user again).
    pub fn restore_line(&self) -> String {
        match self.ctrl {
            Some(Ctrl::Auto) => {
                let mut s = format!("{}", self.dev);
                if let Some(e) = self.enable {
                    s.push_str(&format!(" enable={}", e as u8));
                }
                s.push_str(" ctrl=auto");
                s
            }
            _ => {
                let mut q = self.clone();
                q.extra.clear(); // the kernel refuses keys it does not know
                q.to_string()
            }
        }
    }
}

impl fmt::Display for CostQos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.dev)?;
        write_fields(
            f,
            &self.layout,
            &[
                ("enable", self.enable.map(|e| (e as u8).to_string())),
                ("ctrl", opt(&self.ctrl)),
                ("rpct", opt(&self.rpct)),
                ("rlat", opt(&self.rlat)),
                ("wpct", opt(&self.wpct)),
                ("wlat", opt(&self.wlat)),
                ("min", opt(&self.min)),
                ("max", opt(&self.max)),
            ],
            &self.extra,
        )
    }
}

/// A device's read and write latency targets, µs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencyTargets {
    pub rlat: u32,
    pub wlat: u32,
}

/// Targets every completion misses: see vrate_pin.rs.
pub const SETTLING_TARGETS: LatencyTargets = LatencyTargets { rlat: 1, wlat: 1 };

/// The io.cost.qos line that pins device `devnum`'s vrate at `v` % (min =
/// max = v), with `targets` written back when given. rpct=wpct=100 make
/// every period with a late request busy, in which the kernel clamps vrate
/// into [min, max]; vrate_pin.rs makes the pin take hold when nothing is
/// late.
pub fn pinned_vrate_line(devnum: &str, v: f64, targets: Option<LatencyTargets>) -> String {
    match targets {
        Some(t) => format!(
            "{devnum} enable=1 ctrl=user rpct=100.00 rlat={} wpct=100.00 wlat={} min={v:.2} max={v:.2}",
            t.rlat, t.wlat
        ),
        None => format!("{devnum} enable=1 ctrl=user rpct=100.00 wpct=100.00 min={v:.2} max={v:.2}"),
    }
}

/// The pin's first step: vrate bounded at `v` % with targets every
/// completion misses.
pub fn settling_vrate_line(devnum: &str, v: f64) -> String {
    pinned_vrate_line(devnum, v, Some(SETTLING_TARGETS))
}

/// The whole file: one line per device with iocost set up.
pub fn parse_all(content: &str) -> Result<Vec<CostQos>, KnobError> {
    fields::lines(content).map(CostQos::parse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::fields::format_lines;

    const KERNEL: &str = "259:0 enable=1 ctrl=user rpct=95.00 rlat=5000 wpct=95.00 wlat=5000 min=50.00 max=150.00\n\
                          8:0 enable=0 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 max=10000.00\n";

    #[test]
    fn the_pinned_vrate_line_parses_with_both_targets_at_100_percent() {
        let l = pinned_vrate_line("259:0", 42.5, None);
        assert_eq!(
            l,
            "259:0 enable=1 ctrl=user rpct=100.00 wpct=100.00 min=42.50 max=42.50"
        );
        let q = CostQos::parse(&l).unwrap();
        assert_eq!((q.rpct, q.wpct), (Some(Fixed2(10000)), Some(Fixed2(10000))));
        assert_eq!((q.min, q.max), (Some(Fixed2(4250)), Some(Fixed2(4250))));
        assert_eq!(q.rlat, None, "rlat stays the device's");
    }

    #[test]
    fn the_pin_writes_the_targets_back_and_its_first_step_misses_every_one() {
        let t = LatencyTargets {
            rlat: 25000,
            wlat: 5000,
        };
        let q = CostQos::parse(&pinned_vrate_line("259:0", 20.0, Some(t))).unwrap();
        assert_eq!((q.rlat, q.wlat), (Some(25000), Some(5000)));
        let s = CostQos::parse(&settling_vrate_line("259:0", 20.0)).unwrap();
        assert_eq!((s.rlat, s.wlat), (Some(1), Some(1)));
        assert_eq!((s.min, s.max), (Some(Fixed2(2000)), Some(Fixed2(2000))));
    }

    #[test]
    fn kernel_output_round_trips() {
        let v = parse_all(KERNEL).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].dev, DevNum::new(259, 0));
        assert_eq!(v[0].enable, Some(true));
        assert_eq!(v[0].ctrl, Some(Ctrl::User));
        assert_eq!(v[0].rpct, Some(Fixed2(9500)));
        assert_eq!(v[0].rlat, Some(5000));
        assert_eq!(v[0].min, Some(Fixed2(5000)));
        assert_eq!(v[1].max, Some(Fixed2(1_000_000)));
        assert_eq!(format_lines(&v), KERNEL);
    }

    #[test]
    fn write_side_forms() {
        let q = CostQos::parse("8:0 enable=1 rlat=2000").unwrap();
        assert_eq!(q.to_string(), "8:0 enable=1 rlat=2000");
        assert_eq!(q.rpct, None);
        let q = CostQos::parse("8:0 rpct=99.5 min=75").unwrap();
        assert_eq!(q.rpct, Some(Fixed2(9950)));
        assert_eq!(q.to_string(), "8:0 rpct=99.50 min=75.00");
        let mut q = CostQos::new(DevNum::new(8, 0));
        q.enable = Some(true);
        q.wlat = Some(100);
        assert_eq!(q.to_string(), "8:0 enable=1 wlat=100");
    }

    #[test]
    fn unknown_keys_kept_in_order() {
        let s = "8:0 enable=1 future=x ctrl=user later=7";
        let q = CostQos::parse(s).unwrap();
        assert_eq!(
            q.extra,
            vec![("future".into(), "x".into()), ("later".into(), "7".into())]
        );
        assert_eq!(q.to_string(), s);
        assert_eq!(q.restore_line(), "8:0 enable=1 ctrl=user");
    }

    #[test]
    fn out_of_range_named() {
        let e = |s: &str| CostQos::parse(s).unwrap_err().to_string();
        assert_eq!(
            e("8:0 rpct=101"),
            "io.cost.qos: rpct=101 out of range 0..=100"
        );
        assert_eq!(
            e("8:0 wpct=100.01"),
            "io.cost.qos: wpct=100.01 out of range 0..=100"
        );
        assert_eq!(
            e("8:0 min=0.5"),
            "io.cost.qos: min=0.5 out of range 1..=10000"
        );
        assert_eq!(
            e("8:0 max=10001"),
            "io.cost.qos: max=10001 out of range 1..=10000"
        );
        assert_eq!(
            e("8:0 enable=2"),
            "io.cost.qos: enable=2 out of range 0..=1"
        );
        assert_eq!(
            e("8:0 rlat=4294967296"),
            "io.cost.qos: rlat=4294967296 out of range 0..=4294967295"
        );
        assert_eq!(
            e("8:0 min=60 max=50"),
            "io.cost.qos: min=60.00 greater than max=50.00"
        );
        assert_eq!(
            e("8:0 ctrl=manual"),
            "io.cost.qos: ctrl=manual invalid (auto or user)"
        );
        assert!(e("8:0 rpct=9.999").contains("at most two decimals"));
        assert!(e("8:0 rpct").contains("expected key=value"));
        assert!(e("8:0 rlat=1 rlat=2").contains("twice"));
        assert!(e("sda enable=1").contains("MAJ:MIN"));
    }
}
