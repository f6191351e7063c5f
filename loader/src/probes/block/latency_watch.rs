//! Never silently empty, for latency: whether the reads and writes the
//! block programs count also get a latency. Where the kernel does not give
//! them their allocation or issue stamps (a layout this build cannot read,
//! a queue that bypasses its stats), the counts stay right but the
//! histograms stay empty; this says so in the log and in
//! `iowarden_probe_active{probe="latency"}`.

use iowarden_exporters::{Op, Snapshot};

use crate::probes::gap_watch::GapWatch;

pub struct LatencyWatch(GapWatch);

impl Default for LatencyWatch {
    fn default() -> Self {
        LatencyWatch(GapWatch::new("latency"))
    }
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
    /// Fewer than half of the new reads and writes timed is a gap. Returns
    /// a line to log when the state changes.
    pub fn check(&mut self, snap: &Snapshot) -> Option<String> {
        let (ios, timed) = counts(snap);
        self.0.check(ios, timed, |new_ios, new_timed| {
            format!(
                "{} of {new_ios} reads and writes since the last check completed without \
                 the kernel's allocation or issue stamp (drops: no_issue_stamp {}, \
                 no_start_stamp {}): latency histograms incomplete on this kernel",
                new_ios - new_timed,
                snap.drops.no_issue_stamp,
                snap.drops.no_start_stamp
            )
        })
    }

    /// Shows a gap in the snapshot's statuses.
    pub fn show(&self, snap: &mut Snapshot) {
        self.0.show(snap)
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
        let shown = |w: &LatencyWatch| {
            let mut s = Snapshot::default();
            w.show(&mut s);
            s.probes
        };
        assert!(matches!(shown(&w).as_slice(), [p] if p.name == "latency" && !p.active));
        assert_eq!(w.check(&snap(8192, 0)), None, "said once");
        assert!(w
            .check(&snap(10000, 1800))
            .unwrap()
            .contains("complete again"));
        assert!(shown(&w).is_empty());
    }
}
