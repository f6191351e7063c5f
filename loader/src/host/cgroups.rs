//! Cgroup id <-> path resolution by walking the cgroup filesystem.
//!
//! A cgroup id is the kernfs node id of the cgroup's directory, which is the
//! directory's inode number. Ids are unique within one hierarchy only, so
//! resolution walks the hierarchy the io controller is bound to: the v1
//! `blkio` mount on hybrid hosts, the v2 mount otherwise.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// A cgroup hierarchy mount point, as found in /proc/self/mountinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    pub mount_point: PathBuf,
    /// true for cgroup2, false for a v1 hierarchy.
    pub v2: bool,
    /// v1 controllers bound to the hierarchy (empty for v2).
    pub controllers: Vec<String>,
}

/// Unescape the octal escapes (`\040` for a space) mountinfo uses in paths.
fn unescape_mount_path(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            let digits = std::str::from_utf8(&b[i + 1..i + 4]).unwrap_or("x");
            if let Ok(v) = u8::from_str_radix(digits, 8) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The fields iowarden reads of one /proc/PID/mountinfo line.
pub(crate) struct MountEntry<'a> {
    /// "MAJ:MIN" of the mounted device (major 0 for none: tmpfs, proc).
    pub devnum: &'a str,
    /// Unescaped.
    pub mount_point: String,
    /// The mount's options ("rw,relatime").
    pub options: &'a str,
    pub fstype: &'a str,
    pub super_options: &'a str,
}

/// The lines of mountinfo text, malformed ones skipped.
pub(crate) fn mount_entries(text: &str) -> impl Iterator<Item = MountEntry<'_>> {
    text.lines().filter_map(|line| {
        // id parent maj:min root mount-point options [optional...] - fstype source super-options
        let (left, right) = line.split_once(" - ")?;
        let l: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        if l.len() < 5 || r.len() < 3 {
            return None;
        }
        Some(MountEntry {
            devnum: l[2],
            mount_point: unescape_mount_path(l[4]),
            options: l.get(5).copied().unwrap_or(""),
            fstype: r[0],
            super_options: r[2],
        })
    })
}

/// Parses /proc/self/mountinfo text into the cgroup hierarchies it mounts.
pub fn parse_mountinfo(text: &str) -> Vec<Hierarchy> {
    let mut out = Vec::new();
    for m in mount_entries(text) {
        let mount_point = PathBuf::from(m.mount_point);
        match m.fstype {
            "cgroup2" => out.push(Hierarchy {
                mount_point,
                v2: true,
                controllers: vec![],
            }),
            "cgroup" => {
                let controllers = m
                    .super_options
                    .split(',')
                    .filter(|o| {
                        !matches!(*o, "rw" | "ro") && !o.contains('=') && !o.starts_with("name")
                    })
                    .filter(|o| {
                        !matches!(
                            *o,
                            "relatime"
                                | "noatime"
                                | "nosuid"
                                | "nodev"
                                | "noexec"
                                | "clone_children"
                                | "noprefix"
                                | "xattr"
                                | "cpuset_v2_mode"
                        )
                    })
                    .map(str::to_string)
                    .collect();
                out.push(Hierarchy {
                    mount_point,
                    v2: false,
                    controllers,
                });
            }
            _ => {}
        }
    }
    out
}

/// The hierarchy whose cgroup ids the block layer reports: the v1 hierarchy
/// with `blkio` if there is one, else a cgroup2 mount that offers `io`, else
/// any cgroup2 mount.
pub fn io_hierarchy(hs: &[Hierarchy]) -> Option<&Hierarchy> {
    hs.iter()
        .find(|h| !h.v2 && h.controllers.iter().any(|c| c == "blkio"))
        .or_else(|| {
            hs.iter().find(|h| {
                h.v2 && std::fs::read_to_string(h.mount_point.join("cgroup.controllers"))
                    .map(|c| c.split_whitespace().any(|w| w == "io"))
                    .unwrap_or(false)
            })
        })
        .or_else(|| hs.iter().find(|h| h.v2))
}

/// Maps cgroup ids to paths (relative to the hierarchy root, "/" for the
/// root) and back. Rebuilt by [`CgroupResolver::refresh`].
#[derive(Debug, Default)]
pub struct CgroupResolver {
    root: PathBuf,
    by_id: HashMap<u64, String>,
    by_path: HashMap<String, u64>,
}

impl CgroupResolver {
    /// A resolver for the io controller's hierarchy on this host.
    pub fn for_host() -> Result<Self> {
        let text = std::fs::read_to_string("/proc/self/mountinfo")
            .context("reading /proc/self/mountinfo")?;
        let hs = parse_mountinfo(&text);
        let h = io_hierarchy(&hs)
            .context("no cgroup hierarchy is mounted (neither cgroup2 nor a v1 blkio hierarchy)")?;
        Self::new(&h.mount_point)
    }

