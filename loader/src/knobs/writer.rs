//! Writes io.* knobs safely: the previous value goes to a journal (JSON
//! lines, fsynced) before each write; `dry_run` writes nothing; io.cost.*
//! writes are spaced per device (each freezes and quiesces the queue);
//! `restore_all` (also on Drop) puts every changed knob back; a later run
//! restores what a killed run left changed, and says so.
//!
//! Journal: `<state_dir>/journal-<pid>-<nanos>.jsonl`, flock'ed by its run.
//! A journal whose lock can be taken belongs to a run that is gone.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::devnum::DevNum;
use super::journal::Record;
use super::kind::KnobKind;
use anyhow::{anyhow, bail, Context, Result};

pub const DEFAULT_STATE_DIR: &str = "/var/lib/iowarden";
pub const DEFAULT_IOCOST_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Clone, Debug)]
pub struct WriterConfig {
    pub state_dir: PathBuf,
    pub dry_run: bool,
    /// Minimum time between two io.cost.* writes to the same device.
    pub iocost_min_interval: Duration,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
            dry_run: false,
            iocost_min_interval: DEFAULT_IOCOST_INTERVAL,
        }
    }
}

#[derive(Debug, Clone)]
struct Change {
    id: u64,
    path: PathBuf,
    kind: KnobKind,
    previous: String,
    value: String,
}

pub struct Writer {
    cfg: WriterConfig,
    journal: Option<(PathBuf, File)>,
    changes: Vec<Change>,
    next_id: u64,
    last_cost_write: HashMap<DevNum, Instant>,
}

fn kind_of(path: &Path) -> Result<KnobKind> {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(KnobKind::from_file_name)
        .ok_or_else(|| {
            anyhow!(
                "{}: not a cgroup io knob (io.cost.qos, io.cost.model, io.weight, io.max, io.latency, io.stat, io.pressure)",
                path.display()
            )
        })
}

fn is_cgroupfs(path: &Path) -> bool {
    nix::sys::statfs::statfs(path)
        .is_ok_and(|st| st.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC)
}

/// The cgroup directory must exist; a vanished cgroup is a clear error.
fn check_cgroup(path: &Path) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    if !dir.is_dir() {
        bail!(
            "cgroup {} does not exist (vanished?); nothing changed",
            dir.display()
        );
    }
    if !path.exists() {
        bail!(
            "{} does not exist (io controller not enabled for this cgroup, or a root-only knob); nothing changed",
            path.display()
        );
    }
    Ok(())
}

/// One write(2) of `data` to `path` (cgroupfs takes one command per write).
/// Two writes set the same thing: same file, same device (or the same
/// io.weight key, `default` or MAJ:MIN), so restoring the earlier one's
/// previous value undoes both.
pub(crate) fn same_target(pa: &Path, va: &str, pb: &Path, vb: &str) -> bool {
    pa == pb && va.split_whitespace().next() == vb.split_whitespace().next()
}

fn write_once(path: &Path, data: &str, truncate: bool) -> Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .truncate(truncate)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let n = f.write(data.as_bytes()).map_err(|e| {
        let what = match e.raw_os_error() {
            Some(libc::EINVAL) => "the kernel refused the value".to_string(),
            Some(libc::ENODEV) | Some(libc::ENOENT) => "cgroup or device gone".to_string(),
            _ => e.to_string(),
        };
        anyhow!(
            "writing '{}' to {}: {what} ({e})",
            data.trim_end(),
            path.display()
        )
    })?;
    if n != data.len() {
        bail!(
            "short write to {} ({n} of {} bytes)",
            path.display(),
            data.len()
        );
    }
    Ok(())
}

