//! io.pressure (read-only here): PSI for the cgroup's I/O.
//!
//! Kernel output (psi_show): `some avg10=%lu.%02lu avg60=%lu.%02lu
//! avg300=%lu.%02lu total=%llu` and the same for `full`; averages are
//! percentages (0.00–100.00), total is µs stalled.

use std::fmt;

use super::fields::KnobError;
use super::fields::{self, opt, parse_fixed_in, parse_u64, write_fields, Fixed2, Layout, PCT_MAX};

const KNOB: &str = "io.pressure";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsiKind {
    Some,
    Full,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PsiLine {
    pub kind: PsiKind,
    pub avg10: Option<Fixed2>,
    pub avg60: Option<Fixed2>,
    pub avg300: Option<Fixed2>,
    /// Total stall time, µs.
    pub total: Option<u64>,
    pub extra: Vec<(String, String)>,
    layout: Layout,
}

impl PsiLine {
    pub fn parse(line: &str) -> Result<PsiLine, KnobError> {
        let mut toks = line.split_ascii_whitespace();
        let kind = match toks.next() {
            Some("some") => PsiKind::Some,
            Some("full") => PsiKind::Full,
            other => {
                return Err(KnobError::new(
                    KNOB,
                    format!(
                        "line starts with '{}', not some or full",
                        other.unwrap_or("")
                    ),
                ))
            }
        };
        let mut p = PsiLine {
            kind,
            avg10: None,
            avg60: None,
            avg300: None,
            total: None,
            extra: Vec::new(),
            layout: Layout::default(),
        };
        let mut extra = Vec::new();
        p.layout = fields::parse_fields(KNOB, toks, &mut extra, |k, v| {
            Ok(Some(match k {
                "avg10" => {
                    p.avg10 = Some(parse_fixed_in(KNOB, k, v, 0, PCT_MAX)?);
                    "avg10"
                }
                "avg60" => {
                    p.avg60 = Some(parse_fixed_in(KNOB, k, v, 0, PCT_MAX)?);
                    "avg60"
                }
                "avg300" => {
                    p.avg300 = Some(parse_fixed_in(KNOB, k, v, 0, PCT_MAX)?);
                    "avg300"
                }
                "total" => {
                    p.total = Some(parse_u64(KNOB, k, v)?);
                    "total"
                }
                _ => return Ok(None),
            }))
        })?;
        p.extra = extra;
        Ok(p)
    }
}

impl fmt::Display for PsiLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kind {
            PsiKind::Some => "some",
            PsiKind::Full => "full",
        })?;
        write_fields(
            f,
            &self.layout,
            &[
                ("avg10", opt(&self.avg10)),
                ("avg60", opt(&self.avg60)),
                ("avg300", opt(&self.avg300)),
                ("total", opt(&self.total)),
            ],
            &self.extra,
        )
    }
}

pub fn parse_all(content: &str) -> Result<Vec<PsiLine>, KnobError> {
    fields::lines(content).map(PsiLine::parse).collect()
}

/// The `total` of the `some` and of the `full` line, µs: how long at
/// least one task, and all non-idle tasks at once, stalled on I/O. Both
/// lines and their totals are required (the kernel writes them for io
/// since PSI exists).
pub fn stall_totals_us(content: &str) -> Result<(u64, u64), KnobError> {
    let lines = parse_all(content)?;
    let total = |kind: PsiKind, name: &str| {
        lines
            .iter()
            .find(|l| l.kind == kind)
            .ok_or_else(|| KnobError::new(KNOB, format!("no {name} line")))?
            .total
            .ok_or_else(|| KnobError::new(KNOB, format!("the {name} line has no total")))
    };
    Ok((total(PsiKind::Some, "some")?, total(PsiKind::Full, "full")?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::fields::format_lines;

    #[test]
    fn kernel_output_round_trips() {
        let s = "some avg10=1.53 avg60=0.40 avg300=0.09 total=2251874\nfull avg10=1.20 avg60=0.31 avg300=0.07 total=1960233\n";
        let v = parse_all(s).unwrap();
        assert_eq!(v[0].kind, PsiKind::Some);
        assert_eq!(v[0].avg10, Some(Fixed2(153)));
        assert_eq!(v[1].total, Some(1960233));
        assert_eq!(format_lines(&v), s);
    }

    #[test]
    fn stall_totals_are_the_some_and_full_totals() {
        let s = "some avg10=1.53 avg60=0.40 avg300=0.09 total=2251874\nfull avg10=1.20 avg60=0.31 avg300=0.07 total=1960233\n";
        assert_eq!(stall_totals_us(s), Ok((2251874, 1960233)));
        // Lines in either order, fields the kernel may add kept aside.
        let s = "full total=5 avg10=0.00\nsome avg10=0.00 total=7 new=1\n";
        assert_eq!(stall_totals_us(s), Ok((7, 5)));
        assert_eq!(
            stall_totals_us("some avg10=0.00 total=7\n")
                .unwrap_err()
                .to_string(),
            "io.pressure: no full line"
        );
        assert_eq!(
            stall_totals_us("some total=7\nfull avg10=0.00\n")
                .unwrap_err()
                .to_string(),
            "io.pressure: the full line has no total"
        );
        assert!(stall_totals_us("some total=x\nfull total=1\n").is_err());
    }

    #[test]
    fn rejects() {
        assert_eq!(
            PsiLine::parse("some avg10=100.01").unwrap_err().to_string(),
            "io.pressure: avg10=100.01 out of range 0..=100"
        );
        assert!(PsiLine::parse("half avg10=1.00").is_err());
    }
}
