//! The knob writer's journal format and its strict reader (pure, no I/O).
//!
//! One JSON record per line, each written and fsynced whole before the knob
//! write it announces. So the only damage a crash can leave is a torn *last*
//! line (no newline yet); its write never happened, and it is skipped. Any
//! other line that does not parse, or a `set` of a file that is not an io
//! knob, means the journal is not what this code wrote: the reader refuses
//! the whole journal rather than restore part of it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::kind::KnobKind;

#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(tag = "op", rename_all = "lowercase")]
pub(crate) enum Record {
    /// About to write `value` to `path`, which held `previous`.
    Set {
        id: u64,
        pid: u32,
        time: u64,
        path: PathBuf,
        previous: String,
        value: String,
    },
    /// Entry `id` needs no restore any more (restored, kept, or never written).
    Done { id: u64, how: String },
}

/// A `set` with no `done`: the knob may still hold `value`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PendingSet {
    pub id: u64,
    pub pid: u32,
    pub path: PathBuf,
    pub kind: KnobKind,
    pub previous: String,
    pub value: String,
}

/// An unterminated last line: the write a crash interrupted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TornLine {
    /// 1-based line number.
    pub line: usize,
    pub content: String,
    /// Bytes before it: the journal truncated to this length is whole again.
    pub keep_len: u64,
}

#[derive(Debug, Default, PartialEq)]
pub(crate) struct Parsed {
    pub pending: Vec<PendingSet>,
    pub torn: Option<TornLine>,
    /// The last line parsed but has no newline: append one before more records.
    pub needs_newline: bool,
}

/// A line the reader refuses, and why.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BadLine {
    pub line: usize,
    pub content: String,
    pub why: String,
}

/// At most 200 characters of a line, lossily decoded, for messages.
fn shown(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.into_owned(),
    }
}

fn parse_line(bytes: &[u8]) -> Result<Record, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8 ({e})"))?;
    serde_json::from_str::<Record>(text).map_err(|e| format!("not a journal record ({e})"))
}

/// Applies one record to the pending sets; a set of a non-knob file is refused.
fn apply(pending: &mut Vec<PendingSet>, rec: Record) -> Result<(), String> {
    match rec {
        Record::Set {
            id,
            pid,
            path,
            previous,
            value,
            ..
        } => {
            let kind = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(KnobKind::from_file_name)
                .ok_or_else(|| format!("{} is not a cgroup io knob", path.display()))?;
            pending.push(PendingSet {
                id,
                pid,
                path,
                kind,
                previous,
                value,
            });
        }
        Record::Done { id, .. } => pending.retain(|s| s.id != id),
    }
    Ok(())
}

/// Reads a whole journal. Every newline-terminated line must be a record;
/// an unterminated last line that does not parse is returned as torn.
pub(crate) fn parse(bytes: &[u8]) -> Result<Parsed, BadLine> {
    let mut parsed = Parsed::default();
    let mut start = 0usize;
    let mut line = 0usize;
    while start < bytes.len() {
        line += 1;
        let (end, terminated) = match bytes[start..].iter().position(|&b| b == b'\n') {
            Some(i) => (start + i, true),
            None => (bytes.len(), false),
        };
        let raw = &bytes[start..end];
        let bad = |why: String| BadLine {
            line,
            content: shown(raw),
            why,
        };
        match parse_line(raw) {
            Ok(rec) => apply(&mut parsed.pending, rec).map_err(bad)?,
            Err(_) if !terminated => {
                parsed.torn = Some(TornLine {
                    line,
                    content: shown(raw),
                    keep_len: start as u64,
                });
            }
            Err(why) => return Err(bad(why)),
        }
        parsed.needs_newline = !terminated && parsed.torn.is_none();
        start = end + 1;
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(id: u64, path: &str, value: &str) -> String {
        serde_json::json!({"op": "set", "id": id, "pid": 7, "time": 0,
            "path": path, "previous": "default 100\n", "value": value})
        .to_string()
    }
    fn done(id: u64) -> String {
        serde_json::json!({"op": "done", "id": id, "how": "restored"}).to_string()
    }

    #[test]
    fn pending_sets_are_those_without_done() {
        let j = format!(
            "{}\n{}\n{}\n",
            set(1, "/cg/a/io.weight", "default 50"),
            set(2, "/cg/b/io.weight", "default 60"),
            done(1)
        );
        let p = parse(j.as_bytes()).unwrap();
        assert_eq!(p.pending.len(), 1);
        assert_eq!(p.pending[0].id, 2);
        assert_eq!(p.pending[0].kind, KnobKind::Weight);
        assert_eq!((p.torn, p.needs_newline), (None, false));
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_reported() {
        let whole = set(1, "/cg/a/io.weight", "default 50");
        let partial = &set(2, "/cg/b/io.weight", "default 60")[..30];
        let j = format!("{whole}\n{partial}");
        let p = parse(j.as_bytes()).unwrap();
        assert_eq!(p.pending.len(), 1);
        let torn = p.torn.unwrap();
        assert_eq!(torn.line, 2);
        assert_eq!(torn.keep_len, whole.len() as u64 + 1);
        assert_eq!(torn.content, partial);
        assert!(!p.needs_newline);
    }

    #[test]
    fn a_whole_last_record_without_newline_counts() {
        let j = set(1, "/cg/a/io.weight", "default 50");
        let p = parse(j.as_bytes()).unwrap();
        assert_eq!(p.pending.len(), 1);
        assert!(p.torn.is_none() && p.needs_newline);
    }

    #[test]
    fn a_corrupt_line_before_the_last_is_refused_with_its_number() {
        let j = format!(
            "{}\n{{\"op\":\"set\",\"id\":2,garbage\n{}\n",
            set(1, "/cg/a/io.weight", "default 50"),
            done(1)
        );
        let e = parse(j.as_bytes()).unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(e.content, "{\"op\":\"set\",\"id\":2,garbage");
        assert!(e.why.contains("not a journal record"), "{e:?}");
    }

    #[test]
    fn a_non_utf8_line_is_refused_not_the_end_of_the_journal() {
        let mut j = format!("{}\n", set(1, "/cg/a/io.weight", "default 50")).into_bytes();
        j.extend_from_slice(b"\xff\xfe\n");
        j.extend_from_slice(format!("{}\n", set(2, "/cg/b/io.weight", "default 60")).as_bytes());
        let e = parse(&j).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.why.contains("not UTF-8"), "{e:?}");
    }

    #[test]
    fn a_set_of_a_foreign_path_is_refused() {
        let j = format!("{}\n", set(1, "/etc/passwd", "root::0:0"));
        let e = parse(j.as_bytes()).unwrap_err();
        assert_eq!(e.line, 1);
        assert!(
            e.why.contains("/etc/passwd is not a cgroup io knob"),
            "{e:?}"
        );
        // Even as the unterminated last line: it parsed, so it is not torn.
        let e = parse(set(1, "/etc/passwd", "x").as_bytes()).unwrap_err();
        assert_eq!(e.line, 1);
    }

    #[test]
    fn an_empty_line_is_corruption() {
        let j = format!("\n{}\n", set(1, "/cg/a/io.weight", "default 50"));
        assert_eq!(parse(j.as_bytes()).unwrap_err().line, 1);
    }
}
