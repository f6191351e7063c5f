//! A cgroup's I/O pressure in one window, as the short text `top` shows
//! beside its culprit account: how much of the window its tasks stalled on
//! I/O (the kernel's PSI, io.pressure), where the account says behind
//! whom its requests waited. A pure function of a delta snapshot.

use iowarden_exporters::Snapshot;

/// "io pressure: some 42% full 30%": the seconds `cgroup` (its path) stalled
/// over the window of `delta` (a delta snapshot), some and full; None
/// where the snapshot has no io.pressure of it (cgroup v1, no PSI, no
/// I/O series) or no window.
pub fn pressure_text(delta: &Snapshot, cgroup: &str) -> Option<String> {
    let window = delta.window_seconds;
    if window <= 0.0 {
        return None;
    }
    let p = delta.io_pressure.iter().find(|p| p.cgroup.path == cgroup)?;
    // A poll reads the files a moment after the window's stamp: a share
    // can come out a hair above 100 %.
    let pct = |seconds: f64| (seconds / window * 100.0).round().min(100.0);
    Some(format!(
        "io pressure: some {:.0}% full {:.0}%",
        pct(p.some_seconds),
        pct(p.full_seconds)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use iowarden_exporters::{CgroupRef, PressureSeries};

    fn pressure(path: &str, some_seconds: f64, full_seconds: f64) -> PressureSeries {
        PressureSeries {
            cgroup: CgroupRef {
                id: path.len() as u64,
                path: path.into(),
            },
            some_seconds,
            full_seconds,
        }
    }

    #[test]
    fn the_window_s_share_of_stall_time() {
        let earlier = Snapshot {
            taken_at_unix_seconds: 100.0,
            io_pressure: vec![pressure("/victim", 10.0, 4.0), pressure("/idle", 1.0, 1.0)],
            ..Default::default()
        };
        let later = Snapshot {
            taken_at_unix_seconds: 102.0,
            io_pressure: vec![pressure("/victim", 10.84, 4.6), pressure("/idle", 1.0, 1.0)],
            ..Default::default()
        };
        let delta = later.delta_since(&earlier);
        assert_eq!(
            pressure_text(&delta, "/victim").as_deref(),
            Some("io pressure: some 42% full 30%")
        );
        assert_eq!(
            pressure_text(&delta, "/idle").as_deref(),
            Some("io pressure: some 0% full 0%")
        );
        assert_eq!(pressure_text(&delta, "/elsewhere"), None, "no series");
        let no_window = Snapshot {
            window_seconds: 0.0,
            ..delta
        };
        assert_eq!(pressure_text(&no_window, "/victim"), None);
    }

    #[test]
    fn a_share_past_the_window_reads_100() {
        let delta = Snapshot {
            window_seconds: 1.0,
            io_pressure: vec![pressure("/held", 1.004, 0.5)],
            ..Default::default()
        };
        assert_eq!(
            pressure_text(&delta, "/held").as_deref(),
            Some("io pressure: some 100% full 50%")
        );
    }
}
