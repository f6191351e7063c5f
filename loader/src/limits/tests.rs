use super::*;

fn dev(name: &str, devnum: &str, scheduler: &str, iocost: Option<bool>) -> DeviceFacts {
    DeviceFacts {
        devnum: devnum.into(),
        name: name.into(),
        known_as: name.into(),
        scheduler: scheduler.into(),
        iocost,
        root_writeback: Vec::new(),
    }
}

fn knob(cgroup: &str, knob: &str, devnum: Option<&str>) -> LimitKnob {
    LimitKnob {
        cgroup: cgroup.into(),
        knob: knob.into(),
        devnum: devnum.map(str::to_string),
        value: "x".into(),
    }
}

fn evidence(activity: &[(&str, &str, u64, f64, f64)]) -> Evidence {
    Evidence {
        devices: vec![
            dev("nvme0n1", "259:0", "none", None),
            dev("sda", "8:0", "bfq", Some(false)),
            dev("dm-0", "253:0", "none", Some(true)),
        ],
        activity: activity
            .iter()
            .map(|&(c, d, ios, io_max, held)| {
                let a = Activity {
                    ios,
                    held_io_max_seconds: io_max,
                    held_seconds: held,
                    ..Activity::default()
                };
                ((c.to_string(), d.to_string()), a)
            })
            .collect(),
        io_max_timed: Ok(()),
        cgroup_v1: false,
        dirty_bytes: Default::default(),
    }
}

fn one(k: &LimitKnob, ev: &Evidence) -> LimitVerdict {
    let v = judge(k, ev);
    assert_eq!(v.len(), 1, "{v:?}");
    v.into_iter().next().unwrap()
}

#[test]
fn io_max_that_held_io_is_acting_and_says_how_long() {
    let ev = evidence(&[("/a", "nvme0n1", 1000, 4.0, 4.2)]);
    let v = one(&knob("/a", "io.max", Some("259:0")), &ev);
    assert_eq!(v.state, LimitState::Acting, "{v:?}");
    assert_eq!(v.reason, LimitReason::Held, "{v:?}");
    assert!(v.why.contains("4.000 ms each"), "{}", v.why);
}

#[test]
fn io_max_with_io_and_no_hold_is_idle() {
    let ev = evidence(&[("/a", "nvme0n1", 10, 0.0, 0.0)]);
    let v = one(&knob("/a", "io.max", Some("259:0")), &ev);
    assert_eq!(
        (v.state, v.reason),
        (LimitState::Idle, LimitReason::NoneHeld)
    );
    let v = one(&knob("/a", "io.max", Some("259:0")), &evidence(&[]));
    assert_eq!((v.state, v.reason), (LimitState::Idle, LimitReason::NoIo));
}

#[test]
fn io_max_where_holds_are_not_timed_is_in_effect_with_the_reason() {
    let mut ev = evidence(&[("/a", "nvme0n1", 10, 0.0, 0.0)]);
    ev.io_max_timed = Err("the kernel refuses fexit".into());
    let v = one(&knob("/a", "io.max", Some("259:0")), &ev);
    assert_eq!(v.state, LimitState::InEffect);
    assert_eq!(v.reason, LimitReason::HoldsNotTimed, "{v:?}");
    assert!(v.why.contains("refuses fexit"), "{}", v.why);
}

#[test]
fn a_weight_without_iocost_or_bfq_is_not_in_effect() {
    let ev = evidence(&[("/a", "nvme0n1", 10, 0.0, 0.0)]);
    let v = one(&knob("/a", "io.weight", Some("259:0")), &ev);
    assert_eq!(v.state, LimitState::NotInEffect);
    assert_eq!(v.reason, LimitReason::NoWeightPolicy, "{v:?}");
    assert!(
        v.why.contains("no weight-based policy on nvme0n1"),
        "{}",
        v.why
    );
}

