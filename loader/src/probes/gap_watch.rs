//! Never silently empty: a probe that attaches but cannot fill what it
//! exports (a stamp the kernel does not set, a field this build reads as 0,
//! a tracepoint that never fires for the requests it should see) says so,
//! in the log and in `iowarden_probe_active{probe, reason}`, at the first
//! poll that shows it. A watch compares, poll by poll, what a probe saw
//! with what it should have seen (e.g. NVMe commands against the block
//! completions on NVMe devices).

use iowarden_exporters::{ProbeStatus, Snapshot};

use crate::probes::objects::status;

/// New events a poll needs before it is judged: enough that a gap is not
/// the skew between two tracepoints of the same requests.
pub const MIN_EVENTS: u64 = 1000;

pub struct GapWatch {
    /// The status's probe name ("latency", "nvme").
    probe: &'static str,
    /// The totals at the last judged poll (the first gates the judging).
    last: Vec<u64>,
    /// Why the probe's metrics are incomplete, while they are.
    missing: Option<String>,
}

impl GapWatch {
    pub fn new(probe: &'static str) -> GapWatch {
        GapWatch {
            probe,
            last: Vec::new(),
            missing: None,
        }
    }

    /// Fewer than half of the expected events seen since the last judged
    /// poll is a gap, which `why(new_expected, new_seen)` explains.
    pub fn check(
        &mut self,
        expected: u64,
        seen: u64,
        why: impl FnOnce(u64, u64) -> String,
    ) -> Option<String> {
        self.judge([expected, seen], |[new_expected, new_seen]| {
            (new_seen * 2 < new_expected).then(|| why(new_expected, new_seen))
        })
    }

    /// Judges the growth of `totals` since the last judged poll, once the
    /// first (the events) grew by MIN_EVENTS: `gap(growth)` says why the
    /// probe's metrics are incomplete, or None. Totals that went down
    /// (series released with their cgroups) restart the count. Returns a
    /// line to log when the state changes.
    pub fn judge<const N: usize>(
        &mut self,
        totals: [u64; N],
        gap: impl FnOnce([u64; N]) -> Option<String>,
    ) -> Option<String> {
        let last: [u64; N] = self.last.clone().try_into().unwrap_or([0; N]);
        if totals.iter().zip(&last).any(|(now, before)| now < before) {
            self.last = totals.to_vec();
            return None;
        }
        let growth: [u64; N] = std::array::from_fn(|i| totals[i] - last[i]);
        if growth.first().is_none_or(|&events| events < MIN_EVENTS) {
            return None;
        }
        self.last = totals.to_vec();
        self.set(gap(growth))
    }

    /// Records whether (and why) the probe's metrics are incomplete now;
    /// returns a line to log when that changes.
    pub fn set(&mut self, missing: Option<String>) -> Option<String> {
        let line = match (&missing, &self.missing) {
            (Some(why), None) => Some(format!("{} inactive: {why}", self.probe)),
            (None, Some(_)) => Some(format!("{}: complete again", self.probe)),
            _ => None,
        };
        self.missing = missing;
        line
    }

    /// The probe's status while a gap lasts.
    pub fn status(&self) -> Option<ProbeStatus> {
        self.missing
            .as_ref()
            .map(|why| status(self.probe, false, why))
    }

    /// Shows a gap in the snapshot: the probe's status (the one from its
    /// start, if any) becomes inactive with the reason.
    pub fn show(&self, snap: &mut Snapshot) {
        if let Some(gap) = self.status() {
            snap.probes.retain(|p| p.name != gap.name);
            snap.probes.push(gap);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(expected: u64, seen: u64) -> String {
        format!("{seen} of {expected}")
    }

    #[test]
    fn says_once_when_events_go_missing_and_when_they_are_seen_again() {
        let mut w = GapWatch::new("nvme");
        assert_eq!(w.check(500, 0, why), None, "too few to judge");
        assert_eq!(
            w.check(4096, 0, why).as_deref(),
            Some("nvme inactive: 0 of 4096")
        );
        assert!(w
            .status()
            .is_some_and(|s| !s.active && s.reason == "0 of 4096"));
        assert_eq!(w.check(8192, 100, why), None, "said once");
        assert_eq!(
            w.check(10000, 1800, why).as_deref(),
            Some("nvme: complete again")
        );
        assert!(w.status().is_none());
    }

    #[test]
    fn the_first_total_gates_the_judging_of_the_others() {
        let mut w = GapWatch::new("nvme");
        let zero_bytes = |[n, bytes, block]: [u64; 3]| {
            (bytes == 0 && block > 0).then(|| format!("0 bytes in {n} commands"))
        };
        // 10 MiB in 900 commands: not judged yet, however many bytes.
        assert_eq!(w.judge([900, 0, 10 << 20], zero_bytes), None);
        assert_eq!(
            w.judge([1900, 0, 20 << 20], zero_bytes).as_deref(),
            Some("nvme inactive: 0 bytes in 1900 commands")
        );
        assert!(w.judge([2900, 4096, 30 << 20], zero_bytes).is_some());
    }

    #[test]
    fn totals_that_go_down_restart_the_count_instead_of_judging() {
        let mut w = GapWatch::new("nvme");
        assert_eq!(w.check(5000, 5000, why), None);
        // Cgroups released: both totals drop; the next 1000 are judged
        // from the new totals, not from the old ones.
        assert_eq!(w.check(3000, 2000, why), None);
        assert_eq!(w.check(4000, 3000, why), None, "1000 of 1000 seen");
        assert!(w.check(5000, 3000, why).is_some(), "0 of 1000 seen");
    }
}
