use super::*;

#[test]
fn lcoefs_match_the_kernels_arithmetic() {
    // calc_lcoefs on autop[AUTOP_SSD_DFL], worked out independently
    // (python3, integer ceilings): rbps rounds up to 119297 pages/s.
    assert_eq!(
        lcoefs(&AUTOP_SSD_DFL),
        [
            1152074,            // ceil(2^37 / 119297)
            15387255 - 1152074, // ceil(2^37 / 8932) - rpage
            16135121 - 1152074, // ceil(2^37 / 8518) - rpage
            1315634,            // ceil(2^37 / ceil(427891549 / 4096) = 104466)
            4779655 - 1315634,  // ceil(2^37 / 28755) - wpage
            6264310 - 1315634,  // ceil(2^37 / 21940) - wpage
        ]
    );
    // A 4 KiB request costs 1 / iops: page + base.
    let c = lcoefs(&AUTOP_HDD);
    assert_eq!(c[0] + c[2], VTIME_PER_SEC.div_ceil(370));
    // Zero terms are free; iops slower than the page cost clamp to 0;
    // bps too large to round up wraps to 0 pages and costs 1 (the kernel's fix).
    assert_eq!(calc_lcoefs(0, 0, 0), (0, 0, 0));
    assert_eq!(calc_lcoefs(4096, 1_000_000, 0).1, 0);
    assert_eq!(calc_lcoefs(u64::MAX - 10, 0, 0).0, 1);
}

#[test]
fn parses_flag_and_kernel_lines() {
    let m = parse_over(
        AUTOP_SSD_DFL,
        "ctrl=auto model=linear rbps=1 rseqiops=2 rrandiops=3 wbps=4 wseqiops=5 wrandiops=6",
    )
    .unwrap();
    assert_eq!(
        m.to_string(),
        "rbps=1 rseqiops=2 rrandiops=3 wbps=4 wseqiops=5 wrandiops=6"
    );
    let m = parse_over(AUTOP_SSD_DFL, "rrandiops=100").unwrap();
    assert_eq!(m.rrandiops, 100);
    assert_eq!(m.rbps, AUTOP_SSD_DFL.rbps);
    assert!(parse_over(AUTOP_HDD, "rbps=x").is_err());
    assert!(parse_over(AUTOP_HDD, "dbps=1").is_err());
    let k = parse_kernel_line("ctrl=auto model=linear rbps=9 dbps=1").unwrap();
    assert_eq!((k.rbps, k.wbps), (9, 0));
    assert!(parse_over(AUTOP_HDD, "model=quadratic").is_err());
    assert_eq!(m.line("7:3"), format!("7:3 ctrl=user model=linear {m}"));
    let k = parse_kernel_line(&m.line("259:0")).unwrap();
    assert_eq!(k, m);
}

#[test]
fn what_the_flag_would_silently_have_taken_is_refused() {
    let err = |s: &str| parse_over(AUTOP_SSD_DFL, s).unwrap_err();
    assert_eq!(err("rbps:5000"), "cost model: 'rbps:5000' is not key=value");
    assert_eq!(err("rbps=1 wbps"), "cost model: 'wbps' is not key=value");
    assert!(err("").starts_with("cost model is empty"));
    assert!(err("  ").starts_with("cost model is empty"));
    assert!(err("8:0 rbps=1").contains("'8:0': --cost-model applies to every traced device"));
}

#[test]
fn a_kernel_line_that_does_not_parse_is_an_error() {
    assert!(parse_kernel_line("259:0 ctrl=auto model=linear rbps:9").is_err());
    assert!(parse_kernel_line("259:0 model=quadratic").is_err());
    assert!(parse_kernel_line("259:0 rbps=x").is_err());
    // The device number leads the line only.
    assert!(parse_kernel_line("rbps=1 259:0").is_err());
}

#[test]
fn size_classes() {
    assert_eq!(size_class(512), 0);
    assert_eq!(size_class(4096), 0);
    assert_eq!(size_class(8191), 0);
    assert_eq!(size_class(8192), 1);
    assert_eq!(size_class(65536), 4);
    assert_eq!(size_class(1 << 20), 8);
    assert_eq!(size_class(16 << 20), 8);
    assert_eq!(size_class_bytes(4), 65536);
}

