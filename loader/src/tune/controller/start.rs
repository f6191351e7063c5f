//! The search's start: the first period, measured with iocost as the
//! tuner found it, picks the first pin; the period after it is judged on
//! its later part too.

use super::control::{round2, Controller, FIRST_SHARE, FLOOR_ROOM, KNEE_SHARE};
use super::decision::{Action, Verdict};
use super::measurement::{Measurement, SloSample, LATE_AFTER_SECONDS};

impl Controller {
    /// The first judged period, with iocost as the tuner found it (off, or
    /// a QoS configured before). The device's completed cost rate is
    /// `found`, whose knee bounds the climb, where the SLOs were missed
    /// there (the start: `FIRST_SHARE` of it), or held with the device
    /// saturated and iocost not the limit, off or admitting more (the
    /// start: the knee). Held with iocost the limit, or the load lighter
    /// than the device: that rate up by the headroom left. Else (the
    /// protected cgroup held in iocost's throttle, or nothing charged) at
    /// `start`.
    pub(super) fn start_from_observation(
        &mut self,
        m: &Measurement,
        worst: f64,
        throttled: bool,
    ) -> Verdict {
        self.observing = false;
        let c = &self.cfg;
        let found = 100.0 * m.cost_rate;
        let head = format!(
            "with iocost as found the SLO was at {:.0}% of target, the device completing {found:.1}% of the cost model's capacity",
            worst * 100.0
        );
        // Met on a saturated device iocost did not limit: its own pace.
        // Started above it (x1.09), m-47 at 8000/s from iocost off missed
        // at once, and the climb to 87 % missed again: nothing but a miss
        // bounded it (issue 56). A lighter load's rate is not the device's
        // pace: as below.
        let unlimited = m.admitted.filter(|&a| found < a * (1.0 - c.resolution));
        let paced = worst <= 1.0 && found > 0.0 && m.device_saturated;
        if let (true, Some(a)) = (paced, unlimited) {
            self.found = Some(found);
            self.v = round2((found * KNEE_SHARE).clamp(c.vrate_min, c.vrate_max));
            let by = match a.is_finite() {
                true => format!("iocost admitting {a:.1}%"),
                false => "iocost off".to_string(),
            };
            return (
                Action::Start,
                self.v,
                format!(
                    "{head}: met, {by}, the device saturated: start at the knee, {:.0}% of that, and climb no further",
                    KNEE_SHARE * 100.0
                ),
            );
        }
        // Met with iocost the limit: what the device did, up by the
        // headroom left; on a model the user set, from where it says the
        // device is loaded `FIRST_SHARE` (`start_on_declared`).
        if worst <= 1.0 && found > 0.0 {
            let f = self.headroom_factor(worst);
            let (v, how) = match m.model_declared && found < KNEE_SHARE * 100.0 {
                true => self.start_on_declared(found * f, worst),
                false => (
                    found * f,
                    format!("start there, up x{f:.2} for the headroom"),
                ),
            };
            let c = &self.cfg;
            self.v = round2(v.clamp(c.vrate_min, c.vrate_max));
            // What the QoS held back comes all at once: m-47's 50 reads/s
            // reader, held at the tightest QoS, sent 275 reads in the next
            // period and missed at 119-156 % (issue 56).
            self.draining = self.v > round2(found);
            return (Action::Start, self.v, format!("{head}: met, {how}"));
        }
        if worst <= 1.0 || throttled || found <= 0.0 {
            let why = match (worst <= 1.0, throttled) {
                (true, _) => "met, the model charging nothing",
                (false, true) => "missed in iocost's throttle",
                (false, false) => "missed, the model charging nothing",
            };
            return (
                Action::Start,
                self.v,
                format!("{head}: {why}, start at {}%", self.v),
            );
        }
        if found < c.vrate_max {
            // The first miss: nothing is known yet.
            self.misses = vec![round2(found)];
        }
        self.draining = true;
        self.found = Some(found);
        self.v = round2((found * FIRST_SHARE).clamp(c.vrate_min, c.vrate_max));
        let floor = match found * FIRST_SHARE < FLOOR_ROOM * c.vrate_min {
            true => format!(
                " (within {FLOOR_ROOM}x of --vrate-min {}%: the cost model in force is too optimistic for this device to leave the search room below; with --model it is scaled to the device, else profile it: iowarden profile)",
                c.vrate_min
            ),
            false => String::new(),
        };
        (
            Action::Start,
            self.v,
            format!(
                "{head}: missed, start at {:.0}% of that{floor}",
                FIRST_SHARE * 100.0
            ),
        )
    }

