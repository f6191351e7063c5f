//! io.latency (blk-iolatency, CONFIG_BLK_CGROUP_IOLATENCY): latency target.
//!
//! Kernel output (iolatency_prfill_limit): `MAJ:MIN target=%llu` (µs), only
//! for devices with a target. Writes: `MAJ:MIN target=US` or `target=max`
//! (remove the target).

use std::fmt;

use super::devnum::DevNum;
use super::fields::KnobError;
use super::fields::{self, opt, parse_in, write_fields, Layout};

const KNOB: &str = "io.latency";

/// Largest target in µs whose value in ns still fits u64.
pub const TARGET_MAX_US: u64 = u64::MAX / 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Max,
    Us(u64),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Max => f.write_str("max"),
            Target::Us(v) => write!(f, "{v}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoLatency {
    pub dev: DevNum,
    pub target: Option<Target>,
    pub extra: Vec<(String, String)>,
    layout: Layout,
}

impl IoLatency {
    pub fn new(dev: DevNum) -> IoLatency {
        IoLatency {
            dev,
            target: None,
            extra: Vec::new(),
            layout: Layout::default(),
        }
    }

    pub fn parse(line: &str) -> Result<IoLatency, KnobError> {
        let (dev, toks) = DevNum::split_line(KNOB, line)?;
        let mut l = IoLatency::new(dev);
        let mut extra = Vec::new();
        l.layout = fields::parse_fields(KNOB, toks, &mut extra, |k, v| {
            if k != "target" {
                return Ok(None);
            }
            l.target = Some(if v == "max" {
                Target::Max
            } else {
                Target::Us(parse_in(KNOB, k, v, 0, TARGET_MAX_US)?)
            });
            Ok(Some("target"))
        })?;
        l.extra = extra;
        Ok(l)
    }
}

impl fmt::Display for IoLatency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.dev)?;
        write_fields(
            f,
            &self.layout,
            &[("target", opt(&self.target))],
            &self.extra,
        )
    }
}

pub fn parse_all(content: &str) -> Result<Vec<IoLatency>, KnobError> {
    fields::lines(content).map(IoLatency::parse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::fields::format_lines;

    #[test]
    fn round_trips_and_rejects() {
        let s = "259:0 target=2000\n8:0 target=75\n";
        let v = parse_all(s).unwrap();
        assert_eq!(v[0].target, Some(Target::Us(2000)));
        assert_eq!(format_lines(&v), s);
        assert_eq!(
            IoLatency::parse("8:0 target=max").unwrap().target,
            Some(Target::Max)
        );
        assert_eq!(
            IoLatency::parse("8:0 target=18446744073709552")
                .unwrap_err()
                .to_string(),
            "io.latency: target=18446744073709552 out of range 0..=18446744073709551"
        );
        assert!(IoLatency::parse("8:0 target=1ms").is_err());
    }
}
