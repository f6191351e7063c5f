//! How a decision line records its qos write: what was written in a real
//! run, what would have been in a dry run (which writes nothing).

use serde_json::json;

/// A decision's qos line as (written, would_write): in a dry run the writer
/// wrote nothing, so the line is only what would have been written.
pub(crate) fn written_or_would(
    dry_run: bool,
    line: Option<String>,
) -> (Option<String>, Option<String>) {
    if dry_run {
        (None, line)
    } else {
        (line, None)
    }
}

/// Puts a decision line's write outcome in it: `written` (the line, or
/// null) in a real run; `would_write` and no `written` in a dry run, which
/// writes nothing.
pub(crate) fn put_write_outcome(
    line: &mut serde_json::Value,
    dry_run: bool,
    written: Option<String>,
    would_write: Option<String>,
) {
    if dry_run {
        line["would_write"] = json!(would_write);
    } else {
        line["written"] = json!(written);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iowarden_exporters::TunerDecision;

    #[test]
    fn dry_run_lines_carry_would_write_and_no_written() {
        let line = |dry_run, written: Option<&str>, would: Option<&str>| {
            let mut l = json!({"action": "hold"});
            put_write_outcome(
                &mut l,
                dry_run,
                written.map(str::to_string),
                would.map(str::to_string),
            );
            l
        };
        assert_eq!(
            line(true, None, Some("259:0 min=50")),
            json!({"action": "hold", "would_write": "259:0 min=50"})
        );
        assert_eq!(
            line(true, None, None),
            json!({"action": "hold", "would_write": null})
        );
        assert_eq!(
            line(false, Some("259:0 min=50"), None),
            json!({"action": "hold", "written": "259:0 min=50"})
        );
    }

    #[test]
    fn a_dry_run_reports_would_write_not_written() {
        let l = Some("259:0 enable=1 min=40.00 max=40.00".to_string());
        assert_eq!(written_or_would(true, l.clone()), (None, l.clone()));
        assert_eq!(written_or_would(false, l.clone()), (l.clone(), None));
        assert_eq!(written_or_would(true, None), (None, None));
        // The status JSON carries would_write only when there is one.
        let d = TunerDecision {
            would_write: l,
            ..Default::default()
        };
        let v = serde_json::to_value(&d).unwrap();
        assert!(
            v["written"].is_null() && v["would_write"].is_string(),
            "{v}"
        );
        let v = serde_json::to_value(TunerDecision::default()).unwrap();
        assert!(v.get("would_write").is_none(), "{v}");
    }
}
