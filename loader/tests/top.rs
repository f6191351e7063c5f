//! `iowarden top` against real I/O: plain text in a pipe, the ratatui view on
//! a real pseudo-terminal (util-linux `script` allocates it), keys included.

use crate::fixtures;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use fixtures::*;

const BIN: &str = env!("CARGO_BIN_EXE_iowarden");

fn reader(cg: &Cgroup, dev: &LoopDev) -> std::process::Child {
    let mut a = fio_args(&dev.path, "randread", "4k", 4, 1_000_000, "0", "32M");
    a.push("--time_based".into());
    a.push("--runtime=8".into());
    cg.command("fio", &a).stdout(Stdio::null()).spawn().unwrap()
}

#[test]
fn in_a_pipe_prints_plain_tables_with_the_workload() {
    let dev = LoopDev::file(64);
    let cg = Cgroup::new("iowarden-top-pipe");
    let mut fio = reader(&cg, &dev);
    let out = Command::new(BIN)
        .args([
            "top",
            "--device",
            &dev.name(),
            "--interval",
            "1s",
            "--duration",
            "4s",
        ])
        .output()
        .unwrap();
    let _ = fio.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains('\x1b'), "escape sequences in a pipe: {text}");
    let headers = text
        .lines()
        .filter(|l| l.split_whitespace().take(2).eq(["DEVICE", "CGROUP"]))
        .count();
    assert!(headers >= 2, "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with(&dev.name()) && l.contains(&cg.rel) && l.contains("100%")),
        "{text}"
    );
}

#[test]
fn on_a_terminal_draws_the_tui_and_quits_on_q() {
    let dev = LoopDev::file(64);
    let cg = Cgroup::new("iowarden-top-tty");
    let mut fio = reader(&cg, &dev);
    let log = tempfile::NamedTempFile::new().unwrap();
    let cmd = format!(
        "stty cols 120 rows 30; {BIN} top --device {} --interval 1s --duration 3600s",
        dev.name()
    );
    let mut script = Command::new("script")
        .args(["-qfc", &cmd])
        .arg(log.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(4));
    script.stdin.as_mut().unwrap().write_all(b"s").unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    script.stdin.as_mut().unwrap().write_all(b"q").unwrap();
    // An hour's --duration: only q ends it within the wait (a hang bound,
    // not a timing: the screen above takes seconds).
    let st = poll_until(Duration::from_secs(300), Duration::from_millis(100), || {
        script.try_wait().unwrap()
    });
    if st.is_none() {
        let _ = script.kill();
        let _ = script.wait();
    }
    let _ = fio.wait();
    let screen = String::from_utf8_lossy(&std::fs::read(log.path()).unwrap()).into_owned();
    let st = st.unwrap_or_else(|| panic!("q did not quit top: {screen}"));
    assert!(st.success(), "{screen}");
    // Alternate screen entered and left; the table; the sort marker drawn on
    // SHARE, then drawn again elsewhere after 's' (ratatui writes only the
    // cells that change, so the second one is a lone marker).
    assert!(
        screen.contains("\x1b[?1049h") && screen.contains("\x1b[?1049l"),
        "{screen:?}"
    );
    assert!(screen.contains("SHARE▼"), "{screen:?}");
    let after_s = &screen[screen.find("SHARE▼").unwrap() + "SHARE▼".len()..];
    assert!(after_s.contains('▼'), "no marker moved by 's': {screen:?}");
    assert!(screen.contains(&cg.rel), "{screen:?}");
    assert!(screen.contains("q quit"), "{screen:?}");
}

