//! iocost's linear device cost model (paper §3.2, block/blk-iocost.c):
//! the coefficients the BPF side charges with, derived from io.cost.model
//! parameters exactly as the kernel's calc_lcoefs does, and the online
//! refit of those parameters from measured device time. Pure arithmetic.
//!
//! The model: cost = base[op][seq|rand] + per_byte[op] × bytes, with
//! per_byte = 1 s / bps and base = 1 s / iops − per_byte × 4 KiB.
//!
//! The refit is latency-based: it fits each request's device time (issue to
//! completion) against its size. At queue depth 1 that is the device time a
//! request occupies; at higher depths requests overlap, each one's device
//! time includes waiting behind the others inside the device, and the
//! fitted iops/bps come out lower than the device's throughput (the
//! kernel's profiles measure random IOPS at QD64). Read the fitted model as
//! what a request costs in latency, not in capacity.

use std::fmt;

/// iocost's virtual time: 2^37 per second (VTIME_PER_SEC).
pub const VTIME_PER_SEC: u64 = 1 << 37;
/// The model's page (IOC_PAGE_SIZE).
pub const PAGE_SIZE: u64 = 4096;
/// Size classes: <= 4 KiB, 8 KiB, ..., >= 1 MiB (IOW_COST_SIZES).
pub const SIZES: usize = 9;
/// Fewest samples a class needs to take part in a fit.
pub const MIN_CLASS_IOS: u64 = 8;

/// The six parameters of an io.cost.model line (0 = that term is free, as
/// in the kernel).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinearModel {
    pub rbps: u64,
    pub rseqiops: u64,
    pub rrandiops: u64,
    pub wbps: u64,
    pub wseqiops: u64,
    pub wrandiops: u64,
}

/// blk-iocost.c autop[AUTOP_HDD]: what the kernel assumes for a rotational disk.
pub const AUTOP_HDD: LinearModel = LinearModel {
    rbps: 174019176,
    rseqiops: 41708,
    rrandiops: 370,
    wbps: 178075866,
    wseqiops: 42705,
    wrandiops: 378,
};

/// blk-iocost.c autop[AUTOP_SSD_DFL]: its starting point for other devices.
pub const AUTOP_SSD_DFL: LinearModel = LinearModel {
    rbps: 488636629,
    rseqiops: 8932,
    rrandiops: 8518,
    wbps: 427891549,
    wseqiops: 28755,
    wrandiops: 21940,
};

/// The model of devices without their own: `--cost-model`, else the SSD default.
pub fn default_model(flag: Option<LinearModel>) -> LinearModel {
    flag.unwrap_or(AUTOP_SSD_DFL)
}

/// A device number, `MAJ:MIN`.
fn is_devnum(tok: &str) -> bool {
    tok.split_once(':').is_some_and(|(a, b)| {
        [a, b]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
    })
}

/// The six parameters, in the order the kernel prints them.
use crate::knobs::cost_model::COEFS as KEYS;

impl LinearModel {
    fn values(&self) -> [u64; 6] {
        [
            self.rbps,
            self.rseqiops,
            self.rrandiops,
            self.wbps,
            self.wseqiops,
            self.wrandiops,
        ]
    }

    fn from_values(v: [u64; 6]) -> LinearModel {
        LinearModel {
            rbps: v[0],
            rseqiops: v[1],
            rrandiops: v[2],
            wbps: v[3],
            wseqiops: v[4],
            wrandiops: v[5],
        }
    }

    /// `--cost-model`'s `key=value` pairs: keys not given keep their value
    /// in `base`; `ctrl=` and `model=linear` are skipped; unknown keys, a
    /// token that is not key=value, an empty model and a `MAJ:MIN` (the
    /// flag applies to every traced device) are refused.
    pub fn parse_over(base: LinearModel, s: &str) -> Result<LinearModel, String> {
        if s.trim().is_empty() {
            return Err(
                "cost model is empty: give key=value pairs, e.g. 'rbps=2000000000 rrandiops=400000'"
                    .into(),
            );
        }
        if let Some(dev) = s.split_whitespace().next().filter(|t| is_devnum(t)) {
            return Err(format!(
                "cost model: '{dev}': --cost-model applies to every traced device and takes no MAJ:MIN (use --device to trace one device)"
            ));
        }
        Self::parse(base, s, true)
    }

