//! Lock contention as people read it: the `top` panel, the `iowarden locks`
//! table, folded stacks, lock wait per I/O. Pure functions of (delta)
//! snapshots.

use std::collections::BTreeMap;

use iowarden_exporters::{log2_quantile_seconds, Snapshot};

use crate::probes::locks::sites::folded_line;

/// Lock waits are often below a microsecond: ns, us or ms.
pub fn fmt_wait(s: Option<f64>) -> String {
    // + 0.0: an empty f64 sum is -0.0, which would print as "-0ns".
    match s.map(|s| s + 0.0) {
        None => "-".into(),
        Some(s) if s < 1e-6 => format!("{:.0}ns", s * 1e9),
        Some(s) if s < 1e-3 => format!("{:.1}us", s * 1e6),
        Some(s) => format!("{:.2}ms", s * 1e3),
    }
}

/// One (site, cgroup, kind) of a window.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteRow {
    pub site: String,
    pub cgroup: String,
    pub kind: String,
    pub count: u64,
    pub wait_seconds: f64,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    /// Wait of this row over the I/Os the cgroup completed in the window
    /// (on `device` if given); None without I/O.
    pub wait_per_io: Option<f64>,
}

/// I/Os of each cgroup in the window, on one device or all.
fn ios_by_cgroup(delta: &Snapshot, device: Option<&str>) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for s in delta
        .io
        .iter()
        .filter(|s| device.is_none_or(|d| d == s.device.name))
    {
        *m.entry(s.cgroup.path.clone()).or_default() += s.ios;
    }
    m
}

/// Rows of a delta snapshot, stacks of one site merged, most wait first.
pub fn site_rows(delta: &Snapshot, device: Option<&str>) -> Vec<SiteRow> {
    let Some(r) = &delta.locks else {
        return Vec::new();
    };
    let ios = ios_by_cgroup(delta, device);
    type Acc = (u64, f64, Vec<u64>);
    let mut acc: BTreeMap<(String, String, String), Acc> = BTreeMap::new();
    for s in r.series.iter().filter(|s| s.count > 0) {
        let e = acc
            .entry((s.site.clone(), s.cgroup.path.clone(), s.kind.clone()))
            .or_insert_with(|| (0, 0.0, vec![0; s.hist_log2_ns.len()]));
        e.0 += s.count;
        e.1 += s.wait_seconds;
        if e.2.len() < s.hist_log2_ns.len() {
            e.2.resize(s.hist_log2_ns.len(), 0);
        }
        for (a, b) in e.2.iter_mut().zip(&s.hist_log2_ns) {
            *a += b;
        }
    }
    let mut out: Vec<SiteRow> = acc
        .into_iter()
        .map(|((site, cgroup, kind), (count, wait, hist))| SiteRow {
            p50: log2_quantile_seconds(&hist, 0.5),
            p99: log2_quantile_seconds(&hist, 0.99),
            wait_per_io: ios
                .get(&cgroup)
                .filter(|&&n| n > 0)
                .map(|&n| wait / n as f64),
            site,
            cgroup,
            kind,
            count,
            wait_seconds: wait,
        })
        .collect();
    out.sort_by(|a, b| b.wait_seconds.total_cmp(&a.wait_seconds));
    out
}

/// Total lock wait of a cgroup's tasks over its I/Os in the window (on
/// `device` if given). None without I/O.
pub fn lock_wait_per_io(delta: &Snapshot, cgroup: &str, device: Option<&str>) -> Option<f64> {
    let ios = *ios_by_cgroup(delta, device).get(cgroup)?;
    let wait: f64 = delta
        .locks
        .as_ref()?
        .series
        .iter()
        .filter(|s| s.cgroup.path == cgroup)
        .map(|s| s.wait_seconds)
        .sum();
    (ios > 0).then(|| wait / ios as f64)
}

/// The table of `iowarden locks` (and, first `n` rows, the `top` panel).
pub fn render_table(rows: &[SiteRow], n: usize) -> String {
    let mut s = format!(
        "{:<32} {:<28} {:<12} {:>9} {:>9} {:>8} {:>8} {:>9}\n",
        "SITE", "CGROUP", "KIND", "COUNT", "WAIT", "P50", "P99", "WAIT/IO"
    );
    for r in rows.iter().take(n) {
        s += &format!(
            "{:<32} {:<28} {:<12} {:>9} {:>9} {:>8} {:>8} {:>9}\n",
            r.site,
            r.cgroup,
            r.kind,
            r.count,
            fmt_wait(Some(r.wait_seconds)),
            fmt_wait(r.p50),
            fmt_wait(r.p99),
            fmt_wait(r.wait_per_io)
        );
    }
    s
}

