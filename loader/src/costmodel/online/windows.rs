//! The online io.cost.model estimator, from device occupancy. Pure logic.
//!
//! iocost's model says what share of the device's capacity a request takes:
//! a 4 KiB random read costs 1/rrandiops seconds of a saturated device, and
//! each page 1/(bps/4096) seconds. So over a window in which the device was
//! saturated (always busy, requests queued inside it), the window's length
//! is the sum of what its requests cost:
//!
//!   T_w = Σ_ops (seq_ios × seq_cost + rand_ios × rand_cost + pages × page_cost)
//!
//! Windows whose mix of reads, writes, patterns and sizes differs identify
//! the six per-unit costs by non-negative least squares; each cost's
//! standard error comes from the residuals (σ² (XᵀX)⁻¹). This is what
//! iocost_coef_gen measures offline one pattern at a time (a saturating
//! run's throughput is 1 / cost), fitted here from whatever mix production
//! runs. Per-request latency is not used: at queue depth > 1 it includes
//! waiting behind other requests and says nothing about capacity.
//!
//! A window counts as saturated when the mean number of requests in the
//! device (Σ issue→completion time / window, Little's law) is at least
//! `saturation_depth` (deeper than the device's internal parallelism) and
//! the kernel counted the device busy (io_ticks) for nearly all of it.

use iowarden_exporters::{CostClass, Op};

use crate::costmodel::model::{lcoefs, LinearModel};
use crate::costmodel::units::{PAGE_SIZE, VTIME_PER_SEC};

/// Columns, in blk-iocost's LCOEF order and io.cost.model's key order:
/// rpage/rbps, rseq/rseqiops, rrand/rrandiops, wpage/wbps, wseq, wrand.
pub const PARAMS: usize = 6;
/// The page columns (per-byte terms).
const PAGE_COLS: [usize; 2] = [0, 3];

fn is_page(col: usize) -> bool {
    PAGE_COLS.contains(&col)
}

/// One measurement window of one device.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Window {
    pub seconds: f64,
    /// Mean requests in the device over the window.
    pub mean_inflight: f64,
    /// Time the kernel accounted the device busy in it (/proc/diskstats
    /// io_ticks); None where the kernel did not list the device.
    pub busy_seconds: Option<f64>,
    /// Requests per base column, pages per page column.
    pub x: [f64; PARAMS],
    /// Bytes per base column (for the mean request size).
    pub bytes: [f64; PARAMS],
}

impl Window {
    /// The window between two cumulative reads of a device's cost classes,
    /// `busy_seconds` of it with a request in flight.
    pub fn between(
        prev: &[CostClass],
        cur: &[CostClass],
        seconds: f64,
        busy_seconds: Option<f64>,
    ) -> Window {
        let mut w = Window {
            seconds,
            busy_seconds,
            ..Default::default()
        };
        let mut busy = 0.0;
        for c in cur {
            let p = prev
                .iter()
                .find(|p| p.op == c.op && p.random == c.random && p.size_bytes == c.size_bytes);
            let ios = c.ios.saturating_sub(p.map_or(0, |p| p.ios)) as f64;
            let bytes = c.bytes.saturating_sub(p.map_or(0, |p| p.bytes)) as f64;
            busy += (c.device_seconds - p.map_or(0.0, |p| p.device_seconds)).max(0.0);
            let o = if c.op == Op::Write { 3 } else { 0 };
            let base = o + 1 + c.random as usize;
            w.x[base] += ios;
            w.bytes[base] += bytes;
            // The kernel charges at least one page per request.
            w.x[o] += (bytes / PAGE_SIZE as f64).max(ios);
        }
        if seconds > 0.0 {
            w.mean_inflight = busy / seconds;
        }
        w
    }

    /// Saturated over its whole length: work done, requests queued inside
    /// the device (a mean depth of at least `depth`), and the device idle
    /// for no more than MAX_IDLE_SHARE of it. The mean depth alone does not
    /// tell a device at 32 half the time from one at 16 throughout: at
    /// m-47's 500/s point the hog's switch between its phases left the
    /// device idle for about 0.4 s of a 1.5 s window at mean depth 13.7-16.4
    /// (500 reads where the device does 750), and that one window put the
    /// start fit's rbps at 16-22 % error (1.6-3.3 % without it).
    pub fn saturated(&self, depth: f64) -> bool {
        let work: f64 = self.x.iter().sum();
        let idle = self.busy_seconds.map_or(0.0, |b| self.seconds - b);
        self.seconds > 0.0
            && work > 0.0
            && self.mean_inflight >= depth
            && idle <= MAX_IDLE_SHARE * self.seconds
    }
}

/// The share of a window the device may idle in and the window still count
/// as saturated: the idle time makes the window that much longer than its
/// requests' cost, the running fit's error bound (`--model-max-error`'s
/// default); io_ticks counts in jiffies (4 ms at HZ=250, 0.4 % of 1 s).
const MAX_IDLE_SHARE: f64 = 0.05;

#[derive(Clone, Debug, PartialEq)]
pub struct FitConfig {
    /// Mean requests in the device at which a window counts as saturated.
    pub saturation_depth: f64,
    /// Fewest saturated windows for any fit.
    pub min_windows: usize,
    /// Fewest requests (pages for bps) a parameter needs in saturated windows.
    pub min_samples: u64,
    /// Largest relative standard error of a parameter that counts as determined.
    pub max_rse: f64,
    /// Saturated windows kept (the oldest are dropped: the fit follows the device).
    pub capacity: usize,
}

