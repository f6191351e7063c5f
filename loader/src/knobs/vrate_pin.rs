//! Pinning iocost's vrate so that the pin holds whatever the load.
//!
//! blk-iocost moves vrate into the QoS [min, max] only in periods with a
//! busy signal (ioc_adjust_base_vrate returns at busy_level 0), by 4 % a
//! period. A device nobody saturates, with nobody throttled at the current
//! vrate, gives none: in the guest, vrate pinned at 20 % after a run under
//! the kernel's automatic QoS never took hold (the hog kept 245 MB/s, as
//! with iocost off). So a pin is written in two steps. First with 1 µs
//! latency targets at the 100th percentile, which every completion misses:
//! every period with one is busy (and iocost's period drops to its 1 ms
//! minimum) until io.stat's cost.vrate is the pin. Then with the device's
//! own targets, and with them its period, back. Inside [min, max] = pin,
//! vrate stays: busy periods clamp it there and idle ones leave it.
//!
//! Where iocost runs already (a vrate in io.stat) and the device's targets
//! are known, a new pin is first written with those targets alone: with
//! someone throttled, iocost's own periods clamp vrate to it, and only
//! where that does not reach it in `DIRECT_TIMEOUT` comes the first step.
//! That step holds every cgroup back while it lasts (in m-47 at 500
//! requests/s, 55 of the 59 tuner periods that began with a new pin
//! missed a 50 reads/s reader's p99 SLO, with a 2.2 ms mean hold in
//! iocost's throttle, where 4 of 145 that began without one did; written
//! directly, the climb met at every step, issue 56).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::cost_qos::{self, pinned_vrate_line, CostQos, LatencyTargets};
use super::devnum::DevNum;
use super::stat;
use super::writer::Writer;

/// How long the first step may wait for the kernel's vrate to reach the
/// pin. At 4 % per 1 ms period, 10000 % comes down to 1 % in ~0.23 s of
/// periods with I/O.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(10);

/// How long a pin written with the device's own targets may take to be
/// reached before the first step: iocost clamps vrate into [min, max] by
/// 4 % a period in busy periods and in ones with someone throttled, and
/// its period is twice the larger latency target (50 ms at the guest's
/// 25 ms: x1.3 up in 7 periods, x0.5 down in 18).
const DIRECT_TIMEOUT: Duration = Duration::from_secs(1);

/// One device's pinned vrate.
pub struct VratePin {
    dev: DevNum,
    qos_path: PathBuf,
    stat_path: PathBuf,
    /// The device's latency targets, written back in the second step.
    targets: Option<LatencyTargets>,
    /// The vrate pinned last, and whether the kernel's vrate had reached it.
    pinned: Option<(f64, bool)>,
}

/// What a pin did: the line it left and the kernel's vrate then.
pub struct PinOutcome {
    pub line: String,
    pub kernel_vrate: Option<f64>,
    pub held: bool,
    /// The pin, %.
    pub pin: f64,
    /// Whether the kernel's vrate changed while the pin settled: periods
    /// with I/O ran, so iocost moved it, only not to the pin.
    pub moved: bool,
    /// The first step was written: every cgroup was held while it lasted.
    pub settled: bool,
}

impl PinOutcome {
    /// Where the kernel's vrate was left, and why, for a pin that did not
    /// take hold.
    pub fn shortfall(&self) -> String {
        let seen = self
            .kernel_vrate
            .map_or("unknown".into(), |v| format!("{v:.2}%"));
        match self.kernel_vrate {
            // 5.10's iocost ignores the QoS min in a period whose requests
            // waited over 5 % of it to be allocated (gone by 6.1): the
            // first step's busy periods then take vrate below the pin.
            Some(k) if self.moved && k < self.pin => format!(
                "the kernel's vrate went to {seen}, below the pin of {:.2}%: this kernel lowers vrate \
                 below io.cost.qos's min while requests wait to be allocated (Linux 5.10; not 6.1)",
                self.pin
            ),
            _ if self.moved => format!(
                "the kernel's vrate is {seen}, still moving towards the pin of {:.2}%",
                self.pin
            ),
            _ => format!(
                "the kernel's vrate is still {seen}: no I/O completed while the pin settled"
            ),
        }
    }
}

