//! `iowarden top` on a terminal: the same rows, verdict and panels as the
//! plain-text view, drawn with ratatui, with keys to sort, pause and quit.
//! Everything fits the terminal: the table's columns (views/columns.rs),
//! its box as high as its rows, the verdict and panels wrapped to the
//! width. Drawing is a pure function of the state (tested on ratatui's
//! TestBackend).

use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row as TRow, Table};
use ratatui::Frame;

use crate::views::columns::{fit, HEADER};
use crate::views::top::Row;
use crate::views::verdict::{Finding, Verdict};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortKey {
    Share,
    Iops,
    Bandwidth,
    QueueP99,
    DeviceP99,
}

impl SortKey {
    pub fn next(self) -> SortKey {
        match self {
            SortKey::Share => SortKey::Iops,
            SortKey::Iops => SortKey::Bandwidth,
            SortKey::Bandwidth => SortKey::QueueP99,
            SortKey::QueueP99 => SortKey::DeviceP99,
            SortKey::DeviceP99 => SortKey::Share,
        }
    }

    fn column(self) -> usize {
        match self {
            SortKey::Share => 2,
            SortKey::Iops => 3,
            SortKey::Bandwidth => 4,
            SortKey::QueueP99 => 6,
            SortKey::DeviceP99 => 8,
        }
    }

    fn value(self, r: &Row) -> f64 {
        match self {
            SortKey::Share => r.device_share,
            SortKey::Iops => r.iops,
            SortKey::Bandwidth => r.bytes_per_s,
            SortKey::QueueP99 => r.queue_p99.unwrap_or(0.0),
            SortKey::DeviceP99 => r.device_p99.unwrap_or(0.0),
        }
    }
}

/// Rows grouped by device (shares are per device), largest `key` first.
pub fn sort_rows(rows: &mut [Row], key: SortKey) {
    rows.sort_by(|a, b| {
        a.device
            .cmp(&b.device)
            .then(key.value(b).total_cmp(&key.value(a)))
            .then(a.cgroup.cmp(&b.cgroup))
    });
}

#[derive(Clone, Debug)]
pub struct TuiState {
    pub sort: SortKey,
    pub paused: bool,
}

impl Default for TuiState {
    fn default() -> Self {
        TuiState {
            sort: SortKey::Share,
            paused: false,
        }
    }
}

/// What a key press does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyAction {
    Quit,
    Redraw,
    None,
}

pub fn on_key(state: &mut TuiState, c: char, ctrl: bool) -> KeyAction {
    match (c, ctrl) {
        ('q', false) | ('c', true) => KeyAction::Quit,
        ('s', false) => {
            state.sort = state.sort.next();
            KeyAction::Redraw
        }
        ('p', false) | (' ', false) => {
            state.paused = !state.paused;
            KeyAction::Redraw
        }
        _ => KeyAction::None,
    }
}

/// The heights of the parts between the title line and the key help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heights {
    pub table: u16,
    pub verdict: u16,
    pub panels: u16,
}

/// Splits a screen of `screen` lines: the table's box as high as its rows
/// (header and borders included), the verdict's lines, the panels' lines;
/// where not all fit, the panels keep at least a third of what the verdict
/// leaves (or what they need, if less) and the table the rest. Any lines
/// left over stay blank above the key help.
pub fn heights(screen: u16, rows: usize, verdict: usize, panels: usize) -> Heights {
    let avail = usize::from(screen).saturating_sub(2);
    let table_wants = rows + 3;
    let verdict = verdict.min(avail.saturating_sub(3));
    let rest = avail - verdict;
    let panels = if table_wants + panels <= rest {
        panels
    } else {
        panels.min((rest / 3).max(rest.saturating_sub(table_wants)))
    };
    let table = table_wants.min(rest - panels);
    let h = |n: usize| u16::try_from(n).unwrap_or(u16::MAX);
    Heights {
        table: h(table),
        verdict: h(verdict),
        panels: h(panels),
    }
}

