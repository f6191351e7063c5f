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
}

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
}
