//! Limits the kernel dropped with their device. A cgroup's per-device
//! knobs live on the device's instance: when a disk or volume is removed
//! (and re-created, often with another number: a dm volume re-activated,
//! a loop device re-attached, a controller reset), its limits go with it
//! and no knob file lists them any more. `run` remembers each per-device
//! knob it saw with the name the device is known by, and reports one that
//! vanished with its device until it is set again or its cgroup is gone.
//! Pure: the watch keeps the memory between judgements.

use iowarden_exporters::{LimitKnob, LimitReason, LimitState, LimitVerdict};

use super::evidence::DeviceFacts;

/// A per-device knob as last seen, with the name of its device then.
#[derive(Clone, Debug, PartialEq)]
pub struct SeenKnob {
    /// devnum is Some: defaults are not tied to a device.
    pub knob: LimitKnob,
    /// The device's `known_as` when the knob was seen.
    pub known_as: String,
}

/// What the last judgements saw, and what vanished with its device.
#[derive(Debug, Default)]
pub struct Lost {
    pub verdicts: Vec<LimitVerdict>,
    /// To remember for the next judgement.
    pub seen: Vec<SeenKnob>,
}

fn same_knob(a: &LimitKnob, b: &LimitKnob, devnum: &str) -> bool {
    a.cgroup == b.cgroup && a.knob == b.knob && b.devnum.as_deref() == Some(devnum)
}

/// A verdict on a knob that vanished with its device; None when the knob
/// was removed by hand from a device still there, or set again on the new
/// one.
fn vanished(s: &SeenKnob, knobs: &[LimitKnob], devices: &[DeviceFacts]) -> Option<LimitVerdict> {
    let old = s.knob.devnum.as_deref()?;
    if knobs.iter().any(|k| same_knob(&s.knob, k, old)) {
        return None;
    }
    let now = devices.iter().find(|d| d.known_as == s.known_as);
    let (device, state, reason, why) = match now {
        Some(d) if d.devnum == old => return None,
        Some(d) if knobs.iter().any(|k| same_knob(&s.knob, k, &d.devnum)) => return None,
        Some(d) => (
            d.name.clone(),
            LimitState::NotInEffect,
            LimitReason::DeviceRecreated,
            format!(
                "{} was re-created as {} (it was {old} when this was set): the kernel dropped \
                 the limit with the old device; write it again for {}",
                s.known_as, d.devnum, d.devnum
            ),
        ),
        None => (
            s.known_as.clone(),
            LimitState::NotInEffect,
            LimitReason::NoDevice,
            format!(
                "{} ({old}) is gone: the kernel dropped the limit with it",
                s.known_as
            ),
        ),
    };
    Some(LimitVerdict {
        knob: s.knob.clone(),
        device,
        state,
        reason,
        why,
    })
}

/// The knobs in `seen` that vanished with their device, and what to
/// remember: every per-device knob set now, with its device's name, and
/// each vanished one whose cgroup still exists.
pub fn lost_knobs(
    seen: &[SeenKnob],
    knobs: &[LimitKnob],
    devices: &[DeviceFacts],
    cgroup_exists: impl Fn(&str) -> bool,
) -> Lost {
    let mut lost = Lost::default();
    for s in seen.iter().filter(|s| cgroup_exists(&s.knob.cgroup)) {
        if let Some(v) = vanished(s, knobs, devices) {
            lost.verdicts.push(v);
            lost.seen.push(s.clone());
        }
    }
    for k in knobs {
        let Some(devnum) = &k.devnum else { continue };
        if let Some(known_as) = name_now(k, devnum, seen, devices) {
            lost.seen.push(SeenKnob {
                knob: k.clone(),
                known_as,
            });
        }
    }
    lost
}

