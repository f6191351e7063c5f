//! Checks made before touching BPF, so that a user gets a message that says
//! what to do instead of an errno from the loader.

use anyhow::{bail, Result};

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Effective capability mask from /proc/self/status text.
pub fn effective_caps(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

/// Whether the capabilities allow loading tracing programs.
pub fn caps_allow_tracing(caps: u64) -> bool {
    let has = |c: u32| caps & (1u64 << c) != 0;
    has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON))
}

pub fn check() -> Result<()> {
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        bail!(
            "this kernel exposes no BTF (/sys/kernel/btf/vmlinux is missing): iowarden's CO-RE programs \
             need a kernel built with CONFIG_DEBUG_INFO_BTF=y (Debian, Ubuntu, Fedora and RHEL kernels have it)"
        );
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(caps) = effective_caps(&status) {
        if !caps_allow_tracing(caps) {
            bail!(
                "insufficient privileges to load BPF programs: run iowarden as root (sudo), or grant \
                 CAP_BPF and CAP_PERFMON (e.g. `setcap cap_bpf,cap_perfmon,cap_sys_resource+ep iowarden`)"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_capabilities() {
        assert_eq!(
            effective_caps("Name:\tx\nCapEff:\t000001ffffffffff\n"),
            Some(0x1ffffffffff)
        );
        assert_eq!(effective_caps("Name:\tx\n"), None);
        assert!(caps_allow_tracing(0x1ffffffffff));
        assert!(caps_allow_tracing((1 << CAP_BPF) | (1 << CAP_PERFMON)));
        assert!(!caps_allow_tracing(1 << CAP_BPF));
        assert!(!caps_allow_tracing(0));
    }
}