#[test]
fn a_weight_where_iocost_is_configured_but_disabled_says_enable_0() {
    let ev = evidence(&[("/a", "sda", 10, 0.0, 0.0)]);
    let v = one(&knob("/a", "io.weight", Some("8:0")), &ev);
    assert_eq!(v.state, LimitState::NotInEffect);
    assert_eq!(v.reason, LimitReason::IocostDisabled, "{v:?}");
    assert!(v.why.contains("enable=0"), "{}", v.why);
    assert!(v.why.contains("io.bfq.weight"), "bfq is there: {}", v.why);
}

#[test]
fn a_bfq_weight_needs_bfq() {
    let ev = evidence(&[("/a", "nvme0n1", 10, 0.0, 0.0), ("/a", "sda", 10, 0.0, 0.0)]);
    let v = one(&knob("/a", "io.bfq.weight", Some("259:0")), &ev);
    assert_eq!(v.state, LimitState::NotInEffect);
    assert_eq!(v.reason, LimitReason::NotBfq, "{v:?}");
    assert!(v.why.contains("scheduler is none"), "{}", v.why);
    assert_eq!(
        one(&knob("/a", "io.bfq.weight", Some("8:0")), &ev).state,
        LimitState::Idle
    );
}

#[test]
fn a_default_weight_is_judged_on_every_device_the_cgroup_used() {
    let ev = evidence(&[
        ("/a", "nvme0n1", 10, 0.0, 0.0),
        ("/a", "dm-0", 10, 0.0, 0.5),
    ]);
    let v = judge(&knob("/a", "io.weight", None), &ev);
    let states: Vec<_> = v.iter().map(|v| (v.device.as_str(), v.state)).collect();
    assert_eq!(
        states,
        [
            ("dm-0", LimitState::Acting),
            ("nvme0n1", LimitState::NotInEffect)
        ]
    );
}

#[test]
fn a_limit_on_a_device_the_cgroup_does_not_use_names_where_its_io_went() {
    let ev = evidence(&[("/a", "dm-0", 10, 0.0, 0.0)]);
    let v = one(&knob("/a", "io.max", Some("259:0")), &ev);
    assert_eq!(v.state, LimitState::NotInEffect);
    assert_eq!(v.reason, LimitReason::IoElsewhere, "{v:?}");
    assert!(v.why.contains("went to dm-0"), "{}", v.why);
    let quiet = evidence(&[]);
    assert_eq!(
        one(&knob("/a", "io.max", Some("259:0")), &quiet).state,
        LimitState::Idle
    );
}

#[test]
fn a_limit_on_a_device_that_is_gone_is_not_in_effect() {
    let v = one(&knob("/a", "io.max", Some("253:7")), &evidence(&[]));
    assert_eq!(v.state, LimitState::NotInEffect);
    assert_eq!(v.reason, LimitReason::NoDevice, "{v:?}");
    assert!(v.why.contains("no device 253:7"), "{}", v.why);
}

#[test]
fn a_cgroup_without_the_io_controller_is_told_to_enable_it() {
    let v = one(&knob("/b", "io", None), &evidence(&[]));
    assert_eq!(v.state, LimitState::NotInEffect);
    assert_eq!(v.reason, LimitReason::IoNotDelegated, "{v:?}");
    assert!(v.why.contains("subtree_control"), "{}", v.why);
}

#[test]
fn cgroup_v1_write_limits_say_buffered_writes_escape_them() {
    let mut ev = evidence(&[("/a", "nvme0n1", 10, 0.0, 0.0)]);
    ev.cgroup_v1 = true;
    let v = one(
        &knob("/a", "blkio.throttle.write_bps_device", Some("259:0")),
        &ev,
    );
    assert_eq!(v.state, LimitState::InEffect);
    assert_eq!(v.reason, LimitReason::V1BufferedWrites, "{v:?}");
    assert!(v.why.contains("buffered writes"), "{}", v.why);
}

