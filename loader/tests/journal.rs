//! Recovery from damaged and unreadable journals (`iowarden knob restore`).
//!
//! As in knobs.rs, the knobs are plain files in a tempdir (this host has no
//! cgroup v2 io knobs), so recovery puts the previous bytes back verbatim.
//! The journals are written here by hand: a crash mid-write, a corrupted
//! record, a record naming a file that is not a knob, and journals a
//! non-root user may not read (run through setpriv as nobody).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_iowarden");
const ORIG_WEIGHT: &str = "default 100\n259:0 250\n";
const ORIG_QOS: &str = "259:0 enable=0 ctrl=auto\n";

struct Fixture {
    tmp: tempfile::TempDir,
    state: PathBuf,
}

impl Fixture {
    /// io.weight and io.cost.qos left changed by a killed run.
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir(tmp.path().join("cg")).unwrap();
        let state = tmp.path().join("state");
        fs::create_dir(&state).unwrap();
        let f = Fixture { tmp, state };
        fs::write(f.knob("io.weight"), "default 50\n").unwrap();
        fs::write(f.knob("io.cost.qos"), "259:0 enable=1 min=30 max=30\n").unwrap();
        f
    }
    fn knob(&self, name: &str) -> PathBuf {
        self.tmp.path().join("cg").join(name)
    }
    fn journal(&self) -> PathBuf {
        self.state.join("journal-1-1.jsonl")
    }
    fn set(&self, id: u64, knob: &Path, previous: &str, value: &str) -> String {
        serde_json::json!({"op": "set", "id": id, "pid": 4242, "time": 0,
            "path": knob, "previous": previous, "value": value})
        .to_string()
    }
    fn weight_set(&self) -> String {
        self.set(1, &self.knob("io.weight"), ORIG_WEIGHT, "default 50")
    }
    fn qos_set(&self) -> String {
        let v = "259:0 enable=1 min=30 max=30";
        self.set(2, &self.knob("io.cost.qos"), ORIG_QOS, v)
    }
    fn restore(&self) -> Output {
        Command::new(BIN)
            .args(["knob", "restore", "--state-dir"])
            .arg(&self.state)
            .output()
            .unwrap()
    }
    fn state_files(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(&self.state)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
    fn read(&self, name: &str) -> String {
        fs::read_to_string(self.knob(name)).unwrap()
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_torn_last_line_is_skipped_logged_and_the_rest_restored() {
    let f = Fixture::new();
    let torn = &f.qos_set()[..40];
    fs::write(f.journal(), format!("{}\n{torn}", f.weight_set())).unwrap();
    let o = f.restore();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "{}:2: skipping a torn last line",
            f.journal().display()
        )) && err.contains(torn),
        "{err}"
    );
    assert_eq!(f.read("io.weight"), ORIG_WEIGHT);
    // The torn record announced a write that never happened: not restored.
    assert_eq!(f.read("io.cost.qos"), "259:0 enable=1 min=30 max=30\n");
    assert!(f.state_files().is_empty(), "{:?}", f.state_files());
}

#[test]
fn a_corrupt_line_stops_recovery_and_the_journal_is_kept_aside() {
    let f = Fixture::new();
    let content = format!(
        "{}\n{{\"op\":\"set\",\"id\":9,\"pa#h\n{}\n",
        f.weight_set(),
        f.qos_set()
    );
    fs::write(f.journal(), &content).unwrap();
    let o = f.restore();
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "{}:2: not a journal record",
            f.journal().display()
        )) && err.contains("'{\"op\":\"set\",\"id\":9,\"pa#h'")
            && err.contains("nothing restored from this journal"),
        "{err}"
    );
    // Nothing restored, not even the record before the bad line.
    assert_eq!(f.read("io.weight"), "default 50\n");
    assert_eq!(f.read("io.cost.qos"), "259:0 enable=1 min=30 max=30\n");
    let aside = f.state.join("journal-1-1.jsonl.corrupt");
    assert_eq!(f.state_files(), ["journal-1-1.jsonl.corrupt"]);
    assert_eq!(
        fs::read_to_string(&aside).unwrap(),
        content,
        "kept as it was"
    );

    // Every later recovery warns while it is there; it fails nothing else.
    let o = f.restore();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "warning: {} is a damaged journal set aside earlier",
            aside.display()
        )),
        "{}",
        stderr(&o)
    );

    // A human deletes the bad line and renames it back: the next restore
    // restores both knobs and removes the journal.
    fs::write(&aside, format!("{}\n{}\n", f.weight_set(), f.qos_set())).unwrap();
    fs::rename(&aside, f.journal()).unwrap();
    let o = f.restore();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 2, "{}", stderr(&o));
    assert_eq!(f.read("io.weight"), ORIG_WEIGHT);
    assert_eq!(f.read("io.cost.qos"), ORIG_QOS);
    assert!(f.state_files().is_empty(), "{:?}", f.state_files());
}

#[test]
fn a_non_utf8_line_is_corruption_not_the_end_of_the_journal() {
    let f = Fixture::new();
    let mut content = format!("{}\n", f.weight_set()).into_bytes();
    content.extend_from_slice(b"\xff\xfe\n");
    content.extend_from_slice(format!("{}\n", f.qos_set()).as_bytes());
    fs::write(f.journal(), &content).unwrap();
    let o = f.restore();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(&format!("{}:2: not UTF-8", f.journal().display())),
        "{}",
        stderr(&o)
    );
    assert_eq!(f.read("io.weight"), "default 50\n");
    assert_eq!(f.state_files(), ["journal-1-1.jsonl.corrupt"]);
}

#[test]
fn a_set_of_a_file_that_is_not_a_knob_is_refused() {
    let f = Fixture::new();
    let victim = f.tmp.path().join("cg").join("notes.txt");
    fs::write(&victim, "changed\n").unwrap();
    let rec = f.set(1, &victim, "precious\n", "changed");
    fs::write(f.journal(), format!("{}\n{rec}\n", f.weight_set())).unwrap();
    let o = f.restore();
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "{}:2: {} is not a cgroup io knob",
            f.journal().display(),
            victim.display()
        )),
        "{err}"
    );
    assert_eq!(fs::read_to_string(&victim).unwrap(), "changed\n");
    assert_eq!(f.read("io.weight"), "default 50\n");
    assert_eq!(f.state_files(), ["journal-1-1.jsonl.corrupt"]);
}

/// `iowarden knob restore` as nobody (setpriv) against root's journals.
fn restore_as_nobody(f: &Fixture) -> Output {
    Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            BIN,
            "knob",
            "restore",
            "--state-dir",
        ])
        .arg(&f.state)
        .output()
        .unwrap()
}

#[test]
fn journals_a_non_root_user_cannot_read_are_errors_not_nothing_to_restore() {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "needs root to create root-owned journals"
    );
    let f = Fixture::new();
    fs::set_permissions(f.tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(f.journal(), format!("{}\n", f.weight_set())).unwrap();
    fs::set_permissions(f.journal(), fs::Permissions::from_mode(0o600)).unwrap();
    let o = restore_as_nobody(&f);
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "opening journal {}: Permission denied",
            f.journal().display()
        )) && !err.contains("nothing to restore"),
        "{err}"
    );

    fs::set_permissions(&f.state, fs::Permissions::from_mode(0o700)).unwrap();
    let o = restore_as_nobody(&f);
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "reading state directory {}: Permission denied",
            f.state.display()
        )),
        "{err}"
    );
    // Root still restores it.
    let o = f.restore();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(f.read("io.weight"), ORIG_WEIGHT);
}
