//! The delays io.latency and iocost (a cgroup in debt) put on tasks on
//! their way back to user space (`task_delay`: the block object's
//! fentry/fexit pair on blkcg_maybe_throttle_current, bpf/block/delay.h),
//! where the kernel lets them attach: between a task's I/Os, so outside
//! every latency stage. Read each poll from the task_delays table, which
//! holds sums since load; a gone cgroup's entries are released.

use std::collections::BTreeSet;

use anyhow::Result;
use iowarden_exporters::{CgroupRef, ProbeStatus, TaskDelay};
use libbpf_rs::btf::types::Func;
use libbpf_rs::btf::Btf;
use libbpf_rs::{MapCore, MapFlags};

use crate::host::devices::DeviceNames;
use crate::probes::features::{fexit_attaches, fexit_refusal, struct_has_member};
use crate::probes::objects::status;
use crate::probes::tables::{pod, pod_bytes};
use crate::skel::types::{iow_delay, iow_delay_key};

/// The status's name, and the programs.
pub const STATUS: &str = "task_delay";
pub const PROGRAMS: [&str; 2] = ["task_delay_begin", "task_delay_end"];
const FUNC: &str = "blkcg_maybe_throttle_current";

/// Ok where the programs are wanted (`--task-delays`) and can load and
/// attach, or the status saying why the delays go untimed.
/// IOWARDEN_NO_FEXIT answers as a kernel that refuses fexit does.
pub fn plan(btf: &Btf<'_>, wanted: bool) -> Result<(), ProbeStatus> {
    if !wanted {
        // Off by default: the pair runs on every return to user space with
        // work pending, for every task. (In the guest suite's emulated
        // 6.12, patching that hot function at attach also once met QEMU's
        // stale int3, tests/vmtest/README.)
        return Err(status(
            STATUS,
            false,
            "off by default: --task-delays to load (a fentry/fexit pair on every return to \
             user space with work pending)",
        ));
    }
    let untimed = |why: String| {
        status(
            STATUS,
            false,
            format!(
                "{why}: the delays io.latency and iocost put on tasks between their I/Os are not timed"
            ),
        )
    };
    if btf.type_by_name::<Func<'_>>(FUNC).is_none() {
        return Err(untimed(format!(
            "the kernel has no {FUNC} (CONFIG_BLK_CGROUP)"
        )));
    }
    if !struct_has_member(btf, "task_struct", "throttle_disk")
        && !struct_has_member(btf, "request_queue", "disk")
    {
        return Err(untimed(
            "the kernel's request_queue has no disk (Linux 5.15+): the delaying device is unknown"
                .into(),
        ));
    }
    if std::env::var_os("IOWARDEN_NO_FEXIT").is_some() {
        return Err(untimed(format!(
            "fexit on {FUNC} switched off (IOWARDEN_NO_FEXIT)"
        )));
    }
    fexit_attaches(btf, FUNC).map_err(|errno| untimed(fexit_refusal(FUNC, errno)))
}

/// One (cgroup, device)'s delays since load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RawDelay {
    pub cgroup_id: u64,
    pub devt: u32,
    pub count: u64,
    pub ns: u64,
}

/// Every entry of the task_delays table.
pub fn read(map: &dyn MapCore) -> Result<Vec<RawDelay>> {
    let mut out = Vec::new();
    for k in map.keys() {
        if let Some(v) = map.lookup(&k, MapFlags::ANY)? {
            let (k, v): (iow_delay_key, iow_delay) = (pod(&k), pod(&v));
            out.push(RawDelay {
                cgroup_id: k.cgroup_id,
                devt: k.devt,
                count: v.count,
                ns: v.ns,
            });
        }
    }
    Ok(out)
}

/// Deletes the entries of cgroups that are gone.
pub fn release(map: &dyn MapCore, raw: &mut Vec<RawDelay>, gone: &BTreeSet<u64>) {
    raw.retain(|d| {
        if !gone.contains(&d.cgroup_id) {
            return true;
        }
        let key = iow_delay_key {
            cgroup_id: d.cgroup_id,
            devt: d.devt,
            ..Default::default()
        };
        // SAFETY: a skeleton type, its padding spelled out and zeroed.
        let bytes = unsafe { pod_bytes(&key) };
        let _ = map.delete(bytes);
        false
    });
}

/// The snapshot's records, by device and cgroup.
pub fn fill(
    raw: &[RawDelay],
    cgroup: &dyn Fn(u64) -> CgroupRef,
    devices: &mut DeviceNames,
) -> Vec<TaskDelay> {
    let mut out: Vec<TaskDelay> = raw
        .iter()
        .filter(|d| d.devt != 0)
        .map(|d| TaskDelay {
            cgroup: cgroup(d.cgroup_id),
            device: devices.get(d.devt),
            delays: d.count,
            seconds: d.ns as f64 / 1e9,
        })
        .collect();
    out.sort_by_key(TaskDelay::key);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_names_each_cgroup_and_device_and_skips_an_unknown_disk() {
        let raw = [
            RawDelay {
                cgroup_id: 9,
                devt: (259 << 20) | 1,
                count: 3,
                ns: 6_000_000,
            },
            RawDelay {
                cgroup_id: 8,
                devt: 259 << 20,
                count: 1,
                ns: 1_500_000,
            },
            RawDelay {
                cgroup_id: 7,
                devt: 0,
                count: 1,
                ns: 1,
            },
        ];
        let cgroup = |id| CgroupRef {
            id,
            path: format!("/c{id}"),
        };
        let d = fill(&raw, &cgroup, &mut DeviceNames::default());
        let got: Vec<_> = d
            .iter()
            .map(|d| (d.cgroup.path.as_str(), d.device.minor, d.delays, d.seconds))
            .collect();
        assert_eq!(got, [("/c8", 0, 1, 0.0015), ("/c9", 1, 3, 0.006)]);
    }
}