fn with_vfat(mut ev: Evidence) -> Evidence {
    ev.devices[0].root_writeback = vec![super::writeback::RootWriteback {
        devnum: "253:3".into(),
        fstype: "vfat".into(),
        mount_point: "/mnt/usb".into(),
    }];
    ev
}

#[test]
fn a_write_limit_with_no_io_and_dirty_pages_under_a_mount_without_cgroup_writeback_says_they_escape(
) {
    // Its escaped buffered writes look like no I/O: the verdict must not
    // say idle while the cgroup holds dirty pages.
    let mut ev = with_vfat(evidence(&[]));
    ev.dirty_bytes.insert("/a".into(), 16 << 20);
    let mut k = knob("/a", "io.max", Some("259:0"));
    k.value = "rbps=max wbps=1048576 riops=max wiops=max".into();
    let v = one(&k, &ev);
    assert_eq!(v.state, LimitState::InEffect, "{v:?}");
    assert_eq!(v.reason, LimitReason::WritebackToRoot, "{v:?}");
    assert!(v.why.contains("16.0 MiB of dirty page cache"), "{}", v.why);
    assert!(v.why.contains("/mnt/usb (vfat)"), "{}", v.why);
    let mut w = knob("/a", "io.weight", Some("259:0"));
    w.value = "50".into();
    ev.devices[0].iocost = Some(true);
    assert_eq!(one(&w, &ev).reason, LimitReason::WritebackToRoot);
    // Without dirty pages: no I/O, as before.
    ev.dirty_bytes.clear();
    assert_eq!(one(&k, &ev).reason, LimitReason::NoIo);
}

#[test]
fn a_measured_verdict_stands_and_names_the_mount_whose_writes_it_cannot_see() {
    let mut ev = with_vfat(evidence(&[("/a", "nvme0n1", 10, 0.0, 0.0)]));
    ev.dirty_bytes.insert("/a".into(), 1 << 20);
    let mut k = knob("/a", "io.max", Some("259:0"));
    k.value = "wbps=1048576".into();
    let v = one(&k, &ev);
    assert_eq!(v.reason, LimitReason::NoneHeld, "{v:?}");
    assert!(
        v.why.contains("/mnt/usb (vfat) would escape it"),
        "{}",
        v.why
    );
}

#[test]
fn read_limits_and_other_disks_are_not_told_about_writeback() {
    let mut ev = with_vfat(evidence(&[("/a", "nvme0n1", 10, 0.0, 0.0)]));
    ev.dirty_bytes.insert("/a".into(), 1 << 20);
    let mut k = knob("/a", "io.max", Some("259:0"));
    k.value = "rbps=max wbps=max riops=200 wiops=max".into();
    let v = one(&k, &ev);
    assert!(
        v.reason == LimitReason::NoneHeld && !v.why.contains("escape"),
        "{v:?}"
    );
    k.devnum = Some("8:0".into());
    k.value = "wbps=1048576".into();
    let mut ev = with_vfat(evidence(&[]));
    ev.dirty_bytes.insert("/a".into(), 1 << 20);
    assert_eq!(one(&k, &ev).reason, LimitReason::NoIo);
}

