//! The host side of `limits`: every io knob a cgroup has set (cgroup v2,
//! or blkio on v1), and the devices' schedulers and iocost state.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use iowarden_exporters::LimitKnob;

use super::evidence::DeviceFacts;
use super::judge::limits_writes;
use super::writeback::{root_writeback_mounts, RootWriteback};
use crate::host::devices::{list_block_devices, parse_scheduler_list};

/// The v2 files read.
const V2_KNOBS: &[&str] = &["io.max", "io.weight", "io.bfq.weight", "io.latency"];
/// The v1 (blkio) files read.
const V1_KNOBS: &[&str] = &[
    "blkio.throttle.read_bps_device",
    "blkio.throttle.write_bps_device",
    "blkio.throttle.read_iops_device",
    "blkio.throttle.write_iops_device",
    "blkio.weight_device",
    "blkio.bfq.weight_device",
];

/// Whether a knob line configures anything (io.max's kernel output lists
/// only limited devices; weights their non-default ones, and "default N").
fn configured_line(knob: &str, line: &str) -> bool {
    match knob {
        "io.max" => line
            .split_whitespace()
            .skip(1)
            .any(|f| !f.ends_with("=max")),
        "io.latency" => !line.contains("target=max"),
        // "default 100" is the kernel's own default: not a setting.
        _ => line.trim() != "default 100",
    }
}

/// The configured lines of `file` in cgroup `rel` (a path below the root).
fn knob_lines(dir: &Path, rel: &str, knob: &str) -> Vec<LimitKnob> {
    let Ok(text) = std::fs::read_to_string(dir.join(knob)) else {
        return Vec::new();
    };
    text.lines()
        .filter(|l| !l.trim().is_empty() && configured_line(knob, l))
        .map(|l| {
            let (first, rest) = l.trim().split_once(' ').unwrap_or((l.trim(), ""));
            let devnum = first.contains(':').then(|| first.to_string());
            LimitKnob {
                cgroup: rel.to_string(),
                knob: knob.to_string(),
                devnum,
                value: if first.contains(':') {
                    rest.trim()
                } else {
                    l.trim()
                }
                .to_string(),
            }
        })
        .collect()
}

/// Whether cgroup `dir` has processes of its own.
fn has_processes(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|s| !s.trim().is_empty())
}

/// Every knob set in the hierarchy at `root`, from `start` (a path below
/// the root, "/" for all) down; on v2, also each cgroup with processes
/// whose parent has the io controller but does not delegate it (knob
/// "io"): its I/O is charged to the parent, and no knob of its own exists.
pub fn configured(root: &Path, start: &str, v1: bool) -> Vec<LimitKnob> {
    let mut out = Vec::new();
    let mut stack = vec![root.join(start.trim_start_matches('/'))];
    while let Some(dir) = stack.pop() {
        let rel = format!("/{}", dir.strip_prefix(root).unwrap_or(&dir).display());
        let rel = if rel == "/" {
            rel
        } else {
            rel.trim_end_matches('/').to_string()
        };
        let knobs = if v1 { V1_KNOBS } else { V2_KNOBS };
        let before = out.len();
        for knob in knobs {
            out.extend(knob_lines(&dir, &rel, knob));
        }
        let has_io = |d: &Path| d.join(knobs[0]).exists() || d == root;
        let parent_has_io = dir
            .parent()
            .is_some_and(|p| p.starts_with(root) && has_io(p));
        if !v1 && out.len() == before && !has_io(&dir) && parent_has_io && has_processes(&dir) {
            out.push(LimitKnob {
                cgroup: rel.clone(),
                knob: "io".into(),
                devnum: None,
                value: String::new(),
            });
        }
        if let Ok(rd) = std::fs::read_dir(&dir) {
            let mut subdirs: Vec<_> = rd
                .flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.path())
                .collect();
            subdirs.sort();
            stack.extend(subdirs.into_iter().rev());
        }
    }
    out
}

/// The active scheduler in /sys/block/<name>/queue/scheduler: the one in
/// brackets ("none [bfq]"), or the only word (a bio-based volume's "none").
fn scheduler(name: &str) -> String {
    let s =
        std::fs::read_to_string(format!("/sys/block/{name}/queue/scheduler")).unwrap_or_default();
    let (mut all, active) = parse_scheduler_list(&s);
    active
        .or_else(|| (all.len() == 1).then(|| all.remove(0)))
        .unwrap_or_default()
}

