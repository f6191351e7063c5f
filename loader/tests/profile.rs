//! `iowarden profile` against a real loop device with real fio; the refusals
//! against a real filesystem on it and a real mount. (`--apply` needs
//! io.cost.model, i.e. cgroup v2: this v1 host checks its error; the guest
//! applies it, tests/vmtest/guest/t-46-tune-safety.sh.)

use crate::fixtures;

use std::process::Command;

use fixtures::*;
use iowarden::knobs::cost_model::{CostModel, COEFS};

const BIN: &str = env!("CARGO_BIN_EXE_iowarden");

fn profile(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .arg("profile")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn measures_a_model_from_fio_that_the_kernel_format_accepts() {
    let dev = LoopDev::file(128);
    let out = profile(&[&dev.name(), "--duration", "1s", "--size", "64M"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    println!("{err}{line}");
    assert!(
        line.starts_with(&format!("{} ctrl=user model=linear ", dev.majmin())),
        "{line}"
    );
    let m = CostModel::parse(&line).unwrap();
    for key in COEFS {
        let v = m
            .coef(key)
            .unwrap_or_else(|| panic!("{key} missing in {line}"));
        assert!(v > 0, "{key}={v}");
        // Each value is what its fio run measured (the per-case report).
        let case = err
            .lines()
            .find(|l| l.contains(&format!("-> {key}=")))
            .unwrap_or_else(|| panic!("no report line for {key}: {err}"));
        assert!(
            case.ends_with(&format!("-> {key}={v}")),
            "{case} vs {key}={v}"
        );
    }
    // Each write case ran before its read, so the reads found written blocks.
    let at = |key: &str| err.find(&format!("-> {key}=")).unwrap();
    for (w, r) in [
        ("wbps", "rbps"),
        ("wseqiops", "rseqiops"),
        ("wrandiops", "rrandiops"),
    ] {
        assert!(at(w) < at(r), "{w} after {r}: {err}");
    }
    // 16 MiB sequential blocks (a quarter of the region) move more bytes than 4 KiB random reads.
    let (rbps, rrand) = (m.coef("rbps").unwrap(), m.coef("rrandiops").unwrap());
    assert!(rbps > 4096 * rrand, "{line}");
}

#[test]
fn refuses_a_device_with_a_filesystem_or_a_mount_unless_forced() {
    let dev = LoopDev::file(64);
    let st = Command::new("mkfs.ext4")
        .args(["-q", "-F", &dev.path])
        .status()
        .unwrap();
    assert!(st.success());
    let out = profile(&[&dev.name(), "--duration", "1s"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("holds data (ext4)") && err.contains("--force"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let st = Command::new("mount")
        .arg(&dev.path)
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(st.success());
    let out = profile(&[&dev.name(), "--duration", "1s", "--force", "--size", "8M"]);
    let forced_ok = out.status.success();
    let out2 = profile(&[&dev.name(), "--duration", "1s"]);
    let _ = Command::new("umount").arg(dir.path()).status();
    let err = String::from_utf8_lossy(&out2.stderr);
    assert!(
        err.contains(&format!("mounted at {}", dir.path().display())),
        "{err}"
    );
    // --force is the user's call, even over a mount.
    assert!(forced_ok, "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn bad_input_is_refused_before_any_run() {
    let dev = LoopDev::file(64);
    let out = profile(&[&dev.name(), "--size", "1M"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 4 MiB"));
    let out = profile(&[&dev.name(), "--offset", "63M", "--size", "8M"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not fit"));
    let out = profile(&["nosuchdisk9"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown block device 'nosuchdisk9'"));
    let out = profile(&[&dev.name(), "--size", "lots"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid size 'lots'"));
    if !std::path::Path::new("/sys/fs/cgroup/io.cost.model").exists() {
        let out = profile(&[&dev.name(), "--apply", "--duration", "1s"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("no io.cost.model"),
            "{err}"
        );
    }
}
