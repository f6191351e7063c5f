//! What one period measured: each protected cgroup's SLO sample and the
//! device's.

/// One SLO's measurement over a decision period.
#[derive(Clone, Debug, PartialEq)]
pub struct SloSample {
    /// "cgroup SLO", for reasons.
    pub name: String,
    pub target_seconds: f64,
    /// None when the period had no I/O of the SLO's class.
    pub observed_seconds: Option<f64>,
    pub samples: u64,
    /// Mean time the cgroup's I/Os were held before a request existed:
    /// iowarden's throttle stage where it is measured (then already in
    /// `observed_seconds`, which runs from submission), else iocost's own
    /// count (io.stat cost.wait), which the histograms start after.
    pub throttle_seconds: f64,
    /// `observed_seconds` includes the hold (the throttle stage is measured).
    pub held_in_observed: bool,
    /// The hold's own quantile (the SLO's), where iowarden measures it.
    pub throttle_tail_seconds: Option<f64>,
    /// The vrate (%) at which iocost's budget for the cgroup (its active
    /// hierarchical weight) equals what its own I/O of the period cost:
    /// its cost rate over that weight. None where iocost's account of it
    /// is not traced.
    pub own_need: Option<f64>,
}

/// The share of its budget a protected cgroup's own I/O may use before
/// iocost's hold reaches its tail. A 50 reads/s reader on a 500
/// requests/s device (issue 56), a steady hog of 128 KiB or 4 KiB reads
/// beside it, at fixed vrates: p99 from submission 2.4-3.3 ms at 25-82 %
/// of its budget, 24.5 ms at 123 % (500 reads each, 2026-12-06); the
/// tuner's periods at 84-100 % missed a 5 ms SLO at 300-450 %.
pub const OWN_LOAD: f64 = 0.5;

/// Where the later part of the period after the first pin starts: the
/// queue built with iocost as found drains before it (m-47's hog, 32 reads
/// of 128 KiB: 250 ms at 16 MiB/s, 62 ms at 64 MiB/s).
pub const LATE_AFTER_SECONDS: f64 = 1.0;

/// The share of the effective quantile iocost's mean hold must make up
/// before a miss counts as held (1.3-3.7 ms of 15-24 ms in those misses).
pub const HELD_SHARE: f64 = 0.05;

impl SloSample {
    /// What the application sees: the quantile from submission, or (the
    /// hold not measured) the block-layer quantile plus the mean hold.
    pub fn effective(&self) -> f64 {
        let observed = self.observed_seconds.unwrap_or(0.0);
        match self.held_in_observed {
            true => observed,
            false => observed + self.throttle_seconds,
        }
    }
    /// The miss comes from iocost holding the cgroup back, not the device
    /// queue: the hold is most of the tail. Its own quantile where measured:
    /// the mean says little of a tail (m-47 at 500 requests/s: a 5 ms mean
    /// hold in a 15 ms p99 was taken for queueing, and lowering vrate held
    /// the reader longer, issue 56).
    pub fn throttled(&self) -> bool {
        match self.throttle_tail_seconds {
            Some(tail) if self.held_in_observed => tail > self.effective() / 2.0,
            _ => self.throttle_seconds > self.effective() - self.throttle_seconds,
        }
    }
    /// Held at all: iocost's mean hold is a noticeable part of the quantile.
    pub fn held(&self) -> bool {
        self.throttle_seconds > 0.0 && self.throttle_seconds >= HELD_SHARE * self.effective()
    }
    /// The lowest vrate (%) at which the cgroup's own I/O uses at most
    /// `OWN_LOAD` of its budget.
    pub fn own_floor(&self) -> Option<f64> {
        self.own_need.map(|n| n / OWN_LOAD)
    }
    /// Held at `vrate`, and its own I/O uses more than `OWN_LOAD` of its
    /// budget there: the miss is iocost's, however small the hold's share
    /// of the tail (m-47 at 500 requests/s missed at 300-450 % of the
    /// target with a 2-3 ms mean hold at 85-95 % of the reader's budget,
    /// and lowering vrate held it longer).
    pub fn over_own_budget(&self, vrate: f64) -> bool {
        self.held() && self.own_floor().is_some_and(|f| f > vrate)
    }
}

/// What the controller sees each period.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measurement {
    pub slos: Vec<SloSample>,
    pub throughput_bytes_per_second: f64,
    pub iops: f64,
    /// Seconds of device time per second the cost model in force charged
    /// the device's completed I/O: at vrate v % iocost admits v / 100.
    pub cost_rate: f64,
    /// The vrate (%) iocost admitted at on the device, read at the
    /// period's end (first period only): infinite where iocost is off
    /// there, None where not known.
    pub admitted: Option<f64>,
    /// The device saturated over the period, as the cost-model fitter
    /// counts a window.
    pub device_saturated: bool,
    /// The cost model in force was set by the user (io.cost.model
    /// ctrl=user), read at the period's end (first period only): its
    /// capacity, 100 %, is taken for the device's pace.
    pub model_declared: bool,
    /// The period after the first pin only (else empty): each SLO, in the
    /// order of `slos`, over the period's later part, after the queue built
    /// before the pin drained.
    pub late_slos: Vec<SloSample>,
}

impl Measurement {
    /// The highest own floor of the protected cgroups iocost held this
    /// period: a decrease below it would hold them longer.
    pub fn held_floor(&self) -> Option<f64> {
        self.slos
            .iter()
            .filter(|s| s.held())
            .filter_map(SloSample::own_floor)
            .reduce(f64::max)
    }
}
