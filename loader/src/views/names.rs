//! How the views name a cgroup: its path, or "other cgroups" for the
//! series that sums the many cgroups outside the exported top K (or the
//! account's small culprits).

use iowarden_exporters::{CgroupRef, OTHER_CGROUP_ID};

/// What the views call the aggregate series.
pub const OTHER_CGROUPS: &str = "other cgroups";

pub fn cgroup_name(c: &CgroupRef) -> String {
    if c.id == OTHER_CGROUP_ID {
        OTHER_CGROUPS.into()
    } else {
        c.path.clone()
    }
}

/// `s` in at most `width` characters: whole when it fits, else its start
/// and its end around an ellipsis (a cgroup path's leaf, its most telling
/// part, keeps two thirds).
pub fn elide(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n <= width {
        return s.into();
    }
    if width == 0 {
        return String::new();
    }
    let head = (width - 1) / 3;
    let tail = width - 1 - head;
    let start: String = s.chars().take(head).collect();
    let end: String = s.chars().skip(n - tail).collect();
    format!("{start}…{end}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use iowarden_exporters::OTHER_CGROUP;

    #[test]
    fn the_aggregate_is_named_other_cgroups() {
        let other = CgroupRef {
            id: OTHER_CGROUP_ID,
            path: OTHER_CGROUP.into(),
        };
        assert_eq!(cgroup_name(&other), "other cgroups");
        let real = CgroupRef {
            id: 7,
            path: "/other".into(),
        };
        assert_eq!(cgroup_name(&real), "/other", "a real cgroup keeps its path");
    }

    #[test]
    fn elides_in_the_middle_keeping_the_leaf() {
        let p = "/kubepods.slice/kubepods-burstable.slice/cri-containerd-0123456789.scope";
        assert_eq!(elide(p, 200), p);
        let e = elide(p, 30);
        assert_eq!(e.chars().count(), 30);
        assert_eq!(e, "/kubepods…erd-0123456789.scope");
        assert_eq!(elide(p, 1), "…");
        assert_eq!(elide(p, 0), "");
    }
}