    /// Met with iocost the limit on a model the user set (ctrl=user),
    /// below its knee: its capacity is the device's pace (`found`, 100 %)
    /// until a period measures one, so the climb stops at its knee
    /// (`KNEE_SHARE`), and, the SLO using at most half its aim, the start
    /// is where it loads the device `FIRST_SHARE`, if above `headroom`
    /// (the rate found up by the headroom). From the tightest fixed QoS
    /// (vrate 20 % on the caps' model), m-47 climbed from 25 % in steps of
    /// x1.10-1.24 and converged after 61-117 s, past a tip at 101-112 %
    /// at three of four points (issue 56).
    fn start_on_declared(&mut self, headroom: f64, worst: f64) -> (f64, String) {
        self.found = Some(100.0);
        self.declared = true;
        let aim = 1.0 - self.cfg.margin;
        let light = FIRST_SHARE * 100.0;
        let climb = format!(
            "the climb to at most {:.0}% of the capacity of the cost model the user set (ctrl=user)",
            KNEE_SHARE * 100.0
        );
        match worst <= aim / 2.0 && light > headroom {
            true => (
                light,
                format!(
                    "the SLO using at most half its aim: start at {light:.0}% of that capacity, where a queue's waits double, and {climb}"
                ),
            ),
            false => (
                headroom,
                format!("start there, up for the headroom ({headroom:.2}%), and {climb}"),
            ),
        }
    }

    /// The period after the first pin (`draining`), or after a pin written
    /// with the settling step, missed, but its later part met every SLO on
    /// samples enough to judge: the miss is the queue built before the
    /// first pin draining, or the step's hold, and the pin is held a
    /// period. Lowered x0.7 instead, m-47's write point (2000 reads and
    /// 700 writes a second) missed there at 137 % of the target, and the
    /// climb back to the pin took 30 s (converged at 66 s); at 500/s a
    /// decrease from 44 % that iocost did not follow within 1 s took the
    /// settling step, the reader was held 1.1 ms on average, and the miss
    /// lowered v twice more, to 20 %, each period missed (issue 56).
    pub(super) fn hold_if_later_part_met(
        &self,
        from: f64,
        worst: f64,
        m: &Measurement,
        draining: bool,
    ) -> Option<Verdict> {
        let late = |s: &SloSample| s.effective() / s.target_seconds;
        let judged = m
            .late_slos
            .iter()
            .all(|s| s.samples >= self.cfg.min_samples);
        let late_worst = m.late_slos.iter().map(late).fold(0.0, f64::max);
        if worst <= 1.0 || !judged || late_worst > 1.0 {
            return None;
        }
        let (after, cause) = match draining {
            true => (
                "the first pin",
                "what queued or was held before the pin draining",
            ),
            false => (
                "a pin iocost reached only through the settling step",
                "the step's hold on every cgroup",
            ),
        };
        Some((
            Action::Hold,
            from,
            format!(
                "SLO missed ({:.0}% of target) in the period after {after}, met after its first {LATE_AFTER_SECONDS} s ({:.0}%): {cause}; held at the pin",
                worst * 100.0,
                late_worst * 100.0
            ),
        ))
    }
}
