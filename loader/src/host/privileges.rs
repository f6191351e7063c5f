//! Least privilege after start: once every BPF program is loaded and
//! attached, the daemon needs no capability — map reads go through the fds
//! and mmaps it holds (the kernel checks no capability on map lookups by
//! fd since 6.5), and /sys/fs/cgroup, /sys/block and /proc are readable by
//! every user. So `run` drops all of them (effective, permitted,
//! inheritable, ambient and bounding: no execve regains any), sets
//! no_new_privs and, with `--user`, switches to that user's uid, gid and
//! groups. Commands that write knobs keep theirs and say so.

use anyhow::{bail, Context, Result};
use caps::{CapSet, Capability, CapsHashSet};

/// The capability names of `set` in the calling thread, sorted.
pub fn names(set: CapSet) -> Vec<String> {
    let mut v: Vec<String> = caps::read(None, set)
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.to_string())
        .collect();
    v.sort();
    v
}

/// Switches to `user` (by name): supplementary groups, gid, then uid, all
/// three of each id (real, effective, saved), so there is no way back.
fn switch_user(user: &str) -> Result<()> {
    use nix::unistd::{setgroups, setresgid, setresuid, Uid, User};
    if !Uid::effective().is_root() {
        bail!(
            "--user {user}: only root can switch users (running as uid {})",
            Uid::effective()
        );
    }
    let u = User::from_name(user)
        .with_context(|| format!("--user {user}: looking the user up"))?
        .with_context(|| format!("--user {user}: no such user"))?;
    if u.uid.is_root() {
        bail!("--user {user}: that is root; name an unprivileged user");
    }
    setgroups(&[u.gid]).with_context(|| format!("--user {user}: setgroups"))?;
    setresgid(u.gid, u.gid, u.gid).with_context(|| format!("--user {user}: setresgid"))?;
    setresuid(u.uid, u.uid, u.uid).with_context(|| format!("--user {user}: setresuid"))?;
    Ok(())
}

/// What `run` still needs after attach, and why.
pub struct Keep {
    /// This kernel checks CAP_BPF on every bpf() call (before 6.5, see
    /// probes::features::bpf_calls_need_capability): map reads, program
    /// statistics and the late attach of block_rq_issue need CAP_BPF and
    /// CAP_PERFMON.
    pub bpf_calls: bool,
    /// The locks probe names lock sites from /proc/kallsyms, whose
    /// addresses read as 0 without CAP_SYSLOG (kernel.kptr_restrict).
    pub kallsyms: bool,
}

impl Keep {
    fn capabilities(&self) -> Vec<(Capability, &'static str)> {
        let mut v = Vec::new();
        if self.bpf_calls {
            let why = "this kernel checks CAP_BPF on every bpf() call while \
                       kernel.unprivileged_bpf_disabled is set, before 6.5";
            v.push((Capability::CAP_BPF, why));
            v.push((Capability::CAP_PERFMON, why));
        }
        if self.kallsyms {
            v.push((
                Capability::CAP_SYSLOG,
                "--locks names lock sites from /proc/kallsyms, all zeros without it",
            ));
        }
        v
    }
}

/// Drops every capability of every thread-set but those `keep` names and,
/// with `user`, becomes that user. Call after the programs are attached and
/// before threads start (capabilities are per thread: threads spawned later
/// inherit the dropped sets). Returns a line saying what is left and why,
/// for the log.
pub fn drop_all(user: Option<&str>, keep: &Keep) -> Result<String> {
    let keep = keep.capabilities();
    let kept: CapsHashSet = keep.iter().map(|(c, _)| *c).collect();
    // The bounding set first: dropping from it needs CAP_SETPCAP, which the
    // next steps remove.
    let bounding = caps::read(None, CapSet::Bounding).unwrap_or_default();
    if caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP).unwrap_or(false) {
        for c in bounding.into_iter().filter(|c| !kept.contains(c)) {
            caps::drop(None, CapSet::Bounding, c).context("dropping from the bounding set")?;
        }
    }
    caps::clear(None, CapSet::Ambient).context("clearing the ambient set")?;
    if let Some(u) = user {
        // Keep the permitted set across the change of uid, to keep `kept`.
        if !kept.is_empty() {
            caps::securebits::set_keepcaps(true).context("keeping capabilities across setuid")?;
        }
        switch_user(u)?;
    }
    // Effective first: it must stay within the permitted set.
    caps::set(None, CapSet::Effective, &kept).context("narrowing the Effective set")?;
    caps::set(None, CapSet::Inheritable, &CapsHashSet::new())
        .context("clearing the Inheritable set")?;
    caps::set(None, CapSet::Permitted, &kept).context("narrowing the Permitted set")?;
    nix::sys::prctl::set_no_new_privs().context("setting no_new_privs")?;
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
    let field = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .unwrap_or("?")
            .trim()
            .to_string()
    };
    let mut reasons: Vec<&str> = keep.iter().map(|(_, why)| *why).collect();
    reasons.dedup();
    Ok(format!(
        "programs attached; dropped every capability (kept: {}{}; CapEff {}, CapPrm {}, CapBnd {}), uid {}, no_new_privs",
        match names(CapSet::Permitted) {
            v if v.is_empty() => "none".to_string(),
            v => v.join(","),
        },
        if reasons.is_empty() {
            String::new()
        } else {
            format!(": {}", reasons.join("; "))
        },
        field("CapEff:"),
        field("CapPrm:"),
        field("CapBnd:"),
        nix::unistd::Uid::effective(),
    ))
}