impl VratePin {
    /// `root` is the cgroup v2 root (io.cost.qos, io.stat). Reads the
    /// device's latency targets as they are now.
    pub fn new(root: &Path, dev: DevNum) -> VratePin {
        let qos_path = root.join("io.cost.qos");
        let targets = current_targets(&qos_path, dev);
        VratePin {
            dev,
            stat_path: root.join("io.stat"),
            qos_path,
            targets,
            pinned: None,
        }
    }

    /// Pins vrate at `v` %, both steps, through the journaling writer.
    pub fn set(&mut self, writer: &mut Writer, v: f64) -> Result<PinOutcome> {
        let devnum = self.dev.to_string();
        if writer.config().dry_run {
            let line = pinned_vrate_line(&devnum, v, self.targets);
            writer.set(&self.qos_path, &line)?;
            return Ok(PinOutcome {
                line,
                kernel_vrate: None,
                held: true,
                pin: v,
                moved: false,
                settled: false,
            });
        }
        if self.targets.is_none() {
            // A device iocost never ran on: enabling it gives it targets.
            writer.set(&self.qos_path, &pinned_vrate_line(&devnum, v, None))?;
            self.targets = current_targets(&self.qos_path, self.dev);
        }
        let before = self.kernel_vrate();
        let (mut kernel_vrate, mut moved) = (before, false);
        let line = pinned_vrate_line(&devnum, v, self.targets);
        let mut written = false;
        if !reached(kernel_vrate, v) && before.is_some() && self.targets.is_some() {
            writer.set(&self.qos_path, &line)?;
            written = true;
            (kernel_vrate, moved) = self.wait_for(v, before, DIRECT_TIMEOUT);
        }
        let settled = !reached(kernel_vrate, v);
        if settled {
            writer.set(&self.qos_path, &cost_qos::settling_vrate_line(&devnum, v))?;
            (kernel_vrate, moved) = self.wait_for(v, before, SETTLE_TIMEOUT);
            written = false;
        }
        if !written {
            writer.set(&self.qos_path, &line)?;
        }
        let held = reached(kernel_vrate, v);
        self.pinned = Some((v, held));
        Ok(PinOutcome {
            line,
            kernel_vrate,
            held,
            pin: v,
            moved,
            settled,
        })
    }