/// The name to remember a knob set on `devnum` by: its device's, or the
/// one remembered while the device is unnamed or unlisted (a volume being
/// removed still lists its knobs for a moment; its number can come back
/// as another volume's).
fn name_now(
    k: &LimitKnob,
    devnum: &str,
    seen: &[SeenKnob],
    devices: &[DeviceFacts],
) -> Option<String> {
    match devices.iter().find(|d| d.devnum == devnum) {
        Some(d) if !d.known_as.is_empty() => Some(d.known_as.clone()),
        _ => seen
            .iter()
            .find(|s| same_knob(k, &s.knob, devnum))
            .map(|s| s.known_as.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(name: &str, devnum: &str, known_as: &str) -> DeviceFacts {
        DeviceFacts {
            devnum: devnum.into(),
            name: name.into(),
            known_as: known_as.into(),
            ..Default::default()
        }
    }

    fn limit(cgroup: &str, devnum: &str) -> LimitKnob {
        LimitKnob {
            cgroup: cgroup.into(),
            knob: "io.max".into(),
            devnum: Some(devnum.into()),
            value: "riops=200".into(),
        }
    }

    /// Judges `knobs` on `devices` after `before` was seen on
    /// `devices_before`, every cgroup existing.
    fn after(
        before: &[LimitKnob],
        devices_before: &[DeviceFacts],
        knobs: &[LimitKnob],
        devices: &[DeviceFacts],
    ) -> Lost {
        let seen = lost_knobs(&[], before, devices_before, |_| true).seen;
        lost_knobs(&seen, knobs, devices, |_| true)
    }

    #[test]
    fn a_limit_dropped_with_a_re_created_volume_names_its_new_number() {
        let was = [dev("dm-0", "253:0", "vg-data")];
        let now = [dev("dm-1", "253:1", "vg-data")];
        let lost = after(&[limit("/a", "253:0")], &was, &[], &now);
        assert_eq!(lost.verdicts.len(), 1, "{lost:?}");
        let v = &lost.verdicts[0];
        assert_eq!(
            (v.state, v.reason, v.device.as_str()),
            (
                LimitState::NotInEffect,
                LimitReason::DeviceRecreated,
                "dm-1"
            )
        );
        assert!(v.why.contains("re-created as 253:1"), "{}", v.why);
        assert!(v.why.contains("it was 253:0"), "{}", v.why);
        // Still reported at the next judgement, until it is set again.
        let again = lost_knobs(&lost.seen, &[], &now, |_| true);
        assert_eq!(again.verdicts.len(), 1);
        let set = lost_knobs(&lost.seen, &[limit("/a", "253:1")], &now, |_| true);
        assert!(set.verdicts.is_empty(), "{set:?}");
    }

    #[test]
    fn a_limit_dropped_with_a_removed_device_says_it_is_gone() {
        let was = [dev("loop3", "7:3", "loop3")];
        let lost = after(&[limit("/a", "7:3")], &was, &[], &[]);
        let v = &lost.verdicts[0];
        assert_eq!(
            (v.reason, v.device.as_str()),
            (LimitReason::NoDevice, "loop3")
        );
        assert!(v.why.contains("loop3 (7:3) is gone"), "{}", v.why);
    }

    #[test]
    fn a_limit_removed_by_hand_or_whose_cgroup_went_is_forgotten() {
        let devs = [dev("nvme0n1", "259:0", "nvme0n1")];
        let lost = after(&[limit("/a", "259:0")], &devs, &[], &devs);
        assert!(lost.verdicts.is_empty() && lost.seen.is_empty(), "{lost:?}");
        let was = [dev("dm-0", "253:0", "vg-data")];
        let seen = lost_knobs(&[], &[limit("/a", "253:0")], &was, |_| true).seen;
        let gone = lost_knobs(&seen, &[], &[], |c| c != "/a");
        assert!(gone.verdicts.is_empty() && gone.seen.is_empty(), "{gone:?}");
    }

    #[test]
    fn a_limit_read_while_its_volume_is_removed_keeps_its_name() {
        // t-18's race: the poll between the volume's dm name going and its
        // knob going (or its disk unlisted), then its number re-used by
        // another volume.
        let was = [dev("dm-4", "253:4", "iow-gone")];
        let removing = [dev("dm-4", "253:4", "")];
        let knob = [limit("/a", "253:4")];
        for during in [&removing[..], &[]] {
            let seen = lost_knobs(&[], &knob, &was, |_| true).seen;
            let seen = lost_knobs(&seen, &knob, during, |_| true).seen;
            let reused = [dev("dm-4", "253:4", "iow-lost")];
            let lost = lost_knobs(&seen, &[], &reused, |_| true);
            assert_eq!(lost.verdicts.len(), 1, "{lost:?}");
            let v = &lost.verdicts[0];
            assert_eq!(
                (v.reason, v.device.as_str()),
                (LimitReason::NoDevice, "iow-gone")
            );
        }
        // Never seen named: not remembered by a name it never had.
        let unnamed = lost_knobs(&[], &knob, &removing, |_| true);
        assert!(unnamed.seen.is_empty(), "{unnamed:?}");
    }

    #[test]
    fn a_limit_still_set_is_remembered_and_not_reported() {
        let devs = [dev("dm-0", "253:0", "vg-data")];
        let lost = after(
            &[limit("/a", "253:0")],
            &devs,
            &[limit("/a", "253:0")],
            &devs,
        );
        assert!(lost.verdicts.is_empty());
        assert_eq!(lost.seen.len(), 1);
        assert_eq!(lost.seen[0].known_as, "vg-data");
    }
}