/// The log line of a command that writes knobs and so keeps its
/// privileges (root's file access to cgroup files, and for tune and bench
/// the BPF capabilities of the programs they attach) until it has restored
/// what it changed.
pub fn keeping(command: &str, why: &str) -> String {
    format!(
        "{command} keeps its privileges (effective capabilities: {}) to {why}",
        match names(CapSet::Effective) {
            v if v.is_empty() => "none".to_string(),
            v => v.join(","),
        }
    )
}

/// The calling thread's nice level lowered while it starts threads, which
/// inherit it (`run` starts them after dropping every capability, when
/// no thread may lower its own): with CAP_SYS_NICE, or with RLIMIT_NICE
/// raised for the while through CAP_SYS_RESOURCE (the systemd unit's).
pub struct NiceForThreads {
    /// The calling thread's level before (a service started at Nice=5
    /// goes back to 5, which needs no privilege, not to 0).
    was: i32,
    /// RLIMIT_NICE (soft, hard) to put back, where it was raised.
    rlimit: Option<(u64, u64)>,
}

impl NiceForThreads {
    /// Lowers the calling thread to `nice`; before the capabilities drop.
    pub fn lower(nice: i32) -> Result<NiceForThreads> {
        use nix::sys::resource::{getrlimit, setrlimit, Resource};
        let was = thread_nice();
        if renice_thread(nice).is_ok() {
            return Ok(NiceForThreads { was, rlimit: None });
        }
        let want = (20 - nice) as u64;
        let (soft, hard) = getrlimit(Resource::RLIMIT_NICE).context("reading RLIMIT_NICE")?;
        setrlimit(Resource::RLIMIT_NICE, want, hard.max(want)).with_context(|| {
            format!("nice {nice}: neither CAP_SYS_NICE nor CAP_SYS_RESOURCE to raise RLIMIT_NICE")
        })?;
        let lowered = NiceForThreads {
            was,
            rlimit: Some((soft, hard)),
        };
        renice_thread(nice)?;
        Ok(lowered)
    }

    /// Puts the calling thread back at its level, and RLIMIT_NICE as it
    /// was (raising a nice level, and lowering a limit, needs no privilege).
    pub fn restore(self) -> Result<()> {
        renice_thread(self.was)?;
        if let Some((soft, hard)) = self.rlimit {
            use nix::sys::resource::{setrlimit, Resource};
            setrlimit(Resource::RLIMIT_NICE, soft, hard).context("putting RLIMIT_NICE back")?;
        }
        Ok(())
    }
}

/// The calling thread as PRIO_PROCESS names it (Linux's nice is per thread).
fn this_thread() -> libc::id_t {
    nix::unistd::gettid().as_raw() as libc::id_t
}

/// The calling thread's nice level.
pub fn thread_nice() -> i32 {
    // SAFETY: getpriority takes plain integers and touches no memory.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, this_thread()) }
}

/// Sets the calling thread's nice level.
pub fn renice_thread(nice: i32) -> Result<()> {
    // SAFETY: setpriority takes plain integers and touches no memory.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, this_thread(), nice) };
    if rc != 0 {
        bail!(
            "setpriority to nice {nice}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}
