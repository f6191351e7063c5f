//! Recovery of what a killed or crashed run left changed, from its journal.
//!
//! Nothing here fails quietly:
//! - a state directory or journal this process may not read is an error
//!   (not "nothing to restore"), naming the file;
//! - a torn last line (a crash mid-write: the knob write it announced never
//!   happened) is the only damage skipped, and it is logged;
//! - any other line that does not parse, or a `set` of a file that is not an
//!   io knob, stops recovery of that journal with an error naming the file,
//!   the line and its content. Nothing is restored from it and it is moved
//!   aside to `<journal>.corrupt`, kept for a human: fix or delete the line,
//!   rename it back, and `iowarden knob restore` restores from it. Every
//!   later recovery warns while a `.corrupt` journal remains;
//! - a journal is deleted only when every restore it asked for succeeded.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

use super::journal::{self, PendingSet, Record};
use super::writer::{fsync_dir, same_target, try_flock, Writer};

impl Writer {
    /// Restores what runs that are gone (killed, crashed) left changed:
    /// one message per knob. Journals of live runs are left alone; below is
    /// what happens to damaged or unreadable ones. (Here, not in writer.rs:
    /// recovery needs the writer, the writer never needs recovery.)
    pub fn recover(&mut self) -> Result<Vec<String>> {
        recover(self)
    }
}

pub(crate) const CORRUPT_SUFFIX: &str = ".corrupt";

fn io_error(what: &str, path: &Path, e: std::io::Error) -> anyhow::Error {
    let hint = if e.kind() == ErrorKind::PermissionDenied {
        " (journals are written by the user that changed the knobs, usually root: run as that user)"
    } else {
        ""
    };
    anyhow!("{what} {}: {e}{hint}", path.display())
}

fn is_journal_name(name: &str) -> bool {
    name.starts_with("journal-") && name.ends_with(".jsonl")
}

/// Journals (and set-aside corrupt ones) in the state directory; a missing
/// directory holds none, an unreadable one is an error.
fn list(dir: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
        Err(e) => return Err(io_error("reading state directory", dir, e)),
    };
    let (mut journals, mut corrupt) = (Vec::new(), Vec::new());
    for entry in rd {
        let path = entry
            .map_err(|e| io_error("reading state directory", dir, e))?
            .path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if is_journal_name(name) {
            journals.push(path);
        } else if name
            .strip_suffix(CORRUPT_SUFFIX)
            .is_some_and(is_journal_name)
        {
            corrupt.push(path);
        }
    }
    journals.sort();
    corrupt.sort();
    Ok((journals, corrupt))
}

fn recover(w: &mut Writer) -> Result<Vec<String>> {
    let dir = w.config().state_dir.clone();
    let (journals, corrupt) = list(&dir)?;
    for c in &corrupt {
        crate::say!(
            "iowarden: warning: {} is a damaged journal set aside earlier: its knobs were not restored; \
             inspect it, fix or delete the bad line and rename it back to end in .jsonl (or delete it once restored by hand)",
            c.display()
        );
    }
    let own = w.own_journal().map(Path::to_path_buf);
    let mut msgs = Vec::new();
    let mut errs = Vec::new();
    for jp in journals.iter().filter(|p| Some(*p) != own.as_ref()) {
        match recover_journal(w, jp) {
            Ok(m) => msgs.extend(m),
            Err(e) => errs.push(format!("{e:#}")),
        }
    }
    if errs.is_empty() {
        Ok(msgs)
    } else {
        bail!(
            "{}could not restore: {}",
            msgs.iter().map(|m| format!("{m}; ")).collect::<String>(),
            errs.join("; ")
        )
    }
}

/// Opens and locks a journal; None when a live run holds it.
fn open_unlocked(jp: &Path) -> Result<Option<File>> {
    let f = OpenOptions::new()
        .read(true)
        .append(true)
        .open(jp)
        .map_err(|e| io_error("opening journal", jp, e))?;
    match try_flock(&f) {
        Ok(true) => Ok(Some(f)),
        Ok(false) => Ok(None),
        Err(e) => Err(io_error("locking journal", jp, e)),
    }
}