/// The whole disk a sysfs block directory is: a partition's parent, or
/// itself.
fn whole_disk(dir: &Path) -> Option<String> {
    let disk = if dir.join("partition").exists() {
        dir.parent()?
    } else {
        dir
    };
    Some(disk.file_name()?.to_string_lossy().into_owned())
}

/// The whole disks the device `devnum` ("MAJ:MIN") sits on, itself
/// included: a partition's disk, and every disk below a dm or md volume.
fn disks_under(devnum: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let first = std::fs::canonicalize(format!("/sys/dev/block/{devnum}")).ok();
    let mut todo: Vec<PathBuf> = first.into_iter().collect();
    while let Some(dir) = todo.pop() {
        let Some(disk) = whole_disk(&dir) else {
            continue;
        };
        if out.contains(&disk) {
            continue;
        }
        if let Ok(rd) = std::fs::read_dir(format!("/sys/block/{disk}/slaves")) {
            todo.extend(
                rd.flatten()
                    .filter_map(|e| std::fs::canonicalize(e.path()).ok()),
            );
        }
        out.push(disk);
    }
    out
}

/// The mount table of the host's first process (hostPID in a pod), or
/// this process's.
fn host_mountinfo() -> String {
    std::fs::read_to_string("/proc/1/mountinfo")
        .or_else(|_| std::fs::read_to_string("/proc/self/mountinfo"))
        .unwrap_or_default()
}

/// Each disk's mounts (on it, a partition or a volume above) whose
/// buffered writes are written back charged to the root.
fn root_writeback_by_disk() -> HashMap<String, Vec<RootWriteback>> {
    let mut by_disk: HashMap<String, Vec<RootWriteback>> = HashMap::new();
    for m in root_writeback_mounts(&host_mountinfo()) {
        for disk in disks_under(&m.devnum) {
            by_disk.entry(disk).or_default().push(m.clone());
        }
    }
    by_disk
}

/// The name a disk outlives its number by: a device-mapper volume's dm
/// name, "" while it has none (read as it is created or removed), else the
/// kernel's name.
fn known_as(name: &str) -> String {
    match std::fs::read_to_string(format!("/sys/block/{name}/dm/name")) {
        Ok(n) => n.trim().to_string(),
        Err(_) if name.starts_with("dm-") => String::new(),
        Err(_) => name.to_string(),
    }
}

/// Every whole disk with its scheduler, iocost state (io.cost.qos of the
/// v2 root, if any) and mounts without cgroup writeback.
pub fn devices(cgroup2_root: Option<&Path>) -> Vec<DeviceFacts> {
    let qos: HashMap<String, String> = cgroup2_root
        .map(|r| crate::host::cgroups::read_root_knob(r, "io.cost.qos"))
        .unwrap_or_default();
    let mut root_writeback = root_writeback_by_disk();
    list_block_devices()
        .into_iter()
        .map(|(name, ma, mi)| {
            let devnum = format!("{ma}:{mi}");
            let iocost = qos.get(&devnum).map(|l| l.contains("enable=1"));
            DeviceFacts {
                scheduler: scheduler(&name),
                known_as: known_as(&name),
                devnum,
                root_writeback: root_writeback.remove(&name).unwrap_or_default(),
                name,
                iocost,
            }
        })
        .collect()
}

/// The dirty and under-writeback page cache (memory.stat's file_dirty +
/// file_writeback), in bytes, of each cgroup with a write limit, where a
/// disk carries a mount without cgroup writeback (cgroup v2; none
/// otherwise, and none for a cgroup without the memory controller).
pub fn dirty_bytes(
    root: &Path,
    knobs: &[LimitKnob],
    devices: &[DeviceFacts],
) -> BTreeMap<String, u64> {
    if devices.iter().all(|d| d.root_writeback.is_empty()) {
        return BTreeMap::new();
    }
    // Once per cgroup, whatever the number of its write limits.
    let cgroups: BTreeSet<&str> = knobs
        .iter()
        .filter(|k| limits_writes(k))
        .map(|k| k.cgroup.as_str())
        .collect();
    cgroups
        .into_iter()
        .filter_map(|cgroup| {
            let dir = root.join(cgroup.trim_start_matches('/'));
            let stat = std::fs::read_to_string(dir.join("memory.stat")).ok()?;
            let field = |name: &str| -> u64 {
                stat.lines()
                    .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
                    .unwrap_or(0)
            };
            Some((
                cgroup.to_string(),
                field("file_dirty") + field("file_writeback"),
            ))
        })
        .collect()
}
