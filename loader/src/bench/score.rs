//! The scoring math of `iowarden bench`, pure and unit-tested: Jain's
//! fairness index, the Pareto front of a priority/utilisation sweep, the
//! reaction time to a burst, and the steady window of a timeline.

use iowarden_exporters::Histogram;

/// Jain's fairness index, (Σx)² / (n·Σx²): 1.0 when all x are equal, 1/n
/// when one takes everything. `None` for no values or all zero.
pub fn jain(xs: &[f64]) -> Option<f64> {
    let n = xs.len() as f64;
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    (!xs.is_empty() && sq > 0.0).then(|| sum * sum / (n * sq))
}

/// isol-bench's D2 score: Jain's index over bandwidth divided by weight.
pub fn weighted_jain(bw: &[f64], weights: &[f64]) -> Option<f64> {
    if bw.len() != weights.len() || weights.iter().any(|&w| w <= 0.0) {
        return None;
    }
    let x: Vec<f64> = bw.iter().zip(weights).map(|(b, w)| b / w).collect();
    jain(&x)
}

/// One configuration of a knob in a priority/utilisation sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct TradeoffPoint {
    /// The knob's setting, as written (for the report).
    pub setting: String,
    /// Aggregate bandwidth of all tenants, bytes/s (higher is better).
    pub aggregate_bw: f64,
    /// The priority app's p99 latency, seconds (lower is better).
    pub prio_p99: f64,
}

/// Indices of the points no other point dominates (at least as much
/// bandwidth and at most the p99, better in one), by increasing bandwidth.
pub fn pareto_front(points: &[TradeoffPoint]) -> Vec<usize> {
    let dominated = |i: usize| {
        let p = &points[i];
        points.iter().enumerate().any(|(j, q)| {
            j != i
                && q.aggregate_bw >= p.aggregate_bw
                && q.prio_p99 <= p.prio_p99
                && (q.aggregate_bw > p.aggregate_bw || q.prio_p99 < p.prio_p99)
        })
    };
    let mut front: Vec<usize> = (0..points.len()).filter(|&i| !dominated(i)).collect();
    // Equal points: keep the first only.
    front.dedup_by(|a, b| points[*a] == points[*b]);
    front.sort_by(|&a, &b| points[a].aggregate_bw.total_cmp(&points[b].aggregate_bw));
    front
}

/// The best p99 the front offers while keeping at least `min_bw` of
/// aggregate bandwidth: the question of D3 ("can the priority app be
/// protected at this utilisation?").
pub fn best_p99_at(points: &[TradeoffPoint], min_bw: f64) -> Option<&TradeoffPoint> {
    points
        .iter()
        .filter(|p| p.aggregate_bw >= min_bw)
        .min_by(|a, b| a.prio_p99.total_cmp(&b.prio_p99))
}

/// One window of a timeline: its end, seconds since the phase started, and
/// the latency histogram of the priority app's completions in it.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    pub t: f64,
    pub hist: Histogram,
}

/// The (median) spacing of the windows.
fn window_width(windows: &[Window]) -> f64 {
    let mut d: Vec<f64> = windows.windows(2).map(|w| w[1].t - w[0].t).collect();
    if d.is_empty() {
        return 0.0;
    }
    d.sort_by(f64::total_cmp);
    d[d.len() / 2]
}

fn merged_p99(windows: &[Window], bounds: &[f64]) -> Option<f64> {
    let mut h = Histogram::default();
    for w in windows {
        h.add(&w.hist);
    }
    h.quantile(bounds, 0.99)
}

/// Indices of the first and last windows with completions.
fn data_span(windows: &[Window]) -> Option<(usize, usize)> {
    let first = windows.iter().position(|w| w.hist.count() > 0)?;
    let last = windows.iter().rposition(|w| w.hist.count() > 0)?;
    Some((first, last))
}

/// When the priority app's first I/O completed: the beginning of the first
/// window with a completion (its fio start-up is not the knob's doing).
pub fn first_io(windows: &[Window]) -> Option<f64> {
    let (f, _) = data_span(windows)?;
    Some(windows[f].t - window_width(windows))
}

