//! The Debian package (`make deb`: scripts/deb.sh) as a host installs it:
//! built from the binary under test, installed with dpkg, its unit verified
//! where dpkg put it, the installed binary started as the unit starts it
//! (its ExecStart, with exactly the unit's capabilities through setpriv:
//! this machine has no systemd as PID 1 to start it, so postinst, which
//! enables and starts the unit where systemd runs, leaves it alone here),
//! serving /metrics; then purged, and nothing of it left.

use crate::deploy::unit_capabilities;
use crate::fixtures::{repo, Daemon};
use crate::promserver::free_port;

use std::path::Path;
use std::process::Command;

const UNIT: &str = "/lib/systemd/system/iowarden.service";

fn dpkg(args: &[&str]) -> String {
    let out = Command::new("dpkg").args(args).output().expect("dpkg");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "dpkg {args:?}: {text}");
    text
}

fn installed() -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", "iowarden"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
}

/// Purges the package when the test ends, passed or not.
struct Purge;

impl Drop for Purge {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["--purge", "iowarden"]).status();
    }
}

#[test]
fn package_installs_starts_and_purges() {
    assert!(
        !installed(),
        "the iowarden package is installed on this machine: this test installs and purges its own; \
         remove it first (dpkg --purge iowarden)"
    );
    let out = tempfile::tempdir().unwrap();
    let built = Command::new(repo().join("scripts/deb.sh"))
        .arg(env!("CARGO_BIN_EXE_iowarden"))
        .arg(out.path())
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "deb.sh: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let deb = String::from_utf8(built.stdout).unwrap().trim().to_string();
    let info = dpkg(&["--info", &deb]);
    for field in [
        "Package: iowarden",
        "Depends: ",
        "libelf1",
        "Architecture: ",
    ] {
        assert!(info.contains(field), "{field} in\n{info}");
    }

    let _purge = Purge;
    dpkg(&["--install", &deb]);
    assert!(installed());
    let files = dpkg(&["--listfiles", "iowarden"]);
    for f in [
        "/usr/bin/iowarden",
        UNIT,
        "/usr/share/doc/iowarden/docs/metrics.md",
    ] {
        assert!(files.lines().any(|l| l == f), "{f} in\n{files}");
        assert!(Path::new(f).exists(), "{f}");
    }
    let unit = std::fs::read_to_string(UNIT).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart=");
    let mut args: Vec<String> = exec.split_whitespace().map(str::to_string).collect();
    assert_eq!(
        args[0], "/usr/bin/iowarden",
        "the unit runs the packaged binary"
    );
    let verify = Command::new("systemd-analyze")
        .args(["verify", UNIT])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&verify.stderr).to_string();
    assert!(
        verify.status.success() && text.trim().is_empty(),
        "systemd-analyze verify {UNIT}: {text}"
    );

    // The unit's command line on a free port, with the unit's capabilities.
    let port = free_port();
    let listen = args.iter().position(|a| a == "--listen").expect("--listen") + 1;
    args[listen] = format!("127.0.0.1:{port}");
    let caps = unit_capabilities(&unit)
        .iter()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect::<Vec<_>>()
        .join(",");
    let daemon = Daemon::start_command(
        port,
        Command::new("setpriv")
            .arg(format!("--bounding-set=-all,{caps}"))
            .arg("--inh-caps=-all")
            .args(&args),
    );
    let metrics = daemon.get("/metrics").expect("/metrics");
    assert!(
        metrics.contains(r#"iowarden_probe_active{probe="block_rq_complete",reason=""} 1"#),
        "{metrics}"
    );
    drop(daemon);

    dpkg(&["--purge", "iowarden"]);
    assert!(!installed());
    for f in ["/usr/bin/iowarden", UNIT, "/usr/share/doc/iowarden"] {
        assert!(!Path::new(f).exists(), "{f} left after purge");
    }
}
