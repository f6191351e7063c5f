//! Block device names and numbers, blk-mq CPU -> queue maps, I/O schedulers,
//! and whether a disk is mounted or held, from sysfs.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use anyhow::{bail, Result};
use iowarden_exporters::{CpuQueueMap, DeviceRef, Volume};

/// Kernel-internal dev_t (MKDEV) as the BPF side packs it.
pub fn kernel_devt(major: u32, minor: u32) -> u32 {
    (major << 20) | minor
}

/// Caches dev_t -> device name lookups in /sys/dev/block.
#[derive(Default)]
pub struct DeviceNames {
    cache: HashMap<u32, DeviceRef>,
}

impl DeviceNames {
    pub fn get(&mut self, devt: u32) -> DeviceRef {
        self.cache
            .entry(devt)
            .or_insert_with(|| {
                let (major, minor) = (devt >> 20, devt & 0xfffff);
                let name = std::fs::read_link(format!("/sys/dev/block/{major}:{minor}"))
                    .ok()
                    .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .unwrap_or_else(|| format!("{major}:{minor}"));
                DeviceRef { name, major, minor }
            })
            .clone()
    }
}

/// Whole block devices on this host: (name, major, minor).
pub fn list_block_devices() -> Vec<(String, u32, u32)> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/sys/block") {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Ok(dev) = std::fs::read_to_string(e.path().join("dev")) {
                if let Some((ma, mi)) = parse_majmin(dev.trim()) {
                    out.push((name, ma, mi));
                }
            }
        }
    }
    out.sort();
    out
}

/// Whether /sys/block/<name>/<f> exists.
fn in_sysfs(name: &str, f: &str) -> bool {
    Path::new(&format!("/sys/block/{name}/{f}")).exists()
}

/// The kernel dev_t of every device-mapper and md disk without a blk-mq
/// queue (no `mq` directory in sysfs): volumes whose bios never become
/// requests of their own. (zram is bio-based too, but swap, not a volume.)
pub fn bio_based_disks() -> Vec<u32> {
    list_block_devices()
        .into_iter()
        .filter(|(name, _, _)| {
            (in_sysfs(name, "dm") || in_sysfs(name, "md")) && !in_sysfs(name, "mq")
        })
        .map(|(_, ma, mi)| kernel_devt(ma, mi))
        .collect()
}

/// The device-mapper or md volume `dev` is, with its name and the disks
/// below it; None for any other disk.
pub fn volume(dev: &DeviceRef) -> Option<Volume> {
    let read = |f: &str| std::fs::read_to_string(format!("/sys/block/{}/{f}", dev.name));
    let (kind, name) = if let Ok(n) = read("dm/name") {
        ("dm", n.trim().to_string())
    } else if in_sysfs(&dev.name, "md") {
        // An array's name in its metadata is not in sysfs: its disk's.
        ("md", dev.name.clone())
    } else {
        return None;
    };
    let mut lower: Vec<String> = std::fs::read_dir(format!("/sys/block/{}/slaves", dev.name))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    lower.sort();
    Some(Volume {
        device: dev.clone(),
        kind: kind.into(),
        name,
        lower,
    })
}

pub fn parse_majmin(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// Resolves a user's device filter: a name ("loop3", "/dev/nvme0n1") or
/// "MAJ:MIN". Partitions are refused: requests are accounted to whole disks.
pub fn resolve_device(spec: &str) -> Result<DeviceRef> {
    let devs = list_block_devices();
    let name = spec.trim_start_matches("/dev/");
    let found = match parse_majmin(spec) {
        Some((ma, mi)) => devs.iter().find(|d| d.1 == ma && d.2 == mi),
        None => devs.iter().find(|d| d.0 == name),
    };
    match found {
        Some((n, ma, mi)) => Ok(DeviceRef {
            name: n.clone(),
            major: *ma,
            minor: *mi,
        }),
        None => {
            let names: Vec<&str> = devs.iter().map(|d| d.0.as_str()).collect();
            bail!(
                "unknown block device '{spec}': give a whole disk by name or MAJ:MIN; this host has: {}",
                names.join(", ")
            )
        }
    }
}

/// "0-3,8" -> [0, 1, 2, 3, 8]
pub fn parse_cpu_list(s: &str) -> Vec<u32> {
    let mut out = BTreeSet::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
            out.extend(a..=b);
        }
    }
    out.into_iter().collect()
}

