//! The refit of the model from measured device time per size class.

use super::model::LinearModel;
use super::units::{PAGE_SIZE, VTIME_PER_SEC};

/// Fewest samples a class needs to take part in a fit.
pub const MIN_CLASS_IOS: u64 = 8;

/// Cumulative samples of one (op, sequential/random, size) class.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClassSample {
    pub write: bool,
    pub random: bool,
    pub size: usize,
    pub ios: u64,
    pub bytes: u64,
    pub device_ns: u64,
    /// Model cost charged by the BPF side, vtime.
    pub cost: u64,
}

impl ClassSample {
    /// (Σ model − Σ measured) / Σ measured of the configured model.
    pub fn error(&self) -> Option<f64> {
        ratio_error(
            self.cost as f64 * 1e9 / VTIME_PER_SEC as f64,
            self.device_ns as f64,
        )
    }
}

fn ratio_error(model: f64, measured: f64) -> Option<f64> {
    (measured > 0.0).then(|| (model - measured) / measured)
}

/// A fitted model of one operation: ns per request (by pattern) and per byte.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpFit {
    /// Base cost of a sequential / random request, ns (None: no samples).
    pub seq_ns: Option<f64>,
    pub rand_ns: Option<f64>,
    /// Cost per byte, ns (None: every sample had the same size).
    pub per_byte_ns: Option<f64>,
}

impl OpFit {
    /// Modelled device time of a class's requests, ns.
    pub fn predict(&self, c: &ClassSample) -> Option<f64> {
        let base = if c.random { self.rand_ns } else { self.seq_ns }?;
        Some(base * c.ios as f64 + self.per_byte_ns.unwrap_or(0.0) * c.bytes as f64)
    }

    /// (bps, seqiops, randiops) in io.cost.model's terms: 0 where a term is
    /// free (the kernel's meaning of 0) or unknown.
    pub fn params(&self) -> (u64, u64, u64) {
        let b = self.per_byte_ns.unwrap_or(0.0);
        let bps = if b > 0.0 { (1e9 / b).round() as u64 } else { 0 };
        let iops = |base: Option<f64>| match base {
            Some(a) if a + b * PAGE_SIZE as f64 > 0.0 => {
                (1e9 / (a + b * PAGE_SIZE as f64)).round() as u64
            }
            _ => 0,
        };
        (bps, iops(self.seq_ns), iops(self.rand_ns))
    }
}

/// Non-negative weighted least squares of one operation's class means:
/// mean device time = base[seq|rand] + per_byte × mean bytes, each class
/// weighted by its request count (the fit over individual requests, with
/// every request of a class at the class's mean size). Classes with fewer
/// than MIN_CLASS_IOS requests are left out. None without any class.
pub fn fit_op(classes: &[ClassSample]) -> Option<OpFit> {
    let rows: Vec<([f64; 3], f64, f64)> = classes
        .iter()
        .filter(|c| c.ios >= MIN_CLASS_IOS)
        .map(|c| {
            let n = c.ios as f64;
            let x = [
                (!c.random) as u8 as f64,
                c.random as u8 as f64,
                c.bytes as f64 / n,
            ];
            (x, c.device_ns as f64 / n, n)
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    let has = |j: usize| rows.iter().any(|r| r.0[j] > 0.0);
    // Each pattern has its own base: the slope needs two sizes within one.
    let sizes_vary = (0..2).any(|p| {
        let xs: Vec<f64> = rows
            .iter()
            .filter(|r| r.0[p] > 0.0)
            .map(|r| r.0[2])
            .collect();
        xs.iter().any(|x| (x - xs[0]).abs() > 0.5)
    });
    let identified = [has(0), has(1), sizes_vary];
    // Non-negative least squares by enumeration: with three unknowns, the
    // best feasible solution over every subset of free terms is exact.
    let mut best: Option<([f64; 3], f64)> = None;
    for mask in 1u32..8 {
        let free: Vec<usize> = (0..3)
            .filter(|&j| mask & (1 << j) != 0 && identified[j])
            .collect();
        if free.len() != mask.count_ones() as usize {
            continue;
        }
        let Some(sol) = solve_subset(&rows, &free) else {
            continue;
        };
        if sol.iter().any(|&v| v < 0.0) {
            continue;
        }
        let mut coef = [0.0; 3];
        for (k, &j) in free.iter().enumerate() {
            coef[j] = sol[k];
        }
        let sse: f64 = rows
            .iter()
            .map(|(x, y, w)| {
                let p: f64 = (0..3).map(|j| x[j] * coef[j]).sum();
                w * (y - p) * (y - p)
            })
            .sum();
        if best.is_none_or(|(_, b)| sse < b * (1.0 - 1e-12)) {
            best = Some((coef, sse));
        }
    }
    let (coef, _) = best?;
    Some(OpFit {
        seq_ns: identified[0].then_some(coef[0]),
        rand_ns: identified[1].then_some(coef[1]),
        per_byte_ns: identified[2].then_some(coef[2]),
    })
}

/// Weighted least squares restricted to the columns in `free`, through the
/// normal equations (at most 3×3), in units scaled to keep them well
/// conditioned. None when singular.
fn solve_subset(rows: &[([f64; 3], f64, f64)], free: &[usize]) -> Option<Vec<f64>> {
    let k = free.len();
    // Bytes are ~1e3..1e6 while the indicators are 1: scale the size column.
    let scale = |j: usize| if j == 2 { 1.0 / 65536.0 } else { 1.0 };
    let mut a = vec![vec![0.0; k + 1]; k];
    for (x, y, w) in rows {
        for (r, &jr) in free.iter().enumerate() {
            let xr = x[jr] * scale(jr);
            for (c, &jc) in free.iter().enumerate() {
                a[r][c] += w * xr * x[jc] * scale(jc);
            }
            a[r][k] += w * xr * y;
        }
    }
    // Gauss-Jordan elimination with partial pivoting; a pivot tiny against
    // the matrix means a column depends on the others (singular).
    let norm = a
        .iter()
        .flat_map(|r| r[..k].iter())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    for col in 0..k {
        let piv = (col..k).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[piv][col].abs() <= 1e-10 * norm {
            return None;
        }
        a.swap(col, piv);
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot_row[col];
                for (v, p) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *v -= f * p;
                }
            }
        }
    }
    Some((0..k).map(|r| a[r][k] / a[r][r] * scale(free[r])).collect())
}

/// The refit of one device: per operation, and as an io.cost.model line.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceFit {
    pub read: Option<OpFit>,
    pub write: Option<OpFit>,
}

impl DeviceFit {
    pub fn from_classes(classes: &[ClassSample]) -> DeviceFit {
        let op = |write: bool| {
            let v: Vec<ClassSample> = classes
                .iter()
                .filter(|c| c.write == write)
                .copied()
                .collect();
            fit_op(&v)
        };
        DeviceFit {
            read: op(false),
            write: op(true),
        }
    }

    /// The fitted parameters (0 where unknown or free).
    pub fn model(&self) -> LinearModel {
        let r = self.read.map(|f| f.params()).unwrap_or_default();
        let w = self.write.map(|f| f.params()).unwrap_or_default();
        LinearModel {
            rbps: r.0,
            rseqiops: r.1,
            rrandiops: r.2,
            wbps: w.0,
            wseqiops: w.1,
            wrandiops: w.2,
        }
    }

    /// (Σ fitted − Σ measured) / Σ measured of one class.
    pub fn error(&self, c: &ClassSample) -> Option<f64> {
        let f = if c.write { self.write } else { self.read }?;
        ratio_error(f.predict(c)?, c.device_ns as f64)
    }
}