/// `iowarden top --duration` in a pipe, its stdout.
fn top_for(dev: &LoopDev, secs: u32) -> String {
    let out = succeed(
        Command::new(BIN)
            .args(["top", "--device", &dev.name(), "--interval", "1s"])
            .arg(format!("--duration={secs}s")),
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// fio in `cg`, starting after `delay` s, running `secs` s.
fn fio_for(cg: &Cgroup, a: Vec<String>, delay: u32, secs: u32) -> std::process::Child {
    let mut args = vec![
        "-c".to_string(),
        format!("sleep {delay}; exec fio \"$@\""),
        "fio".into(),
    ];
    args.extend(a);
    args.push("--time_based".into());
    args.push(format!("--runtime={secs}"));
    cg.command("sh", &args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The verdict on real I/O: a 4 KiB QD1 reader alone for 5 s, then a
/// 128 KiB QD32 writer in another cgroup joins; top's closing line must name
/// the writer and the reader, measured by the culprit account (on by
/// default). Before that, the reader alone must not be called a victim (the
/// same detector, same device, no hog).
#[test]
fn the_verdict_names_a_real_hog_and_not_a_lone_reader() {
    let dev = LoopDev::file(1024);
    let victim = Cgroup::new("iowarden-top-victim");
    let hog = Cgroup::new("iowarden-top-hog");
    let victim_io = || fio_args(&dev.path, "randread", "4k", 1, 100_000_000, "0", "256M");
    let hog_io = || {
        fio_args(
            &dev.path,
            "randwrite",
            "128k",
            32,
            100_000_000,
            "512M",
            "256M",
        )
    };

    let mut alone = fio_for(&victim, victim_io(), 0, 8);
    let text = top_for(&dev, 6);
    let _ = alone.wait();
    let last = text.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("measured: no noisy neighbour: ")
            && last.contains(&format!("/iowarden-top-victim on {},", dev.name())),
        "{text}"
    );

    let mut v = fio_for(&victim, victim_io(), 0, 17);
    let mut h = fio_for(&hog, hog_io(), 5, 10);
    let text = top_for(&dev, 13);
    let _ = v.wait();
    let _ = h.wait();
    let last = text.lines().last().unwrap_or_default();
    let want = format!(
        "measured: noisy neighbour on {}: /iowarden-top-victim waited behind /iowarden-top-hog for ",
        dev.name()
    );
    assert!(last.starts_with(&want), "{text}");
}

/// The terminal goes away under `top` (an SSH session dropped, a tmux
/// session killed): the pseudo-terminal's master side is closed. `top` must
/// end on its own, with a non-zero status, its BPF programs unloaded.
#[test]
fn a_terminal_that_goes_away_ends_top_and_unloads_its_programs() {
    top_whose_terminal_goes_away(HangUp::AfterFirstFrame);
}

/// The same while `top` is still starting: it has loaded programs but not
/// yet attached them all nor said which probes run. Every line it writes
/// from here meets a hung-up terminal (EIO); std's eprintln! panicked on
/// that (exit 101, found by chance in CI when the machine was slow).
#[test]
fn a_terminal_that_goes_away_during_start_up_ends_top_cleanly() {
    top_whose_terminal_goes_away(HangUp::AtFirstProgram);
}

/// When the test closes `top`'s terminal.
enum HangUp {
    /// As soon as top holds a BPF program.
    AtFirstProgram,
    /// Once top has drawn its view.
    AfterFirstFrame,
}

fn top_whose_terminal_goes_away(at: HangUp) {
    let pty = nix::pty::openpty(None, None).expect("openpty");
    // openpty's descriptors are inherited across exec; their clones are not
    // (a master left open in top itself would keep its terminal alive).
    let (master, slave_fd) = (
        pty.master.try_clone().unwrap(),
        pty.slave.try_clone().unwrap(),
    );
    drop(pty);
    let slave = || Stdio::from(slave_fd.try_clone().unwrap());
    // setsid -c: a session of its own with the pty as controlling terminal,
    // so that the kernel also sends it SIGHUP, as a login session's would.
    let mut top = Command::new("setsid")
        .args(["-c", BIN, "top", "--interval", "200ms"])
        .stdin(slave())
        .stdout(slave())
        .stderr(slave())
        .spawn()
        .unwrap();
    drop(slave_fd);
    let progs = match at {
        HangUp::AtFirstProgram => first_programs_of(top.id()),
        HangUp::AfterFirstFrame => {
            let progs = loaded_programs_of(top.id());
            let mut screen = std::fs::File::from(master.try_clone().unwrap());
            read_until(&mut screen, "iowarden");
            progs
        }
    };
    drop(master);
    let status = exit_within_a_minute(&mut top, "top's terminal went away");
    assert_eq!(status.code(), Some(1), "top's status: {status}");
    assert_unloaded(&progs, "top");
}

/// Reads the terminal's output until `text` appears (ratatui draws only
/// the cells that change: a word, not a phrase with blanks, is sure to
/// arrive whole). Fails if the terminal closes first or 30 s pass.
fn read_until(screen: &mut std::fs::File, text: &str) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::io::Read;
    use std::os::fd::AsFd;
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    // No sleep between tries: the poll's timeout is the pause.
    poll_until(Duration::from_secs(30), Duration::ZERO, || {
        let mut fds = [PollFd::new(screen.as_fd(), PollFlags::POLLIN)];
        if poll(&mut fds, PollTimeout::from(100u16)).unwrap() == 0 {
            return None;
        }
        let n = screen
            .read(&mut buf)
            .unwrap_or_else(|e| panic!("top's terminal closed before {text:?}: {e}"));
        assert!(n > 0, "top's terminal closed before {text:?}");
        seen.extend_from_slice(&buf[..n]);
        String::from_utf8_lossy(&seen).contains(text).then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "top drew no {text:?} within 30 s: {:?}",
            String::from_utf8_lossy(&seen)
        )
    });
}

/// The demo's terminal goes away mid-run: the script cleans up as on
/// Ctrl-C (its loop device, backing file and cgroups gone, no process of
/// its session left) and exits non-zero.
#[test]
fn the_demo_cleans_up_when_its_terminal_goes_away() {
    let (root, _) = io_root();
    let base = root.join("iowarden-demo");
    let images = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir("/var/tmp")
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.to_string_lossy().contains("iowarden-demo.")
                    && p.extension().is_some_and(|x| x == "img")
            })
            .collect()
    };
    // An earlier demo killed with -9 can leave its (empty) cgroups: the
    // demo runs in them all the same, and this test checks they go.
    for d in [base.join("victim"), base.join("hog"), base.clone()] {
        let _ = std::fs::remove_dir(d);
    }
    assert!(
        !base.exists(),
        "{} exists before the demo, with processes in it",
        base.display()
    );
    let images_before = images();
    let fio_log = tempfile::NamedTempFile::new().unwrap();
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let (master, slave_fd) = (
        pty.master.try_clone().unwrap(),
        pty.slave.try_clone().unwrap(),
    );
    drop(pty);
    let slave = || Stdio::from(slave_fd.try_clone().unwrap());
    let mut demo = Command::new("setsid")
        .arg("-c")
        .arg(repo().join("examples/noisy-neighbour/run.sh"))
        .env("IOWARDEN", BIN)
        .env("DURATION", "40")
        .env("FIO_LOG", fio_log.path())
        .stdin(slave())
        .stdout(slave())
        .stderr(slave())
        .spawn()
        .unwrap();
    drop(slave_fd);
    let session = demo.id();
    // Mid-run: the victim's fio is running in its cgroup.
    wait_until(
        "the demo's victim never started",
        Duration::from_secs(60),
        Duration::from_millis(100),
        || {
            std::fs::read_to_string(base.join("victim/cgroup.procs"))
                .is_ok_and(|p| !p.trim().is_empty())
                .then_some(())
        },
    );
    // And top, with its programs loaded.
    let top = wait_until(
        "the demo's top never started",
        Duration::from_secs(60),
        Duration::from_millis(100),
        || {
            let found = Command::new("pgrep")
                .args(["-s", &session.to_string(), "-x", "iowarden"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&found.stdout)
                .split_whitespace()
                .next()
                .map(|pid| pid.parse::<u32>().unwrap())
        },
    );
    let progs = loaded_programs_of(top);
    drop(master);
    let status = exit_within_a_minute(&mut demo, "the demo's terminal went away");
    assert!(!status.success(), "the demo's status: {status}");
    let mut left = Vec::new();
    poll_until(Duration::from_secs(30), Duration::from_millis(100), || {
        left = Command::new("pgrep")
            .args(["-s", &session.to_string()])
            .output()
            .unwrap()
            .stdout;
        left.is_empty().then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "processes of the demo's session left: {}",
            String::from_utf8_lossy(&left)
        )
    });
    assert_unloaded(&progs, "the demo's top");
    assert!(!base.exists(), "{} left behind", base.display());
    assert_eq!(images(), images_before, "backing files left in /var/tmp");
    let losetup =
        String::from_utf8(Command::new("losetup").arg("-a").output().unwrap().stdout).unwrap();
    assert!(
        !losetup.contains("iowarden-demo."),
        "loop device left: {losetup}"
    );
}