    pub fn new(root: &Path) -> Result<Self> {
        if !root.is_dir() {
            bail!(
                "cgroup hierarchy root {} is not a directory",
                root.display()
            );
        }
        let mut r = CgroupResolver {
            root: root.to_path_buf(),
            ..Default::default()
        };
        r.refresh();
        Ok(r)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Walks the hierarchy again. Cgroups removed meanwhile vanish from the
    /// maps; directories that disappear during the walk are skipped.
    pub fn refresh(&mut self) {
        self.by_id.clear();
        self.by_path.clear();
        let mut stack = vec![(self.root.clone(), String::from("/"))];
        while let Some((dir, rel)) = stack.pop() {
            let Ok(md) = std::fs::metadata(&dir) else {
                continue;
            };
            self.by_id.insert(md.ino(), rel.clone());
            self.by_path.insert(rel.clone(), md.ino());
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let child = if rel == "/" {
                        format!("/{name}")
                    } else {
                        format!("{rel}/{name}")
                    };
                    stack.push((e.path(), child));
                }
            }
        }
    }

    /// Whether cgroup `id` is no longer in the hierarchy. A known id is
    /// checked on disk (one stat): its directory gone, or reused by another
    /// cgroup, drops it from the maps. Ids never seen count as gone.
    pub fn is_gone(&mut self, id: u64) -> bool {
        let Some(rel) = self.by_id.get(&id) else {
            return true;
        };
        let dir = self.root.join(rel.trim_start_matches('/'));
        if std::fs::metadata(&dir).is_ok_and(|m| m.ino() == id) {
            return false;
        }
        if let Some(rel) = self.by_id.remove(&id) {
            self.by_path.remove(&rel);
        }
        true
    }

    pub fn path_of(&self, id: u64) -> Option<&str> {
        self.by_id.get(&id).map(String::as_str)
    }

    /// Id of a cgroup given relative to the hierarchy root ("/a/b" or "a/b")
    /// or as an absolute path under the mount point.
    pub fn id_of(&self, path: &str) -> Option<u64> {
        let p = Path::new(path);
        let rel = match p.strip_prefix(&self.root) {
            Ok(r) => format!("/{}", r.display()),
            Err(_) => format!("/{}", path.trim_start_matches('/')),
        };
        let rel = if rel.len() > 1 {
            rel.trim_end_matches('/').to_string()
        } else {
            rel
        };
        self.by_path.get(&rel).copied()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

/// The cgroup2 root, where io.cost.qos and io.cost.model live.
pub fn cgroup2_root() -> Option<PathBuf> {
    let mi = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let root = mount_entries(&mi)
        .find(|m| m.fstype == "cgroup2")
        .map(|m| PathBuf::from(m.mount_point));
    root
}

/// io.cost.qos / io.cost.model lines per MAJ:MIN (empty without iocost).
pub fn read_root_knob(root: &Path, file: &str) -> HashMap<String, String> {
    std::fs::read_to_string(root.join(file))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (dev, rest) = l.split_once(' ')?;
            Some((dev.to_string(), rest.trim().to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
25 30 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
27 25 0:24 / /sys/fs/cgroup/systemd rw,nosuid shared:11 - cgroup cgroup rw,xattr,name=systemd
31 25 0:28 / /sys/fs/cgroup/blkio rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,blkio
32 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:16 - cgroup cgroup rw,cpu,cpuacct
40 30 0:40 / /mnt/with\\040space rw - ext4 /dev/x rw
";

    #[test]
    fn parses_hybrid_mountinfo_and_prefers_v1_blkio() {
        let hs = parse_mountinfo(HYBRID);
        assert_eq!(hs.len(), 4);
        assert!(hs[0].v2 && hs[0].mount_point == Path::new("/sys/fs/cgroup/unified"));
        assert_eq!(hs[1].controllers, Vec::<String>::new());
        assert_eq!(hs[2].controllers, vec!["blkio"]);
        assert_eq!(hs[3].controllers, vec!["cpu", "cpuacct"]);
        assert_eq!(
            io_hierarchy(&hs).unwrap().mount_point,
            Path::new("/sys/fs/cgroup/blkio")
        );
    }

    #[test]
    fn pure_v2_host_uses_cgroup2_mount() {
        let hs = parse_mountinfo(
            "30 1 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
        );
        assert_eq!(
            io_hierarchy(&hs).unwrap().mount_point,
            Path::new("/sys/fs/cgroup")
        );
    }

    #[test]
    fn unescapes_octal_in_mount_points() {
        assert_eq!(
            unescape_mount_path("/mnt/with\\040space"),
            "/mnt/with space"
        );
        assert_eq!(unescape_mount_path("/plain"), "/plain");
    }

    #[test]
    fn resolves_ids_and_paths_on_a_real_tree() {
        // Any directory tree works the same way: ids are inode numbers.
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("a/b")).unwrap();
        std::fs::create_dir_all(t.path().join("c")).unwrap();
        let mut r = CgroupResolver::new(t.path()).unwrap();
        let ino = |p: &str| std::fs::metadata(t.path().join(p)).unwrap().ino();
        assert_eq!(r.path_of(ino("a/b")), Some("/a/b"));
        assert_eq!(r.path_of(ino("")), Some("/"));
        assert_eq!(r.id_of("/a/b"), Some(ino("a/b")));
        assert_eq!(r.id_of("c/"), Some(ino("c")));
        let abs = t.path().join("a").display().to_string();
        assert_eq!(r.id_of(&abs), Some(ino("a")));
        assert_eq!(r.id_of("/nope"), None);
        let gone = ino("c");
        std::fs::remove_dir(t.path().join("c")).unwrap();
        r.refresh();
        assert_eq!(r.path_of(gone), None);
        assert_eq!(r.len(), 3);
    }

    #[test]
    fn host_resolver_knows_the_root() {
        // Real cgroup filesystem of this machine.
        let r = CgroupResolver::for_host().unwrap();
        assert_eq!(r.id_of("/").and_then(|id| r.path_of(id)), Some("/"));
    }
}
