//! The occupancy estimator over the windows windows.rs defines: the
//! saturated windows kept, which terms they identify, their non-negative
//! least-squares fit, and each parameter's standard error. Pure arithmetic.

use std::collections::VecDeque;

use super::windows::{is_page_col, page_col, param_value, Fit, FitConfig, Window, PARAMS};
use crate::costmodel::units::PAGE_SIZE;

/// Base columns first: when pages and requests cannot be told apart (every
/// request of one size), the page term is the one dropped and the request
/// term absorbs it.
const ORDER: [usize; PARAMS] = [1, 2, 4, 5, 0, 3];

/// A solved least-squares problem over some columns.
struct Solution {
    cols: Vec<usize>,
    theta: [f64; PARAMS],
    /// Covariance of theta over `cols` (indexed by position in `cols`);
    /// None when there are no degrees of freedom left for the residual.
    cov: Option<Vec<Vec<f64>>>,
    rms_rel: f64,
    /// A page term dropped as negative or vague: how large it could be
    /// (|cost| + 2 standard errors, seconds per page), by page column.
    page_bound: [Option<f64>; PARAMS],
}

/// Inverse of a small symmetric matrix by Gauss-Jordan with partial
/// pivoting; None when a column depends on the others.
fn invert(a: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let k = a.len();
    let norm = (0..k).fold(0.0f64, |m, i| m.max(a[i][i].abs()));
    let mut m: Vec<Vec<f64>> = (0..k)
        .map(|i| {
            let mut r = a[i].clone();
            r.extend((0..k).map(|j| (i == j) as u8 as f64));
            r
        })
        .collect();
    for col in 0..k {
        let piv = (col..k).max_by(|&i, &j| m[i][col].abs().total_cmp(&m[j][col].abs()))?;
        if m[piv][col].abs() <= 1e-9 * norm {
            return None;
        }
        m.swap(col, piv);
        let p = m[col][col];
        m[col].iter_mut().for_each(|v| *v /= p);
        let pivot_row = m[col].clone();
        for (r, row) in m.iter_mut().enumerate() {
            if r != col {
                let f = row[col];
                row.iter_mut()
                    .zip(&pivot_row)
                    .for_each(|(v, p)| *v -= f * p);
            }
        }
    }
    Some(m.into_iter().map(|r| r[k..].to_vec()).collect())
}

/// Least squares of the windows' lengths on `cols`, columns scaled to their
/// mean so the normal equations stay well conditioned.
fn solve(rows: &[&Window], cols: &[usize]) -> Option<Solution> {
    let n = rows.len() as f64;
    let scale: Vec<f64> = cols
        .iter()
        .map(|&c| rows.iter().map(|w| w.x[c]).sum::<f64>() / n)
        .collect();
    let k = cols.len();
    let mut a = vec![vec![0.0; k]; k];
    let mut b = vec![0.0; k];
    for w in rows {
        let z: Vec<f64> = cols.iter().zip(&scale).map(|(&c, s)| w.x[c] / s).collect();
        for i in 0..k {
            b[i] += z[i] * w.seconds;
            for j in 0..k {
                a[i][j] += z[i] * z[j];
            }
        }
    }
    let inv = invert(&a)?;
    let mut theta = [0.0; PARAMS];
    for (i, &c) in cols.iter().enumerate() {
        theta[c] = (0..k).map(|j| inv[i][j] * b[j]).sum::<f64>() / scale[i];
    }
    let (mut sse, mut rel) = (0.0, 0.0);
    for w in rows {
        let r = w.seconds - cols.iter().map(|&c| w.x[c] * theta[c]).sum::<f64>();
        sse += r * r;
        rel += (r / w.seconds).powi(2);
    }
    let dof = rows.len().saturating_sub(k);
    let cov = (dof > 0).then(|| {
        let s2 = sse / dof as f64;
        (0..k)
            .map(|i| {
                (0..k)
                    .map(|j| s2 * inv[i][j] / (scale[i] * scale[j]))
                    .collect()
            })
            .collect()
    });
    Some(Solution {
        cols: cols.to_vec(),
        theta,
        cov,
        rms_rel: (rel / n).sqrt(),
        page_bound: [None; PARAMS],
    })
}

