//! Which io.* file a path names, and what each kind checks and restores
//! through its parser. Pure.

use super::devnum::DevNum;
use super::fields::{self, KnobError};
use super::{cost_model, cost_qos, latency, max, pressure, stat, weight};

/// Which io.* file a path names (by its file name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KnobKind {
    CostQos,
    CostModel,
    Weight,
    Max,
    Latency,
    Stat,
    Pressure,
}

impl KnobKind {
    pub fn from_file_name(name: &str) -> Option<KnobKind> {
        Some(match name {
            "io.cost.qos" => KnobKind::CostQos,
            "io.cost.model" => KnobKind::CostModel,
            "io.weight" => KnobKind::Weight,
            "io.max" => KnobKind::Max,
            "io.latency" => KnobKind::Latency,
            "io.stat" => KnobKind::Stat,
            "io.pressure" => KnobKind::Pressure,
            _ => return None,
        })
    }

    pub fn file_name(self) -> &'static str {
        match self {
            KnobKind::CostQos => "io.cost.qos",
            KnobKind::CostModel => "io.cost.model",
            KnobKind::Weight => "io.weight",
            KnobKind::Max => "io.max",
            KnobKind::Latency => "io.latency",
            KnobKind::Stat => "io.stat",
            KnobKind::Pressure => "io.pressure",
        }
    }

    /// io.stat and io.pressure are statistics, not settings.
    pub fn writable(self) -> bool {
        !matches!(self, KnobKind::Stat | KnobKind::Pressure)
    }

    /// io.cost.* writes freeze and quiesce the device queue.
    pub fn freezes_queue(self) -> bool {
        matches!(self, KnobKind::CostQos | KnobKind::CostModel)
    }

    /// Parses a whole file as the kernel prints it and formats it again
    /// (canonical form); errors name the field and its range.
    pub fn normalize(self, content: &str) -> Result<String, KnobError> {
        Ok(match self {
            KnobKind::CostQos => fields::format_lines(&cost_qos::parse_all(content)?),
            KnobKind::CostModel => fields::format_lines(&cost_model::parse_all(content)?),
            KnobKind::Weight => fields::format_lines(&weight::parse_all(content)?),
            KnobKind::Max => fields::format_lines(&max::parse_all(content)?),
            KnobKind::Latency => fields::format_lines(&latency::parse_all(content)?),
            KnobKind::Stat => fields::format_lines(&stat::parse_all(content)?),
            KnobKind::Pressure => fields::format_lines(&pressure::parse_all(content)?),
        })
    }

    /// Checks a value to be written (one line, the write-side form) and
    /// returns the device it addresses, if any.
    pub fn check_write(self, value: &str) -> Result<Option<DevNum>, KnobError> {
        let one = single_line(self, value)?;
        match self {
            KnobKind::CostQos => cost_qos::CostQos::parse(one).map(|q| Some(q.dev)),
            KnobKind::CostModel => cost_model::CostModel::parse(one).map(|m| Some(m.dev)),
            KnobKind::Weight => weight::WeightLine::parse(one).map(|w| w.dev()),
            KnobKind::Max => max::IoMax::parse(one).map(|m| Some(m.dev)),
            KnobKind::Latency => latency::IoLatency::parse(one).map(|l| Some(l.dev)),
            KnobKind::Stat | KnobKind::Pressure => Err(KnobError::new(
                self.file_name(),
                "read-only (statistics), cannot be set",
            )),
        }
    }

    /// The writes that put back `previous` (the file as read before) after
    /// `written` (one write-side line) was written. Pure: the writer runs them.
    pub fn restore_commands(self, previous: &str, written: &str) -> Result<Vec<String>, KnobError> {
        let dev = self.check_write(written)?;
        Ok(match self {
            KnobKind::CostQos => {
                let dev = dev.expect("qos lines name a device");
                let prev = cost_qos::parse_all(previous)?;
                vec![match prev.iter().find(|q| q.dev == dev) {
                    Some(q) => q.restore_line(),
                    // iocost was never set up on this device: the closest
                    // state userspace can reach is disabled, auto parameters.
                    None => format!("{dev} enable=0 ctrl=auto"),
                }]
            }
            KnobKind::CostModel => {
                let dev = dev.expect("model lines name a device");
                let prev = cost_model::parse_all(previous)?;
                vec![match prev.iter().find(|m| m.dev == dev) {
                    Some(m) => m.restore_line(),
                    None => format!("{dev} ctrl=auto"),
                }]
            }
            KnobKind::Weight => {
                let prev = weight::parse_all(previous)?;
                weight::restore_commands(&prev, &weight::WeightLine::parse(written.trim())?)
            }
            KnobKind::Max => {
                let dev = dev.expect("io.max lines name a device");
                let prev = max::parse_all(previous)?;
                vec![match prev.iter().find(|m| m.dev == dev) {
                    Some(m) => m.to_string(),
                    None => format!("{dev} rbps=max wbps=max riops=max wiops=max"),
                }]
            }
            KnobKind::Latency => {
                let dev = dev.expect("io.latency lines name a device");
                let prev = latency::parse_all(previous)?;
                vec![match prev.iter().find(|l| l.dev == dev) {
                    Some(l) => l.to_string(),
                    None => format!("{dev} target=max"),
                }]
            }
            KnobKind::Stat | KnobKind::Pressure => unreachable!("check_write refuses these"),
        })
    }
}