/// Steady-state p99: all completions of the second half of the app's run.
pub fn steady_p99(windows: &[Window], bounds: &[f64]) -> Option<f64> {
    let (f, l) = data_span(windows)?;
    let mid = f + (l + 1 - f) / 2;
    merged_p99(&windows[mid..=l], bounds)
}

/// D4: time from the app's first I/O until its p99, over `span` windows
/// merged (one window holds too few samples for a stable p99), first comes
/// within `tolerance` (0.1 = 10 %) of `steady` (or below it). None: never.
pub fn settle_time(
    windows: &[Window],
    bounds: &[f64],
    steady: f64,
    tolerance: f64,
    span: usize,
) -> Option<f64> {
    let (f, l) = data_span(windows)?;
    let start = first_io(windows)?;
    let width = window_width(windows);
    (f..=l).find_map(|k| {
        let end = (k + span.max(1)).min(l + 1);
        let p = merged_p99(&windows[k..end], bounds)?;
        (p <= steady * (1.0 + tolerance)).then(|| (windows[k].t - width - start).max(0.0))
    })
}

/// The longest run of consecutive polls in which every tenant completed
/// I/O: `active[k][i]` says whether tenant i did in interval k. Returns the
/// half-open interval range [first, last] (inclusive indices), with one
/// interval trimmed at each end when there are more than four (ramp up and
/// tail of the jobs).
pub fn all_active_span(active: &[Vec<bool>]) -> Option<(usize, usize)> {
    let mut best: Option<(usize, usize)> = None;
    let mut start = None;
    for (k, row) in active.iter().enumerate() {
        if !row.is_empty() && row.iter().all(|&a| a) {
            let s = *start.get_or_insert(k);
            if best.is_none_or(|(a, b)| k - s > b - a) {
                best = Some((s, k));
            }
        } else {
            start = None;
        }
    }
    best.map(|(a, b)| {
        if b - a + 1 > 4 {
            (a + 1, b - 1)
        } else {
            (a, b)
        }
    })
}