/// The plain least-squares costs (seconds per unit, by column) of windows
/// over `cols` only (the others 0): no trimming, no judging. None when
/// those columns are not determined.
pub fn least_squares(rows: &[&Window], cols: &[usize]) -> Option<[f64; PARAMS]> {
    solve(rows, cols).map(|s| s.theta)
}

/// The columns windows use, base columns first (the order in which a
/// column that cannot be told from another is the page term dropped).
pub fn used_columns(rows: &[&Window]) -> Vec<usize> {
    ORDER
        .iter()
        .copied()
        .filter(|&c| rows.iter().any(|w| w.x[c] > 0.0))
        .collect()
}

impl Solution {
    fn var(&self, a: usize, b: usize) -> Option<f64> {
        let cov = self.cov.as_ref()?;
        let i = self.cols.iter().position(|&c| c == a)?;
        let j = self.cols.iter().position(|&c| c == b)?;
        Some(cov[i][j])
    }

    /// How large a column's cost could be: |cost| + 2 standard errors.
    fn bound(&self, col: usize) -> Option<f64> {
        Some(self.theta[col].abs() + 2.0 * self.var(col, col)?.max(0.0).sqrt())
    }

    /// Relative standard error of a column's io.cost.model value: of the
    /// page cost for bps, of base + page (a 4 KiB request) for iops.
    fn rse(&self, col: usize) -> Option<f64> {
        if is_page_col(col) {
            return Some(self.var(col, col)?.max(0.0).sqrt() / self.theta[col]);
        }
        let p = page_col(col);
        let mut v = self.var(col, col)?;
        let mut cost = self.theta[col];
        if self.cols.contains(&p) {
            v += self.var(p, p)? + 2.0 * self.var(col, p)?;
            cost += self.theta[p];
        }
        Some(v.max(0.0).sqrt() / cost)
    }
}

/// Names of the columns, for reasons: io.cost.model's coefficients, in its order.
pub const NAMES: [&str; PARAMS] = crate::knobs::cost_model::COEFS;

/// Less independent variation than this (1 − R² of a column on the ones
/// before it) and a column cannot be told apart from them.
const MIN_INDEPENDENT: f64 = 1e-4;

/// The first column (in `cols`' order) that the windows vary only together
/// with earlier ones, and those it moves with.
fn dependent(rows: &[&Window], cols: &[usize]) -> Option<(usize, Vec<usize>)> {
    for i in 1..cols.len() {
        let y: Vec<f64> = rows.iter().map(|w| w.x[cols[i]]).collect();
        let sub = &cols[..i];
        let fake: Vec<Window> = rows
            .iter()
            .zip(&y)
            .map(|(w, &t)| Window {
                seconds: t,
                ..(*w).clone()
            })
            .collect();
        let refs: Vec<&Window> = fake.iter().collect();
        let Some(s) = solve(&refs, sub) else { continue };
        let total: f64 = y.iter().map(|v| v * v).sum();
        let res: f64 = rows
            .iter()
            .zip(&y)
            .map(|(w, t)| (t - sub.iter().map(|&c| w.x[c] * s.theta[c]).sum::<f64>()).powi(2))
            .sum();
        if total > 0.0 && res / total < MIN_INDEPENDENT {
            // Columns that carry part of it (in units of its own mean).
            let mean = |c: usize| rows.iter().map(|w| w.x[c]).sum::<f64>();
            let with = sub
                .iter()
                .copied()
                .filter(|&c| (s.theta[c] * mean(c) / mean(cols[i])).abs() > 0.05)
                .collect();
            return Some((cols[i], with));
        }
    }
    None
}

