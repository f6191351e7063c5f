//! The knob parsers, compiled from the loader's sources (only the pure
//! part: writer and CLI are left out under cfg(fuzzing)), and the property
//! every fuzz target checks: no panic; what parses formats to text that
//! parses to the same value and formats identically again.

#[path = "../../loader/src/knobs/mod.rs"]
pub mod knobs;

// Where else input arrives from outside: --web.config.file, durations on
// the command line, --cost-model and --slo strings (the Accept header's
// negotiation and the knob journal are fuzzed through their crates/modules).
#[path = "../../loader/src/costmodel/mod.rs"]
pub mod costmodel;
#[path = "../../loader/src/duration.rs"]
pub mod duration;
#[path = "../../loader/src/tune/slo.rs"]
pub mod slo;
#[path = "../../loader/src/web/config.rs"]
pub mod web_config;

/// Inputs that arrive from outside the knob files: no panic on anything.
pub fn check_input(kind: &str, data: &[u8]) {
    if kind == "journal" {
        let _ = knobs::journal::parse(data);
        return;
    }
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match kind {
        "web_config" => {
            if let Ok(spec) = web_config::parse_web_config(s) {
                // What parses holds only bcrypt hashes and allowed headers.
                for hash in spec.users.values() {
                    assert!(hash.parse::<bcrypt::HashParts>().is_ok(), "{hash:?}");
                }
            }
        }
        "accept" => {
            let _ = iowarden_exporters::negotiate(Some(s));
        }
        "duration" => {
            let _ = duration::parse_duration(s);
        }
        "cost_model_arg" => {
            let _ = costmodel::parse_over(costmodel::AUTOP_SSD_DFL, s);
        }
        "slo" => {
            let _ = slo::parse_slo(s);
        }
        _ => unreachable!(),
    }
}

use knobs::fields::format_lines;
use std::fmt::{Debug, Display};

fn round_trip<T: Debug + PartialEq + Display, E: Debug>(
    s: &str,
    parse: impl Fn(&str) -> Result<Vec<T>, E>,
) {
    if let Ok(v) = parse(s) {
        let text = format_lines(&v);
        let v2 =
            parse(&text).unwrap_or_else(|e| panic!("{text:?} (from {s:?}) does not parse: {e:?}"));
        assert_eq!(v2, v, "value changed through {text:?}");
        assert_eq!(format_lines(&v2), text, "format not stable");
    }
}

/// A single line (write side): Display has no newline.
fn one<T: Debug + PartialEq + Display, E: Debug>(s: &str, parse: impl Fn(&str) -> Result<T, E>) {
    if let Ok(x) = parse(s) {
        let text = x.to_string();
        let x2 =
            parse(&text).unwrap_or_else(|e| panic!("{text:?} (from {s:?}) does not parse: {e:?}"));
        assert_eq!(x2, x, "value changed through {text:?}");
        assert_eq!(x2.to_string(), text, "format not stable");
    }
}

/// Whole files and single (write-side) lines.
pub fn check(kind: &str, data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    use knobs::*;
    match kind {
        "cost_qos" => {
            round_trip(s, cost_qos::parse_all);
            one(s, cost_qos::CostQos::parse);
        }
        "cost_model" => {
            round_trip(s, cost_model::parse_all);
            one(s, cost_model::CostModel::parse);
        }
        "weight" => {
            round_trip(s, weight::parse_all);
            one(s, weight::WeightLine::parse);
        }
        "max" => {
            round_trip(s, max::parse_all);
            one(s, max::IoMax::parse);
        }
        "latency" => {
            round_trip(s, latency::parse_all);
            one(s, latency::IoLatency::parse);
        }
        "stat" => {
            round_trip(s, stat::parse_all);
            one(s, stat::IoStat::parse);
        }
        "pressure" => {
            round_trip(s, pressure::parse_all);
            one(s, pressure::PsiLine::parse);
            // What the exporter reads (probes/pressure.rs): the totals
            // of lines that parse.
            if let Ok((some, full)) = pressure::stall_totals_us(s) {
                let lines = pressure::parse_all(s).expect("totals of lines that parse");
                assert!(lines.iter().any(|l| l.total == Some(some)));
                assert!(lines.iter().any(|l| l.total == Some(full)));
            }
        }
        "devnum" => one(s, |x| DevNum::parse("devnum", x)),
        _ => unreachable!(),
    }
    // Every kind's check_write must not panic on anything.
    for k in [
        KnobKind::CostQos,
        KnobKind::CostModel,
        KnobKind::Weight,
        KnobKind::Max,
        KnobKind::Latency,
    ] {
        if let Ok(dev) = k.check_write(s) {
            let _ = dev;
            let _ = k.restore_commands(s, s);
        }
    }
}
