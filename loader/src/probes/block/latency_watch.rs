//! Never silently empty: watches, poll by poll, whether the reads and
//! writes the block programs count also get a latency. Where the kernel
//! does not give them their allocation or issue stamps (a layout this build
//! cannot read, a queue that bypasses its stats), the counts stay right
//! but the histograms stay empty; this says so in the log and in
//! `iowarden_probe_active{probe="latency"}`.

use iowarden_exporters::{Op, ProbeStatus, Snapshot};

use crate::probes::status;

/// New reads and writes a poll needs before it is judged.
const MIN_REQUESTS: u64 = 1000;

#[derive(Default)]
pub struct LatencyWatch {
    /// Reads and writes completed, and those timed, at the last judged poll.
    last: (u64, u64),
    /// Why latency is incomplete, while it is.
    missing: Option<String>,
}

/// Completed reads and writes, and those with a total latency, in `snap`.
fn counts(snap: &Snapshot) -> (u64, u64) {
    snap.io
        .iter()
        .filter(|s| matches!(s.op, Op::Read | Op::Write))
        .fold((0, 0), |(ios, timed), s| {
            (
                ios + s.ios,
                timed + s.latency.total.counts.iter().sum::<u64>(),
            )
        })
}

impl LatencyWatch {
    /// Judges the reads and writes since the last judged poll (once there
    /// are MIN_REQUESTS of them): fewer than half timed is a gap. Returns a
    /// line to log when the state changes.
    pub fn check(&mut self, snap: &Snapshot) -> Option<String> {
        let (ios, timed) = counts(snap);
        let (new_ios, new_timed) = (
            ios.saturating_sub(self.last.0),
            timed.saturating_sub(self.last.1),
        );
        if new_ios < MIN_REQUESTS {
            return None;
        }
        self.last = (ios, timed);
        let gap = new_timed * 2 < new_ios;
        match (gap, self.missing.is_some()) {
            (true, false) => {
                let why = format!(
                    "{} of {new_ios} reads and writes since the last check completed without \
                     the kernel's allocation or issue stamp (drops: no_issue_stamp {}, \
                     no_start_stamp {}): latency histograms incomplete on this kernel",
                    new_ios - new_timed,
                    snap.drops.no_issue_stamp,
                    snap.drops.no_start_stamp
                );
                self.missing = Some(why.clone());
                Some(format!("latency inactive: {why}"))
            }
            (false, true) => {
                self.missing = None;
                Some("latency: requests are timed again".into())
            }
            _ => None,
        }
    }

    /// The latency status while a gap lasts.
    pub fn status(&self) -> Option<ProbeStatus> {
        self.missing
            .as_ref()
            .map(|why| status("latency", false, why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iowarden_exporters::IoSeries;

    fn snap(ios: u64, timed: u64) -> Snapshot {
        let mut s = IoSeries {
            op: Op::Read,
            ios,
            ..Default::default()
        };
        s.latency.total.counts = vec![timed];
        Snapshot {
            io: vec![s],
            ..Default::default()
        }
    }

    #[test]
    fn says_once_when_requests_go_untimed_and_when_they_are_timed_again() {
        let mut w = LatencyWatch::default();
        assert_eq!(w.check(&snap(500, 0)), None, "too few to judge");
        assert!(w.check(&snap(4096, 0)).unwrap().contains("4096 of 4096"));
        assert!(w.status().is_some_and(|s| !s.active));
        assert_eq!(w.check(&snap(8192, 0)), None, "said once");
        assert!(w.check(&snap(10000, 1800)).unwrap().contains("timed again"));
        assert!(w.status().is_none());
    }
}