/// Relative difference |a - b| / b (b the reference), None when b is 0.
pub fn rel_diff(a: f64, reference: f64) -> Option<f64> {
    (reference != 0.0).then(|| (a - reference).abs() / reference.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn jain_known_values() {
        assert!(close(jain(&[1.0, 1.0, 1.0, 1.0]).unwrap(), 1.0));
        // One of n takes everything: 1/n.
        assert!(close(jain(&[5.0, 0.0, 0.0, 0.0]).unwrap(), 0.25));
        // (1+2+3)^2 / (3 * (1+4+9)) = 36/42.
        assert!(close(jain(&[1.0, 2.0, 3.0]).unwrap(), 36.0 / 42.0));
        assert_eq!(jain(&[]), None);
        assert_eq!(jain(&[0.0, 0.0]), None);
    }

    #[test]
    fn weighted_jain_divides_by_weight() {
        // Bandwidth exactly proportional to 1:2:4:8 weights: perfectly fair.
        let w = [1.0, 2.0, 4.0, 8.0];
        assert!(close(
            weighted_jain(&[10.0, 20.0, 40.0, 80.0], &w).unwrap(),
            1.0
        ));
        // Equal bandwidth whatever the weights: x = 1, 1/2, 1/4, 1/8,
        // J = (15/8)^2 / (4 * 85/64) = 225/340.
        let j = weighted_jain(&[1.0; 4], &w).unwrap();
        assert!(close(j, 225.0 / 340.0), "{j}");
        assert_eq!(weighted_jain(&[1.0], &[0.0]), None);
        assert_eq!(weighted_jain(&[1.0, 2.0], &[1.0]), None);
    }

    fn pt(bw: f64, p99: f64) -> TradeoffPoint {
        TradeoffPoint {
            setting: format!("{bw}/{p99}"),
            aggregate_bw: bw,
            prio_p99: p99,
        }
    }

    #[test]
    fn pareto_front_drops_dominated_points() {
        let pts = [
            pt(100.0, 5.0), // 0: front (most bandwidth)
            pt(80.0, 2.0),  // 1: front
            pt(70.0, 3.0),  // 2: dominated by 1
            pt(50.0, 1.0),  // 3: front (best p99)
            pt(50.0, 1.5),  // 4: dominated by 3
            pt(100.0, 6.0), // 5: dominated by 0
        ];
        assert_eq!(pareto_front(&pts), vec![3, 1, 0]);
        assert_eq!(pareto_front(&[]), Vec::<usize>::new());
        // Duplicates keep one.
        assert_eq!(pareto_front(&[pt(1.0, 1.0), pt(1.0, 1.0)]), vec![0]);
        // The best p99 keeping at least 75 of bandwidth is point 1.
        assert_eq!(best_p99_at(&pts, 75.0), Some(&pts[1]));
        assert_eq!(best_p99_at(&pts, 101.0), None);
    }

    /// Windows of 0.1 s; each holds 100 samples in the given bucket (None: empty).
    fn tl(buckets: &[Option<usize>]) -> Vec<Window> {
        buckets
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let mut counts = vec![0; 12];
                if let Some(b) = b {
                    counts[*b] = 100;
                }
                Window {
                    t: (i + 1) as f64 * 0.1,
                    hist: Histogram {
                        counts,
                        sum_seconds: 0.0,
                    },
                }
            })
            .collect()
    }

    #[test]
    fn burst_settles_when_the_merged_p99_reaches_the_steady_state() {
        // Bucket i holds [i, i+1): 100 samples in bucket b have p99 b + 0.99.
        let bounds: Vec<f64> = (0..12).map(|i| i as f64).collect();
        let w = tl(&[
            None,
            None,
            Some(9), // first I/O: the window began at 0.2
            Some(5),
            Some(1), // one lucky window: merged with the next it is not settled
            Some(6),
            Some(1), // 0.6..0.7: settled from here
            Some(1),
            Some(1),
            Some(1),
            None, // the app has ended
        ]);
        assert!(close(first_io(&w).unwrap(), 0.2));
        // Second half of the 8 windows with data: all in bucket 1.
        let steady = steady_p99(&w, &bounds).unwrap();
        assert!(close(steady, 1.99), "{steady}");
        let t = settle_time(&w, &bounds, steady, 0.1, 2).unwrap();
        assert!(close(t, 0.4), "{t}");
        // Span 1 takes the lucky window: 0.2 s.
        assert!(close(
            settle_time(&w, &bounds, steady, 0.1, 1).unwrap(),
            0.2
        ));
        // A steady state nothing reaches: never.
        assert_eq!(settle_time(&w, &bounds, 0.5, 0.1, 2), None);
        // Within from the first window: 0 s.
        let w = tl(&[None, Some(2), Some(2), Some(2)]);
        let steady = steady_p99(&w, &bounds).unwrap();
        assert!(close(
            settle_time(&w, &bounds, steady, 0.1, 2).unwrap(),
            0.0
        ));
        assert_eq!(steady_p99(&tl(&[None, None]), &bounds), None);
        assert_eq!(first_io(&tl(&[None])), None);
    }

    #[test]
    fn all_active_span_finds_the_concurrent_stretch() {
        let t = true;
        let f = false;
        let a = vec![
            vec![t, f, f],
            vec![t, t, t], // 1
            vec![t, t, t],
            vec![t, t, t],
            vec![t, t, t],
            vec![t, t, t],
            vec![t, t, t], // 6
            vec![f, t, t],
            vec![t, t, t],
        ];
        // 1..=6 is the longest, trimmed to 2..=5.
        assert_eq!(all_active_span(&a), Some((2, 5)));
        assert_eq!(all_active_span(&[vec![t, t], vec![f, t]]), Some((0, 0)));
        assert_eq!(all_active_span(&[vec![f]]), None);
    }

    #[test]
    fn rel_diff_against_a_reference() {
        assert!(close(rel_diff(102.0, 100.0).unwrap(), 0.02));
        assert!(close(rel_diff(98.0, 100.0).unwrap(), 0.02));
        assert_eq!(rel_diff(1.0, 0.0), None);
    }
}
