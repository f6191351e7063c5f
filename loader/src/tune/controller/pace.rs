//! The device's pace as found (`found`): the cost rate it completed with
//! iocost as found where the SLOs were missed there, or where it was
//! saturated and iocost not the limit; else, met with iocost the limit on
//! a model the user set, that model's capacity. Its knee bounds the climb.

use super::control::{Controller, KNEE_SHARE};
use super::decision::{Action, Verdict};

impl Controller {
    /// `KNEE_SHARE` of the device's pace as found: no step up, a probe's
    /// included, goes past it (at 2000 requests/s a probe from the knee
    /// tipped the device at 1161 % of the target, and the queue missed
    /// again where it had held).
    pub(super) fn knee(&self) -> Option<f64> {
        self.found.map(|found| found * KNEE_SHARE)
    }

    /// The knee, where `from` is within one resolution step of it: no step
    /// up is left.
    pub(super) fn knee_within_a_step(&self, from: f64) -> Option<f64> {
        self.knee()
            .filter(|&k| from * (1.0 + self.cfg.resolution) > k)
    }

    /// What `found` is, for reasons: a rate measured, or the capacity of
    /// the model the user set.
    pub(super) fn pace_words(&self) -> String {
        let found = self.found.unwrap_or(f64::NAN);
        match self.declared {
            true => format!("{found:.2}%, the capacity of the cost model the user set"),
            false => format!("the {found:.2}% the device completed with iocost as found"),
        }
    }

    /// Met within one resolution step of the knee: no step up is left, so
    /// the search is done (m-47 at 2000/s from the kernel's default QoS
    /// reached 18.92 %, under the knee at 19.36 %, at 45 s, and converged
    /// at 55 s, after two periods within the margin and two with slack).
    pub(super) fn converge_at_knee(&mut self, from: f64, worst: f64, knee: f64) -> Verdict {
        self.converged = true;
        self.probe_base = None;
        (
            Action::Converged,
            from,
            format!(
                "converged: SLO met ({:.0}% of target) within {:.0}% of at most {:.0}% of {} ({knee:.2}%)",
                worst * 100.0,
                self.cfg.resolution * 100.0,
                KNEE_SHARE * 100.0,
                self.pace_words()
            ),
        )
    }
}