/// blk-mq hardware queues of a disk and their CPUs.
pub fn cpu_queue_map(device: &str) -> Vec<CpuQueueMap> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(format!("/sys/block/{device}/mq")) else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(hctx) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cpus = std::fs::read_to_string(e.path().join("cpu_list")).unwrap_or_default();
        out.push(CpuQueueMap {
            device: device.to_string(),
            hctx,
            cpus: parse_cpu_list(&cpus),
        });
    }
    out.sort_by_key(|m| m.hctx);
    out
}

/// The partitions of a disk: (name, MAJ:MIN).
pub fn partitions(sys: &Path, name: &str) -> Vec<(String, String)> {
    let mut parts = Vec::new();
    if let Ok(rd) = std::fs::read_dir(sys) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with(name) {
                if let Ok(d) = std::fs::read_to_string(e.path().join("dev")) {
                    parts.push((n, d.trim().to_string()));
                }
            }
        }
    }
    parts
}

/// Whether the disk or one of its partitions is mounted, or the disk is
/// held (device mapper, md): in use by the system, whatever it holds.
pub fn mounted_or_held(name: &str, mountinfo: &str) -> Option<String> {
    let sys = Path::new("/sys/block").join(name);
    // The disk and its partitions, by MAJ:MIN.
    let mut devs = vec![std::fs::read_to_string(sys.join("dev"))
        .ok()?
        .trim()
        .to_string()];
    devs.extend(partitions(&sys, name).into_iter().map(|p| p.1));
    for l in mountinfo.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() > 4 && devs.iter().any(|d| d == f[2]) {
            return Some(format!("mounted at {}", f[4]));
        }
    }
    if let Some(h) = std::fs::read_dir(sys.join("holders"))
        .ok()
        .and_then(|mut rd| rd.next())
        .and_then(|e| e.ok())
    {
        return Some(format!("held by {}", h.file_name().to_string_lossy()));
    }
    None
}

/// The scheduler names in /sys/block/DEV/queue/scheduler (`[none] mq-deadline`)
/// and the active one, in brackets.
pub fn parse_scheduler_list(s: &str) -> (Vec<String>, Option<String>) {
    let mut all = Vec::new();
    let mut cur = None;
    for w in s.split_whitespace() {
        let n = w.trim_matches(['[', ']']).to_string();
        if w.starts_with('[') {
            cur = Some(n.clone());
        }
        all.push(n);
    }
    (all, cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_majmin() {
        assert_eq!(parse_majmin("259:0"), Some((259, 0)));
        assert_eq!(parse_majmin("x:0"), None);
        assert_eq!(parse_majmin("7"), None);
    }

    #[test]
    fn unknown_device_names_the_alternatives() {
        let e = resolve_device("no-such-disk").unwrap_err().to_string();
        assert!(e.contains("unknown block device 'no-such-disk'"), "{e}");
        // This host's real devices are listed (every Linux host has /sys/block entries here).
        assert!(e.contains("this host has:"), "{e}");
    }

    #[test]
    fn resolves_a_real_device_by_name_and_number() {
        let (name, ma, mi) = list_block_devices()
            .into_iter()
            .next()
            .expect("a block device");
        let d = resolve_device(&name).unwrap();
        assert_eq!((d.major, d.minor), (ma, mi));
        assert_eq!(resolve_device(&format!("{ma}:{mi}")).unwrap().name, name);
        assert_eq!(resolve_device(&format!("/dev/{name}")).unwrap().name, name);
    }

    #[test]
    fn a_mount_of_the_disk_is_found_by_its_number() {
        let (name, ma, mi) = list_block_devices()
            .into_iter()
            .next()
            .expect("a block device");
        let mountinfo =
            format!("36 25 {ma}:{mi} / /mnt/scratch rw,relatime shared:1 - ext4 /dev/{name} rw\n");
        assert_eq!(
            mounted_or_held(&name, &mountinfo).as_deref(),
            Some("mounted at /mnt/scratch")
        );
        // A disk that is not in /sys/block is no fact at all.
        assert_eq!(mounted_or_held("no-such-disk", &mountinfo), None);
    }

    #[test]
    fn scheduler_list_parses() {
        let (all, cur) = parse_scheduler_list("none [mq-deadline] kyber bfq\n");
        assert_eq!(all, ["none", "mq-deadline", "kyber", "bfq"]);
        assert_eq!(cur.as_deref(), Some("mq-deadline"));
        assert_eq!(parse_scheduler_list("[none]\n").1.as_deref(), Some("none"));
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8\n"), vec![0, 1, 2, 3, 8]);
        assert_eq!(parse_cpu_list("1"), vec![1]);
        assert_eq!(parse_cpu_list(""), Vec::<u32>::new());
    }
}
