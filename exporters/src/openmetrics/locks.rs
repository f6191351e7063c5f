//! OpenMetrics for kernel lock contention: wait time and contentions per
//! top site and cgroup (the rest under site="other"), and what was dropped.

use prometheus_client::encoding::DescriptorEncoder;

use super::expose::{Expose, Input};
use super::family::{counter, encode_families, Labels};
use crate::model::{LockReport, LockSiteRow};

/// Nothing without a report (the lock programs are off).
impl Expose for Option<LockReport> {
    fn expose(&self, enc: &mut DescriptorEncoder, _: &Input) -> std::fmt::Result {
        let Some(r) = self else {
            return Ok(());
        };
        encode_top_sites(enc, &r.top)?;
        encode_drops(enc, r)
    }
}

fn encode_top_sites(enc: &mut DescriptorEncoder, top: &[LockSiteRow]) -> std::fmt::Result {
    let records: Vec<(Labels, &LockSiteRow)> = top
        .iter()
        .map(|t| {
            let l = vec![
                ("site".to_string(), t.site.clone()),
                ("cgroup".to_string(), t.cgroup.path.clone()),
            ];
            (l, t)
        })
        .collect();
    encode_families(enc, &records)
}

fn encode_drops(enc: &mut DescriptorEncoder, r: &LockReport) -> std::fmt::Result {
    let mut drops: Vec<(Labels, f64)> = r
        .dropped
        .iter()
        .map(|(k, v)| (vec![("reason".to_string(), k.clone())], *v as f64))
        .collect();
    if drops.is_empty() {
        drops.push((vec![("reason".to_string(), "none".to_string())], 0.0));
    }
    counter(
            enc,
            "iowarden_lock_dropped",
            "Lock contentions not recorded (slot_full, nest, storage, unmatched) or recorded without a stack (stack)",
            None,
            &drops,
        )?;
    counter(
        enc,
        "iowarden_lock_filtered",
        "Lock contentions outside the block layer, ignored in block-only mode",
        None,
        &[(
            vec![("mode".to_string(), r.mode.clone())],
            r.filtered as f64,
        )],
    )
}

#[cfg(test)]
mod tests {
    use crate::model::{CgroupRef, LockReport, LockSiteRow, Snapshot};
    use crate::openmetrics::test_text::text_of;

    #[test]
    fn lock_metrics_render() {
        let s = Snapshot {
            locks: Some(LockReport {
                mode: "block".into(),
                top: vec![
                    LockSiteRow {
                        site: "dd_dispatch_request".into(),
                        cgroup: CgroupRef {
                            id: 5,
                            path: "/w".into(),
                        },
                        count: 3,
                        wait_seconds: 0.25,
                    },
                    LockSiteRow {
                        site: "other".into(),
                        cgroup: CgroupRef {
                            id: 5,
                            path: "/w".into(),
                        },
                        count: 1,
                        wait_seconds: 0.5,
                    },
                ],
                filtered: 7,
                dropped: vec![("stack".into(), 2)],
                ..Default::default()
            }),
            ..Default::default()
        };
        let text = text_of(s);
        for want in [
            r#"iowarden_lock_wait_seconds_total{site="dd_dispatch_request",cgroup="/w"} 0.25"#,
            r#"iowarden_lock_wait_seconds_total{site="other",cgroup="/w"} 0.5"#,
            r#"iowarden_lock_contentions_total{site="dd_dispatch_request",cgroup="/w"} 3"#,
            r#"iowarden_lock_dropped_total{reason="stack"} 2"#,
            r#"iowarden_lock_filtered_total{mode="block"} 7"#,
        ] {
            assert!(text.contains(want), "{want} not in\n{text}");
        }
        let none = text_of(Snapshot::default());
        assert!(
            !none.contains("iowarden_lock_"),
            "no lock families without the programs"
        );
    }
}
