//! io.max (blk-throttle): absolute bandwidth / IOPS limits per device.
//!
//! Kernel output (tg_prfill_limit): `MAJ:MIN rbps=%s wbps=%s riops=%s wiops=%s`,
//! each a number or `max`; devices without limits are not listed. Writes
//! take any subset, e.g. `8:0 rbps=max`. A limit of 0 is refused.

use std::fmt;

use super::devnum::DevNum;
use super::fields::KnobError;
use super::fields::{self, opt, parse_in, write_fields, Layout};

const KNOB: &str = "io.max";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Max,
    Value(u64),
}

impl Limit {
    fn parse(field: &str, s: &str, hi: u64) -> Result<Limit, KnobError> {
        if s == "max" {
            return Ok(Limit::Max);
        }
        Ok(Limit::Value(parse_in(KNOB, field, s, 1, hi)?))
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Max => f.write_str("max"),
            Limit::Value(v) => write!(f, "{v}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoMax {
    pub dev: DevNum,
    pub rbps: Option<Limit>,
    pub wbps: Option<Limit>,
    pub riops: Option<Limit>,
    pub wiops: Option<Limit>,
    pub extra: Vec<(String, String)>,
    layout: Layout,
}

impl IoMax {
    pub fn new(dev: DevNum) -> IoMax {
        IoMax {
            dev,
            rbps: None,
            wbps: None,
            riops: None,
            wiops: None,
            extra: Vec::new(),
            layout: Layout::default(),
        }
    }

    pub fn parse(line: &str) -> Result<IoMax, KnobError> {
        let (dev, toks) = DevNum::split_line(KNOB, line)?;
        let mut m = IoMax::new(dev);
        let mut extra = Vec::new();
        // bps limits are u64 (U64_MAX means max), iops u32 (UINT_MAX means max).
        let (bps_hi, iops_hi) = (u64::MAX - 1, u32::MAX as u64 - 1);
        m.layout = fields::parse_fields(KNOB, toks, &mut extra, |k, v| {
            Ok(Some(match k {
                "rbps" => {
                    m.rbps = Some(Limit::parse(k, v, bps_hi)?);
                    "rbps"
                }
                "wbps" => {
                    m.wbps = Some(Limit::parse(k, v, bps_hi)?);
                    "wbps"
                }
                "riops" => {
                    m.riops = Some(Limit::parse(k, v, iops_hi)?);
                    "riops"
                }
                "wiops" => {
                    m.wiops = Some(Limit::parse(k, v, iops_hi)?);
                    "wiops"
                }
                _ => return Ok(None),
            }))
        })?;
        m.extra = extra;
        Ok(m)
    }
}

impl fmt::Display for IoMax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.dev)?;
        write_fields(
            f,
            &self.layout,
            &[
                ("rbps", opt(&self.rbps)),
                ("wbps", opt(&self.wbps)),
                ("riops", opt(&self.riops)),
                ("wiops", opt(&self.wiops)),
            ],
            &self.extra,
        )
    }
}

pub fn parse_all(content: &str) -> Result<Vec<IoMax>, KnobError> {
    fields::lines(content).map(IoMax::parse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::fields::format_lines;

    #[test]
    fn kernel_output_round_trips() {
        let s = "259:0 rbps=2097152 wbps=max riops=max wiops=120\n8:0 rbps=max wbps=max riops=1000 wiops=max\n";
        let v = parse_all(s).unwrap();
        assert_eq!(v[0].rbps, Some(Limit::Value(2097152)));
        assert_eq!(v[0].wbps, Some(Limit::Max));
        assert_eq!(v[1].riops, Some(Limit::Value(1000)));
        assert_eq!(format_lines(&v), s);
        assert_eq!(parse_all("").unwrap(), vec![]);
    }

    #[test]
    fn write_side_and_rejects() {
        assert_eq!(
            IoMax::parse("8:0 rbps=max").unwrap().to_string(),
            "8:0 rbps=max"
        );
        let e = |s: &str| IoMax::parse(s).unwrap_err().to_string();
        assert_eq!(
            e("8:0 riops=4294967295"),
            "io.max: riops=4294967295 out of range 1..=4294967294"
        );
        assert_eq!(
            e("8:0 rbps=0"),
            "io.max: rbps=0 out of range 1..=18446744073709551614"
        );
        assert!(e("8:0 rbps=MAX").contains("not a number"));
        // io.low's extra keys are tolerated and kept.
        let s = "8:0 rbps=1 wbps=max riops=max wiops=max idle=200 latency=max";
        assert_eq!(IoMax::parse(s).unwrap().to_string(), s);
    }
}
