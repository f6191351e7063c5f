//! blk-throttle's holds (io.max): the block object's fexit program that
//! times them (`throtl_held`), where this kernel has blk-throttle and lets
//! fexit attach to it. No tracepoint is at blk-throttle's entry; without
//! the program the throttle stage still holds the rq-qos waits (iocost,
//! io.latency, wbt), which come after the bio's submission stamp.

use iowarden_exporters::ProbeStatus;
use libbpf_rs::btf::types::Func;
use libbpf_rs::btf::Btf;

use crate::probes::objects::status;

/// The program, and the name of its status.
pub const PROGRAM: &str = "throtl_held";

/// blk-throttle's entry point: `__blk_throtl_bio` from 5.18 (called only
/// for cgroups with limits), `blk_throtl_bio` before (called for every
/// bio). None when the kernel has neither (no CONFIG_BLK_DEV_THROTTLING).
fn target(btf: &Btf<'_>) -> Option<&'static str> {
    ["__blk_throtl_bio", "blk_throtl_bio"]
        .into_iter()
        .find(|f| btf.type_by_name::<Func<'_>>(f).is_some())
}

/// The function to attach to, or the status saying why holds go untimed.
/// IOWARDEN_NO_FEXIT answers as a kernel that refuses fexit does (how
/// tests see that path on a kernel that allows it).
pub fn plan(btf: &Btf<'_>) -> Result<&'static str, ProbeStatus> {
    let untimed = |why: String| {
        status(
            PROGRAM,
            false,
            format!("{why}: io.max holds are not timed (the throttle stage has iocost, io.latency and wbt waits only)"),
        )
    };
    let Some(func) = target(btf) else {
        return Err(untimed(
            "the kernel has no blk-throttle (CONFIG_BLK_DEV_THROTTLING)".into(),
        ));
    };
    if func == "blk_throtl_bio" {
        // Before 5.18 the entry runs for every bio: a 5.10 guest locked up
        // (soft lockups in two fio readers on both CPUs) with the program
        // and six concurrent readers, two under io.max; not loaded there
        // until that is understood.
        return Err(untimed(
            "blk_throtl_bio runs for every bio before 5.18, and a 5.10 guest locked up with the \
             program attached under concurrent throttled readers: not loaded"
                .into(),
        ));
    }
    if std::env::var_os("IOWARDEN_NO_FEXIT").is_some() {
        return Err(untimed(format!(
            "fexit on {func} switched off (IOWARDEN_NO_FEXIT)"
        )));
    }
    match crate::probes::features::fexit_attaches(btf, func) {
        Ok(()) => Ok(func),
        Err(errno) => Err(untimed(crate::probes::features::fexit_refusal(func, errno))),
    }
}
