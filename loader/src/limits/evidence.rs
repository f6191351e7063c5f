//! What the judge reads: the devices as it needs them and what each
//! cgroup did on each over the window. Pure: read.rs gathers the devices,
//! the snapshot gives the activity.

use std::collections::BTreeMap;

use iowarden_exporters::{Op, ProbeStatus, Snapshot};

use super::writeback;

/// A device as the judge needs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceFacts {
    /// "MAJ:MIN", as the knobs name it.
    pub devnum: String,
    pub name: String,
    /// The name that outlives its number: a device-mapper volume's dm
    /// name (LVM's vg-lv), else the kernel's name; "" for a volume read
    /// while it is created or removed (no dm name yet, or any more).
    pub known_as: String,
    /// The active I/O scheduler ("none", "mq-deadline", "bfq", ...; "" for
    /// a bio-based volume).
    pub scheduler: String,
    /// iocost on this device: None when io.cost.qos does not list it,
    /// Some(enabled) when it does.
    pub iocost: Option<bool>,
    /// Writable mounts on it, on a partition of it or on a volume above
    /// it whose buffered writes are written back charged to the root.
    pub root_writeback: Vec<writeback::RootWriteback>,
}

/// What a cgroup did on a device over the window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Activity {
    pub ios: u64,
    pub held_io_max_seconds: f64,
    /// The throttle stage's sum: io.max's hold and the rq-qos waits.
    pub held_seconds: f64,
    /// Its reads: how many, their throttle stage less io.max's hold (the
    /// rq-qos waits: io.latency's, iocost's; wbt holds only writes) and
    /// their total time, for io.latency, which holds the cgroups beside
    /// its own.
    pub reads: u64,
    pub read_waits_seconds: f64,
    pub read_seconds: f64,
}

/// What the judge reads: the devices, the window's activity by (cgroup,
/// device name), and whether io.max holds are timed here (else why not).
pub struct Evidence {
    pub devices: Vec<DeviceFacts>,
    pub activity: ActivityMap,
    pub io_max_timed: Result<(), String>,
    /// Cgroup v1: writeback is never charged to the cgroup that wrote.
    pub cgroup_v1: bool,
    /// Dirty and under-writeback page cache of each cgroup (memory.stat),
    /// in bytes, read for those with a write limit on a disk that carries
    /// a mount without cgroup writeback.
    pub dirty_bytes: BTreeMap<String, u64>,
}

/// What each (cgroup path, device name) did.
pub type ActivityMap = BTreeMap<(String, String), Activity>;

impl Activity {
    /// `other`'s activity added to this one.
    fn add(&mut self, other: &Activity) {
        self.ios += other.ios;
        self.held_io_max_seconds += other.held_io_max_seconds;
        self.held_seconds += other.held_seconds;
        self.reads += other.reads;
        self.read_waits_seconds += other.read_waits_seconds;
        self.read_seconds += other.read_seconds;
    }

    /// What was done since `earlier` (both cumulative).
    fn since(&self, earlier: &Activity) -> Activity {
        let less = |now: f64, then: f64| (now - then).max(0.0);
        Activity {
            ios: self.ios.saturating_sub(earlier.ios),
            held_io_max_seconds: less(self.held_io_max_seconds, earlier.held_io_max_seconds),
            held_seconds: less(self.held_seconds, earlier.held_seconds),
            reads: self.reads.saturating_sub(earlier.reads),
            read_waits_seconds: less(self.read_waits_seconds, earlier.read_waits_seconds),
            read_seconds: less(self.read_seconds, earlier.read_seconds),
        }
    }
}

/// The activity of every (cgroup, device) in `snap`.
pub fn activity_of(snap: &Snapshot) -> ActivityMap {
    let mut activity = ActivityMap::new();
    for s in &snap.io {
        let a = activity
            .entry((s.cgroup.path.clone(), s.device.name.clone()))
            .or_default();
        a.ios += s.ios;
        a.held_io_max_seconds += s.held_io_max_seconds;
        a.held_seconds += s.latency.throttle.sum_seconds;
        if s.op == Op::Read {
            a.reads += s.ios;
            a.read_waits_seconds +=
                (s.latency.throttle.sum_seconds - s.held_io_max_seconds).max(0.0);
            a.read_seconds += s.latency.total.sum_seconds;
        }
    }
    activity
}

/// `now` less `earlier`, key by key (cumulative maps; a key new in `now`
/// whole).
pub fn activity_since(now: &ActivityMap, earlier: &ActivityMap) -> ActivityMap {
    now.iter()
        .map(|(k, a)| (k.clone(), earlier.get(k).map_or(*a, |e| a.since(e))))
        .collect()
}

impl Evidence {
    /// The activity of every (cgroup, device) in `snap` (a window), and
    /// whether the blk-throttle program ran.
    pub fn from_snapshot(snap: &Snapshot, devices: Vec<DeviceFacts>, cgroup_v1: bool) -> Evidence {
        Evidence::new(&snap.probes, activity_of(snap), devices, cgroup_v1)
    }

    /// `activity` measured over a window, with the probes' state.
    pub fn new(
        probes: &[ProbeStatus],
        activity: ActivityMap,
        devices: Vec<DeviceFacts>,
        cgroup_v1: bool,
    ) -> Evidence {
        let io_max_timed = match probes.iter().find(|p| p.name == "throtl_held") {
            Some(p) if !p.active => Err(p.reason.clone()),
            _ => Ok(()),
        };
        Evidence {
            devices,
            activity,
            io_max_timed,
            cgroup_v1,
            dirty_bytes: BTreeMap::new(),
        }
    }

    pub(super) fn device(&self, devnum: &str) -> Option<&DeviceFacts> {
        self.devices.iter().find(|d| d.devnum == devnum)
    }

    /// What the cgroups for which `beside` holds did on device `name`,
    /// summed, with their paths.
    pub(super) fn on_device_where(
        &self,
        name: &str,
        beside: impl Fn(&str) -> bool,
    ) -> (Activity, Vec<&str>) {
        let mut sum = Activity::default();
        let mut who = Vec::new();
        for ((c, d), a) in &self.activity {
            if d != name || !beside(c) || a.ios == 0 {
                continue;
            }
            sum.add(a);
            who.push(c.as_str());
        }
        (sum, who)
    }

    /// The devices `cgroup` did I/O on, with what it did.
    pub(super) fn used_by(&self, cgroup: &str) -> Vec<(&str, Activity)> {
        self.activity
            .iter()
            .filter(|((c, _), a)| c == cgroup && a.ios > 0)
            .map(|((_, d), a)| (d.as_str(), *a))
            .collect()
    }
}
