//! Long-running commands end the way SIGINT ends them whatever stops them,
//! on the real kernel: SIGHUP (a terminal or session gone) and a closed
//! stdout end `run` and `top` with a non-zero status and their programs
//! detached; SIGTERM is honoured while the programs load and long before a
//! `--duration` runs out. Every wait is a bound on a hang, not a timing.

use crate::fixtures;

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fixtures::*;
use nix::sys::signal::Signal;

const BIN: &str = env!("CARGO_BIN_EXE_iowarden");

/// Whether process `pid` has a handler for `sig` (SigCgt in its status).
fn catches(pid: u32, sig: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|m| m & (1 << (sig - 1)) != 0)
}

/// Sends SIGTERM as soon as `child` has a handler for it (its SigCgt):
/// while its programs load, or just after.
fn terminate_once_caught(child: &Child, what: &str) {
    wait_until(
        &format!("{what} installed no SIGTERM handler within 30 s"),
        Duration::from_secs(30),
        Duration::from_millis(1),
        || catches(child.id(), libc::SIGTERM).then_some(()),
    );
    signal(child, Signal::SIGTERM);
}

/// `iowarden top` in a pipe (no terminal), its stdout to read.
fn top_in_a_pipe(extra: &[&str]) -> Child {
    Command::new(BIN)
        .args(["top", "--interval", "200ms"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn sighup_ends_run_with_129_and_detaches_its_programs() {
    let (mut daemon, log) = Daemon::start_ephemeral(&[], &[]);
    let progs = loaded_programs_of(daemon.child.id());
    signal(&daemon.child, Signal::SIGHUP);
    let status = exit_within_a_minute(&mut daemon.child, "SIGHUP to run");
    assert_eq!(status.code(), Some(129), "run's status: {status}");
    assert!(
        log.text().contains("stopped by SIGHUP"),
        "run's log: {}",
        log.text()
    );
    assert_unloaded(&progs, "run");
}

#[test]
fn sighup_ends_top_in_a_pipe_with_129_and_detaches_its_programs() {
    let mut top = top_in_a_pipe(&[]);
    let progs = loaded_programs_of(top.id());
    signal(&top, Signal::SIGHUP);
    let status = exit_within_a_minute(&mut top, "SIGHUP to top");
    assert_eq!(status.code(), Some(129), "top's status: {status}");
    assert_unloaded(&progs, "top");
}

#[test]
fn a_closed_stdout_ends_top_with_an_error_and_detaches_its_programs() {
    let mut top = top_in_a_pipe(&[]);
    let progs = loaded_programs_of(top.id());
    // A first table arrives, then the reader goes away: the next write
    // gets EPIPE (Rust ignores SIGPIPE).
    let mut out = top.stdout.take().unwrap();
    let mut first = [0u8; 64];
    out.read_exact(&mut first).unwrap();
    assert!(
        String::from_utf8_lossy(&first).starts_with("iowarden top"),
        "{}",
        String::from_utf8_lossy(&first)
    );
    drop(out);
    let status = exit_within_a_minute(&mut top, "top's stdout closed");
    assert_eq!(status.code(), Some(1), "top's status: {status}");
    assert_unloaded(&progs, "top");
}

#[test]
fn sigterm_is_honoured_while_loading_and_long_before_the_duration() {
    // SIGTERM as soon as the handler is in place: the programs are being
    // loaded then (or just attached). --duration is 10 minutes.
    let mut top = top_in_a_pipe(&["--duration", "600s"]);
    terminate_once_caught(&top, "top");
    let status = exit_within_a_minute(&mut top, "SIGTERM to top --duration 600s");
    assert_eq!(status.code(), Some(0), "top's status: {status}");

    let state = tempfile::tempdir().unwrap();
    let mut run = Command::new(BIN)
        .args(["run", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state.path())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    terminate_once_caught(&run, "run");
    let status = exit_within_a_minute(&mut run, "SIGTERM to run");
    assert_eq!(status.code(), Some(0), "run's status: {status}");
}