/// Drops columns until the rest solve with non-negative costs and every
/// page term left is determined; says why each dropped column went, and
/// which kept ones absorbed a dropped one (`tangled`).
fn solve_feasible(
    rows: &[&Window],
    cfg: &FitConfig,
    mut cols: Vec<usize>,
    why: &mut [String; PARAMS],
    tangled: &mut [String; PARAMS],
) -> Option<Solution> {
    while let Some((d, with)) = dependent(rows, &cols) {
        let names: Vec<&str> = with.iter().map(|&c| NAMES[c]).collect();
        why[d] = format!(
            "cannot be told apart from {}: these windows vary it only together with them",
            names.join(", ")
        );
        for &k in &with {
            // A base term absorbing its own op's page term stays meaningful
            // for small requests (judged by size later).
            if !(is_page_col(d) && page_col(k) == d) {
                tangled[k] = format!("cannot be told apart from {}", NAMES[d]);
            }
        }
        cols.retain(|&c| c != d);
    }
    let mut page_bound = [None; PARAMS];
    while !cols.is_empty() {
        let mut s = solve(rows, &cols)?;
        let negative = cols
            .iter()
            .copied()
            .filter(|&c| s.theta[c] < 0.0)
            .min_by(|&a, &b| s.theta[a].total_cmp(&s.theta[b]));
        if let Some(c) = negative {
            why[c] = "fitted cost is negative (the windows contradict a linear model here)".into();
            page_bound[c] = is_page_col(c).then(|| s.bound(c)).flatten();
            cols.retain(|&x| x != c);
            continue;
        }
        let vague_page = cols
            .iter()
            .copied()
            .find(|&c| is_page_col(c) && s.rse(c).is_some_and(|r| r > cfg.max_rse));
        if let Some(c) = vague_page {
            why[c] = format!(
                "relative error {:.0}% above {:.0}%: sizes vary too little across windows",
                s.rse(c).unwrap_or(0.0) * 100.0,
                cfg.max_rse * 100.0
            );
            page_bound[c] = s.bound(c);
            cols.retain(|&x| x != c);
            continue;
        }
        s.page_bound = page_bound;
        return Some(s);
    }
    None
}

/// Leaves out windows in which the device did clearly less work than the
/// others say it can: a stall (the host or the guest CPU not feeding it, a
/// flush) only ever lowers what a saturated window gets done, never raises
/// it, so the capacity is the upper envelope. One-sided and robust: a
/// window is out when its relative residual exceeds the median by more than
/// 3 × 1.4826 × the median absolute deviation (and 5 %), refitted until none
/// is, keeping at least `min_windows`.
fn drop_stalled<'a>(rows: &[&'a Window], cfg: &FitConfig, cols: &[usize]) -> Vec<&'a Window> {
    // Every term kept while trimming: only the final fit judges errors.
    let loose = FitConfig {
        max_rse: f64::INFINITY,
        ..cfg.clone()
    };
    let mut kept: Vec<&Window> = rows.to_vec();
    for _ in 0..10 {
        let (mut why, mut tangled) = (Default::default(), Default::default());
        let Some(s) = solve_feasible(&kept, &loose, cols.to_vec(), &mut why, &mut tangled) else {
            break;
        };
        let rel = |w: &Window| {
            let pred: f64 = s.cols.iter().map(|&c| w.x[c] * s.theta[c]).sum();
            (w.seconds - pred) / w.seconds
        };
        let r: Vec<f64> = kept.iter().map(|w| rel(w)).collect();
        let med = median(r.clone());
        let mad = median(r.iter().map(|v| (v - med).abs()).collect());
        let limit = med + (3.0 * 1.4826 * mad).max(0.05);
        let next: Vec<&Window> = kept
            .iter()
            .zip(&r)
            .filter(|(_, &v)| v <= limit)
            .map(|(w, _)| *w)
            .collect();
        if next.len() == kept.len() || next.len() < cfg.min_windows {
            break;
        }
        kept = next;
    }
    kept
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Saturated windows the start's fit needs: those of the period or two
/// observed with iocost off (windows of half `--model-window` there, 3 s
/// periods), fewer than the running fit's six. The start scales the terms the fit leaves
/// undetermined.
pub const START_WINDOWS: usize = 4;

/// The relative standard error a term of the start's fit may have: the
/// uniform scale it replaces keeps the model's shape, whose error nothing
/// bounds (26 % between 4 KiB and 128 KiB reads at m-47's 500/s point,
/// where six windows with iocost off put rbps at 8 %); the running fit
/// corrects the terms within `--model-max-error` once it has its windows.
pub const START_MAX_RSE: f64 = 0.15;

/// The saturated windows of one device and the fit over them.
pub struct Estimator {
    cfg: FitConfig,
    windows: VecDeque<Window>,
    unsaturated: u64,
}

impl Estimator {
    pub fn new(cfg: FitConfig) -> Estimator {
        Estimator {
            cfg,
            windows: VecDeque::new(),
            unsaturated: 0,
        }
    }

    pub fn config(&self) -> &FitConfig {
        &self.cfg
    }

