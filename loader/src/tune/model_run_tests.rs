//! Unit tests of model_run.rs: the start's decision, the logged windows.

use super::*;
use crate::costmodel::online::solve::Estimator;

/// A saturated window of 2 s on a device capped at 500 requests/s and
/// 16 MiB/s (m-47's 500/s point): `small` 4 KiB and `large` 128 KiB
/// random reads, taking max(requests / 500, bytes / 16 MiB) each.
fn capped_window(small: f64, large: f64) -> Window {
    let bytes = small * 4096.0 + large * 131072.0;
    let mut w = Window {
        seconds: 2.0,
        mean_inflight: 32.0,
        ..Default::default()
    };
    w.x[0] = bytes / 4096.0;
    w.x[2] = small + large;
    w.bytes[2] = bytes;
    w
}

/// The start fits the terms the windows observed with iocost off
/// determine (a 4 KiB read 2 ms, a 128 KiB one 7.8 ms: rrandiops 500,
/// rbps 21.8 MB/s, the line through both) and scales the rest; vrate
/// follows so that no window's mix is admitted more than before; the
/// few reads counted as sequential go with the random ones. Without a
/// determined term, every rate is scaled and vrate by the inverse.
#[test]
fn the_start_fits_what_the_observed_windows_determine() {
    let mut est = Estimator::new(FitConfig::default());
    for (small, large) in [(1000.0, 0.0), (0.0, 256.0), (500.0, 128.0), (1000.0, 0.0)] {
        assert!(est.push(capped_window(small, large)));
    }
    // A few of the reads iocost counts as sequential, at a cost the
    // windows' noise gives them: counted as random reads.
    let mut w = capped_window(990.0, 0.0);
    w.x[1] = 10.0;
    w.bytes[1] = 40960.0;
    w.seconds += 0.05;
    assert!(est.push(w));
    let fit = est.start_fit(START_WINDOWS, START_MAX_RSE);
    let d = start_model(AUTOP_SSD_DFL, 0.05, &fit);
    assert_eq!(d.action, ModelAction::Scale);
    assert!(
        (d.to.rrandiops as f64 / 500.0 - 1.0).abs() < 0.01,
        "{:?}",
        d.to
    );
    assert!(
        (d.to.rbps as f64 / (4096.0 / 0.1875e-3) - 1.0).abs() < 0.01,
        "{:?}",
        d.to
    );
    assert_eq!(d.to.wbps, (AUTOP_SSD_DFL.wbps as f64 * 0.05).round() as u64);
    assert_eq!(d.to.wrandiops, 1097);
    let charged = cost_of(&fit.work, &d.to);
    assert!((charged - 10.0).abs() < 0.1, "{charged}");
    // No window's mix is admitted more than under the pin: at the new
    // vrate each costs at least what it did, and the dearest-before one
    // exactly that.
    let admitted: Vec<f64> = fit
        .window_work
        .iter()
        .map(|w| d.vrate_factor * cost_of(w, &AUTOP_SSD_DFL) / cost_of(w, &d.to))
        .collect();
    assert!(admitted.iter().all(|&a| a <= 1.0 + 1e-9), "{admitted:?}");
    assert!(admitted.iter().any(|&a| a > 1.0 - 1e-9), "{admitted:?}");
    assert!(d.vrate_factor * cost_of(&fit.work, &AUTOP_SSD_DFL) < 10.0);
    assert_eq!(
        fit.params[1].reason,
        "10 samples, 223 needed: counted as rrandiops"
    );
    assert_eq!(
        d.to.rseqiops,
        (AUTOP_SSD_DFL.rseqiops as f64 * 0.05).round() as u64
    );
    assert!(
        d.reason
            .contains("fitted from the 5 saturated windows observed"),
        "{}",
        d.reason
    );

    let d = start_model(AUTOP_SSD_DFL, 0.05, &est.fit());
    assert_eq!(d.to.rrandiops, 426);
    assert_eq!(d.vrate_factor, 20.0);
    assert!(
        d.reason
            .contains("none fitted from the 5 saturated windows"),
        "{}",
        d.reason
    );
}

#[test]
fn a_logged_window_reads_back_as_itself() {
    let w = Window {
        seconds: 1.25,
        mean_inflight: 9.5,
        busy_seconds: Some(1.248),
        x: [256.0, 10.0, 1500.0, 0.0, 0.0, 300.0],
        bytes: [0.0, 40960.0, 6144000.0, 0.0, 0.0, 1228800.0],
    };
    let line = window_line(&w, true);
    assert_eq!(window_from_line(&line), Some((w.clone(), true)));
    let text = serde_json::from_str(&line.to_string()).unwrap();
    assert_eq!(window_from_line(&text), Some((w, true)));
    assert_eq!(window_from_line(&json!({"model_action": "hold"})), None);
}

/// The device's cumulative reading at `at` s: 500 random 4 KiB reads a
/// second at 32 in flight, busy throughout.
fn reading_at(at: f64) -> Snapshot {
    let device = DeviceRef {
        name: "nvme0n1".into(),
        major: 259,
        minor: 0,
    };
    let reads = (at * 500.0) as u64;
    Snapshot {
        taken_at_unix_seconds: at,
        cost_models: vec![iowarden_exporters::DeviceCostModel {
            device: device.clone(),
            classes: vec![CostClass {
                op: iowarden_exporters::Op::Read,
                random: true,
                size_bytes: 4096,
                ios: reads,
                bytes: reads * 4096,
                device_seconds: at * 32.0,
                ..Default::default()
            }],
            ..Default::default()
        }],
        kernel_diskstats: vec![iowarden_exporters::KernelDiskStats {
            device,
            busy_ms: (at * 1000.0) as u64,
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn windows_are_half_as_long_while_the_device_is_observed_as_found() {
    let mut ml = ModelLoop {
        device: reading_at(0.0).cost_models[0].device.clone(),
        model_path: PathBuf::new(),
        window: Duration::from_secs(1),
        estimator: Estimator::new(FitConfig::default()),
        guard: Guard::new(GuardConfig::default()),
        current: AUTOP_SSD_DFL,
        prev: None,
        fit: Fit::default(),
        decisions: BTreeMap::new(),
        last: None,
    };
    // Polls every 0.5 s: 3 s as found, then 2 s under the tuner.
    for i in 0..=10 {
        ml.observe(&reading_at(i as f64 * 0.5), i <= 6).unwrap();
    }
    let fit = ml.estimator.fit();
    assert_eq!((fit.windows, fit.unsaturated), (8, 0), "{fit:#?}");
    let seconds: Vec<f64> = fit.window_work.iter().map(|w| w[2] / 500.0).collect();
    assert_eq!(seconds, [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 1.0, 1.0]);
}