    /// A line of io.cost.model (`MAJ:MIN key=value...`): keys newer kernels
    /// may add are ignored, anything else that is not key=value refused.
    pub fn parse_kernel_line(s: &str) -> Result<LinearModel, String> {
        let rest = match s.split_whitespace().next() {
            Some(dev) if is_devnum(dev) => s.trim_start()[dev.len()..].to_string(),
            _ => s.to_string(),
        };
        Self::parse(LinearModel::default(), &rest, false)
    }

    fn parse(base: LinearModel, s: &str, strict: bool) -> Result<LinearModel, String> {
        let mut v = base.values();
        for tok in s.split_whitespace() {
            let Some((k, val)) = tok.split_once('=') else {
                return Err(format!("cost model: '{tok}' is not key=value"));
            };
            match k {
                "ctrl" => {}
                "model" if val == "linear" => {}
                "model" => return Err(format!("cost model: model={val} (only linear)")),
                _ => {
                    let Some(i) = KEYS.iter().position(|&n| n == k) else {
                        if strict {
                            return Err(format!("cost model: unknown key '{k}'"));
                        }
                        continue;
                    };
                    v[i] = val
                        .parse()
                        .map_err(|_| format!("cost model: {k}={val} is not a number"))?;
                }
            }
        }
        Ok(LinearModel::from_values(v))
    }

    /// The coefficients blk-iocost.c's ioc_refresh_lcoefs derives, in its
    /// LCOEF order (rpage, rseqio, rrandio, wpage, wseqio, wrandio), vtime
    /// units: what the BPF side charges.
    pub fn lcoefs(&self) -> [u64; 6] {
        let r = calc_lcoefs(self.rbps, self.rseqiops, self.rrandiops);
        let w = calc_lcoefs(self.wbps, self.wseqiops, self.wrandiops);
        [r.0, r.1, r.2, w.0, w.1, w.2]
    }

    /// The model's parameters as `io.cost.model` writes them.
    pub fn line(&self, devnum: &str) -> String {
        let kv: Vec<String> = KEYS
            .iter()
            .zip(self.values())
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{devnum} ctrl=user model=linear {}", kv.join(" "))
    }
}

impl fmt::Display for LinearModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (k, v)) in KEYS.iter().zip(self.values()).enumerate() {
            write!(f, "{}{k}={v}", if i > 0 { " " } else { "" })?;
        }
        Ok(())
    }
}

/// DIV64_U64_ROUND_UP with the kernel's u64 wrap-around.
fn div_round_up(a: u64, b: u64) -> u64 {
    a.wrapping_add(b).wrapping_sub(1) / b
}

/// blk-iocost.c calc_lcoefs: (page, seqio, randio) in vtime.
pub fn calc_lcoefs(bps: u64, seqiops: u64, randiops: u64) -> (u64, u64, u64) {
    let mut page = 0;
    if bps != 0 {
        let bps_pages = div_round_up(bps, PAGE_SIZE);
        page = if bps_pages != 0 {
            div_round_up(VTIME_PER_SEC, bps_pages)
        } else {
            1
        };
    }
    let base = |iops: u64| {
        if iops == 0 {
            return 0;
        }
        let v = div_round_up(VTIME_PER_SEC, iops);
        v.saturating_sub(page)
    };
    (page, base(seqiops), base(randiops))
}

/// Cost in vtime of one request as the BPF side charges it (the kernel's
/// calc_vtime_cost_builtin for a whole request).
pub fn request_cost(lcoefs: &[u64; 6], write: bool, random: bool, bytes: u64) -> u64 {
    let o = if write { 3 } else { 0 };
    let pages = (bytes / PAGE_SIZE).max(1);
    lcoefs[o + 1 + random as usize] + pages * lcoefs[o]
}

/// Size class of a request of `bytes` (as the BPF side computes it).
pub fn size_class(bytes: u64) -> usize {
    let log2 = 63 - bytes.max(1).leading_zeros() as usize;
    log2.saturating_sub(12).min(SIZES - 1)
}

