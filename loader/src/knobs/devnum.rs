//! `MAJ:MIN` device numbers as cgroup io.* files print them.

use std::fmt;

use super::fields::digits_u64;
use super::fields::KnobError;

/// Largest major / minor the kernel's dev_t holds (MINORBITS = 20).
pub const MAJOR_MAX: u32 = (1 << 12) - 1;
pub const MINOR_MAX: u32 = (1 << 20) - 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DevNum {
    pub major: u32,
    pub minor: u32,
}

impl DevNum {
    pub fn new(major: u32, minor: u32) -> DevNum {
        DevNum { major, minor }
    }

    /// `259:0`; decimal digits only, major ≤ 4095, minor ≤ 1048575.
    pub fn parse(knob: &'static str, s: &str) -> Result<DevNum, KnobError> {
        let bad = || KnobError::new(knob, format!("'{s}' is not a MAJ:MIN device number"));
        let (ma, mi) = s.split_once(':').ok_or_else(bad)?;
        let major = digits_u64(ma).ok_or_else(bad)?;
        let minor = digits_u64(mi).ok_or_else(bad)?;
        if major > MAJOR_MAX as u64 {
            return Err(KnobError::range(
                knob,
                "major",
                ma,
                &format!("0..={MAJOR_MAX}"),
            ));
        }
        if minor > MINOR_MAX as u64 {
            return Err(KnobError::range(
                knob,
                "minor",
                mi,
                &format!("0..={MINOR_MAX}"),
            ));
        }
        Ok(DevNum::new(major as u32, minor as u32))
    }

    /// Splits a line into its leading device number and the rest's tokens.
    pub(crate) fn split_line<'a>(
        knob: &'static str,
        line: &'a str,
    ) -> Result<(DevNum, std::str::SplitAsciiWhitespace<'a>), KnobError> {
        let mut toks = line.split_ascii_whitespace();
        let first = toks
            .next()
            .ok_or_else(|| KnobError::new(knob, "empty line"))?;
        Ok((DevNum::parse(knob, first)?, toks))
    }
}

impl fmt::Display for DevNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_show() {
        let d = DevNum::parse("k", "259:0").unwrap();
        assert_eq!(d, DevNum::new(259, 0));
        assert_eq!(d.to_string(), "259:0");
        assert_eq!(DevNum::parse("k", "8:16").unwrap().minor, 16);
        for s in ["", "8", "8:", ":0", "+8:0", "8:-1", "a:b", "8:0:1", " 8:0"] {
            assert!(DevNum::parse("k", s).is_err(), "{s}");
        }
        assert_eq!(
            DevNum::parse("io.max", "4096:0").unwrap_err().to_string(),
            "io.max: major=4096 out of range 0..=4095"
        );
        assert!(DevNum::parse("k", "8:1048576").is_err());
    }
}