/// `text` broken at blanks into lines of at most `width` characters (a
/// word longer than a line is cut at the line's end), continuation lines
/// indented by two.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(3);
    let mut out = Vec::new();
    let mut rest: Vec<char> = text.trim_end().chars().collect();
    let mut indent = "";
    loop {
        let room = width - indent.len();
        if rest.len() <= room {
            out.push(format!("{indent}{}", String::from_iter(&rest)));
            return out;
        }
        // A break at a blank, unless the word after it would not fit a
        // line of its own either (a long path): that is cut here.
        let word_after = |i: usize| rest[i + 1..].iter().take_while(|c| **c != ' ').count();
        let blank = rest[..=room]
            .iter()
            .rposition(|c| *c == ' ')
            .filter(|&i| rest[..i].iter().any(|c| *c != ' ') && word_after(i) <= width - 2);
        let (end, next) = blank.map_or((room, room), |i| (i, i + 1));
        let line = String::from_iter(&rest[..end]);
        out.push(format!("{indent}{}", line.trim_end()));
        let skip = rest[next..].iter().take_while(|c| **c == ' ').count();
        rest.drain(..next + skip);
        indent = "  ";
    }
}

fn verdict_style(v: &Verdict) -> Style {
    match v.finding {
        Finding::NoisyNeighbour => Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        Finding::OwnLimits => Style::new().fg(Color::Yellow),
        Finding::None => Style::new().fg(Color::Green),
    }
}

/// One frame: title, table, verdict, the panels (the culprit account,
/// iocost, NVMe, locks), key help.
pub fn draw(
    f: &mut Frame,
    title: &str,
    rows: &[Row],
    verdict: &Verdict,
    panels: &str,
    st: &TuiState,
) {
    let width = usize::from(f.area().width);
    let verdict_lines = wrap(&verdict.to_string(), width);
    let panel_lines: Vec<String> = panels.lines().flat_map(|l| wrap(l, width)).collect();
    let h = heights(
        f.area().height,
        rows.len(),
        verdict_lines.len(),
        panel_lines.len(),
    );
    let [top, table, verdict_area, panel_area, _, help] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(h.table),
        Constraint::Length(h.verdict),
        Constraint::Length(h.panels),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let paused = if st.paused { "  [paused]" } else { "" };
    f.render_widget(
        Paragraph::new(format!("{title}{paused}")).style(Style::new().add_modifier(Modifier::BOLD)),
        top,
    );
    let mut header = HEADER.map(String::from);
    header[st.sort.column()].push('▼');
    // Inside the box's borders.
    let t = fit(&header, rows, width.saturating_sub(2));
    let widths = t
        .widths
        .map(|w| Constraint::Length(u16::try_from(w).unwrap_or(u16::MAX)));
    let header = TRow::new(t.header).style(Style::new().add_modifier(Modifier::REVERSED));
    f.render_widget(
        Table::new(t.rows.into_iter().map(TRow::new), widths)
            .header(header)
            .block(Block::bordered()),
        table,
    );
    f.render_widget(
        Paragraph::new(
            verdict_lines
                .into_iter()
                .map(Line::from)
                .collect::<Vec<_>>(),
        )
        .style(verdict_style(verdict)),
        verdict_area,
    );
    f.render_widget(
        Paragraph::new(panel_lines.into_iter().map(Line::from).collect::<Vec<_>>()),
        panel_area,
    );
    f.render_widget(
        Paragraph::new("q quit   s sort column   p pause").style(Style::new().fg(Color::DarkGray)),
        help,
    );
}

