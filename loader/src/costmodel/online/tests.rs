//! Unit tests of the occupancy estimator on synthetic windows: a device that
//! follows a known linear model exactly (or with noise) is what the fit must
//! recover. The real device is fitted in the guest (t-47-model.sh).

use iowarden_exporters::{CostClass, Op};

use super::solve::{Estimator, START_MAX_RSE, START_WINDOWS};
use super::windows::*;
use crate::costmodel::LinearModel;

/// The guest's emulated NVMe as `iowarden profile` measured it (issue 15).
const DEVICE: LinearModel = LinearModel {
    rbps: 242_668_476,
    rseqiops: 15_062,
    rrandiops: 13_680,
    wbps: 271_738_119,
    wseqiops: 11_880,
    wrandiops: 7_681,
};

/// (write, random, request bytes, share of the window's device time)
type Mix = [(bool, bool, u64, f64)];

/// A saturated window of `seconds` in which the device spends the given
/// shares of its time on each kind of request, as `model` charges them.
fn window(model: &LinearModel, mix: &Mix, seconds: f64, noise: f64) -> Window {
    let u = unit_costs(model);
    let mut w = Window {
        seconds: seconds * (1.0 + noise),
        mean_inflight: 32.0,
        ..Default::default()
    };
    for &(write, random, size, share) in mix {
        let o = if write { 3 } else { 0 };
        let pages = (size / 4096).max(1) as f64;
        let cost = u[o + 1 + random as usize] + pages * u[o];
        let ios = (share * seconds / cost).round();
        w.x[o + 1 + random as usize] += ios;
        w.x[o] += ios * pages;
        w.bytes[o + 1 + random as usize] += ios * size as f64;
    }
    w
}

/// Windows whose mix varies: every pattern alone, and pairs of them.
fn varied_mixes() -> Vec<Vec<(bool, bool, u64, f64)>> {
    let kinds = [
        (false, true, 4096),
        (false, false, 4096),
        (false, false, 1 << 20),
        (true, true, 4096),
        (true, false, 4096),
        (true, false, 1 << 20),
    ];
    let mut v = Vec::new();
    for (i, &(w, r, s)) in kinds.iter().enumerate() {
        v.push(vec![(w, r, s, 1.0)]);
        let (w2, r2, s2) = kinds[(i + 2) % kinds.len()];
        v.push(vec![(w, r, s, 0.3), (w2, r2, s2, 0.7)]);
    }
    v
}

