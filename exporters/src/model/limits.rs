//! Every io limit and weight configured on the host's cgroups, judged on
//! each device against what the probes measured over a window: what
//! `iowarden limits` prints and `iowarden run` exports.

use serde::{Deserialize, Serialize};

/// One configured knob line of one cgroup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct LimitKnob {
    /// The cgroup's path below the hierarchy's root.
    pub cgroup: String,
    /// io.max, io.weight, io.bfq.weight, io.latency; blkio.throttle.* and
    /// blkio.weight_device on cgroup v1; "io" for a cgroup without the
    /// controller.
    pub knob: String,
    /// "MAJ:MIN", or None for a cgroup-wide default.
    pub devnum: Option<String>,
    pub value: String,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LimitState {
    /// It held I/O in the window.
    Acting,
    /// Set, and nothing held (or no I/O).
    Idle,
    /// Set where it can act, its holds not measured here.
    InEffect,
    /// It cannot act: `reason` says why.
    NotInEffect,
}

impl LimitState {
    /// In a table, in words.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitState::Acting => "acting",
            LimitState::Idle => "idle",
            LimitState::InEffect => "in effect",
            LimitState::NotInEffect => "not in effect",
        }
    }

    /// As a label value.
    pub fn label(self) -> &'static str {
        match self {
            LimitState::Acting => "acting",
            LimitState::Idle => "idle",
            LimitState::InEffect => "in_effect",
            LimitState::NotInEffect => "not_in_effect",
        }
    }
}

/// Why a knob is in its state, as a label a rule can match (the verdict's
/// `why` says it in words, with numbers).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LimitReason {
    /// Acting: it held I/O in the window.
    Held,
    /// Idle: the cgroup did I/O there, none of it held.
    NoneHeld,
    /// Idle: the cgroup did no I/O in the window.
    NoIo,
    /// The io controller is not enabled for the cgroup (its parent does
    /// not delegate it).
    IoNotDelegated,
    /// io.weight with iocost off on the device.
    NoWeightPolicy,
    /// io.weight where io.cost.qos lists the device with enable=0.
    IocostDisabled,
    /// A bfq weight on a device whose scheduler is not bfq.
    NotBfq,
    /// No device with that number (removed, or re-created as another).
    NoDevice,
    /// The cgroup's I/O went to other devices (a dm volume above, or the
    /// disk below).
    IoElsewhere,
    /// A v1 write limit: buffered writes are written back by the root.
    V1BufferedWrites,
    /// io.max where blk-throttle's holds cannot be timed; io.latency on a
    /// device with iocost on, whose waits are not told apart from its own.
    HoldsNotTimed,
    /// A write limit or weight on a disk with a mount whose filesystem
    /// writes back buffered writes charged to the root (no cgroup
    /// writeback).
    WritebackToRoot,
    /// A limit the kernel dropped when its device was re-created with
    /// another number (seen by `run` before it went).
    DeviceRecreated,
}

impl LimitReason {
    pub fn label(self) -> &'static str {
        match self {
            LimitReason::Held => "held",
            LimitReason::NoneHeld => "none_held",
            LimitReason::NoIo => "no_io",
            LimitReason::IoNotDelegated => "io_not_delegated",
            LimitReason::NoWeightPolicy => "no_weight_policy",
            LimitReason::IocostDisabled => "iocost_disabled",
            LimitReason::NotBfq => "not_bfq",
            LimitReason::NoDevice => "no_device",
            LimitReason::IoElsewhere => "io_elsewhere",
            LimitReason::V1BufferedWrites => "v1_buffered_writes",
            LimitReason::HoldsNotTimed => "holds_not_timed",
            LimitReason::WritebackToRoot => "writeback_to_root",
            LimitReason::DeviceRecreated => "device_recreated",
        }
    }
}

/// A knob on one device, judged.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct LimitVerdict {
    #[serde(flatten)]
    pub knob: LimitKnob,
    /// The device judged on (a default weight: each device the cgroup
    /// used; "*" when none or for the whole cgroup).
    pub device: String,
    pub state: LimitState,
    pub reason: LimitReason,
    /// In words a user can act on.
    pub why: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_the_serde_names() {
        for s in [
            LimitState::Acting,
            LimitState::Idle,
            LimitState::InEffect,
            LimitState::NotInEffect,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.label());
        }
        for r in [
            LimitReason::Held,
            LimitReason::NoneHeld,
            LimitReason::NoIo,
            LimitReason::IoNotDelegated,
            LimitReason::NoWeightPolicy,
            LimitReason::IocostDisabled,
            LimitReason::NotBfq,
            LimitReason::NoDevice,
            LimitReason::IoElsewhere,
            LimitReason::V1BufferedWrites,
            LimitReason::HoldsNotTimed,
            LimitReason::WritebackToRoot,
            LimitReason::DeviceRecreated,
        ] {
            assert_eq!(serde_json::to_value(r).unwrap(), r.label());
        }
    }
}