    /// Pins again what did not take hold (no I/O while it settled).
    pub fn retry(&mut self, writer: &mut Writer) -> Result<Option<PinOutcome>> {
        match self.pinned {
            Some((v, false)) if !reached(self.kernel_vrate(), v) => self.set(writer, v).map(Some),
            Some((v, false)) => {
                self.pinned = Some((v, true));
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    /// The kernel's vrate, %, from the root's io.stat.
    pub fn kernel_vrate(&self) -> Option<f64> {
        let text = std::fs::read_to_string(&self.stat_path).ok()?;
        let line = stat::parse_all(&text)
            .ok()?
            .into_iter()
            .find(|s| s.dev == self.dev)?;
        line.cost_vrate.map(|f| f.0 as f64 / 100.0)
    }

    /// The vrate (%) iocost admits at on the device now: infinite where
    /// iocost is off there (no line in io.cost.qos, or enable=0), else the
    /// kernel's (None where io.stat has none, or a file does not read).
    pub fn admitted(&self) -> Option<f64> {
        let on = device_qos(&self.qos_path, self.dev)?.is_some_and(|q| q.enable == Some(true));
        match on {
            true => self.kernel_vrate(),
            false => Some(f64::INFINITY),
        }
    }

    /// Waits for the kernel's vrate to reach `v`; returns the last one read
    /// and whether it ever differed from `before`.
    fn wait_for(&self, v: f64, before: Option<f64>, timeout: Duration) -> (Option<f64>, bool) {
        let start = Instant::now();
        let mut moved = false;
        loop {
            let now = self.kernel_vrate();
            moved |= now != before;
            if reached(now, v) || start.elapsed() >= timeout {
                return (now, moved);
            }
            std::thread::sleep(POLL);
        }
    }
}

/// io.stat prints vrate with two decimals; the kernel's clamp lands on the
/// bound exactly.
fn reached(kernel: Option<f64>, v: f64) -> bool {
    kernel.is_some_and(|k| (k - v).abs() <= 0.011)
}

/// The device's rlat/wlat in io.cost.qos, unless the file has no line for
/// it (iocost never enabled there) or holds the first step's.
fn current_targets(qos_path: &Path, dev: DevNum) -> Option<LatencyTargets> {
    let q = device_qos(qos_path, dev)??;
    let t = LatencyTargets {
        rlat: q.rlat?,
        wlat: q.wlat?,
    };
    (t != cost_qos::SETTLING_TARGETS).then_some(t)
}

/// The device's line in io.cost.qos: None where the file does not read or
/// parse, Some(None) where it has no line for the device.
fn device_qos(qos_path: &Path, dev: DevNum) -> Option<Option<CostQos>> {
    let text = std::fs::read_to_string(qos_path).ok()?;
    let lines = cost_qos::parse_all(&text).ok()?;
    Some(lines.into_iter().find(|q| q.dev == dev))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_that_did_not_hold_says_why_from_what_the_kernel_did() {
        let out = |kernel_vrate, moved| PinOutcome {
            line: String::new(),
            kernel_vrate,
            held: false,
            pin: 50.0,
            moved,
            settled: true,
        };
        assert!(out(Some(100.0), false)
            .shortfall()
            .contains("still 100.00%: no I/O completed"));
        // 5.10 in the guest: vrate under the pin after the settling step.
        let below = out(Some(37.5), true).shortfall();
        assert!(
            below.contains("went to 37.50%, below the pin of 50.00%"),
            "{below}"
        );
        assert!(!below.contains("no I/O"), "{below}");
        assert!(out(Some(80.0), true)
            .shortfall()
            .contains("80.00%, still moving towards the pin of 50.00%"));
    }

    #[test]
    fn a_pin_is_reached_at_the_printed_two_decimals_only() {
        assert!(reached(Some(20.0), 20.0));
        assert!(reached(Some(42.51), 42.5));
        assert!(!reached(Some(20.8), 20.0));
        assert!(!reached(None, 20.0));
    }

    #[test]
    fn the_targets_come_from_the_devices_line_but_never_the_settling_ones() {
        let dir = std::env::temp_dir().join(format!("iow-pin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("io.cost.qos");
        let dev = DevNum::new(259, 0);
        std::fs::write(&p, "8:0 enable=0 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 max=10000.00\n259:0 enable=1 ctrl=user rpct=95.00 rlat=5000 wpct=95.00 wlat=9000 min=50.00 max=150.00\n").unwrap();
        assert_eq!(
            current_targets(&p, dev),
            Some(LatencyTargets {
                rlat: 5000,
                wlat: 9000
            })
        );
        std::fs::write(
            &p,
            "259:0 enable=1 ctrl=user rpct=100.00 rlat=1 wpct=100.00 wlat=1 min=20.00 max=20.00\n",
        )
        .unwrap();
        assert_eq!(current_targets(&p, dev), None);
        std::fs::write(
            &p,
            "8:0 enable=1 ctrl=user rpct=100.00 rlat=1 wpct=100.00 wlat=1 min=20.00 max=20.00\n",
        )
        .unwrap();
        assert_eq!(current_targets(&p, dev), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_vrate_admitted_is_infinite_with_iocost_off_and_unknown_without_its_stat() {
        let dir = std::env::temp_dir().join(format!("iow-admitted-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (qos, stat) = (dir.join("io.cost.qos"), dir.join("io.stat"));
        let pin = |dev| VratePin::new(&dir, dev);
        let on = "259:0 enable=1 ctrl=auto rpct=95.00 rlat=25000 wpct=95.00 wlat=25000 min=50.00 max=150.00\n";
        std::fs::write(&qos, on).unwrap();
        std::fs::write(&stat, "259:0 rbytes=0 cost.vrate=61.20 cost.usage=0\n").unwrap();
        assert_eq!(pin(DevNum::new(259, 0)).admitted(), Some(61.2));
        assert_eq!(pin(DevNum::new(8, 0)).admitted(), Some(f64::INFINITY));
        std::fs::write(&qos, on.replace("enable=1", "enable=0")).unwrap();
        assert_eq!(pin(DevNum::new(259, 0)).admitted(), Some(f64::INFINITY));
        std::fs::write(&qos, "").unwrap();
        assert_eq!(pin(DevNum::new(259, 0)).admitted(), Some(f64::INFINITY));
        std::fs::write(&qos, on).unwrap();
        std::fs::write(&stat, "259:0 rbytes=0\n").unwrap();
        assert_eq!(pin(DevNum::new(259, 0)).admitted(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
