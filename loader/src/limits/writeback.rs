//! Mounts whose buffered writes escape a cgroup's write limits: the
//! kernel charges a page's writeback to the cgroup that dirtied it only
//! on filesystems that set SB_I_CGROUPWB (ext2/3/4 except data=journal,
//! xfs, btrfs, f2fs, and raw block devices); on every other one (vfat,
//! exfat, ntfs3, ...) the flusher writes them back charged to the root
//! cgroup, where no child's io.max or weight applies. Pure: read.rs maps
//! each mount's device to the disks beneath it.

use crate::host::cgroups::mount_entries;

/// A writable mount of a block device whose filesystem has no cgroup
/// writeback.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootWriteback {
    /// "MAJ:MIN" of the mounted device (a disk, partition or volume).
    pub devnum: String,
    pub fstype: String,
    pub mount_point: String,
}

impl RootWriteback {
    /// In a verdict: "/mnt/x (vfat)".
    pub fn describe(&self) -> String {
        format!("{} ({})", self.mount_point, self.fstype)
    }
}

/// Whether `fstype` mounted with `super_options` charges writeback to the
/// cgroup that dirtied the page.
fn has_cgroup_writeback(fstype: &str, super_options: &str) -> bool {
    match fstype {
        // ext4 (which also mounts ext2 and ext3) drops it for data=journal.
        "ext2" | "ext3" | "ext4" => !super_options.split(',').any(|o| o == "data=journal"),
        "xfs" | "btrfs" | "f2fs" => true,
        _ => false,
    }
}

/// Every writable block-device mount in `mountinfo` (/proc/PID/mountinfo)
/// without cgroup writeback. Filesystems without a device (major 0: tmpfs,
/// proc, overlay, nfs) write nothing back to a disk of this host.
pub fn root_writeback_mounts(mountinfo: &str) -> Vec<RootWriteback> {
    let read_only = |opts: &str| opts.split(',').any(|o| o == "ro");
    mount_entries(mountinfo)
        .filter(|m| !m.devnum.starts_with("0:") && !read_only(m.options))
        .filter(|m| !read_only(m.super_options))
        .filter(|m| !has_cgroup_writeback(m.fstype, m.super_options))
        .map(|m| RootWriteback {
            devnum: m.devnum.to_string(),
            fstype: m.fstype.to_string(),
            mount_point: m.mount_point,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro
23 22 0:21 / /proc rw,nosuid - proc proc rw
30 22 259:1 / /boot/efi rw,relatime shared:9 - vfat /dev/nvme0n1p1 rw,fmask=0022,codepage=437
31 22 253:2 / /mnt/my\\040data rw,relatime - exfat /dev/mapper/vg-data rw
32 22 253:3 / /srv rw,relatime - ext4 /dev/mapper/vg-srv rw,data=journal
33 22 253:4 / /var/lib rw - xfs /dev/mapper/vg-lib rw,attr2
34 22 7:0 / /media/iso ro,relatime - iso9660 /dev/loop0 ro
35 22 8:1 / /mnt/ro rw - vfat /dev/sda1 ro
36 22 0:45 / /var/lib/docker/overlay2/x/merged rw - overlay overlay rw,lowerdir=a
37 22 8:2 / /mnt/ordered rw - ext3 /dev/sda2 rw,data=ordered
";

    #[test]
    fn lists_writable_block_mounts_without_cgroup_writeback() {
        let got = root_writeback_mounts(MOUNTINFO);
        let points: Vec<(&str, &str, &str)> = got
            .iter()
            .map(|m| (m.devnum.as_str(), m.fstype.as_str(), m.mount_point.as_str()))
            .collect();
        assert_eq!(
            points,
            [
                ("259:1", "vfat", "/boot/efi"),
                ("253:2", "exfat", "/mnt/my data"),
                ("253:3", "ext4", "/srv"),
            ]
        );
        assert_eq!(got[0].describe(), "/boot/efi (vfat)");
    }

    #[test]
    fn malformed_lines_are_skipped() {
        assert!(root_writeback_mounts("garbage\n1 2 3 - vfat\n").is_empty());
    }
}
