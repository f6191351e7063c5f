//! What a bench run is asked for: the suites, the knobs under test (with
//! their command-line parsers) and the durations and sweep sizes of its
//! mode. Pure.

use std::fmt;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// A sub-benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Suite {
    #[serde(rename = "overhead")]
    Overhead,
    #[serde(rename = "fairness")]
    Fairness,
    #[serde(rename = "prio-util")]
    PrioUtil,
    #[serde(rename = "burst")]
    Burst,
    #[serde(rename = "schedulers")]
    Schedulers,
}

impl Suite {
    pub const ALL: [Suite; 5] = [
        Suite::Overhead,
        Suite::Fairness,
        Suite::PrioUtil,
        Suite::Burst,
        Suite::Schedulers,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Suite::Overhead => "overhead",
            Suite::Fairness => "fairness",
            Suite::PrioUtil => "prio-util",
            Suite::Burst => "burst",
            Suite::Schedulers => "schedulers",
        }
    }
}

impl fmt::Display for Suite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A knob under test: a cgroup io knob, or an I/O scheduler (with its
/// cgroup weights where it has them: io.bfq.weight for bfq).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub enum Knob {
    #[default]
    #[serde(rename = "none")]
    None,
    #[serde(rename = "io.max")]
    IoMax,
    #[serde(rename = "io.latency")]
    IoLatency,
    #[serde(rename = "io.cost")]
    IoCost,
    #[serde(rename = "bfq")]
    Bfq,
    #[serde(rename = "mq-deadline")]
    MqDeadline,
    #[serde(rename = "kyber")]
    Kyber,
}

impl Knob {
    pub const ALL: [Knob; 7] = [
        Knob::None,
        Knob::IoMax,
        Knob::IoLatency,
        Knob::IoCost,
        Knob::Bfq,
        Knob::MqDeadline,
        Knob::Kyber,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Knob::None => "none",
            Knob::IoMax => "io.max",
            Knob::IoLatency => "io.latency",
            Knob::IoCost => "io.cost",
            Knob::Bfq => "bfq",
            Knob::MqDeadline => "mq-deadline",
            Knob::Kyber => "kyber",
        }
    }

    /// The I/O scheduler the knob runs under: the scheduler knobs name
    /// theirs; the cgroup knobs run with none (no scheduler), as isol-bench
    /// evaluates each knob on its own.
    pub fn scheduler(self) -> &'static str {
        match self {
            Knob::Bfq => "bfq",
            Knob::MqDeadline => "mq-deadline",
            Knob::Kyber => "kyber",
            _ => "none",
        }
    }

    pub fn is_scheduler(self) -> bool {
        matches!(self, Knob::Bfq | Knob::MqDeadline | Knob::Kyber)
    }

    /// Whether the knob can share bandwidth by weight (D2 applies).
    pub fn has_weights(self) -> bool {
        matches!(self, Knob::None | Knob::IoCost | Knob::Bfq)
    }
}

impl fmt::Display for Knob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `overhead,fairness` or `all`; duplicates collapse, order is canonical.
pub fn parse_suites(s: &str) -> Result<Vec<Suite>> {
    let mut out = Vec::new();
    for w in s.split(',').map(str::trim) {
        if w == "all" {
            out.extend(Suite::ALL);
            continue;
        }
        match Suite::ALL.iter().find(|x| x.name() == w) {
            Some(&x) => out.push(x),
            None => bail!(
                "unknown suite '{w}': one or more of {}, or all",
                Suite::ALL.map(Suite::name).join(", ")
            ),
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// `none,io.cost` or `all`; `none` (the baseline every score is relative
/// to) is always included.
pub fn parse_knobs(s: &str) -> Result<Vec<Knob>> {
    let mut out = vec![Knob::None];
    for w in s.split(',').map(str::trim) {
        if w == "all" {
            out.extend(Knob::ALL);
            continue;
        }
        match Knob::ALL.iter().find(|x| x.name() == w) {
            Some(&x) => out.push(x),
            None => bail!(
                "unknown knob '{w}': one or more of {}, or all",
                Knob::ALL.map(Knob::name).join(", ")
            ),
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Durations and sweep sizes of one mode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Params {
    pub quick: bool,
    /// Seconds each fio job of a phase runs.
    pub runtime_s: f64,
    /// Poll interval of the monitor, seconds (timelines' resolution).
    pub interval_s: f64,
    /// Poll interval during the burst suite.
    pub burst_interval_s: f64,
    /// Seconds of each calibration run.
    pub calibrate_s: f64,
    /// Cgroup counts of the overhead suite.
    pub overhead_cgroups: Vec<usize>,
    /// Bytes of the device the jobs read from.
    pub size: u64,
}

impl Params {
    pub fn new(quick: bool, device_bytes: u64) -> Params {
        let size = device_bytes.min(if quick { 1 << 30 } else { 16 << 30 });
        if quick {
            Params {
                quick,
                runtime_s: 5.0,
                interval_s: 0.2,
                burst_interval_s: 0.1,
                calibrate_s: 2.0,
                overhead_cgroups: vec![1, 4],
                size,
            }
        } else {
            Params {
                quick,
                runtime_s: 30.0,
                interval_s: 0.5,
                burst_interval_s: 0.1,
                calibrate_s: 10.0,
                overhead_cgroups: vec![1, 2, 4, 8, 16],
                size,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suites_parse_and_unknown_ones_are_named() {
        assert_eq!(
            parse_suites("fairness, overhead,fairness").unwrap(),
            vec![Suite::Overhead, Suite::Fairness]
        );
        assert_eq!(parse_suites("all").unwrap(), Suite::ALL.to_vec());
        let e = parse_suites("fairness,speed").unwrap_err().to_string();
        assert!(
            e.contains("unknown suite 'speed'") && e.contains("prio-util"),
            "{e}"
        );
    }

    #[test]
    fn knobs_parse_with_the_baseline() {
        assert_eq!(
            parse_knobs("io.cost").unwrap(),
            vec![Knob::None, Knob::IoCost]
        );
        assert_eq!(parse_knobs("all").unwrap(), Knob::ALL.to_vec());
        let e = parse_knobs("io.cost,io.prio").unwrap_err().to_string();
        assert!(
            e.contains("unknown knob 'io.prio'") && e.contains("mq-deadline"),
            "{e}"
        );
        // Serde names are the command-line names (the JSON schema uses them).
        for k in Knob::ALL {
            assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{k}\""));
        }
        for s in Suite::ALL {
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
        }
    }
}