/// Samples a known model generates exactly: base + per_byte × size.
fn synth(write: bool, random: bool, size: u64, ios: u64, base: f64, per_byte: f64) -> ClassSample {
    ClassSample {
        write,
        random,
        size: size_class(size),
        ios,
        bytes: size * ios,
        device_ns: ((base + per_byte * size as f64) * ios as f64).round() as u64,
        cost: 0,
    }
}

#[test]
fn refit_recovers_a_known_model() {
    // Reads: 20 us seq, 90 us random base, 1 GB/s (1 ns/B); writes: 30/40 us, 0.5 GB/s.
    let mut v = Vec::new();
    for size in [4096u64, 16384, 65536, 262144] {
        v.push(synth(false, false, size, 1000, 20_000.0, 1.0));
        v.push(synth(false, true, size, 333, 90_000.0, 1.0));
        v.push(synth(true, false, size, 500, 30_000.0, 2.0));
        v.push(synth(true, true, size, 77, 40_000.0, 2.0));
    }
    let f = DeviceFit::from_classes(&v);
    let r = f.read.unwrap();
    assert!((r.seq_ns.unwrap() - 20_000.0).abs() < 1e-3, "{r:?}");
    assert!((r.rand_ns.unwrap() - 90_000.0).abs() < 1e-3, "{r:?}");
    assert!((r.per_byte_ns.unwrap() - 1.0).abs() < 1e-9, "{r:?}");
    let m = f.model();
    assert_eq!(m.rbps, 1_000_000_000);
    // 1 / (base + 4096 ns)
    assert_eq!(m.rseqiops, (1e9f64 / 24_096.0).round() as u64);
    assert_eq!(m.rrandiops, (1e9f64 / 94_096.0).round() as u64);
    assert_eq!(m.wbps, 500_000_000);
    assert_eq!(m.wrandiops, (1e9f64 / 48_192.0).round() as u64);
    for c in &v {
        assert!(f.error(c).unwrap().abs() < 1e-6, "{c:?}");
    }
}

#[test]
fn refit_only_fits_what_the_samples_identify() {
    // Random reads of one size: base only, no slope, nothing for seq.
    let v = [synth(false, true, 4096, 100, 50_000.0, 0.0)];
    let r = fit_op(&v).unwrap();
    assert_eq!(r.seq_ns, None);
    assert_eq!(r.per_byte_ns, None);
    assert!((r.rand_ns.unwrap() - 50_000.0).abs() < 1e-6);
    assert_eq!(r.params(), (0, 0, 20_000));
    // Seq at one size and random at another: three unknowns, two means.
    let v = [
        synth(false, true, 4096, 100, 50_000.0, 1.0),
        synth(false, false, 65536, 100, 10_000.0, 1.0),
    ];
    assert_eq!(fit_op(&v).unwrap().per_byte_ns, None);
    // Too few samples: nothing.
    assert_eq!(fit_op(&[synth(false, true, 4096, 3, 1.0, 0.0)]), None);
}

#[test]
fn refit_never_goes_negative() {
    // Larger requests measured faster than small ones (a cache): the
    // unconstrained slope is negative; the constrained fit holds it at 0.
    let v = [
        synth(false, true, 4096, 100, 80_000.0, 0.0),
        synth(false, true, 65536, 100, 40_000.0, 0.0),
    ];
    let r = fit_op(&v).unwrap();
    assert_eq!(r.per_byte_ns, Some(0.0));
    assert!((r.rand_ns.unwrap() - 60_000.0).abs() < 1e-6, "{r:?}");
    assert_eq!(r.params().0, 0, "a free byte term is bps=0");
}

#[test]
fn configured_model_error() {
    let lc = lcoefs(&AUTOP_SSD_DFL);
    let cost = request_cost(&lc, false, true, 4096);
    assert_eq!(cost, VTIME_PER_SEC.div_ceil(8518));
    let c = ClassSample {
        ios: 10,
        bytes: 40960,
        device_ns: 10 * 58_700,
        cost: 10 * cost,
        random: true,
        ..Default::default()
    };
    // 1/8518 s = 117.4 us charged for 58.7 us measured: +100 %.
    assert!((c.error().unwrap() - 1.0).abs() < 0.001, "{:?}", c.error());
    assert_eq!(ClassSample::default().error(), None);
}
