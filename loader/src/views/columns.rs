//! `top`'s table for the terminal view and the plain text alike: a row's
//! ten cells, formatted once, and column widths that fit a width (each
//! column as wide as its widest cell; a long cgroup path or device name
//! elided in the middle, never the table widened past the width).

use crate::views::names::elide;
use crate::views::top::{fmt_lat, fmt_rate, fmt_share, Row};

pub const HEADER: [&str; 10] = [
    "DEVICE", "CGROUP", "SHARE", "IOPS", "BW", "Q_P50", "Q_P99", "D_P50", "D_P99", "HELD",
];

/// Blanks between two columns (ratatui's Table puts as many).
pub const SPACING: usize = 1;

const DEVICE: usize = 0;
const CGROUP: usize = 1;
/// The widest a device name is shown (dm and md names can be long).
const MAX_DEVICE: usize = 12;
/// The narrowest the CGROUP column gets however narrow the width: below
/// that a path says nothing.
const MIN_CGROUP: usize = 8;

pub type Cells = [String; 10];

/// One row's cells, under HEADER.
pub fn cells(r: &Row) -> Cells {
    [
        r.device.clone(),
        r.cgroup.clone(),
        fmt_share(Some(r.device_share)),
        fmt_rate(r.iops, ""),
        fmt_rate(r.bytes_per_s, "B/s"),
        fmt_lat(r.queue_p50),
        fmt_lat(r.queue_p99),
        fmt_lat(r.device_p50),
        fmt_lat(r.device_p99),
        fmt_share(r.held_share),
    ]
}

/// A table laid out for a width: every cell elided to its column and
/// padded (names left, numbers right).
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    pub widths: [usize; 10],
    pub header: Cells,
    pub rows: Vec<Cells>,
}

impl Fitted {
    /// Its width in characters, the spacing included.
    pub fn width(&self) -> usize {
        self.widths.iter().sum::<usize>() + SPACING * (self.widths.len() - 1)
    }
}

/// Lays `rows` out under `header` (HEADER, or HEADER with a sort marker)
/// within `width` characters: the CGROUP column gets what the others
/// leave, at most what its longest path needs, at least MIN_CGROUP.
pub fn fit(header: &[String; 10], rows: &[Row], width: usize) -> Fitted {
    let body: Vec<Cells> = rows.iter().map(cells).collect();
    let len = |s: &String| s.chars().count();
    let mut widths = header.each_ref().map(len);
    for c in &body {
        for (w, cell) in widths.iter_mut().zip(c) {
            *w = (*w).max(len(cell));
        }
    }
    widths[DEVICE] = widths[DEVICE].min(MAX_DEVICE.max(len(&header[DEVICE])));
    let others: usize = widths.iter().sum::<usize>() - widths[CGROUP] + SPACING * 9;
    widths[CGROUP] = widths[CGROUP].min(width.saturating_sub(others).max(MIN_CGROUP));
    let lay = |c: &Cells| -> Cells {
        std::array::from_fn(|i| {
            let (s, w) = (elide(&c[i], widths[i]), widths[i]);
            if i == DEVICE || i == CGROUP {
                format!("{s:<w$}")
            } else {
                format!("{s:>w$}")
            }
        })
    };
    Fitted {
        widths,
        header: lay(header),
        rows: body.iter().map(lay).collect(),
    }
}

/// The plain text's width: $COLUMNS where set, between 80 and 220, else
/// 220 (a pipe has no terminal to ask; its lines are read whole).
pub fn plain_width(columns: Option<&str>) -> usize {
    columns
        .and_then(|c| c.trim().parse::<usize>().ok())
        .map_or(220, |c| c.clamp(80, 220))
}

/// The table and the verdict as plain text, the table within `width`
/// (the verdict one line, as grep reads it).
pub fn render(rows: &[Row], verdict: &str, width: usize) -> String {
    let t = fit(&HEADER.map(String::from), rows, width);
    let line = |c: &Cells| c.join(&" ".repeat(SPACING)).trim_end().to_string() + "\n";
    let mut s = line(&t.header);
    for r in &t.rows {
        s += &line(r);
    }
    s + verdict + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(dev: &str, cg: &str) -> Row {
        Row {
            device: dev.into(),
            cgroup: cg.into(),
            iops: 12_345.0,
            bytes_per_s: 814_500.0,
            device_share: 0.66,
            queue_p50: Some(1e-6),
            queue_p99: Some(0.0122),
            device_p50: Some(0.00294),
            device_p99: Some(0.01196),
            total_p99: None,
            held_share: Some(0.25),
            ios: 100,
        }
    }

    const POD: &str = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b5b6c0e_8f0e_4d4c_9a9c_2f4e7a1c3d2b.slice/cri-containerd-4f2a9c1e7b3d5a6f8e0c2b4d6a8f0e1c3b5d7a9f.scope";

    #[test]
    fn one_row_formats_its_ten_cells() {
        assert_eq!(
            cells(&row("loop0", "/v")),
            [
                "loop0",
                "/v",
                "66%",
                "12.3k",
                "814.5kB/s",
                "1us",
                "12.2ms",
                "2.94ms",
                "12.0ms",
                "25%"
            ]
        );
    }

    #[test]
    fn the_table_fits_80_and_220_columns_eliding_a_long_path() {
        let rows = [row("nvme0n1", POD), row("nvme0n1", "/system.slice")];
        for width in [80, 220] {
            let text = render(&rows, "verdict", width);
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 4, "{text}");
            for l in &lines[..3] {
                assert!(l.chars().count() <= width, "{width}: {l:?}");
            }
            assert!(
                lines[1].contains('…') && lines[1].ends_with("25%"),
                "{text}"
            );
            assert!(lines[1].contains(".scope "), "the leaf kept: {text}");
            assert!(lines[2].contains("/system.slice "), "{text}");
            assert_eq!(lines[3], "verdict");
        }
        // A short path: the column is as wide as it, not the width.
        let narrow = render(&[row("loop0", "/v")], "", 220);
        assert!(narrow.starts_with("DEVICE CGROUP SHARE"), "{narrow}");
        assert!(narrow.lines().all(|l| l.chars().count() < 80), "{narrow}");
    }

    #[test]
    fn the_sort_marker_widens_its_column_in_the_header_and_rows() {
        let mut header = HEADER.map(String::from);
        header[2] = "SHARE▼".into();
        let t = fit(&header, &[row("loop0", "/v")], 78);
        assert_eq!(t.widths[2], 6);
        assert_eq!(t.rows[0][2], "   66%");
        assert!(t.width() <= 78);
    }

    #[test]
    fn a_long_device_name_is_elided() {
        let t = fit(
            &HEADER.map(String::from),
            &[row("dm-luks-0123456789abcdef", "/v")],
            80,
        );
        assert_eq!(t.rows[0][0], "dm-…89abcdef");
        assert_eq!(t.rows[0][0].chars().count(), 12);
    }

    #[test]
    fn plain_width_honours_columns_within_80_to_220() {
        assert_eq!(plain_width(None), 220);
        assert_eq!(plain_width(Some("132")), 132);
        assert_eq!(plain_width(Some("40")), 80);
        assert_eq!(plain_width(Some("500")), 220);
        assert_eq!(plain_width(Some("wide")), 220);
    }
}