fn set_aside(jp: &Path) -> Result<PathBuf> {
    let mut name = jp.as_os_str().to_owned();
    name.push(CORRUPT_SUFFIX);
    let aside = PathBuf::from(name);
    fs::rename(jp, &aside).map_err(|e| io_error("moving aside journal", jp, e))?;
    if let Some(dir) = jp.parent() {
        fsync_dir(dir);
    }
    Ok(aside)
}

/// Reads a journal strictly; a damaged one is set aside (not in dry-run).
fn read_pending(w: &Writer, jp: &Path, f: &mut File) -> Result<Vec<PendingSet>> {
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)
        .map_err(|e| io_error("reading journal", jp, e))?;
    let parsed = match journal::parse(&bytes) {
        Ok(p) => p,
        Err(bad) => {
            let where_now = if w.config().dry_run {
                "left in place (dry run)".to_string()
            } else {
                format!("moved to {}", set_aside(jp)?.display())
            };
            bail!(
                "{}:{}: {}: '{}'; nothing restored from this journal, {where_now}: \
                 inspect it, fix or delete that line and rename it back to run `iowarden knob restore` again",
                jp.display(),
                bad.line,
                bad.why,
                bad.content
            );
        }
    };
    if let Some(torn) = &parsed.torn {
        crate::say!(
            "iowarden: {}:{}: skipping a torn last line (a crash while writing it; its change never happened): '{}'",
            jp.display(),
            torn.line,
            torn.content
        );
        if !w.config().dry_run {
            f.set_len(torn.keep_len)
                .map_err(|e| io_error("truncating the torn line of journal", jp, e))?;
        }
    }
    if parsed.needs_newline && !w.config().dry_run {
        f.write_all(b"\n")
            .map_err(|e| io_error("writing journal", jp, e))?;
    }
    Ok(parsed.pending)
}

/// Only the first change of each knob: its previous value is the original.
fn firsts(pending: Vec<PendingSet>) -> Vec<PendingSet> {
    let mut out: Vec<PendingSet> = Vec::new();
    for s in pending {
        if !out
            .iter()
            .any(|f| same_target(&f.path, &f.value, &s.path, &s.value))
        {
            out.push(s);
        }
    }
    out
}

fn recover_journal(w: &mut Writer, jp: &Path) -> Result<Vec<String>> {
    let Some(mut f) = open_unlocked(jp)? else {
        return Ok(Vec::new()); // a live run holds it
    };
    let pending = read_pending(w, jp, &mut f)?;
    let why = |pid: u32| format!("left changed by pid {pid}, which did not exit cleanly");
    let mut msgs = Vec::new();
    let mut errs = Vec::new();
    for s in firsts(pending).into_iter().rev() {
        if w.config().dry_run {
            msgs.push(format!(
                "dry-run: would restore {} to '{}' ({})",
                s.path.display(),
                s.previous.trim_end().replace('\n', "\\n"),
                why(s.pid)
            ));
            continue;
        }
        match w.restore_left_change(s.id, &s.path, s.kind, &s.previous, &s.value) {
            Ok(m) => {
                let rec = serde_json::to_string(&Record::Done {
                    id: s.id,
                    how: "recovered".into(),
                })?;
                writeln!(f, "{rec}")
                    .and_then(|_| f.sync_all())
                    .with_context(|| format!("writing journal {}", jp.display()))?;
                msgs.push(format!("{m} ({})", why(s.pid)));
            }
            Err(e) => errs.push(format!("{}: {e:#}", s.path.display())),
        }
    }
    msgs.sort();
    if !errs.is_empty() {
        bail!(
            "{}{}: kept for the next `iowarden knob restore`: {}",
            msgs.iter().map(|m| format!("{m}; ")).collect::<String>(),
            jp.display(),
            errs.join("; ")
        );
    }
    if !w.config().dry_run {
        fs::remove_file(jp).map_err(|e| io_error("removing journal", jp, e))?;
        if let Some(dir) = jp.parent() {
            fsync_dir(dir);
        }
    }
    Ok(msgs)
}
