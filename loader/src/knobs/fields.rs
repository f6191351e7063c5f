//! Shared pieces of the knob parsers: the error type, fixed-point numbers
//! with two decimals, `key=value` fields with unknown keys kept in order.

use std::fmt;

/// A knob value that does not parse or is out of range; Display reads
/// `io.cost.qos: rpct=101 out of range 0..=100`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnobError {
    pub knob: &'static str,
    pub msg: String,
}

impl KnobError {
    pub fn new(knob: &'static str, msg: impl Into<String>) -> KnobError {
        KnobError {
            knob,
            msg: msg.into(),
        }
    }

    pub(crate) fn range(knob: &'static str, field: &str, raw: &str, range: &str) -> KnobError {
        KnobError::new(knob, format!("{field}={raw} out of range {range}"))
    }
}

impl fmt::Display for KnobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.knob, self.msg)
    }
}

impl std::error::Error for KnobError {}

/// 100 % in hundredths.
pub(crate) const PCT_MAX: u64 = 100 * 100;
/// iocost's vrate bounds (VRATE_MIN_PPM, VRATE_MAX_PPM) in hundredths of a percent.
pub(crate) const VRATE_MIN: u64 = 100;
pub(crate) const VRATE_MAX: u64 = 10_000 * 100;

/// A decimal with two fractional digits, kept as hundredths: the kernel's
/// `%u.%02u` (iocost percentages, vrate, PSI averages).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Fixed2(pub u64);

impl Fixed2 {
    pub fn from_int(v: u64) -> Fixed2 {
        Fixed2(v * 100)
    }

    /// `95`, `95.5`, `95.50`; at most two decimals, no sign.
    pub fn parse(knob: &'static str, field: &str, s: &str) -> Result<Fixed2, KnobError> {
        let bad = || {
            KnobError::new(
                knob,
                format!("{field}={s} is not a number with at most two decimals"),
            )
        };
        let (int, frac) = match s.split_once('.') {
            Some((i, f)) => (i, Some(f)),
            None => (s, None),
        };
        let int = digits_u64(int).ok_or_else(bad)?;
        let frac = match frac {
            None => 0,
            Some(f) if (1..=2).contains(&f.len()) && f.bytes().all(|b| b.is_ascii_digit()) => {
                let v: u64 = f.parse().map_err(|_| bad())?;
                if f.len() == 1 {
                    v * 10
                } else {
                    v
                }
            }
            Some(_) => return Err(bad()),
        };
        int.checked_mul(100)
            .and_then(|v| v.checked_add(frac))
            .map(Fixed2)
            .ok_or_else(bad)
    }
}

impl fmt::Display for Fixed2 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:02}", self.0 / 100, self.0 % 100)
    }
}

/// Decimal digits only (no sign, no blanks), as the kernel prints `%llu`.
pub(crate) fn digits_u64(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

pub(crate) fn parse_u64(knob: &'static str, field: &str, s: &str) -> Result<u64, KnobError> {
    digits_u64(s).ok_or_else(|| KnobError::new(knob, format!("{field}={s} is not a number")))
}

/// An unsigned number within `lo..=hi`.
pub(crate) fn parse_in(
    knob: &'static str,
    field: &str,
    s: &str,
    lo: u64,
    hi: u64,
) -> Result<u64, KnobError> {
    let v = parse_u64(knob, field, s);
    match v {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        Ok(_) => Err(KnobError::range(knob, field, s, &format!("{lo}..={hi}"))),
        Err(_) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            // Too many digits for u64: still a range problem.
            Err(KnobError::range(knob, field, s, &format!("{lo}..={hi}")))
        }
        Err(e) => Err(e),
    }
}

/// A two-decimal number within `lo..=hi` hundredths; the range is shown in
/// whole units when they are whole.
pub(crate) fn parse_fixed_in(
    knob: &'static str,
    field: &str,
    s: &str,
    lo: u64,
    hi: u64,
) -> Result<Fixed2, KnobError> {
    let show = |v: u64| {
        if (v / 100) * 100 == v {
            (v / 100).to_string()
        } else {
            Fixed2(v).to_string()
        }
    };
    let v = match Fixed2::parse(knob, field, s) {
        Ok(v) => v,
        Err(e) => {
            // An integer part too long for u64 is still out of range.
            let int = s.split('.').next().unwrap_or("");
            if !int.is_empty() && int.len() > 17 && int.bytes().all(|b| b.is_ascii_digit()) {
                return Err(KnobError::range(
                    knob,
                    field,
                    s,
                    &format!("{}..={}", show(lo), show(hi)),
                ));
            }
            return Err(e);
        }
    };
    if !(lo..=hi).contains(&v.0) {
        return Err(KnobError::range(
            knob,
            field,
            s,
            &format!("{}..={}", show(lo), show(hi)),
        ));
    }
    Ok(v)
}

