//! `iowarden top` on a terminal: the same rows, verdict and panels as the
//! plain-text view, drawn with ratatui, with keys to sort, pause and quit.
//! Drawing is a pure function of the state (tested on ratatui's TestBackend).

use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row as TRow, Table};
use ratatui::Frame;

use crate::views::top::{fmt_lat, fmt_rate, fmt_share, Row};

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

const HEADER: [&str; 10] = [
    "DEVICE", "CGROUP", "SHARE", "IOPS", "BW", "Q_P50", "Q_P99", "D_P50", "D_P99", "HELD",
];

/// One frame: title, table, verdict, the iocost/NVMe/lock panels, key help.
pub fn draw(f: &mut Frame, title: &str, rows: &[Row], verdict: &str, panels: &str, st: &TuiState) {
    let panel_lines = panels.lines().count() as u16;
    let [top, table, verdict_area, panel_area, help] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(2),
        Constraint::Length(panel_lines.min(12)),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let paused = if st.paused { "  [paused]" } else { "" };
    f.render_widget(
        Paragraph::new(format!("{title}{paused}")).style(Style::new().add_modifier(Modifier::BOLD)),
        top,
    );
    let header = TRow::new(HEADER.iter().enumerate().map(|(i, h)| {
        if i == st.sort.column() {
            format!("{h}▼")
        } else {
            h.to_string()
        }
    }))
    .style(Style::new().add_modifier(Modifier::REVERSED));
    let body = rows.iter().map(|r| {
        TRow::new(vec![
            r.device.clone(),
            r.cgroup.clone(),
            format!("{:.0}%", r.device_share * 100.0),
            fmt_rate(r.iops, ""),
            fmt_rate(r.bytes_per_s, "B/s"),
            fmt_lat(r.queue_p50),
            fmt_lat(r.queue_p99),
            fmt_lat(r.device_p50),
            fmt_lat(r.device_p99),
            fmt_share(r.held_share),
        ])
    });
    let widths = [
        Constraint::Length(10),
        Constraint::Min(20),
        Constraint::Length(7),
        Constraint::Length(9),
        Constraint::Length(10),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(5),
    ];
    f.render_widget(
        Table::new(body, widths)
            .header(header)
            .block(Block::bordered()),
        table,
    );
    let noisy = !verdict.starts_with("no noisy neighbour");
    f.render_widget(
        Paragraph::new(verdict.to_string()).style(if noisy {
            Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)
        } else {
            Style::new().fg(Color::Green)
        }),
        verdict_area,
    );
    f.render_widget(
        Paragraph::new(panels.lines().map(Line::from).collect::<Vec<_>>()),
        panel_area,
    );
    f.render_widget(
        Paragraph::new("q quit   s sort column   p pause").style(Style::new().fg(Color::DarkGray)),
        help,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

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
        let mut t = Terminal::new(TestBackend::new(110, 20)).unwrap();
        t.draw(|f| draw(f, "iowarden top", rows, verdict, panels, st))
            .unwrap();
        let buf = t.backend().buffer().clone();
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect::<String>()
                    + "\n"
            })
            .collect()
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
        assert!(s.contains("noisy neighbour on loop0: /hog"), "{s}");
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
}