#[test]
fn only_lines_that_set_something_are_configured() {
    use super::read::configured;
    let root = tempfile::tempdir().unwrap();
    let a = root.path().join("a");
    std::fs::create_dir(&a).unwrap();
    std::fs::write(
        a.join("io.max"),
        "259:0 rbps=max wbps=max riops=200 wiops=max\n8:0 rbps=max wbps=max riops=max wiops=max\n",
    )
    .unwrap();
    std::fs::write(a.join("io.weight"), "default 100\n259:0 50\n").unwrap();
    std::fs::write(a.join("io.latency"), "259:0 target=max\n").unwrap();
    // b has processes and no io files of its own (root delegates none to
    // it); c has neither.
    let b = root.path().join("b");
    std::fs::create_dir(&b).unwrap();
    std::fs::write(b.join("cgroup.procs"), "42\n").unwrap();
    std::fs::create_dir(root.path().join("c")).unwrap();
    let got = configured(root.path(), "/", false);
    let rows: Vec<_> = got
        .iter()
        .map(|c| {
            (
                c.cgroup.as_str(),
                c.knob.as_str(),
                c.devnum.as_deref(),
                c.value.as_str(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (
                "/a",
                "io.max",
                Some("259:0"),
                "rbps=max wbps=max riops=200 wiops=max"
            ),
            ("/a", "io.weight", Some("259:0"), "50"),
            ("/b", "io", None, ""),
        ]
    );
}

/// Reads of `cgroup` on nvme0n1: (reads, waits before a request, total).
fn reads(ev: &mut Evidence, cgroup: &str, (n, waits, total): (u64, f64, f64)) {
    let a = Activity {
        ios: n,
        held_seconds: waits,
        reads: n,
        read_waits_seconds: waits,
        read_seconds: total,
        ..Activity::default()
    };
    ev.activity.insert((cgroup.into(), "nvme0n1".into()), a);
}

#[test]
fn io_latency_is_acting_when_the_cgroups_beside_it_waited() {
    // The protected cgroup itself is not held: io.latency holds its
    // siblings (and their subtrees), not the cgroup whose target it is.
    let mut ev = evidence(&[]);
    reads(&mut ev, "/il/p", (500, 0.01, 2.0));
    reads(&mut ev, "/il/f/rd", (4000, 30.0, 40.0));
    reads(&mut ev, "/other", (100, 5.0, 6.0));
    let v = one(&knob("/il/p", "io.latency", Some("259:0")), &ev);
    assert_eq!(
        (v.state, v.reason),
        (LimitState::Acting, LimitReason::Held),
        "{v:?}"
    );
    assert!(
        v.why.contains("4000 reads beside it (/il/f/rd) 30.000 s") && v.why.contains("75 %"),
        "{}",
        v.why
    );
}

#[test]
fn io_latency_is_idle_when_nothing_beside_it_reads_or_waits() {
    let mut ev = evidence(&[]);
    reads(&mut ev, "/il/p", (500, 0.01, 2.0));
    let k = knob("/il/p", "io.latency", Some("259:0"));
    let v = one(&k, &ev);
    assert_eq!(
        (v.state, v.reason),
        (LimitState::Idle, LimitReason::NoneHeld),
        "{v:?}"
    );
    assert!(v.why.contains("no reads beside it"), "{}", v.why);
    // Beside it, reads that spent 1 % of their time before a request.
    reads(&mut ev, "/il/f", (4000, 0.4, 40.0));
    let v = one(&k, &ev);
    assert_eq!(
        (v.state, v.reason),
        (LimitState::Idle, LimitReason::NoneHeld),
        "{v:?}"
    );
    assert!(v.why.contains("1.0 %"), "{}", v.why);
    // Its own I/O absent: nothing to protect.
    ev.activity
        .remove(&("/il/p".to_string(), "nvme0n1".to_string()));
    let v = one(&k, &ev);
    assert_eq!(
        (v.state, v.reason),
        (LimitState::Idle, LimitReason::NoIo),
        "{v:?}"
    );
}

#[test]
fn io_latency_beside_iocost_does_not_claim_iocost_waits() {
    let mut ev = evidence(&[]);
    ev.devices[0].iocost = Some(true);
    reads(&mut ev, "/il/p", (500, 0.01, 2.0));
    reads(&mut ev, "/il/f", (4000, 30.0, 40.0));
    let v = one(&knob("/il/p", "io.latency", Some("259:0")), &ev);
    assert_eq!(
        (v.state, v.reason),
        (LimitState::InEffect, LimitReason::HoldsNotTimed),
        "{v:?}"
    );
    assert!(v.why.contains("iocost is enabled"), "{}", v.why);
}
