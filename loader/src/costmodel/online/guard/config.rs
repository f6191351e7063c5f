//! What the guard is configured with: its step, hysteresis and periods.

#[derive(Clone, Debug, PartialEq)]
pub struct GuardConfig {
    /// Largest factor by which one change moves a parameter.
    pub max_step: f64,
    /// Relative difference between fit and model below which nothing moves.
    pub hysteresis: f64,
    /// Periods a change is watched before it is kept.
    pub judge_periods: u32,
    /// Worst SLO ratio (observed / target) worse by more than this fraction
    /// after a change, and above 1 (a miss): the change is rolled back.
    pub worse_by: f64,
    /// Periods without changes after a rollback.
    pub cooldown_periods: u32,
    /// Most periods in a row a due step waits for the QoS search to stop
    /// raising vrate.
    pub climb_wait_periods: u32,
}

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            max_step: 2.0,
            hysteresis: 0.10,
            judge_periods: 2,
            worse_by: 0.2,
            cooldown_periods: 10,
            climb_wait_periods: 6,
        }
    }
}

impl GuardConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.max_step.is_nan() || self.max_step <= 1.0 || self.max_step > 10.0 {
            return Err(format!(
                "model max step {} must be a factor above 1 and at most 10",
                self.max_step
            ));
        }
        if self.hysteresis.is_nan() || self.hysteresis < 0.0 || self.hysteresis >= 1.0 {
            return Err(format!(
                "model hysteresis {} outside [0, 1)",
                self.hysteresis
            ));
        }
        if self.judge_periods == 0 {
            return Err("a model change must be judged over at least 1 period".into());
        }
        Ok(())
    }
}
