//! Opening and loading BPF objects, shared by every probe: the open
//! object a skeleton borrows, which programs load, attaching, the
//! tracepoints the kernel has, and the statuses and errors probes report.

use std::mem::MaybeUninit;

use anyhow::Result;
use iowarden_exporters::ProbeStatus;
use libbpf_rs::btf::Btf;
use libbpf_rs::OpenObject;

/// The open object a skeleton borrows: it must outlive the skeleton, which
/// lives as long as the process.
pub(crate) fn open_object() -> &'static mut MaybeUninit<OpenObject> {
    Box::leak(Box::new(MaybeUninit::uninit()))
}

/// Loads exactly the programs named in `wanted` (autoload switching, as
/// libbpf-tools does): a name the object lacks is an error, never some
/// other program.
pub(crate) fn load_only(obj: &mut OpenObject, wanted: &[&str]) -> Result<()> {
    if let Some(w) = wanted
        .iter()
        .find(|w| !obj.progs().any(|p| p.name() == **w))
    {
        anyhow::bail!("the BPF object has no program {w}");
    }
    for mut p in obj.progs_mut() {
        let load = wanted.iter().any(|w| p.name() == *w);
        p.set_autoload(load);
    }
    Ok(())
}

/// Attaches the loaded program `name` of `obj`.
pub(crate) fn attach(obj: &libbpf_rs::Object, name: &str) -> Result<libbpf_rs::Link> {
    let prog = obj
        .progs_mut()
        .find(|p| p.name() == name)
        .ok_or_else(|| anyhow::anyhow!("the BPF object has no program {name}"))?;
    Ok(prog.attach()?)
}

/// Whether the running kernel has tracepoint `tp` (a btf_trace_ typedef)
/// and IOWARDEN_HIDE_TRACEPOINTS does not hide it (how tests exercise the
/// degraded modes on a kernel that has every tracepoint).
pub(crate) fn tracepoint_available(btf: &Btf<'_>, tp: &str) -> bool {
    let hidden = std::env::var("IOWARDEN_HIDE_TRACEPOINTS").unwrap_or_default();
    btf.type_by_name::<libbpf_rs::btf::types::Typedef<'_>>(&format!("btf_trace_{tp}"))
        .is_some()
        && !hidden.split(',').any(|h| h.trim() == tp)
}

/// The error for a BPF object the kernel refused to load. Privileges are
/// checked before (host::preflight), so the cause is the kernel: its
/// verifier or a feature it lacks, which libbpf's log above names.
pub(crate) fn load_error(object: &str, e: libbpf_rs::Error) -> anyhow::Error {
    // EPERM (not the verifier's EACCES): the memory limit of old kernels.
    let memlock = if e.to_string().contains("(os error 1)") {
        " (before 5.11 BPF memory counts against RLIMIT_MEMLOCK: raise it, e.g. LimitMEMLOCK=infinity)"
    } else {
        ""
    };
    anyhow::anyhow!(
        "the kernel refused {object} BPF programs: {e}{memlock}; libbpf's log above names the program and the instruction"
    )
}

pub(crate) fn status(name: &str, active: bool, reason: impl Into<String>) -> ProbeStatus {
    ProbeStatus {
        name: name.into(),
        active,
        reason: reason.into(),
    }
}
