//! `top` as the user saw it, from one delta snapshot through the
//! real rows, account, verdict and panels to ratatui's TestBackend (and
//! the plain text): at 80x24 and 220x60 the account is said once, nothing
//! is cut off, and the table's box is as high as its rows.

use iowarden_exporters::{
    CgroupRef, CulpritSeries, DeviceRef, Histogram, IoSeries, Op, Snapshot, StageHistograms,
};

use crate::views::columns::{fit, plain_width, render, HEADER};
use crate::views::culprits::accounts;
use crate::views::top::{render_panels, rows};
use crate::views::tui::{screen_of, TuiState};
use crate::views::verdict::{Basis, NoisyNeighbourDetector, Verdict};

const VICTIM: &str = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b5b6c0e_8f0e_4d4c_9a9c_2f4e7a1c3d2b.slice/cri-containerd-4f2a9c1e7b3d5a6f8e0c2b4d6a8f0e1c3b5d7a9f.scope/victim";
const HOG: &str = "/iowarden-demo/hog";

fn loop0() -> DeviceRef {
    DeviceRef {
        name: "loop0".into(),
        major: 7,
        minor: 0,
    }
}

fn io(cgroup: &CgroupRef, op: Op, ios: u64, bytes: u64, device_s: f64) -> IoSeries {
    let hist = |s| Histogram {
        counts: vec![ios],
        sum_seconds: s,
    };
    IoSeries {
        cgroup: cgroup.clone(),
        device: loop0(),
        op,
        ios,
        bytes,
        latency: StageHistograms {
            device: hist(device_s),
            total: hist(device_s),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn culprit(victim: &CgroupRef, c: Option<&CgroupRef>, seconds: f64) -> CulpritSeries {
    CulpritSeries {
        device: loop0(),
        victim: victim.clone(),
        culprit: c.cloned(),
        culprit_op: c.map(|_| Op::Write),
        seconds,
        ..Default::default()
    }
}

/// The demo's window: the victim's 4 KiB reads 97 % behind the hog's
/// 128 KiB writes.
fn demo_window() -> Snapshot {
    let victim = CgroupRef {
        id: 1,
        path: VICTIM.into(),
    };
    let hog = CgroupRef {
        id: 2,
        path: HOG.into(),
    };
    Snapshot {
        window_seconds: 2.0,
        hist_lower_bounds_seconds: vec![0.0],
        io: vec![
            io(&victim, Op::Read, 400, 1_638_400, 0.8),
            io(&hog, Op::Write, 4000, 524_288_000, 30.0),
        ],
        culprits: vec![
            culprit(&victim, Some(&hog), 0.776),
            culprit(&victim, None, 0.024),
        ],
        ..Default::default()
    }
}

/// Text without its blanks: wrapped lines join again however a line
/// broke (a path has no blank to break at).
fn squash(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

#[test]
fn fits_80x24_and_220x60_saying_the_account_once() {
    let delta = demo_window();
    let rows = rows(&delta, None);
    let mut det = NoisyNeighbourDetector::default();
    let verdict = det.observe(&rows, &accounts(&delta, None));
    assert_eq!(verdict.basis, Basis::Measured, "{verdict}");
    let panels = render_panels(&delta, None);
    for (w, h) in [(80u16, 24u16), (220, 60)] {
        let lines = screen_of(w, h, &rows, &verdict, &panels, &TuiState::default());
        let text = squash(&lines.concat());
        // Said once: the account's line under the table, the verdict
        // naming the culprit without repeating it.
        assert_eq!(
            text.matches("ofrequesttime").count(),
            1,
            "{w}x{h}:\n{}",
            lines.join("\n")
        );
        assert_eq!(text.matches("128KiBwrites").count(), 1, "{w}x{h}");
        // Nothing cut off: the verdict and the account whole.
        assert!(
            text.contains(&squash(&verdict.to_string())),
            "{w}x{h}:\n{}",
            lines.join("\n")
        );
        let account = panels.lines().next().unwrap();
        assert!(
            text.contains(&squash(account)),
            "{w}x{h}:\n{}",
            lines.join("\n")
        );
        // The table as laid out for the box's inside, within it.
        let mut header = HEADER.map(String::from);
        header[2].push('▼');
        let t = fit(&header, &rows, usize::from(w) - 2);
        assert!(t.width() <= usize::from(w) - 2, "{w}: {}", t.width());
        for r in &t.rows {
            let drawn = r.join(" ");
            assert!(
                lines.iter().any(|l| l.contains(&drawn)),
                "{w}x{h}: {drawn:?} not drawn"
            );
        }
        let victim = t.rows.iter().find(|r| r[1].ends_with("/victim")).unwrap();
        assert!(
            victim[1].contains('…'),
            "{w}: the path elided, its leaf kept: {victim:?}"
        );
        // The box: 2 rows, the header and two borders.
        let top = lines.iter().position(|l| l.starts_with('┌')).unwrap();
        let bottom = lines.iter().position(|l| l.starts_with('└')).unwrap();
        assert_eq!(
            bottom - top + 1,
            rows.len() + 3,
            "{w}x{h}:\n{}",
            lines.join("\n")
        );
    }
}

#[test]
fn the_plain_text_says_the_account_once_within_its_width() {
    let delta = demo_window();
    let rows = rows(&delta, None);
    let verdict = NoisyNeighbourDetector::default().observe(&rows, &accounts(&delta, None));
    let panels = render_panels(&delta, None);
    for width in [plain_width(Some("80")), plain_width(None)] {
        let text = render(&rows, &verdict.to_string(), width) + &panels;
        assert_eq!(text.matches("of request time").count(), 1, "{text}");
        let table: Vec<&str> = text.lines().take(rows.len() + 1).collect();
        assert!(
            table.iter().all(|l| l.chars().count() <= width),
            "{width}:\n{text}"
        );
        assert!(
            text.contains("measured: noisy neighbour on loop0: ")
                && text.contains(&format!("waited behind {HOG} for 97% of its request time")),
            "{text}"
        );
    }
}

#[test]
fn without_an_account_the_verdict_says_it_is_inferred() {
    let mut delta = demo_window();
    delta.culprits.clear();
    let rows = rows(&delta, None);
    let v: Verdict = NoisyNeighbourDetector::default().observe(&rows, &accounts(&delta, None));
    assert_eq!(v.basis, Basis::Inferred);
    assert!(
        v.to_string()
            .starts_with("inferred from device-time shares: no noisy neighbour: top device-time share is /iowarden-demo/hog"),
        "{v}"
    );
    assert!(!render_panels(&delta, None).contains("of request time"));
}