/// The lock panel of `top`: a header with the mode and drops, then the top
/// sites by wait time in the window.
pub fn render_panel(delta: &Snapshot, device: Option<&str>, n: usize) -> String {
    let Some(r) = &delta.locks else {
        return String::new();
    };
    let rows = site_rows(delta, device);
    let dropped: u64 = r.dropped.iter().map(|d| d.1).sum();
    let mut s = format!(
        "locks ({}): {} contentions, {} waited{}\n",
        r.mode,
        rows.iter().map(|r| r.count).sum::<u64>(),
        fmt_wait(Some(rows.iter().map(|r| r.wait_seconds).sum())),
        if dropped > 0 {
            format!(", {dropped} dropped")
        } else {
            String::new()
        }
    );
    if !rows.is_empty() {
        s += &render_table(&rows, n);
    }
    s
}

/// Folded stacks (root first, cgroup as the root frame), one line per
/// (cgroup, stack), valued in nanoseconds of wait: `flamegraph.pl` input.
pub fn folded(delta: &Snapshot) -> String {
    let Some(r) = &delta.locks else {
        return String::new();
    };
    let mut acc: BTreeMap<(String, u32), u64> = BTreeMap::new();
    for s in r.series.iter().filter(|s| s.count > 0) {
        *acc.entry((s.cgroup.path.clone(), s.stack_id)).or_default() +=
            (s.wait_seconds * 1e9).round() as u64;
    }
    let mut out = String::new();
    for ((cg, id), ns) in acc {
        let frames: Vec<String> = match r.stack(id) {
            Some(st) if !st.frames.is_empty() => st
                .frames
                .iter()
                // "func+0x1f" -> "func": flame graphs merge by function.
                .map(|f| f.split('+').next().unwrap_or(f).to_string())
                .collect(),
            _ => vec!["(no stack)".into()],
        };
        out += &folded_line(&cg, &frames, ns);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use iowarden_exporters::*;

    fn snap() -> Snapshot {
        let cg = |id, p: &str| CgroupRef { id, path: p.into() };
        let mut hist = vec![0u64; 32];
        hist[12] = 10; // 4-8 us
        let series = |site: &str, id, c: CgroupRef, count, wait| LockSeries {
            site: site.into(),
            stack_id: id,
            cgroup: c,
            kind: "spin".into(),
            count,
            wait_seconds: wait,
            hist_log2_ns: hist.clone(),
        };
        Snapshot {
            io: vec![IoSeries {
                cgroup: cg(5, "/w"),
                device: DeviceRef {
                    name: "loop3".into(),
                    major: 7,
                    minor: 3,
                },
                op: Op::Read,
                ios: 100,
                ..Default::default()
            }],
            locks: Some(LockReport {
                mode: "block".into(),
                series: vec![
                    series("dd_dispatch_request", 1, cg(5, "/w"), 10, 0.002),
                    series("dd_dispatch_request", 2, cg(5, "/w"), 10, 0.001),
                    series("loop_queue_work", 3, cg(1, "/"), 5, 0.0005),
                ],
                stacks: vec![
                    LockStack {
                        id: 1,
                        frames: vec![
                            "_raw_spin_lock+0x1a".into(),
                            "dd_dispatch_request+0x30".into(),
                        ],
                    },
                    LockStack {
                        id: 2,
                        frames: vec![
                            "_raw_spin_lock+0x1a".into(),
                            "dd_insert_requests+0x3".into(),
                        ],
                    },
                ],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn rows_merge_stacks_of_a_site_and_divide_by_ios() {
        let rows = site_rows(&snap(), None);
        assert_eq!(rows[0].site, "dd_dispatch_request");
        assert_eq!(rows[0].count, 20);
        assert!((rows[0].wait_seconds - 0.003).abs() < 1e-12);
        assert!((rows[0].wait_per_io.unwrap() - 0.00003).abs() < 1e-12);
        assert_eq!(rows[0].p99, Some(8192e-9));
        assert_eq!(rows[1].wait_per_io, None, "the root cgroup did no I/O here");
        assert!((lock_wait_per_io(&snap(), "/w", Some("loop3")).unwrap() - 0.00003).abs() < 1e-12);
        assert_eq!(lock_wait_per_io(&snap(), "/w", Some("vda")), None);
        assert_eq!(fmt_wait(Some(std::iter::empty::<f64>().sum())), "0ns");
        let p = render_panel(&snap(), None, 5);
        assert!(p.starts_with("locks (block): 25 contentions"), "{p}");
        assert!(p.contains("dd_dispatch_request"), "{p}");
    }

    #[test]
    fn folded_lines_are_per_cgroup_and_stack_in_ns() {
        let f = folded(&snap());
        let lines: Vec<&str> = f.lines().collect();
        assert_eq!(
            lines,
            vec![
                "/;(no_stack) 500000",
                "/w;dd_dispatch_request;_raw_spin_lock 2000000",
                "/w;dd_insert_requests;_raw_spin_lock 1000000",
            ]
        );
    }
}
