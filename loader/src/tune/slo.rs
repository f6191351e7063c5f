//! Latency SLOs as the tuner takes them: `read-p99=2ms`, `write-p99.9=10ms`,
//! `any-p95=500us`.

use std::fmt;
use std::time::Duration;

use iowarden_exporters::Op;

/// Which requests an SLO covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpClass {
    Read,
    Write,
    /// Reads and writes together.
    Any,
}

impl OpClass {
    pub fn covers(self, op: Op) -> bool {
        match self {
            OpClass::Read => op == Op::Read,
            OpClass::Write => op == Op::Write,
            OpClass::Any => matches!(op, Op::Read | Op::Write),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            OpClass::Read => "read",
            OpClass::Write => "write",
            OpClass::Any => "any",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Slo {
    pub class: OpClass,
    /// Quantile in (0, 1), e.g. 0.99.
    pub quantile: f64,
    pub target: Duration,
    /// The text it was parsed from, for reports and metric labels.
    pub spec: String,
}

impl fmt::Display for Slo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.spec)
    }
}

const FORM: &str = "expected <read|write|any>-p<percentile>=<latency>, e.g. read-p99=2ms";

/// Parses a latency with a unit (us, ms, s); the tuner's targets are
/// sub-second, so a bare number is refused rather than guessed.
fn parse_latency(s: &str) -> Result<Duration, String> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("latency '{s}' needs a unit (us, ms or s)"))?;
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("latency '{s}' is not a number with a unit"))?;
    let secs = match unit {
        "us" | "µs" => v / 1e6,
        "ms" => v / 1e3,
        "s" => v,
        _ => return Err(format!("latency unit '{unit}' in '{s}': use us, ms or s")),
    };
    // io.cost.qos latency targets are u32 microseconds; below 1 µs is noise.
    if !(secs.is_finite() && (1e-6..=60.0).contains(&secs)) {
        return Err(format!("latency '{s}' out of range (1us to 60s)"));
    }
    Ok(Duration::from_secs_f64(secs))
}

pub fn parse_slo(spec: &str) -> Result<Slo, String> {
    let spec = spec.trim();
    let err = |why: String| format!("SLO '{spec}': {why}");
    let (lhs, rhs) = spec
        .split_once('=')
        .ok_or_else(|| err(format!("no '=' ({FORM})")))?;
    let (class, pct) = lhs
        .split_once("-p")
        .ok_or_else(|| err(format!("no '-p<percentile>' ({FORM})")))?;
    let class = match class {
        "read" => OpClass::Read,
        "write" => OpClass::Write,
        "any" => OpClass::Any,
        other => return Err(err(format!("unknown class '{other}' (read, write or any)"))),
    };
    let pct: f64 = pct
        .parse()
        .map_err(|_| err(format!("percentile '{pct}' is not a number ({FORM})")))?;
    if !(pct.is_finite() && pct > 0.0 && pct < 100.0) {
        return Err(err(format!(
            "percentile {pct} out of range (0 < p < 100, e.g. 99 or 99.9)"
        )));
    }
    let target = parse_latency(rhs).map_err(err)?;
    Ok(Slo {
        class,
        quantile: pct / 100.0,
        target,
        spec: format!("{}-p{}={}", class.as_str(), pct, rhs),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        let s = parse_slo("read-p99=2ms").unwrap();
        assert_eq!(s.class, OpClass::Read);
        assert!((s.quantile - 0.99).abs() < 1e-12);
        assert_eq!(s.target, Duration::from_millis(2));
        assert_eq!(s.spec, "read-p99=2ms");
        let s = parse_slo("write-p99.9=10ms").unwrap();
        assert_eq!(s.class, OpClass::Write);
        assert!((s.quantile - 0.999).abs() < 1e-12);
        let s = parse_slo(" any-p95=500us ").unwrap();
        assert_eq!(s.class, OpClass::Any);
        assert_eq!(s.target, Duration::from_micros(500));
        assert_eq!(
            parse_slo("read-p50=1.5s").unwrap().target,
            Duration::from_millis(1500)
        );
    }

    #[test]
    fn classes_cover_their_ops() {
        assert!(OpClass::Read.covers(Op::Read) && !OpClass::Read.covers(Op::Write));
        assert!(OpClass::Any.covers(Op::Write) && !OpClass::Any.covers(Op::Flush));
    }

    #[test]
    fn malformed_slos_say_what_is_wrong() {
        let cases = [
            ("read-p99", "no '='"),
            ("read99=2ms", "no '-p"),
            ("trim-p99=2ms", "unknown class 'trim'"),
            ("read-pX=2ms", "percentile 'X'"),
            ("read-p100=2ms", "out of range"),
            ("read-p0=2ms", "out of range"),
            ("read-p99=2", "needs a unit"),
            ("read-p99=2min", "latency unit 'min'"),
            ("read-p99=0ms", "out of range"),
            ("read-p99=-1ms", "not a number"),
            ("read-p99=99s", "out of range"),
        ];
        for (spec, want) in cases {
            let e = parse_slo(spec).unwrap_err();
            assert!(e.contains(want), "{spec}: {e}");
            assert!(e.starts_with(&format!("SLO '{spec}'")), "{e}");
        }
    }
}