/// Deterministic noise in [-a, a] (xorshift).
fn noise(seed: &mut u64, a: f64) -> f64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    ((*seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * a
}

fn within(got: u64, want: u64, tol: f64) -> bool {
    (got as f64 / want as f64 - 1.0).abs() <= tol
}

#[test]
fn recovers_the_six_parameters_from_varied_saturated_windows() {
    let mut e = Estimator::new(FitConfig::default());
    for m in varied_mixes() {
        assert!(e.push(window(&DEVICE, &m, 1.0, 0.0)));
    }
    let f = e.fit();
    assert_eq!(f.determined(), 6, "{f:#?}");
    let got = f.model_over(LinearModel::default());
    for (g, want) in got.values().iter().zip(DEVICE.values()) {
        // Rounding of the synthetic request counts only.
        assert!(within(*g, want, 0.002), "{got} vs {DEVICE}");
    }
    assert!(f.error.unwrap() < 1e-3, "{:?}", f.error);
}

#[test]
fn noisy_windows_fit_within_their_noise_and_say_how_sure() {
    let mut e = Estimator::new(FitConfig::default());
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..5 {
        for m in varied_mixes() {
            let n = noise(&mut seed, 0.03);
            e.push(window(&DEVICE, &m, 1.0, n));
        }
    }
    let f = e.fit();
    assert_eq!(f.determined(), 6, "{f:#?}");
    for (p, want) in f.params.iter().zip(DEVICE.values()) {
        assert!(within(p.value.unwrap(), want, 0.03), "{p:?} vs {want}");
        let rse = p.rse.unwrap();
        assert!(rse > 0.0 && rse < 0.05, "{p:?}");
    }
    let err = f.error.unwrap();
    assert!(err > 0.005 && err < 0.03, "{err}");
}

#[test]
fn stalled_windows_do_not_drag_the_capacity_down() {
    // A fifth of the windows lose 30-60 % of their work to stalls (the
    // window lasts as long, the device gets less done).
    let mut e = Estimator::new(FitConfig::default());
    let mut seed = 7u64;
    for round in 0..5 {
        for (i, m) in varied_mixes().into_iter().enumerate() {
            let stall = if (i + round) % 5 == 0 {
                0.3 + 0.3 * (noise(&mut seed, 1.0) + 1.0) / 2.0
            } else {
                0.0
            };
            let mut w = window(&DEVICE, &m, 1.0, noise(&mut seed, 0.01));
            w.x.iter_mut()
                .for_each(|v| *v = (*v * (1.0 - stall)).round());
            e.push(w);
        }
    }
    let f = e.fit();
    assert_eq!(f.stalled, 12, "{f:#?}");
    assert_eq!(f.determined(), 6, "{f:#?}");
    for (p, want) in f.params.iter().zip(DEVICE.values()) {
        assert!(within(p.value.unwrap(), want, 0.02), "{p:?} vs {want}");
    }
}

#[test]
fn a_model_four_times_off_does_not_bias_the_fit() {
    // The fit measures the device, whatever model iocost charged with: the
    // windows carry counts and time, not the configured costs.
    let mut e = Estimator::new(FitConfig::default());
    for m in varied_mixes() {
        e.push(window(&DEVICE, &m, 0.5, 0.0));
    }
    let f = e.fit();
    let pessimistic = LinearModel::from_values(DEVICE.values().map(|v| v / 4));
    let m = f.model_over(pessimistic);
    assert!(within(m.rrandiops, DEVICE.rrandiops, 0.002), "{m}");
}

#[test]
fn unsaturated_windows_are_not_used_and_too_few_change_nothing() {
    let mut e = Estimator::new(FitConfig::default());
    let mut w = window(&DEVICE, &[(false, true, 4096, 1.0)], 1.0, 0.0);
    w.mean_inflight = 2.0;
    assert!(!e.push(w));
    for m in varied_mixes().into_iter().take(3) {
        e.push(window(&DEVICE, &m, 1.0, 0.0));
    }
    let f = e.fit();
    assert_eq!(f.determined(), 0);
    assert_eq!((f.windows, f.unsaturated), (3, 1));
    assert!(
        f.params[2]
            .reason
            .starts_with("3 saturated windows, 6 needed"),
        "{f:?}"
    );
    let current = DEVICE;
    assert_eq!(f.model_over(current), current);
}

#[test]
fn what_the_workload_does_not_separate_is_reported_undetermined() {
    // The mix: 4 KiB random reads, 1 MiB sequential reads, 4 KiB
    // random writes, in varying proportions. No 4 KiB sequential reads: the
    // per-byte and per-request costs of reads cannot be told apart; nothing
    // of writes but random 4 KiB.
    let mut e = Estimator::new(FitConfig::default());
    for i in 0..12 {
        let a = 0.1 + 0.07 * i as f64;
        let b = 0.2 + 0.05 * (i % 5) as f64;
        let mix = [
            (false, true, 4096, a * (1.0 - b)),
            (false, false, 1 << 20, 1.0 - a),
            (true, true, 4096, a * b),
        ];
        e.push(window(&DEVICE, &mix, 1.0, 0.0));
    }
    let f = e.fit();
    let p = &f.params;
    assert!(
        within(p[2].value.unwrap(), DEVICE.rrandiops, 0.01),
        "{f:#?}"
    );
    assert!(
        within(p[5].value.unwrap(), DEVICE.wrandiops, 0.01),
        "{f:#?}"
    );
    assert_eq!(p[0].value, None, "{f:#?}");
    assert!(p[0].reason.contains("cannot be told apart"), "{f:#?}");
    assert_eq!(p[1].value, None);
    assert!(p[1].reason.contains("1024 KiB"), "{}", p[1].reason);
    assert!(
        p[3].reason.contains("cannot be told apart from wrandiops"),
        "{f:#?}"
    );
    assert!(p[4].reason.contains("no such requests"), "{f:#?}");
}

#[test]
fn patterns_that_always_come_together_are_not_split() {
    // Random reads and writes in a fixed ratio: only their sum is known.
    let mut e = Estimator::new(FitConfig::default());
    for i in 0..10 {
        let a = 0.2 + 0.06 * i as f64;
        let mix = [
            (false, true, 4096, a * 0.6),
            (true, true, 4096, a * 0.4),
            (false, false, 1 << 20, 1.0 - a),
        ];
        e.push(window(&DEVICE, &mix, 1.0, 0.0));
    }
    let f = e.fit();
    assert_eq!(f.params[2].value, None, "{f:#?}");
    assert_eq!(f.params[5].value, None, "{f:#?}");
    assert!(f.params[5].reason.contains("rrandiops"), "{f:#?}");
}

#[test]
fn few_samples_of_a_class_leave_it_undetermined() {
    let cfg = FitConfig {
        min_samples: 1_000_000,
        ..FitConfig::default()
    };
    let mut e = Estimator::new(cfg);
    for m in varied_mixes() {
        e.push(window(&DEVICE, &m, 1.0, 0.0));
    }
    let f = e.fit();
    assert_eq!(f.determined(), 0);
    assert!(
        f.params[2].reason.contains("1000000 needed"),
        "{:?}",
        f.params[2]
    );
    // The estimate is still there to look at.
    assert!(within(f.params[2].estimate, DEVICE.rrandiops, 0.002));
}

#[test]
fn the_oldest_windows_make_room_for_new_ones() {
    let cfg = FitConfig {
        capacity: 12,
        ..FitConfig::default()
    };
    let mut e = Estimator::new(cfg);
    let old = LinearModel::from_values(DEVICE.values().map(|v| v * 2));
    for m in varied_mixes() {
        e.push(window(&old, &m, 1.0, 0.0));
    }
    for m in varied_mixes() {
        e.push(window(&DEVICE, &m, 1.0, 0.0));
    }
    let f = e.fit();
    assert_eq!(f.windows, 12);
    assert!(
        within(f.params[4].value.unwrap(), DEVICE.wseqiops, 0.002),
        "{f:#?}"
    );
}

fn class(op: Op, random: bool, size: u64, ios: u64, device_seconds: f64) -> CostClass {
    CostClass {
        op,
        random,
        size_bytes: size,
        ios,
        bytes: ios * size,
        device_seconds,
        model_seconds: 0.0,
        error: None,
        fitted_error: None,
    }
}

#[test]
fn a_window_is_the_change_of_the_cost_classes() {
    let prev = [class(Op::Read, true, 4096, 100, 1.0)];
    let cur = [
        class(Op::Read, true, 4096, 1100, 17.0),
        class(Op::Write, false, 1 << 20, 10, 4.0),
    ];
    let w = Window::between(&prev, &cur, 2.0, Some(1.9));
    assert_eq!(w.x, [1000.0, 0.0, 1000.0, 2560.0, 10.0, 0.0]);
    assert_eq!(w.busy_seconds, Some(1.9));
    // (16 + 4) s of device time in 2 s: 10 requests in the device on average.
    assert!((w.mean_inflight - 10.0).abs() < 1e-9);
    assert_eq!(w.bytes[4], 10.0 * 1048576.0);
}

#[test]
fn bad_configurations_are_refused() {
    let bad = |f: FitConfig| f.validate().unwrap_err();
    assert!(bad(FitConfig {
        saturation_depth: 0.5,
        ..FitConfig::default()
    })
    .contains("saturation depth"));
    assert!(bad(FitConfig {
        min_windows: 1,
        ..FitConfig::default()
    })
    .contains("at least 2 windows"));
    assert!(bad(FitConfig {
        max_rse: 1.5,
        ..FitConfig::default()
    })
    .contains("outside (0, 1)"));
    FitConfig::default().validate().unwrap();
}

#[test]
fn a_few_reads_counted_sequential_go_with_the_random_ones() {
    // Random 4 KiB and 128 KiB reads, and in each window five 4 KiB reads
    // that iocost counted as sequential (within 16 MiB of the last) at a
    // random read's cost: 60 of over 10,000 requests, their own column
    // would price them from the windows' noise alone.
    let mut e = Estimator::new(FitConfig::default());
    let mut seed = 7;
    let u = unit_costs(&DEVICE);
    for i in 0..12 {
        let a = 0.15 + 0.06 * i as f64;
        let mut w = window(
            &DEVICE,
            &[(false, true, 4096, a), (false, true, 128 << 10, 1.0 - a)],
            1.0,
            noise(&mut seed, 0.01),
        );
        w.x[1] += 5.0;
        w.x[0] += 5.0;
        w.bytes[1] += 5.0 * 4096.0;
        w.seconds += 5.0 * (u[2] + u[0]);
        e.push(w);
    }
    let f = e.fit();
    assert_eq!(f.params[1].value, None, "{f:#?}");
    assert_eq!(
        f.params[1].reason,
        "60 samples, 2000 needed: counted as rrandiops"
    );
    assert!(
        within(f.params[2].value.unwrap(), DEVICE.rrandiops, 0.03),
        "{f:#?}"
    );
    assert!(
        within(f.params[0].value.unwrap(), DEVICE.rbps, 0.03),
        "{f:#?}"
    );
}

#[test]
fn the_start_counts_samples_against_its_own_error_bound() {
    // Four 1 s windows of random 4 KiB and 128 KiB reads on a device that
    // completes 500 requests/s (m-47's slowest point): about 1,400 random
    // reads, under the running fit's 2,000 but plenty for the start's
    // 15 %, whose counting-noise floor is 2,000 x (5/15)^2 = 223.
    let slow = LinearModel {
        rbps: 21_800_000,
        rrandiops: 500,
        ..DEVICE
    };
    let mut e = Estimator::new(FitConfig::default());
    let mut seed = 11;
    for a in [0.2, 0.8, 0.4, 0.6] {
        let mix = [(false, true, 4096, a), (false, true, 128 << 10, 1.0 - a)];
        assert!(e.push(window(&slow, &mix, 1.0, noise(&mut seed, 0.01))));
    }
    let start = e.start_fit(4, 0.15);
    let reads = start.params[2].samples;
    assert!((1000..2000).contains(&reads), "{start:#?}");
    assert!(
        within(start.params[2].value.unwrap(), 500, 0.05),
        "{start:#?}"
    );
    // Held to the running fit's bound, the start needs its floor too.
    let strict = e.start_fit(4, 0.05);
    assert_eq!(strict.params[2].value, None, "{strict:#?}");
    assert_eq!(
        strict.params[2].reason,
        format!("{reads} samples, 2000 needed")
    );
}

/// m-47's observations with iocost off at its 500 requests/s, 16 MiB/s
/// point (QEMU's throttle), as the guest logged them on 2026-12-06: seconds,
/// busy seconds (io_ticks), mean depth, random and sequential reads, pages.
/// Windows of the hog's 4 KiB phase at QD32, its switch to 128 KiB reads
/// (the device idle in part of it, at a mean depth above 8), and of its
/// 128 KiB phase.
const OBSERVED_AT_500: [[f64; 6]; 5] = [
    [1.04, 1.032, 33.6, 497.0, 35.0, 532.0],
    [1.50, 1.492, 32.9, 698.0, 52.0, 750.0],
    [1.00, 0.968, 22.4, 462.0, 33.0, 495.0],
    [1.00, 0.476, 10.5, 94.0, 6.0, 2332.0],
    [1.00, 1.000, 33.0, 119.0, 13.0, 4100.0],
];

/// An earlier run's, logged before io_ticks was: the busy time given is
/// the switch's 549 reads at the device's 2 ms each, the rest busy
/// throughout.
const OBSERVED_AT_500_BEFORE: [[f64; 6]; 5] = [
    [1.04, 1.04, 33.7, 501.0, 32.0, 533.0],
    [1.50, 1.50, 32.9, 700.0, 51.0, 751.0],
    [1.50, 1.098, 16.4, 515.0, 34.0, 549.0],
    [1.00, 1.00, 23.6, 124.0, 10.0, 3947.0],
    [1.50, 1.50, 33.0, 183.0, 15.0, 6150.0],
];

/// The windows; the log has no bytes per class: a sequential read is given
/// its phase's size (4 KiB, 128 KiB; the switch's mean), the random ones
/// the rest of the pages. `busy`: whether the kernel's busy time is known.
fn observed(rows: &[[f64; 6]], busy: bool) -> Vec<Window> {
    rows.iter()
        .map(
            |&[seconds, busy_seconds, depth, random, sequential, pages]| {
                let pages_per_read = match pages / (random + sequential) {
                    m if m < 1.5 => 1.0,
                    m if m > 30.0 => 32.0,
                    m => m,
                };
                let sequential_bytes = sequential * pages_per_read * 4096.0;
                Window {
                    seconds,
                    busy_seconds: busy.then_some(busy_seconds),
                    mean_inflight: depth,
                    x: [pages, sequential, random, 0.0, 0.0, 0.0],
                    bytes: [
                        0.0,
                        sequential_bytes,
                        pages * 4096.0 - sequential_bytes,
                        0.0,
                        0.0,
                        0.0,
                    ],
                }
            },
        )
        .collect()
}

/// The start's fit over `windows`, and which of them it kept.
fn start_over(windows: Vec<Window>) -> (Fit, Vec<bool>) {
    let mut e = Estimator::new(FitConfig::default());
    let kept = windows.into_iter().map(|w| e.push(w)).collect();
    (e.start_fit(START_WINDOWS, START_MAX_RSE), kept)
}

/// The caps' line: a 4 KiB read 1/500 s, a 128 KiB one 128 KiB at 16 MiB/s
/// (7.8125 ms); through both a page costs (7.8125 - 2) / 31 ms.
const CAPS_LINE_RBPS: u64 = (4096.0 / 0.1875e-3) as u64;

fn on_the_caps_line(f: &Fit) -> bool {
    f.params[2].value.is_some_and(|v| within(v, 500, 0.03))
        && f.params[0]
            .value
            .is_some_and(|v| within(v, CAPS_LINE_RBPS, 0.05))
}

#[test]
fn the_start_leaves_out_a_window_the_device_idled_in() {
    // Idle for half the switch: out, whatever its depth.
    let (f, kept) = start_over(observed(&OBSERVED_AT_500, true));
    assert_eq!(kept, [true, true, true, false, true]);
    assert!(on_the_caps_line(&f) && f.stalled == 0, "{f:#?}");
    // Idle for a quarter of it, at depth 16.4: the residuals of five
    // windows do not single it out, and rbps was at 16 % error.
    let (blind, kept) = start_over(observed(&OBSERVED_AT_500_BEFORE, false));
    assert!(kept.iter().all(|&k| k) && blind.stalled == 0);
    assert_eq!(blind.params[0].value, None, "{blind:#?}");
    let (f, kept) = start_over(observed(&OBSERVED_AT_500_BEFORE, true));
    assert_eq!(kept, [true, true, false, true, true]);
    assert!(on_the_caps_line(&f), "{f:#?}");
}

#[test]
fn a_few_reads_counted_sequential_fold_by_their_size_not_their_share_of_bytes() {
    // The 133 reads counted sequential carry 10.04 % of the random ones'
    // bytes (13 of them in the 128 KiB phase), 16.1 KiB a read on average,
    // within the random ones' 4-124 KiB a window.
    let (f, _) = start_over(observed(&OBSERVED_AT_500, true));
    assert_eq!(
        f.params[1].reason,
        "133 samples, 223 needed: counted as rrandiops"
    );
    // A few 1 MiB reads beside many 4 KiB random ones are a class of their
    // own: left in their column, not priced as random reads.
    let mut e = Estimator::new(FitConfig::default());
    let mut seed = 5;
    for a in [0.9, 0.8, 0.7, 0.9, 0.8, 0.7] {
        let mix = [(false, true, 4096, a), (false, false, 1 << 20, 1.0 - a)];
        assert!(e.push(window(&DEVICE, &mix, 0.1, noise(&mut seed, 0.01))));
    }
    let f = e.fit();
    assert!(
        (1..2000).contains(&f.params[1].samples) && !f.params[1].reason.contains("counted as"),
        "{f:#?}"
    );
}
