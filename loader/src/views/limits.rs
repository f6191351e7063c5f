//! `iowarden limits`' table: one row per knob and device judged.

use crate::limits::LimitVerdict;

/// The verdicts as an aligned table, the reason last.
pub fn table(verdicts: &[LimitVerdict]) -> String {
    let rows: Vec<[String; 6]> = verdicts
        .iter()
        .map(|v| {
            [
                v.knob.cgroup.clone(),
                v.knob.knob.clone(),
                v.device.clone(),
                v.knob.value.clone(),
                v.state.as_str().to_string(),
                v.why.clone(),
            ]
        })
        .collect();
    let head = ["CGROUP", "KNOB", "DEVICE", "VALUE", "STATE", "WHY"].map(String::from);
    let mut width = [0usize; 5];
    for r in std::iter::once(&head).chain(&rows) {
        for (w, cell) in width.iter_mut().zip(r.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for r in std::iter::once(&head).chain(&rows) {
        for (w, cell) in width.iter().zip(r.iter()) {
            out.push_str(&format!("{cell:<w$}  "));
        }
        out.push_str(&r[5]);
        out.push('\n');
    }
    if rows.is_empty() {
        out.push_str("(no io limit or weight is set)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{LimitKnob, LimitReason, LimitState};

    #[test]
    fn rows_align_and_the_reason_comes_last() {
        let v = LimitVerdict {
            knob: LimitKnob {
                cgroup: "/a".into(),
                knob: "io.max".into(),
                devnum: Some("259:0".into()),
                value: "riops=200".into(),
            },
            device: "nvme0n1".into(),
            state: LimitState::Acting,
            reason: LimitReason::Held,
            why: "held".into(),
        };
        let t = table(&[v]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2, "{t}");
        assert!(
            lines[0].starts_with("CGROUP  KNOB    DEVICE   VALUE      STATE   WHY"),
            "{t}"
        );
        assert!(
            lines[1].starts_with("/a      io.max  nvme0n1  riops=200  acting  held"),
            "{t}"
        );
        assert_eq!(
            table(&[]).lines().nth(1),
            Some("(no io limit or weight is set)")
        );
    }
}
