//! `iowarden run`'s judge of the limits: once a window, every knob set on
//! the host judged against the I/O measured since the last judgement (the
//! first at the first poll); the verdicts go with every snapshot until the
//! next (iowarden_limit_state, /snapshot.json), with the limits the kernel
//! dropped with their device since (lost.rs). The hierarchy is read in a
//! thread of its own: at thousands of cgroups a walk takes longer than a
//! poll interval (2,000 v1 cgroups: ~0.5 s on a 2-core VM).

use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use iowarden_exporters::{LimitVerdict, Snapshot};

use super::evidence::{activity_of, activity_since, ActivityMap, Evidence};
use super::judge::judge_all;
use super::lost::{lost_knobs, SeenKnob};
use super::read;
use crate::host::cgroups::{io_hierarchy, parse_mountinfo};

pub struct LimitsWatch {
    /// The io controller's hierarchy.
    root: PathBuf,
    v2: bool,
    window: Duration,
    /// When the last judgement was made, and the cumulative activity then.
    last: Option<(Instant, ActivityMap)>,
    /// The judgement under way: its verdicts and the knobs it saw.
    judging: Option<JoinHandle<(Vec<LimitVerdict>, Vec<SeenKnob>)>>,
    verdicts: Vec<LimitVerdict>,
    /// Per-device knobs seen so far (see lost.rs).
    seen: Vec<SeenKnob>,
}

impl LimitsWatch {
    /// Err(why) where no io hierarchy is mounted.
    pub fn new(window: Duration) -> Result<LimitsWatch, String> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("reading /proc/self/mountinfo: {e}"))?;
        let hs = parse_mountinfo(&mountinfo);
        let h = io_hierarchy(&hs).ok_or(
            "no cgroup hierarchy with the io controller (cgroup2 io, v1 blkio) is mounted",
        )?;
        Ok(LimitsWatch {
            root: h.mount_point.clone(),
            v2: h.v2,
            window,
            last: None,
            judging: None,
            verdicts: Vec::new(),
            seen: Vec::new(),
        })
    }

    /// Starts a judgement when a window has passed since the last one (and
    /// none is under way), takes the verdicts of one that has ended, and
    /// puts the latest in `snap` (a cumulative snapshot).
    pub fn attach(&mut self, snap: &mut Snapshot) {
        if self.judging.as_ref().is_some_and(JoinHandle::is_finished) {
            if let Ok((verdicts, seen)) = self.judging.take().unwrap().join() {
                self.verdicts = verdicts;
                self.seen = seen;
            }
        }
        let due = self
            .last
            .as_ref()
            .is_none_or(|(at, _)| at.elapsed() >= self.window);
        if due && self.judging.is_none() {
            let now = activity_of(snap);
            let window = match &self.last {
                Some((_, earlier)) => activity_since(&now, earlier),
                None => now.clone(),
            };
            let probes = snap.probes.clone();
            let (root, v2, seen) = (self.root.clone(), self.v2, self.seen.clone());
            self.judging = Some(std::thread::spawn(move || {
                let v2_root = v2.then_some(root.as_path());
                let knobs = read::configured(&root, "/", !v2);
                let mut ev = Evidence::new(&probes, window, read::devices(v2_root), !v2);
                if v2 {
                    ev.dirty_bytes = read::dirty_bytes(&root, &knobs, &ev.devices);
                }
                let cgroup_exists = |c: &str| root.join(c.trim_start_matches('/')).is_dir();
                let lost = lost_knobs(&seen, &knobs, &ev.devices, cgroup_exists);
                let mut verdicts = judge_all(&knobs, &ev);
                verdicts.extend(lost.verdicts);
                (verdicts, lost.seen)
            }));
            self.last = Some((Instant::now(), now));
        }
        snap.limits = self.verdicts.clone();
    }
}