/// Takes the journal's lock without waiting; Ok(false) when another
/// process holds it.
pub(crate) fn try_flock(f: &File) -> std::io::Result<bool> {
    // flock(2), LOCK_EX | LOCK_NB, as journals were always locked.
    match f.try_lock() {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

pub(crate) fn fsync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

impl Writer {
    pub fn new(cfg: WriterConfig) -> Writer {
        Writer {
            cfg,
            journal: None,
            changes: Vec::new(),
            next_id: 1,
            last_cost_write: HashMap::new(),
        }
    }

    pub fn config(&self) -> &WriterConfig {
        &self.cfg
    }

    /// Knobs this run has changed and not yet restored.
    pub fn pending(&self) -> usize {
        self.changes.len()
    }

    /// Waits until an io.cost.* write to `dev` is allowed, and books it.
    fn pace(&mut self, kind: KnobKind, dev: Option<DevNum>) {
        let (true, Some(dev)) = (kind.freezes_queue(), dev) else {
            return;
        };
        if let Some(last) = self.last_cost_write.get(&dev) {
            let since = last.elapsed();
            if since < self.cfg.iocost_min_interval {
                std::thread::sleep(self.cfg.iocost_min_interval - since);
            }
        }
        self.last_cost_write.insert(dev, Instant::now());
    }

    fn append(&mut self, rec: &Record) -> Result<()> {
        if self.journal.is_none() {
            fs::create_dir_all(&self.cfg.state_dir).with_context(|| {
                format!("creating state directory {}", self.cfg.state_dir.display())
            })?;
            let nanos = crate::host::clock::since_epoch().as_nanos();
            let p = self
                .cfg
                .state_dir
                .join(format!("journal-{}-{nanos}.jsonl", std::process::id()));
            let f = OpenOptions::new()
                .create_new(true)
                .append(true)
                .open(&p)
                .with_context(|| format!("creating journal {}", p.display()))?;
            if !try_flock(&f).unwrap_or(false) {
                bail!("locking journal {}", p.display());
            }
            fsync_dir(&self.cfg.state_dir);
            self.journal = Some((p, f));
        }
        let (p, f) = self.journal.as_mut().expect("opened above");
        let mut line = serde_json::to_string(rec)?;
        line.push('\n');
        f.write_all(line.as_bytes())
            .and_then(|_| f.sync_all())
            .with_context(|| format!("writing journal {}", p.display()))
    }

    /// Sets `path` to `value` (one write-side line); returns what it did.
    pub fn set(&mut self, path: &Path, value: &str) -> Result<String> {
        let kind = kind_of(path)?;
        let dev = kind.check_write(value)?;
        let value = value.trim_end_matches('\n').to_string();
        check_cgroup(path)?;
        let previous = fs::read_to_string(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                anyhow!("cgroup of {} vanished; nothing changed", path.display())
            } else {
                anyhow!("reading {}: {e}", path.display())
            }
        })?;
        // Refuse what we could not put back.
        let undo = kind.restore_commands(&previous, &value).with_context(|| {
            format!(
                "current value of {} does not parse; refusing to change what could not be restored",
                path.display()
            )
        })?;
        if self.cfg.dry_run {
            return Ok(format!(
                "dry-run: would write '{value}' to {} (now: '{}'); restore would write: '{}'",
                path.display(),
                previous.trim_end().replace('\n', "\\n"),
                undo.join("' then '")
            ));
        }
        self.pace(kind, dev);
        let id = self.next_id;
        self.next_id += 1;
        self.append(&Record::Set {
            id,
            pid: std::process::id(),
            time: crate::host::clock::since_epoch().as_secs(),
            path: path.to_path_buf(),
            previous: previous.clone(),
            value: value.clone(),
        })?;
        let data = format!("{value}\n");
        if let Err(e) = write_once(path, &data, !is_cgroupfs(path)) {
            let _ = self.append(&Record::Done {
                id,
                how: "write failed".into(),
            });
            return Err(e.context("nothing changed"));
        }
        self.changes.push(Change {
            id,
            path: path.to_path_buf(),
            kind,
            previous: previous.clone(),
            value: value.clone(),
        });
        Ok(format!(
            "wrote '{value}' to {} (was: '{}')",
            path.display(),
            previous.trim_end().replace('\n', "\\n")
        ))
    }

    /// Keeps every change made so far: nothing will be restored.
    pub fn keep_all(&mut self) -> Result<()> {
        for c in std::mem::take(&mut self.changes) {
            self.append(&Record::Done {
                id: c.id,
                how: "kept".into(),
            })?;
        }
        self.remove_journal();
        Ok(())
    }

    fn restore_change(&mut self, c: &Change) -> Result<String> {
        let dir = c.path.parent().unwrap_or(Path::new("/"));
        if !dir.is_dir() {
            return Ok(format!(
                "{}: cgroup is gone, nothing to restore",
                c.path.display()
            ));
        }
        if is_cgroupfs(&c.path) {
            // A device that is gone took its line of the knob with it.
            if let Ok(Some(dev)) = c.kind.check_write(&c.value) {
                if !Path::new(&format!("/sys/dev/block/{dev}")).exists() {
                    return Ok(format!(
                        "{}: device {dev} is gone, nothing to restore",
                        c.path.display()
                    ));
                }
            }
            let cmds = c.kind.restore_commands(&c.previous, &c.value)?;
            for cmd in &cmds {
                let dev = c.kind.check_write(cmd).ok().flatten();
                self.pace(c.kind, dev);
                write_once(&c.path, &format!("{cmd}\n"), false)?;
            }
        } else {
            // A regular file standing in for a knob (tests): put the bytes back.
            self.pace(c.kind, c.kind.check_write(&c.value).ok().flatten());
            write_once(&c.path, &c.previous, true)?;
        }
        Ok(format!(
            "restored {} to '{}'",
            c.path.display(),
            c.previous.trim_end().replace('\n', "\\n")
        ))
    }

    /// Puts back every knob this run changed, newest first. Returns one
    /// message per knob; errors are collected, the others still restored.
    pub fn restore_all(&mut self) -> Result<Vec<String>> {
        let mut msgs = Vec::new();
        let mut errs = Vec::new();
        while let Some(c) = self.changes.pop() {
            // An earlier change of the same knob restores the original value:
            // the intermediate ones need no write (each io.cost write is paced).
            if self
                .changes
                .iter()
                .any(|e| same_target(&e.path, &e.value, &c.path, &c.value))
            {
                self.append(&Record::Done {
                    id: c.id,
                    how: "superseded".into(),
                })?;
                continue;
            }
            match self.restore_change(&c) {
                Ok(m) => {
                    self.append(&Record::Done {
                        id: c.id,
                        how: "restored".into(),
                    })?;
                    msgs.push(m);
                }
                Err(e) => errs.push(format!("{}: {e:#}", c.path.display())),
            }
        }
        if errs.is_empty() {
            self.remove_journal();
            Ok(msgs)
        } else {
            bail!("could not restore: {}", errs.join("; "))
        }
    }

    fn remove_journal(&mut self) {
        if let Some((p, _f)) = self.journal.take() {
            let _ = fs::remove_file(&p);
            fsync_dir(&self.cfg.state_dir);
        }
    }

    pub(crate) fn own_journal(&self) -> Option<&Path> {
        self.journal.as_ref().map(|(p, _)| p.as_path())
    }

    /// Restores one knob a gone run left changed (no journal record).
    pub(crate) fn restore_left_change(
        &mut self,
        id: u64,
        path: &Path,
        kind: KnobKind,
        previous: &str,
        value: &str,
    ) -> Result<String> {
        self.restore_change(&Change {
            id,
            path: path.to_path_buf(),
            kind,
            previous: previous.to_string(),
            value: value.to_string(),
        })
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.changes.is_empty() {
            match self.restore_all() {
                Ok(msgs) => msgs.iter().for_each(|m| crate::say!("iowarden: {m}")),
                Err(e) => crate::say!("iowarden: error: {e:#}"),
            }
        }
    }
}

/// Reads a knob file and returns it parsed and formatted again.
pub fn get(path: &Path) -> Result<String> {
    let kind = kind_of(path)?;
    let dir = path.parent().unwrap_or(Path::new("/"));
    if !dir.is_dir() {
        bail!("cgroup {} does not exist", dir.display());
    }
    let s = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(kind.normalize(&s)?)
}
