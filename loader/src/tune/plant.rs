//! A simulated plant for the controller's unit tests (the real one, iocost on
//! an NVMe device, runs in the guest: tests/vmtest/guest/t-45-tune.sh).
//!
//! A device of capacity C (cost units/s) behind iocost whose model claims M
//! units/s at vrate 100%: with a saturating best-effort hog, iocost admits
//! A = v% × M, the device runs at ρ = A / C, and the protected cgroup's p99
//! grows like an M/M/1 queue's, base / (1 − ρ) (unbounded once ρ ≥ 1).

use super::controller::{Measurement, SloSample};

#[derive(Clone, Debug)]
pub struct Plant {
    pub capacity_units_per_second: f64,
    pub model_units_per_second: f64,
    /// Unloaded p99 of the protected cgroup.
    pub base_p99_seconds: f64,
    pub slo_target: f64,
    /// The protected cgroup's I/Os per period.
    pub lc_samples: u64,
    pub bytes_per_unit: f64,
    /// Relative noise on the measured p99 (uniform ±noise).
    pub noise: f64,
    /// The protected cgroup's own demand: it gets 90% of iocost's budget
    /// (weight 10:1 against the hog) and waits in iocost's throttle for the
    /// rest, 10 ms per unit of overload.
    pub lc_demand_units_per_second: f64,
    /// The hog's device cost per unit the model charges, phase by phase
    /// (empty: 1): a model right for one request size and wrong for
    /// another, as m-47's hog cycling 4 KiB and 128 KiB reads.
    pub phase_cost: Vec<f64>,
    /// How long each phase lasts, in periods (m-47: 4 s in 3 s periods).
    pub phase_periods: f64,
    /// The protected reader is QD1: its I/Os per period fall as its
    /// latency grows (lc_samples at the unloaded p99).
    pub qd1: bool,
    /// Periods run so far.
    pub t: f64,
    pub rng: u64,
}

impl Default for Plant {
    fn default() -> Self {
        Plant {
            capacity_units_per_second: 10_000.0,
            model_units_per_second: 20_000.0,
            base_p99_seconds: 0.0003,
            slo_target: 0.002,
            lc_samples: 3000,
            bytes_per_unit: 32768.0,
            noise: 0.0,
            lc_demand_units_per_second: 0.0,
            phase_cost: Vec::new(),
            phase_periods: 1.0,
            qd1: false,
            t: 0.0,
            rng: 0x9e37_79b9_7f4a_7c15,
        }
    }
}

impl Plant {
    /// A plant with random capacity, model error, base latency and target.
    pub fn random(seed: u64) -> Plant {
        let mut p = Plant {
            rng: seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1,
            noise: 0.1,
            ..Plant::default()
        };
        p.capacity_units_per_second = 2_000.0 + 40_000.0 * p.uniform();
        p.model_units_per_second = p.capacity_units_per_second * (0.3 + 4.0 * p.uniform());
        p.base_p99_seconds = 0.0001 + 0.002 * p.uniform();
        p.slo_target = p.base_p99_seconds * (1.1 + 10.0 * p.uniform());
        p
    }

    fn uniform(&mut self) -> f64 {
        // xorshift64
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 11) as f64 / (1u64 << 53) as f64
    }

    fn p99_at_cost(&self, vrate: f64, cost: f64) -> f64 {
        let rho =
            vrate / 100.0 * self.model_units_per_second * cost / self.capacity_units_per_second;
        // A QD1 reader behind a QD32 hog waits for at most the hog's queue.
        let most = if self.qd1 {
            33.0 * self.base_p99_seconds
        } else {
            1.0
        };
        if rho >= 0.999 {
            most
        } else {
            (self.base_p99_seconds / (1.0 - rho)).min(most)
        }
    }

    /// The period's p99: the worst of the hog's phases it overlaps (one
    /// second of a costly phase is more than 1 % of a period's I/Os).
    fn p99(&self, vrate: f64) -> f64 {
        let first = (self.t / self.phase_periods).floor() as usize;
        let last = ((self.t + 1.0) / self.phase_periods).ceil() as usize;
        (first..last.max(first + 1))
            .map(|i| self.p99_at_cost(vrate, self.cost_of_phase(i)))
            .fold(0.0, f64::max)
    }

    /// The highest vrate whose noiseless p99 meets `target`.
    pub fn max_vrate_meeting(&self, target: f64) -> f64 {
        let rho = 1.0 - self.base_p99_seconds / target;
        let cost = self.phase_cost.iter().copied().fold(1.0_f64, f64::max);
        rho * self.capacity_units_per_second / (self.model_units_per_second * cost) * 100.0
    }

    fn throttle(&self, vrate: f64) -> f64 {
        let share = 0.9 * vrate / 100.0 * self.model_units_per_second;
        if self.lc_demand_units_per_second <= share {
            0.0
        } else {
            (self.lc_demand_units_per_second / share - 1.0) * 0.01
        }
    }

    /// Phase `i`'s device cost per unit the model charges (1 without
    /// phases).
    fn cost_of_phase(&self, i: usize) -> f64 {
        match self.phase_cost.len() {
            0 => 1.0,
            n => self.phase_cost[i % n],
        }
    }

    /// `vrate` f64::INFINITY: iocost off.
    fn measure(&self, vrate: f64, p99: f64) -> Measurement {
        let admitted =
            (vrate / 100.0 * self.model_units_per_second).min(self.capacity_units_per_second);
        let completed = (vrate / 100.0 * self.model_units_per_second).min(
            self.capacity_units_per_second
                / self.cost_of_phase((self.t / self.phase_periods).floor() as usize),
        );
        Measurement {
            slos: vec![SloSample {
                name: "/lc read-p99".into(),
                target_seconds: self.slo_target,
                observed_seconds: Some(p99),
                samples: if self.qd1 {
                    ((self.lc_samples as f64) * self.base_p99_seconds / p99).max(1.0) as u64
                } else {
                    self.lc_samples
                },
                throttle_seconds: self.throttle(vrate),
                held_in_observed: false,
                throttle_tail_seconds: None,
                own_need: None,
            }],
            throughput_bytes_per_second: admitted * self.bytes_per_unit,
            iops: admitted,
            cost_rate: completed / self.model_units_per_second,
            admitted: Some(vrate),
            device_saturated: admitted >= self.capacity_units_per_second,
            model_declared: false,
            late_slos: Vec::new(),
        }
    }

    pub fn period(&mut self, vrate: f64) -> Measurement {
        let jitter = 1.0 + self.noise * (2.0 * self.uniform() - 1.0);
        let m = self.measure(vrate, self.p99(vrate) * jitter);
        self.t += 1.0;
        m
    }

    pub fn period_noiseless(&self, vrate: f64) -> Measurement {
        self.measure(vrate, self.p99(vrate))
    }
}
