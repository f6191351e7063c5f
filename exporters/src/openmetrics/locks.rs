//! OpenMetrics for kernel lock contention: wait time and contentions per
//! top site and cgroup (the rest under site="other"), and what was dropped.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use crate::model::Snapshot;
use crate::openmetrics::counter;

type Labels = Vec<(String, String)>;

#[derive(Debug)]
pub(crate) struct LocksCollector {
    pub(crate) snap: Snapshot,
}

impl Collector for LocksCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let Some(r) = &self.snap.locks else {
            return Ok(());
        };
        let rows = |f: &dyn Fn(&crate::locks::LockSiteRow) -> f64| -> Vec<(Labels, f64)> {
            r.top
                .iter()
                .map(|t| {
                    (
                        vec![
                            ("site".to_string(), t.site.clone()),
                            ("cgroup".to_string(), t.cgroup.path.clone()),
                        ],
                        f(t),
                    )
                })
                .collect()
        };
        counter(
            &mut enc,
            "iowarden_lock_wait",
            "Time tasks of the cgroup waited on contended kernel locks, by lock site (top sites by wait time; the rest as site=\"other\")",
            Some(Unit::Seconds),
            &rows(&|t| t.wait_seconds),
        )?;
        counter(
            &mut enc,
            "iowarden_lock_contentions",
            "Contended kernel lock acquisitions by tasks of the cgroup, by lock site (top sites; the rest as site=\"other\")",
            None,
            &rows(&|t| t.count as f64),
        )?;
        let mut drops: Vec<(Labels, f64)> = r
            .dropped
            .iter()
            .map(|(k, v)| (vec![("reason".to_string(), k.clone())], *v as f64))
            .collect();
        if drops.is_empty() {
            drops.push((vec![("reason".to_string(), "none".to_string())], 0.0));
        }
        counter(
            &mut enc,
            "iowarden_lock_dropped",
            "Lock contentions not recorded (slot_full, nest, storage, unmatched) or recorded without a stack (stack)",
            None,
            &drops,
        )?;
        counter(
            &mut enc,
            "iowarden_lock_filtered",
            "Lock contentions outside the block layer, ignored in block-only mode",
            None,
            &[(
                vec![("mode".to_string(), r.mode.clone())],
                r.filtered as f64,
            )],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::locks::*;
    use crate::model::{CgroupRef, Snapshot};

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
        let text =
            crate::openmetrics::encode_openmetrics(&s, &Default::default(), &Default::default())
                .unwrap();
        for want in [
            r#"iowarden_lock_wait_seconds_total{site="dd_dispatch_request",cgroup="/w"} 0.25"#,
            r#"iowarden_lock_wait_seconds_total{site="other",cgroup="/w"} 0.5"#,
            r#"iowarden_lock_contentions_total{site="dd_dispatch_request",cgroup="/w"} 3"#,
            r#"iowarden_lock_dropped_total{reason="stack"} 2"#,
            r#"iowarden_lock_filtered_total{mode="block"} 7"#,
        ] {
            assert!(text.contains(want), "{want} not in\n{text}");
        }
        let none = crate::openmetrics::encode_openmetrics(
            &Snapshot::default(),
            &Default::default(),
            &Default::default(),
        )
        .unwrap();
        assert!(
            !none.contains("iowarden_lock_"),
            "no lock families without the programs"
        );
    }
}
