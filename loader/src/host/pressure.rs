//! The kernel's pressure stall information (PSI) for I/O: whether the
//! cgroups iowarden names have an `io.pressure`, and its text. PSI per
//! cgroup is cgroup v2's; the kernel has it with CONFIG_PSI, unless it is
//! off (`psi=0`, or CONFIG_PSI_DEFAULT_DISABLED without `psi=1`), in
//! which case /proc/pressure is not there either.

use std::io;
use std::path::Path;

/// Why the cgroups under `cgroup_root` (the io controller's hierarchy)
/// have no io.pressure; None when they do.
pub fn io_pressure_unavailable(cgroup_root: &Path) -> Option<String> {
    let v2 = cgroup_root.join("cgroup.controllers").exists();
    why_unavailable(v2, std::fs::read_to_string("/proc/pressure/io"))
}

/// The reason from what the host shows: the hierarchy's version and the
/// system-wide io pressure file read.
fn why_unavailable(v2: bool, system_wide: io::Result<String>) -> Option<String> {
    if !v2 {
        return Some(
            "the io controller's hierarchy is cgroup v1, and io.pressure is cgroup v2's".into(),
        );
    }
    match system_wide {
        Ok(_) => None,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Some(
            "no /proc/pressure/io: the kernel has no PSI (CONFIG_PSI), or it is off \
             (psi=0, or CONFIG_PSI_DEFAULT_DISABLED without psi=1 on the kernel command line)"
                .into(),
        ),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
            Some("PSI is off (psi=0 on the kernel command line)".into())
        }
        Err(e) => Some(format!("/proc/pressure/io: {e}")),
    }
}

/// The io.pressure text of `cgroup` (a path relative to `cgroup_root`,
/// "/" for the root).
pub fn read_io_pressure(cgroup_root: &Path, cgroup: &str) -> io::Result<String> {
    let dir = cgroup_root.join(cgroup.trim_start_matches('/'));
    std::fs::read_to_string(dir.join("io.pressure"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_what_is_missing() {
        let psi = || Ok("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n".to_string());
        assert_eq!(why_unavailable(true, psi()), None);
        assert!(why_unavailable(false, psi()).unwrap().contains("cgroup v1"));
        let absent = io::Error::from(io::ErrorKind::NotFound);
        assert!(why_unavailable(true, Err(absent))
            .unwrap()
            .contains("no /proc/pressure/io"));
        let off = io::Error::from_raw_os_error(libc::EOPNOTSUPP);
        assert!(why_unavailable(true, Err(off)).unwrap().contains("psi=0"));
    }
}