    /// Keeps the window if the device was saturated over it; says whether.
    pub fn push(&mut self, w: Window) -> bool {
        if !w.saturated(self.cfg.saturation_depth) {
            self.unsaturated += 1;
            return false;
        }
        if self.windows.len() == self.cfg.capacity {
            self.windows.pop_front();
        }
        self.windows.push_back(w);
        true
    }

    /// Forgets every window (after the device changed, e.g. a new model
    /// changes nothing here, but a vanished and returned device does).
    pub fn clear(&mut self) {
        self.windows.clear();
        self.unsaturated = 0;
    }

    /// The fit over the windows kept, a request column with fewer than
    /// `--model-min-samples` counted in its sibling of the same direction.
    /// A random-read load has a few reads iocost counts as sequential
    /// (within 16 MiB of the last): at 500 requests/s, 132 of them took a
    /// 30 ms cost in the start's fit and pushed rrandiops negative, out of
    /// the fit; at 3,000/s the running fit priced them negative.
    pub fn fit(&self) -> Fit {
        self.fit_with(&self.cfg)
    }

    /// The start's fit, over the few windows observed with iocost off:
    /// from `min_windows` of them, a term determined within `max_rse` from
    /// as many requests as give the same counting noise (1/sqrt(n)) against
    /// that bound as `--model-min-samples` gives against the running fit's
    /// (2,000 at 5 % makes 223 at 15 %). A floor sized for the running fit
    /// held a slow device's start back: at 500 requests/s the start saw
    /// 1,982 random reads, rrandiops within 4.1 %, and left it scaled.
    pub fn start_fit(&self, min_windows: usize, max_rse: f64) -> Fit {
        let noise = (self.cfg.max_rse / max_rse).powi(2);
        self.fit_with(&FitConfig {
            min_windows,
            max_rse,
            min_samples: (self.cfg.min_samples as f64 * noise).ceil() as u64,
            ..self.cfg.clone()
        })
    }

    fn fit_with(&self, cfg: &FitConfig) -> Fit {
        let mut folded: Vec<Window> = self.windows.iter().cloned().collect();
        let moved = fold_sparse_columns(&mut folded, cfg.min_samples);
        let rows: Vec<&Window> = folded.iter().collect();
        let mut fit = fit_windows(&rows, cfg, self.unsaturated);
        for (from, into, samples) in moved {
            fit.params[from].samples = samples;
            fit.params[from].reason = format!(
                "{samples} samples, {} needed: counted as {}",
                cfg.min_samples, NAMES[into]
            );
        }
        fit
    }
}

/// A folded column is the few requests iocost counted in the other class
/// (132 of 2,000 random 4 KiB reads at 500 requests/s counted sequential),
/// not a class of its own: under this share of its sibling's requests.
const FOLD_SHARE: f64 = 0.1;

/// How far outside the range of its sibling's windows' mean request sizes
/// a sparse column's mean may lie and still be of sizes its sibling has. Reads counted sequential by chance come from the
/// load the random ones do (at m-47's 500/s point 16 KiB a read where the
/// random ones' windows hold 4-124 KiB, but 10 % of their bytes: kept apart
/// by a share of bytes, they took 8 ms each and pushed rrandiops to 61 %
/// error); a few 1 MiB reads beside 4 KiB random ones are a class of their
/// own.
const FOLD_SIZE_RATIO: f64 = 2.0;

/// Moves the requests of a base column with fewer than `min_samples` into
/// its sibling (sequential and random of one direction) where they are a
/// small part of its own (FOLD_SHARE) of sizes it has (FOLD_SIZE_RATIO);
/// returns (column, sibling, samples) for each moved. A class of its own,
/// however sparse, stays: 1 MiB reads counted as 4 KiB random ones would
/// price neither.
pub fn fold_sparse_columns(rows: &mut [Window], min_samples: u64) -> Vec<(usize, usize, u64)> {
    let mut moved = Vec::new();
    for (a, b) in [(1, 2), (4, 5)] {
        let requests = |c: usize| rows.iter().map(|w| w.x[c]).sum::<f64>();
        let (from, into) = if requests(a) <= requests(b) {
            (a, b)
        } else {
            (b, a)
        };
        let t = requests(from);
        let size = rows.iter().map(|w| w.bytes[from]).sum::<f64>() / t;
        let (smallest, largest) = rows
            .iter()
            .filter(|w| w.x[into] > 0.0)
            .map(|w| w.bytes[into] / w.x[into])
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), s| {
                (lo.min(s), hi.max(s))
            });
        let few = t < min_samples as f64
            && t < FOLD_SHARE * requests(into)
            && size >= smallest / FOLD_SIZE_RATIO
            && size <= largest * FOLD_SIZE_RATIO;
        if t <= 0.0 || !few {
            continue;
        }
        for w in rows.iter_mut() {
            w.x[into] += std::mem::take(&mut w.x[from]);
            w.bytes[into] += std::mem::take(&mut w.bytes[from]);
        }
        moved.push((from, into, t.round() as u64));
    }
    moved
}

