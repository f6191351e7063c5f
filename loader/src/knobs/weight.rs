//! io.weight (not on the root cgroup): proportional weight under iocost.
//!
//! Kernel output (ioc_weight_show): `default %u` then `MAJ:MIN %u` for
//! devices with their own weight. Writes (ioc_weight_write): `default N`,
//! `N`, `MAJ:MIN N`, `MAJ:MIN default` (drop the device's own weight);
//! N in 1..=10000 (CGROUP_WEIGHT_MIN..MAX).

use std::fmt;

use super::devnum::DevNum;
use super::fields::KnobError;
use super::fields::{self, parse_in};

const KNOB: &str = "io.weight";
pub const WEIGHT_MIN: u64 = 1;
pub const WEIGHT_MAX: u64 = 10000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WeightLine {
    /// `default N`
    Default(u32),
    /// `N` (write-side shorthand for `default N`)
    Bare(u32),
    /// `MAJ:MIN N`
    Device(DevNum, u32),
    /// `MAJ:MIN default` (write side: back to the cgroup default)
    DeviceDefault(DevNum),
}

fn weight(field: &str, s: &str) -> Result<u32, KnobError> {
    parse_in(KNOB, field, s, WEIGHT_MIN, WEIGHT_MAX).map(|v| v as u32)
}

impl WeightLine {
    pub fn parse(line: &str) -> Result<WeightLine, KnobError> {
        let toks: Vec<&str> = line.split_ascii_whitespace().collect();
        match toks.as_slice() {
            ["default", n] => Ok(WeightLine::Default(weight("default", n)?)),
            [n] if !n.contains(':') => Ok(WeightLine::Bare(weight("weight", n)?)),
            [d, "default"] => Ok(WeightLine::DeviceDefault(DevNum::parse(KNOB, d)?)),
            [d, n] => {
                let dev = DevNum::parse(KNOB, d)?;
                Ok(WeightLine::Device(dev, weight(d, n)?))
            }
            _ => Err(KnobError::new(
                KNOB,
                format!("'{line}' is not 'default N', 'N', 'MAJ:MIN N' or 'MAJ:MIN default'"),
            )),
        }
    }

    pub fn dev(&self) -> Option<DevNum> {
        match self {
            WeightLine::Device(d, _) | WeightLine::DeviceDefault(d) => Some(*d),
            _ => None,
        }
    }
}

impl fmt::Display for WeightLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WeightLine::Default(n) => write!(f, "default {n}"),
            WeightLine::Bare(n) => write!(f, "{n}"),
            WeightLine::Device(d, n) => write!(f, "{d} {n}"),
            WeightLine::DeviceDefault(d) => write!(f, "{d} default"),
        }
    }
}

pub fn parse_all(content: &str) -> Result<Vec<WeightLine>, KnobError> {
    fields::lines(content).map(WeightLine::parse).collect()
}

/// The cgroup default weight in a parsed file.
pub fn default_weight(lines: &[WeightLine]) -> Option<u32> {
    lines.iter().find_map(|l| match l {
        WeightLine::Default(n) | WeightLine::Bare(n) => Some(*n),
        _ => None,
    })
}

/// Writes that undo `written` given the file as it was before.
pub(crate) fn restore_commands(prev: &[WeightLine], written: &WeightLine) -> Vec<String> {
    match written.dev() {
        None => match default_weight(prev) {
            Some(n) => vec![format!("default {n}")],
            None => vec!["default 100".to_string()],
        },
        Some(dev) => {
            let own = prev.iter().find_map(|l| match l {
                WeightLine::Device(d, n) if *d == dev => Some(*n),
                _ => None,
            });
            match own {
                Some(n) => vec![format!("{dev} {n}")],
                None => vec![format!("{dev} default")],
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::fields::format_lines;

    #[test]
    fn kernel_output_round_trips() {
        let s = "default 100\n259:0 250\n8:16 10000\n";
        let v = parse_all(s).unwrap();
        assert_eq!(v[0], WeightLine::Default(100));
        assert_eq!(v[1], WeightLine::Device(DevNum::new(259, 0), 250));
        assert_eq!(format_lines(&v), s);
        assert_eq!(default_weight(&v), Some(100));
    }

    #[test]
    fn write_forms_and_restore() {
        assert_eq!(WeightLine::parse("50").unwrap(), WeightLine::Bare(50));
        assert_eq!(
            WeightLine::parse("8:0 default").unwrap().to_string(),
            "8:0 default"
        );
        let prev = parse_all("default 100\n259:0 250\n").unwrap();
        let w = |s: &str| restore_commands(&prev, &WeightLine::parse(s).unwrap());
        assert_eq!(w("default 7"), vec!["default 100"]);
        assert_eq!(w("259:0 1"), vec!["259:0 250"]);
        assert_eq!(w("8:0 1"), vec!["8:0 default"]);
    }

    #[test]
    fn rejects() {
        let e = |s: &str| WeightLine::parse(s).unwrap_err().to_string();
        assert_eq!(
            e("default 0"),
            "io.weight: default=0 out of range 1..=10000"
        );
        assert_eq!(
            e("8:0 10001"),
            "io.weight: 8:0=10001 out of range 1..=10000"
        );
        assert_eq!(e("20000"), "io.weight: weight=20000 out of range 1..=10000");
        assert!(e("default").contains("is not"));
        assert!(e("default 1 2").contains("is not"));
        assert!(e("x:0 5").contains("MAJ:MIN"));
    }
}
