//! What the controller is configured with: the vrate bounds and the
//! search's steps, margins and periods.

#[derive(Clone, Debug, PartialEq)]
pub struct ControllerConfig {
    /// vrate bounds in percent; the tuner never writes outside them.
    pub vrate_min: f64,
    pub vrate_max: f64,
    /// First vrate written (with `observe_first`: where the first period
    /// met the SLOs).
    pub start: f64,
    /// Write nothing in the first period: start from what it measured with
    /// iocost as found (`iowarden tune` without --start).
    pub observe_first: bool,
    /// Factor applied on an SLO miss when no lower good value is known.
    pub decrease: f64,
    /// Factor applied on slack when no higher bad value is known.
    pub increase: f64,
    /// Largest change per decision, in percentage points, where one
    /// increase (decrease) factor of vrate is not more.
    pub max_step: f64,
    /// Slack needed to raise v: every observed quantile ≤ target × (1 − margin).
    pub margin: f64,
    /// Converged when (bad − good) ≤ resolution × good.
    pub resolution: f64,
    /// Periods after a miss during which v is not raised.
    pub backoff_periods: u32,
    /// Periods held within the margin that count as converged.
    pub settle_periods: u32,
    /// Periods of slack after convergence before probing upwards again.
    pub reprobe_periods: u32,
    /// A miss where the SLO held before is taken for noise once in this
    /// many periods; another within them acts.
    pub excuse_periods: u32,
    /// Fewer I/Os than this in a period for any SLO: no decision.
    pub min_samples: u64,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            vrate_min: 5.0,
            vrate_max: 100.0,
            start: 100.0,
            observe_first: false,
            decrease: 0.7,
            increase: 1.3,
            max_step: 30.0,
            margin: 0.15,
            resolution: 0.1,
            backoff_periods: 2,
            settle_periods: 3,
            reprobe_periods: 20,
            excuse_periods: 10,
            min_samples: 100,
        }
    }
}

impl ControllerConfig {
    /// Checks the configuration; the message names the offending option.
    pub fn validate(&self) -> Result<(), String> {
        let in_range = |v: f64| (1.0..=10000.0).contains(&v);
        if !(in_range(self.vrate_min) && in_range(self.vrate_max)) {
            return Err(format!(
                "vrate bounds {}..{} outside what io.cost.qos accepts (1 to 10000 percent)",
                self.vrate_min, self.vrate_max
            ));
        }
        if self.vrate_min > self.vrate_max {
            return Err(format!(
                "--vrate-min {} is above --vrate-max {}",
                self.vrate_min, self.vrate_max
            ));
        }
        if !(self.vrate_min..=self.vrate_max).contains(&self.start) {
            return Err(format!(
                "--start {} outside the bounds {}..{}",
                self.start, self.vrate_min, self.vrate_max
            ));
        }
        // clamp() in step() panics on a NaN or negative width.
        if !(self.max_step.is_finite() && self.max_step > 0.0) {
            return Err(format!(
                "--max-step {} must be a positive number of percentage points",
                self.max_step
            ));
        }
        if !(0.0..1.0).contains(&self.margin) {
            return Err(format!("margin {} must be in [0, 1)", self.margin));
        }
        if !(self.decrease > 0.0 && self.decrease < 1.0 && self.increase > 1.0) {
            return Err("decrease must be in (0, 1) and increase above 1".into());
        }
        Ok(())
    }
}
