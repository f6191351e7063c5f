//! io.stat (read-only): per-device I/O statistics of a cgroup.
//!
//! Kernel output (blkcg_print_one_stat): `MAJ:MIN rbytes=%llu wbytes=%llu
//! rios=%llu wios=%llu dbytes=%llu dios=%llu`, then what policies append:
//! iocost ` cost.vrate=%llu.%02llu` (root), ` cost.usage=%llu` and with debug
//! stats ` cost.wait= cost.indebt= cost.indelay=`; iolatency ` use_delay=
//! delay=`... Keys this code does not type are kept as text, in order.

use std::fmt;

use super::devnum::DevNum;
use super::fields::KnobError;
use super::fields::{self, opt, parse_u64, write_fields, Fixed2, Layout};

const KNOB: &str = "io.stat";

/// Counters typed as u64, in the order the kernel prints them.
pub const COUNTERS: [&str; 10] = [
    "rbytes",
    "wbytes",
    "rios",
    "wios",
    "dbytes",
    "dios",
    "cost.usage",
    "cost.wait",
    "cost.indebt",
    "cost.indelay",
];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoStat {
    pub dev: DevNum,
    /// See COUNTERS.
    pub counters: [Option<u64>; 10],
    /// iocost's vrate in percent (root cgroup only).
    pub cost_vrate: Option<Fixed2>,
    pub extra: Vec<(String, String)>,
    layout: Layout,
}

impl IoStat {
    pub fn new(dev: DevNum) -> IoStat {
        IoStat {
            dev,
            counters: [None; 10],
            cost_vrate: None,
            extra: Vec::new(),
            layout: Layout::default(),
        }
    }

    pub fn get(&self, name: &str) -> Option<u64> {
        COUNTERS
            .iter()
            .position(|c| *c == name)
            .and_then(|i| self.counters[i])
    }

    /// Any key's text (typed or not).
    pub fn raw(&self, name: &str) -> Option<String> {
        if name == "cost.vrate" {
            return opt(&self.cost_vrate);
        }
        self.get(name).map(|v| v.to_string()).or_else(|| {
            self.extra
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
    }

    pub fn parse(line: &str) -> Result<IoStat, KnobError> {
        let (dev, toks) = DevNum::split_line(KNOB, line)?;
        let mut s = IoStat::new(dev);
        let mut extra = Vec::new();
        s.layout = fields::parse_fields(KNOB, toks, &mut extra, |k, v| {
            if k == "cost.vrate" {
                s.cost_vrate = Some(Fixed2::parse(KNOB, k, v)?);
                return Ok(Some("cost.vrate"));
            }
            match COUNTERS.iter().position(|c| *c == k) {
                Some(i) => {
                    s.counters[i] = Some(parse_u64(KNOB, k, v)?);
                    Ok(Some(COUNTERS[i]))
                }
                None => Ok(None),
            }
        })?;
        s.extra = extra;
        Ok(s)
    }
}

impl fmt::Display for IoStat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The kernel prints "MAJ:MIN " and then the six I/O counters, or
        // nothing for a device without I/O; what policies add starts with a
        // blank of its own ("11:0 " alone, "8:0  cost.usage=0").
        write!(f, "{}", self.dev)?;
        if self.counters[..6].iter().all(|c| c.is_none()) {
            f.write_str(" ")?;
        }
        let mut known: Vec<(&'static str, Option<String>)> = COUNTERS[..6]
            .iter()
            .enumerate()
            .map(|(i, c)| (*c, opt(&self.counters[i])))
            .collect();
        known.push(("cost.vrate", opt(&self.cost_vrate)));
        for (i, c) in COUNTERS.iter().enumerate().skip(6) {
            known.push((c, opt(&self.counters[i])));
        }
        write_fields(f, &self.layout, &known, &self.extra)
    }
}

pub fn parse_all(content: &str) -> Result<Vec<IoStat>, KnobError> {
    fields::lines(content).map(IoStat::parse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::fields::format_lines;

    #[test]
    fn kernel_output_round_trips() {
        let s = "259:0 rbytes=12288000 wbytes=65536000 rios=3000 wios=1000 dbytes=0 dios=0 cost.vrate=100.00 cost.usage=1234 cost.wait=0 cost.indebt=0 cost.indelay=0\n\
                 8:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0 use_delay=0 delay=0\n";
        let v = parse_all(s).unwrap();
        assert_eq!(v[0].get("rios"), Some(3000));
        assert_eq!(v[0].cost_vrate, Some(Fixed2(10000)));
        assert_eq!(v[0].get("cost.usage"), Some(1234));
        assert_eq!(v[1].raw("use_delay").as_deref(), Some("0"));
        assert_eq!(format_lines(&v), s);
    }

    #[test]
    fn device_without_io_keeps_the_kernels_blank() {
        // Real 6.1 output: sr0 (11:0) has no I/O; iocost adds its own blank.
        let s = "259:0 rbytes=1343488 wbytes=0 rios=115 wios=0 dbytes=0 dios=0\n11:0 \n8:0  cost.usage=0\n";
        let v = parse_all(s).unwrap();
        assert_eq!(v[1].dev, DevNum::new(11, 0));
        assert_eq!(v[1].get("rbytes"), None);
        assert_eq!(v[2].get("cost.usage"), Some(0));
        assert_eq!(format_lines(&v), s);
    }

    #[test]
    fn rejects_non_numbers() {
        assert_eq!(
            IoStat::parse("8:0 rbytes=-1").unwrap_err().to_string(),
            "io.stat: rbytes=-1 is not a number"
        );
        assert!(IoStat::parse("8:0 cost.vrate=1.234").is_err());
    }
}