/// The fit over saturated windows (see windows.rs).
pub fn fit_windows(rows: &[&Window], cfg: &FitConfig, unsaturated: u64) -> Fit {
    let mut fit = Fit {
        windows: rows.len(),
        unsaturated,
        ..Default::default()
    };
    for w in rows {
        for c in 0..PARAMS {
            fit.work[c] += w.x[c];
        }
        fit.window_work.push(w.x);
    }
    for c in 0..PARAMS {
        fit.params[c].samples = fit.work[c].round() as u64;
    }
    if rows.len() < cfg.min_windows {
        let why = format!(
            "{} saturated windows, {} needed ({} windows not saturated: mean depth below {} or the device idle in them)",
            rows.len(),
            cfg.min_windows,
            unsaturated,
            cfg.saturation_depth
        );
        fit.params.iter_mut().for_each(|p| p.reason = why.clone());
        return fit;
    }
    let mut why: [String; PARAMS] = Default::default();
    let cols: Vec<usize> = ORDER
        .iter()
        .copied()
        .filter(|&c| fit.work[c] > 0.0)
        .collect();
    let kept = drop_stalled(rows, cfg, &cols);
    fit.stalled = rows.len() - kept.len();
    let rows = &kept[..];
    let mut tangled: [String; PARAMS] = Default::default();
    let sol = solve_feasible(rows, cfg, cols, &mut why, &mut tangled);
    fit.error = sol.as_ref().map(|s| s.rms_rel);
    for c in 0..PARAMS {
        let p = &mut fit.params[c];
        if p.samples == 0 {
            p.reason = "no such requests in the saturated windows".into();
            continue;
        }
        let Some(s) = &sol else {
            p.reason = std::mem::take(&mut why[c]);
            continue;
        };
        judge_param(c, s, rows, cfg, &why, p);
        if p.value.is_some() && !tangled[c].is_empty() {
            p.value = None;
            p.reason = std::mem::take(&mut tangled[c]);
        }
    }
    fit
}

fn judge_param(
    c: usize,
    s: &Solution,
    rows: &[&Window],
    cfg: &FitConfig,
    why: &[String; PARAMS],
    p: &mut super::windows::ParamFit,
) {
    if !s.cols.contains(&c) {
        p.reason = why[c].clone();
        return;
    }
    p.estimate = param_value(c, &s.theta).unwrap_or(0);
    p.rse = s.rse(c);
    let bytes: f64 = rows.iter().map(|w| w.bytes[c]).sum();
    let page_dropped = !s.cols.contains(&page_col(c));
    // A page term dropped because the windows show bytes costing nothing
    // within its error (an IOPS-bound device: a 128 KiB read takes as long
    // as a 4 KiB one) leaves the request cost known: what the bytes could
    // add per request is below the error allowed.
    let bytes_cost_nothing = s.page_bound[page_col(c)].is_some_and(|b| {
        b * bytes / PAGE_SIZE as f64 / p.samples as f64 <= cfg.max_rse * s.theta[c]
    });
    if !is_page_col(c) && page_dropped && !bytes_cost_nothing && bytes > 8192.0 * p.samples as f64 {
        p.reason = format!(
            "requests of {:.0} KiB on average and no per-byte term: the request cost cannot be told from the byte cost",
            bytes / p.samples as f64 / 1024.0
        );
    } else if p.samples < cfg.min_samples {
        p.reason = format!("{} samples, {} needed", p.samples, cfg.min_samples);
    } else {
        match p.rse {
            None => p.reason = "as many windows as terms: no residual to judge the error".into(),
            Some(r) if r > cfg.max_rse => {
                p.reason = format!(
                    "relative error {:.1}% above {:.1}%",
                    r * 100.0,
                    cfg.max_rse * 100.0
                )
            }
            Some(_) => p.value = Some(p.estimate),
        }
    }
}
