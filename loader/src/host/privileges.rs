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

/// Drops every capability of every thread-set and, with `user`, becomes
/// that user. Call after the programs are attached and before threads
/// start (capabilities are per thread: threads spawned later inherit the
/// dropped sets). Returns a line saying what is left, for the log.
pub fn drop_all(user: Option<&str>) -> Result<String> {
    // The bounding set first: dropping from it needs CAP_SETPCAP, which the
    // next steps remove.
    let bounding = caps::read(None, CapSet::Bounding).unwrap_or_default();
    if caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP).unwrap_or(false) {
        for c in bounding {
            caps::drop(None, CapSet::Bounding, c).context("dropping from the bounding set")?;
        }
    }
    caps::clear(None, CapSet::Ambient).context("clearing the ambient set")?;
    if let Some(u) = user {
        switch_user(u)?;
    }
    let none = CapsHashSet::new();
    for set in [CapSet::Effective, CapSet::Inheritable, CapSet::Permitted] {
        caps::set(None, set, &none).with_context(|| format!("clearing the {set:?} set"))?;
    }
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
    Ok(format!(
        "programs attached; dropped every capability (kept: {}; CapEff {}, CapPrm {}, CapBnd {}), uid {}, no_new_privs",
        match names(CapSet::Permitted) {
            v if v.is_empty() => "none".to_string(),
            v => v.join(","),
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