/// Lower bound of a size class in bytes (class 0 holds everything below 8 KiB).
pub fn size_class_bytes(class: usize) -> u64 {
    PAGE_SIZE << class
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lcoefs_match_the_kernels_arithmetic() {
        // calc_lcoefs on autop[AUTOP_SSD_DFL], worked out independently
        // (python3, integer ceilings): rbps rounds up to 119297 pages/s.
        assert_eq!(
            AUTOP_SSD_DFL.lcoefs(),
            [
                1152074,            // ceil(2^37 / 119297)
                15387255 - 1152074, // ceil(2^37 / 8932) - rpage
                16135121 - 1152074, // ceil(2^37 / 8518) - rpage
                1315634,            // ceil(2^37 / ceil(427891549 / 4096) = 104466)
                4779655 - 1315634,  // ceil(2^37 / 28755) - wpage
                6264310 - 1315634,  // ceil(2^37 / 21940) - wpage
            ]
        );
        // A 4 KiB request costs 1 / iops: page + base.
        let c = AUTOP_HDD.lcoefs();
        assert_eq!(c[0] + c[2], VTIME_PER_SEC.div_ceil(370));
        // Zero terms are free; iops slower than the page cost clamp to 0;
        // bps too large to round up wraps to 0 pages and costs 1 (the kernel's fix).
        assert_eq!(calc_lcoefs(0, 0, 0), (0, 0, 0));
        assert_eq!(calc_lcoefs(4096, 1_000_000, 0).1, 0);
        assert_eq!(calc_lcoefs(u64::MAX - 10, 0, 0).0, 1);
    }

    #[test]
    fn parses_flag_and_kernel_lines() {
        let m = LinearModel::parse_over(
            AUTOP_SSD_DFL,
            "ctrl=auto model=linear rbps=1 rseqiops=2 rrandiops=3 wbps=4 wseqiops=5 wrandiops=6",
        )
        .unwrap();
        assert_eq!(
            m.to_string(),
            "rbps=1 rseqiops=2 rrandiops=3 wbps=4 wseqiops=5 wrandiops=6"
        );
        let m = LinearModel::parse_over(AUTOP_SSD_DFL, "rrandiops=100").unwrap();
        assert_eq!(m.rrandiops, 100);
        assert_eq!(m.rbps, AUTOP_SSD_DFL.rbps);
        assert!(LinearModel::parse_over(AUTOP_HDD, "rbps=x").is_err());
        assert!(LinearModel::parse_over(AUTOP_HDD, "dbps=1").is_err());
        let k = LinearModel::parse_kernel_line("ctrl=auto model=linear rbps=9 dbps=1").unwrap();
        assert_eq!((k.rbps, k.wbps), (9, 0));
        assert!(LinearModel::parse_over(AUTOP_HDD, "model=quadratic").is_err());
        assert_eq!(m.line("7:3"), format!("7:3 ctrl=user model=linear {m}"));
        let k = LinearModel::parse_kernel_line(&m.line("259:0")).unwrap();
        assert_eq!(k, m);
    }

    #[test]
    fn what_the_flag_would_silently_have_taken_is_refused() {
        let err = |s: &str| LinearModel::parse_over(AUTOP_SSD_DFL, s).unwrap_err();
        assert_eq!(err("rbps:5000"), "cost model: 'rbps:5000' is not key=value");
        assert_eq!(err("rbps=1 wbps"), "cost model: 'wbps' is not key=value");
        assert!(err("").starts_with("cost model is empty"));
        assert!(err("  ").starts_with("cost model is empty"));
        assert!(err("8:0 rbps=1").contains("'8:0': --cost-model applies to every traced device"));
    }

    #[test]
    fn a_kernel_line_that_does_not_parse_is_an_error() {
        assert!(LinearModel::parse_kernel_line("259:0 ctrl=auto model=linear rbps:9").is_err());
        assert!(LinearModel::parse_kernel_line("259:0 model=quadratic").is_err());
        assert!(LinearModel::parse_kernel_line("259:0 rbps=x").is_err());
        // The device number leads the line only.
        assert!(LinearModel::parse_kernel_line("rbps=1 259:0").is_err());
    }

    #[test]
    fn size_classes() {
        assert_eq!(size_class(512), 0);
        assert_eq!(size_class(4096), 0);
        assert_eq!(size_class(8191), 0);
        assert_eq!(size_class(8192), 1);
        assert_eq!(size_class(65536), 4);
        assert_eq!(size_class(1 << 20), 8);
        assert_eq!(size_class(16 << 20), 8);
        assert_eq!(size_class_bytes(4), 65536);
    }

    /// Samples a known model generates exactly: base + per_byte × size.
    fn synth(
        write: bool,
        random: bool,
        size: u64,
        ios: u64,
        base: f64,
        per_byte: f64,
    ) -> ClassSample {
        ClassSample {
            write,
            random,
            size: size_class(size),
            ios,
            bytes: size * ios,
            device_ns: ((base + per_byte * size as f64) * ios as f64).round() as u64,
            cost: 0,
        }
    }

    #[test]
    fn refit_recovers_a_known_model() {
        // Reads: 20 us seq, 90 us random base, 1 GB/s (1 ns/B); writes: 30/40 us, 0.5 GB/s.
        let mut v = Vec::new();
        for size in [4096u64, 16384, 65536, 262144] {
            v.push(synth(false, false, size, 1000, 20_000.0, 1.0));
            v.push(synth(false, true, size, 333, 90_000.0, 1.0));
            v.push(synth(true, false, size, 500, 30_000.0, 2.0));
            v.push(synth(true, true, size, 77, 40_000.0, 2.0));
        }
        let f = DeviceFit::from_classes(&v);
        let r = f.read.unwrap();
        assert!((r.seq_ns.unwrap() - 20_000.0).abs() < 1e-3, "{r:?}");
        assert!((r.rand_ns.unwrap() - 90_000.0).abs() < 1e-3, "{r:?}");
        assert!((r.per_byte_ns.unwrap() - 1.0).abs() < 1e-9, "{r:?}");
        let m = f.model();
        assert_eq!(m.rbps, 1_000_000_000);
        // 1 / (base + 4096 ns)
        assert_eq!(m.rseqiops, (1e9f64 / 24_096.0).round() as u64);
        assert_eq!(m.rrandiops, (1e9f64 / 94_096.0).round() as u64);
        assert_eq!(m.wbps, 500_000_000);
        assert_eq!(m.wrandiops, (1e9f64 / 48_192.0).round() as u64);
        for c in &v {
            assert!(f.error(c).unwrap().abs() < 1e-6, "{c:?}");
        }
    }

    #[test]
    fn refit_only_fits_what_the_samples_identify() {
        // Random reads of one size: base only, no slope, nothing for seq.
        let v = [synth(false, true, 4096, 100, 50_000.0, 0.0)];
        let r = fit_op(&v).unwrap();
        assert_eq!(r.seq_ns, None);
        assert_eq!(r.per_byte_ns, None);
        assert!((r.rand_ns.unwrap() - 50_000.0).abs() < 1e-6);
        assert_eq!(r.params(), (0, 0, 20_000));
        // Seq at one size and random at another: three unknowns, two means.
        let v = [
            synth(false, true, 4096, 100, 50_000.0, 1.0),
            synth(false, false, 65536, 100, 10_000.0, 1.0),
        ];
        assert_eq!(fit_op(&v).unwrap().per_byte_ns, None);
        // Too few samples: nothing.
        assert_eq!(fit_op(&[synth(false, true, 4096, 3, 1.0, 0.0)]), None);
    }

    #[test]
    fn refit_never_goes_negative() {
        // Larger requests measured faster than small ones (a cache): the
        // unconstrained slope is negative; the constrained fit holds it at 0.
        let v = [
            synth(false, true, 4096, 100, 80_000.0, 0.0),
            synth(false, true, 65536, 100, 40_000.0, 0.0),
        ];
        let r = fit_op(&v).unwrap();
        assert_eq!(r.per_byte_ns, Some(0.0));
        assert!((r.rand_ns.unwrap() - 60_000.0).abs() < 1e-6, "{r:?}");
        assert_eq!(r.params().0, 0, "a free byte term is bps=0");
    }

    #[test]
    fn configured_model_error() {
        let lc = AUTOP_SSD_DFL.lcoefs();
        let cost = request_cost(&lc, false, true, 4096);
        assert_eq!(cost, VTIME_PER_SEC.div_ceil(8518));
        let c = ClassSample {
            ios: 10,
            bytes: 40960,
            device_ns: 10 * 58_700,
            cost: 10 * cost,
            random: true,
            ..Default::default()
        };
        // 1/8518 s = 117.4 us charged for 58.7 us measured: +100 %.
        assert!((c.error().unwrap() - 1.0).abs() < 0.001, "{:?}", c.error());
        assert_eq!(ClassSample::default().error(), None);
    }
}