fn single_line(kind: KnobKind, value: &str) -> Result<&str, KnobError> {
    let v = value.strip_suffix('\n').unwrap_or(value);
    if v.contains('\n') {
        return Err(KnobError::new(kind.file_name(), "write one line at a time"));
    }
    if v.trim().is_empty() {
        return Err(KnobError::new(kind.file_name(), "empty value"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_name() {
        for k in [
            KnobKind::CostQos,
            KnobKind::CostModel,
            KnobKind::Weight,
            KnobKind::Max,
            KnobKind::Latency,
            KnobKind::Stat,
            KnobKind::Pressure,
        ] {
            assert_eq!(KnobKind::from_file_name(k.file_name()), Some(k));
        }
        assert_eq!(KnobKind::from_file_name("io.bfq.weight"), None);
    }

    #[test]
    fn restore_qos_user_and_auto() {
        let prev = "259:0 enable=1 ctrl=user rpct=95.00 rlat=5000 wpct=95.00 wlat=5000 min=50.00 max=150.00\n";
        let c = KnobKind::CostQos
            .restore_commands(prev, "259:0 rlat=2000")
            .unwrap();
        assert_eq!(c, vec![prev.trim_end().to_string()]);
        let prev = "259:0 enable=0 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 max=10000.00\n";
        let c = KnobKind::CostQos
            .restore_commands(prev, "259:0 enable=1")
            .unwrap();
        assert_eq!(c, vec!["259:0 enable=0 ctrl=auto"]);
        let c = KnobKind::CostQos
            .restore_commands("", "8:0 enable=1")
            .unwrap();
        assert_eq!(c, vec!["8:0 enable=0 ctrl=auto"]);
    }

    #[test]
    fn restore_model_and_max_and_latency() {
        let prev = "259:0 ctrl=user model=linear rbps=1 rseqiops=2 rrandiops=3 wbps=4 wseqiops=5 wrandiops=6\n";
        let c = KnobKind::CostModel
            .restore_commands(prev, "259:0 rbps=100")
            .unwrap();
        assert_eq!(c, vec![prev.trim_end().to_string()]);
        let prev = "259:0 ctrl=auto model=linear rbps=1 rseqiops=2 rrandiops=3 wbps=4 wseqiops=5 wrandiops=6\n";
        let c = KnobKind::CostModel
            .restore_commands(prev, "259:0 rbps=100")
            .unwrap();
        assert_eq!(c, vec!["259:0 ctrl=auto"]);
        let c = KnobKind::Max.restore_commands("", "8:0 rbps=1000").unwrap();
        assert_eq!(c, vec!["8:0 rbps=max wbps=max riops=max wiops=max"]);
        let c = KnobKind::Latency
            .restore_commands("8:0 target=100\n", "8:0 target=5")
            .unwrap();
        assert_eq!(c, vec!["8:0 target=100"]);
    }

    #[test]
    fn check_write_rejects() {
        let e = KnobKind::CostQos
            .check_write("8:0 rpct=101")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "io.cost.qos: rpct=101 out of range 0..=100");
        assert!(KnobKind::Stat.check_write("8:0 rbytes=1").is_err());
        assert!(KnobKind::Weight
            .check_write("default 1\ndefault 2")
            .is_err());
        assert!(KnobKind::Weight.check_write("  ").is_err());
        assert_eq!(KnobKind::Weight.check_write("default 100\n").unwrap(), None);
    }
}