/// The screen of one frame, a string per line.
#[cfg(test)]
pub fn screen_of(
    w: u16,
    h: u16,
    rows: &[Row],
    verdict: &Verdict,
    panels: &str,
    st: &TuiState,
) -> Vec<String> {
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| draw(f, "iowarden top", rows, verdict, panels, st))
        .unwrap();
    let buf = t.backend().buffer();
    (0..buf.area.height)
        .map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::verdict::Basis;

    fn row(dev: &str, cg: &str, share: f64, iops: f64) -> Row {
        Row {
            device: dev.into(),
            cgroup: cg.into(),
            iops,
            bytes_per_s: iops * 4096.0,
            device_share: share,
            queue_p50: Some(1e-5),
            queue_p99: Some(2e-4),
            device_p50: Some(3e-4),
            device_p99: Some(0.0042),
            total_p99: None,
            held_share: Some(0.25),
            ios: 10,
        }
    }

    fn screen(rows: &[Row], verdict: &str, panels: &str, st: &TuiState) -> String {
        let verdict = Verdict {
            basis: Basis::Measured,
            finding: Finding::NoisyNeighbour,
            text: verdict.into(),
        };
        screen_of(110, 20, rows, &verdict, panels, st).join("\n")
    }

    #[test]
    fn draws_the_table_verdict_panels_and_sort_marker() {
        let rows = vec![
            row("loop0", "/hog", 0.9, 100.0),
            row("loop0", "/victim", 0.1, 5000.0),
        ];
        let s = screen(
            &rows,
            "noisy neighbour on loop0: /hog",
            "iocost nvme0n1: vrate 100.0%\n",
            &TuiState::default(),
        );
        assert!(s.contains("SHARE▼"), "{s}");
        assert!(
            s.contains("/hog") && s.contains("90%") && s.contains("4.20ms"),
            "{s}"
        );
        assert!(
            s.contains("measured: noisy neighbour on loop0: /hog"),
            "{s}"
        );
        assert!(s.contains("iocost nvme0n1: vrate 100.0%"), "{s}");
        assert!(s.contains("q quit"), "{s}");
        let st = TuiState {
            sort: SortKey::Iops,
            paused: true,
        };
        let s = screen(&rows, "no noisy neighbour", "", &st);
        assert!(s.contains("IOPS▼") && !s.contains("SHARE▼"), "{s}");
        assert!(s.contains("[paused]"), "{s}");
    }

    #[test]
    fn keys_sort_pause_and_quit() {
        let mut st = TuiState::default();
        assert_eq!(on_key(&mut st, 's', false), KeyAction::Redraw);
        assert_eq!(st.sort, SortKey::Iops);
        for _ in 0..4 {
            on_key(&mut st, 's', false);
        }
        assert_eq!(st.sort, SortKey::Share);
        on_key(&mut st, 'p', false);
        assert!(st.paused);
        assert_eq!(on_key(&mut st, 'x', false), KeyAction::None);
        assert_eq!(on_key(&mut st, 'q', false), KeyAction::Quit);
        assert_eq!(on_key(&mut st, 'c', true), KeyAction::Quit);
    }

    #[test]
    fn sorting_stays_within_each_device() {
        let mut rows = vec![
            row("vda", "/a", 1.0, 1.0),
            row("loop0", "/slow", 0.2, 9000.0),
            row("loop0", "/busy", 0.8, 10.0),
        ];
        sort_rows(&mut rows, SortKey::Share);
        let order: Vec<_> = rows.iter().map(|r| r.cgroup.as_str()).collect();
        assert_eq!(order, ["/busy", "/slow", "/a"]);
        sort_rows(&mut rows, SortKey::Iops);
        let order: Vec<_> = rows.iter().map(|r| r.cgroup.as_str()).collect();
        assert_eq!(order, ["/slow", "/busy", "/a"]);
    }

    #[test]
    fn the_table_box_is_as_high_as_its_rows_and_the_panels_get_the_rest() {
        assert_eq!(
            heights(60, 2, 1, 4),
            Heights {
                table: 5,
                verdict: 1,
                panels: 4
            }
        );
        // Many rows, a few panel lines: the panels keep theirs.
        assert_eq!(heights(24, 100, 2, 3).panels, 3);
        assert_eq!(heights(24, 100, 2, 3).table, 17);
        // Both too many: the panels a third of what the verdict leaves.
        let h = heights(24, 100, 2, 100);
        assert_eq!((h.table, h.verdict, h.panels), (14, 2, 6));
        // Few rows, many panel lines: the table keeps its rows.
        assert_eq!(heights(24, 2, 2, 100).table, 5);
        assert_eq!(heights(24, 2, 2, 100).panels, 15);
    }

    #[test]
    fn wrap_breaks_at_blanks_within_the_width() {
        assert_eq!(wrap("short line", 80), ["short line"]);
        assert_eq!(
            wrap("measured: noisy neighbour on loop0: /victim waited", 20),
            [
                "measured: noisy",
                "  neighbour on",
                "  loop0: /victim",
                "  waited"
            ]
        );
        assert_eq!(
            wrap("/a/very/long/path/without/blanks", 12),
            ["/a/very/long", "  /path/with", "  out/blanks"]
        );
        assert_eq!(
            wrap("culprits /a/very/long/path on loop0", 12),
            ["culprits /a/", "  very/long/", "  path on", "  loop0"]
        );
        assert_eq!(wrap("", 80), [""]);
    }
}