impl Default for FitConfig {
    fn default() -> Self {
        FitConfig {
            saturation_depth: 8.0,
            min_windows: 6,
            min_samples: 2000,
            max_rse: 0.05,
            capacity: 240,
        }
    }
}

impl FitConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.saturation_depth.is_nan() || self.saturation_depth < 1.0 {
            return Err(format!(
                "saturation depth {} must be at least 1 request",
                self.saturation_depth
            ));
        }
        if self.min_windows < 2 || self.capacity < self.min_windows {
            return Err(format!(
                "need at least 2 windows for a fit, and room for them (min {} of {})",
                self.min_windows, self.capacity
            ));
        }
        if self.max_rse.is_nan() || self.max_rse <= 0.0 || self.max_rse >= 1.0 {
            return Err(format!(
                "max relative error {} outside (0, 1)",
                self.max_rse
            ));
        }
        Ok(())
    }
}

/// One fitted parameter.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParamFit {
    /// In io.cost.model's units (bytes/s or IOPS); None: not determined.
    pub value: Option<u64>,
    /// The estimate even when not determined (0: not in the fit).
    pub estimate: u64,
    /// Relative standard error of the estimate.
    pub rse: Option<f64>,
    /// Requests (pages for bps) in the saturated windows.
    pub samples: u64,
    /// Why it is not determined ("" when it is).
    pub reason: String,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fit {
    pub params: [ParamFit; PARAMS],
    /// Saturated windows used / windows seen but not saturated.
    pub windows: usize,
    pub unsaturated: u64,
    /// Saturated windows left out as stalls (the device did clearly less
    /// than the others show it can).
    pub stalled: usize,
    /// RMS of (T − predicted) / T over the windows used.
    pub error: Option<f64>,
    /// Total work of the saturated windows, per column.
    pub work: [f64; PARAMS],
    /// Each saturated window's work, per column (for rescaling vrate).
    pub window_work: Vec<[f64; PARAMS]>,
}

impl Fit {
    pub fn determined(&self) -> usize {
        self.params.iter().filter(|p| p.value.is_some()).count()
    }

    /// `current` with every determined parameter replaced by the fit's.
    pub fn model_over(&self, current: LinearModel) -> LinearModel {
        let mut v = current.values();
        for (slot, p) in v.iter_mut().zip(&self.params) {
            if let Some(x) = p.value {
                *slot = x;
            }
        }
        LinearModel::from_values(v)
    }

    /// The factor vrate follows a model change from `from` to `to` by: the
    /// smallest ratio of new to old cost over the windows' mixes, so that
    /// iocost admits no more of any mix the device served than before (the
    /// budget scales by it, each mix's cost by its own ratio, at least it).
    /// With the ratio of the windows' total work instead, a step that made
    /// pages dearer (rbps 122 -> 61 MB/s, vrate x1.25 at m-47's 3,000/s
    /// point) admitted 25 % more of the 4 KiB phase of a hog cycling 4 KiB
    /// and 128 KiB reads, whose cost had not changed (a 4 KiB request
    /// costs 1/rrandiops whatever the page cost), and the protected reader
    /// missed at 275 % of its target until the step was rolled back (twice
    /// in two runs). 1 without any work.
    pub fn vrate_factor(&self, from: &LinearModel, to: &LinearModel) -> f64 {
        let ratio = |work: &[f64; PARAMS]| {
            let old = cost_of(work, from);
            (old > 0.0).then(|| cost_of(work, to) / old)
        };
        self.window_work
            .iter()
            .filter_map(ratio)
            .reduce(f64::min)
            .or_else(|| ratio(&self.work))
            .unwrap_or(1.0)
    }
}

/// Seconds of device time per unit of each column under `m` (0: free term):
/// per page, and per request of the base columns as blk-iocost charges them.
pub fn unit_costs(m: &LinearModel) -> [f64; PARAMS] {
    let lc = lcoefs(m);
    lc.map(|c| c as f64 / VTIME_PER_SEC as f64)
}

/// Cost of `work` (per column: requests or pages) under `m`, seconds.
pub fn cost_of(work: &[f64; PARAMS], m: &LinearModel) -> f64 {
    work.iter().zip(unit_costs(m)).map(|(w, u)| w * u).sum()
}

/// io.cost.model's value of a column from per-unit costs (seconds): bps
/// from the page cost, iops from the cost of a 4 KiB request (base + page).
pub fn param_value(col: usize, theta: &[f64; PARAMS]) -> Option<u64> {
    let page = theta[if col < 3 { 0 } else { 3 }];
    let v = if is_page(col) {
        (page > 0.0).then(|| PAGE_SIZE as f64 / page)?
    } else {
        let c = theta[col] + page;
        (c > 0.0).then(|| 1.0 / c)?
    };
    Some(v.round().max(1.0) as u64)
}

pub(crate) fn page_col(col: usize) -> usize {
    if col < 3 {
        0
    } else {
        3
    }
}

pub(crate) fn is_page_col(col: usize) -> bool {
    is_page(col)
}