/// Where each field stood in the parsed text, so Display keeps the order.
/// Compares equal to any other layout: two values with the same fields are
/// the same value whatever order they were written in.
#[derive(Clone, Debug, Default)]
pub struct Layout(Vec<Slot>);

#[derive(Clone, Debug)]
enum Slot {
    Known(&'static str),
    Extra(usize),
}

impl PartialEq for Layout {
    fn eq(&self, _: &Layout) -> bool {
        true
    }
}

impl Eq for Layout {}

/// Splits `key=value` tokens; `known` stores a known key and returns its
/// static name, or None for a key this code does not know (kept in `extra`).
pub(crate) fn parse_fields<'a>(
    knob: &'static str,
    tokens: impl Iterator<Item = &'a str>,
    extra: &mut Vec<(String, String)>,
    mut known: impl FnMut(&str, &str) -> Result<Option<&'static str>, KnobError>,
) -> Result<Layout, KnobError> {
    let mut layout = Vec::new();
    for tok in tokens {
        let Some((k, v)) = tok.split_once('=') else {
            return Err(KnobError::new(
                knob,
                format!("expected key=value, got '{tok}'"),
            ));
        };
        if k.is_empty() {
            return Err(KnobError::new(knob, format!("empty key in '{tok}'")));
        }
        match known(k, v)? {
            Some(name) => {
                if layout
                    .iter()
                    .any(|s| matches!(s, Slot::Known(n) if *n == name))
                {
                    return Err(KnobError::new(knob, format!("{name} given twice")));
                }
                layout.push(Slot::Known(name));
            }
            None => {
                if extra.iter().any(|(ek, _)| ek == k) {
                    return Err(KnobError::new(knob, format!("{k} given twice")));
                }
                layout.push(Slot::Extra(extra.len()));
                extra.push((k.to_string(), v.to_string()));
            }
        }
    }
    Ok(Layout(layout))
}

/// Writes ` key=value` for every field: in the parsed order, then known
/// fields that were not in it (canonical order), then unplaced extras.
pub(crate) fn write_fields(
    f: &mut fmt::Formatter<'_>,
    layout: &Layout,
    known: &[(&'static str, Option<String>)],
    extra: &[(String, String)],
) -> fmt::Result {
    let mut done_known = vec![false; known.len()];
    let mut done_extra = vec![false; extra.len()];
    for slot in &layout.0 {
        match slot {
            Slot::Known(name) => {
                if let Some(i) = known.iter().position(|(n, _)| n == name) {
                    if let (false, Some(v)) = (done_known[i], &known[i].1) {
                        write!(f, " {name}={v}")?;
                    }
                    done_known[i] = true;
                }
            }
            Slot::Extra(i) => {
                if let (Some(false), Some((k, v))) = (done_extra.get(*i).copied(), extra.get(*i)) {
                    write!(f, " {k}={v}")?;
                    done_extra[*i] = true;
                }
            }
        }
    }
    for (i, (name, v)) in known.iter().enumerate() {
        if let (false, Some(v)) = (done_known[i], v) {
            write!(f, " {name}={v}")?;
        }
    }
    for (i, (k, v)) in extra.iter().enumerate() {
        if !done_extra[i] {
            write!(f, " {k}={v}")?;
        }
    }
    Ok(())
}

/// Non-blank lines of a knob file.
pub(crate) fn lines(content: &str) -> impl Iterator<Item = &str> {
    content.split('\n').filter(|l| !l.trim_ascii().is_empty())
}

/// Lines as the kernel prints them: each followed by a newline.
pub(crate) fn format_lines<T: fmt::Display>(items: &[T]) -> String {
    items.iter().map(|i| format!("{i}\n")).collect()
}

pub(crate) fn opt<T: fmt::Display>(v: &Option<T>) -> Option<String> {
    v.as_ref().map(|v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed2() {
        for (s, v) in [("95", 9500), ("95.5", 9550), ("95.05", 9505), ("0.00", 0)] {
            assert_eq!(Fixed2::parse("k", "f", s).unwrap(), Fixed2(v));
        }
        assert_eq!(Fixed2(9505).to_string(), "95.05");
        for s in ["", "-1", "+1", "1.", ".5", "1.234", "1e3", " 1", "1.2.3"] {
            assert!(Fixed2::parse("k", "f", s).is_err(), "{s}");
        }
    }

    #[test]
    fn ranges_name_field() {
        assert_eq!(
            parse_fixed_in("io.cost.qos", "rpct", "101", 0, 10000)
                .unwrap_err()
                .to_string(),
            "io.cost.qos: rpct=101 out of range 0..=100"
        );
        assert_eq!(
            parse_in("io.weight", "default", "99999999999999999999999", 1, 10000)
                .unwrap_err()
                .to_string(),
            "io.weight: default=99999999999999999999999 out of range 1..=10000"
        );
        assert!(parse_in("k", "f", "x", 1, 2)
            .unwrap_err()
            .to_string()
            .contains("not a number"));
    }
}
