//! Which of the block object's programs load and when they attach: the
//! claim method's variants, the tracepoints the kernel has, the fexit on
//! blk-throttle where allowed, and the programs attached late (issue
//! stamps, bio-based volumes) once the host shows it needs them
//! (probe.rs attaches them).

use anyhow::{Context, Result};
use iowarden_exporters::ProbeStatus;
use libbpf_rs::btf::Btf;
use libbpf_rs::skel::OpenSkel;

use super::{delay, held};
use crate::probes::objects::{load_only, status, tracepoint_available};

/// When a program is attached.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Attach {
    /// Always: the tracer cannot work without it.
    Required,
    /// Always, where the kernel has the tracepoint.
    Optional,
    /// With --hwq-events.
    Inserts,
    /// With --hwq-events, or once a traced queue turns out
    /// not to stamp io_start_time_ns (tables.need_issue_stamps).
    IssueStamps,
    /// While a traced bio-based disk (device-mapper, md) exists: the
    /// program runs for every bio of every device.
    BioBased,
}

/// How the programs claim table entries: by compare-and-swap, or, where the
/// kernel's BPF has none (before 5.12), through the `claims` hash map (the
/// `_nocas` set of programs; bpf/table.bpf.h take_entry).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Claims {
    CompareAndSwap,
    MapInsert,
}

impl Claims {
    pub(super) fn probe() -> Claims {
        if crate::probes::features::bpf_has_cmpxchg() {
            Claims::CompareAndSwap
        } else {
            Claims::MapInsert
        }
    }

    /// The name of `prog`'s variant for this claim method.
    pub(super) fn program(self, prog: &str) -> String {
        match self {
            Claims::CompareAndSwap => prog.to_string(),
            Claims::MapInsert => format!("{prog}_nocas"),
        }
    }
}

/// The programs, by name, with their tracepoint and when they attach.
pub(super) const PROGRAMS: &[(&str, &str, Attach)] = &[
    ("block_rq_complete", "block_rq_complete", Attach::Required),
    ("block_rq_requeue", "block_rq_requeue", Attach::Optional),
    ("block_rq_merge", "block_rq_merge", Attach::Optional),
    ("block_rq_insert", "block_rq_insert", Attach::Inserts),
    ("block_rq_issue", "block_rq_issue", Attach::IssueStamps),
    ("block_bio_complete", "block_bio_complete", Attach::BioBased),
];

/// The bio-based disks the programs would trace.
pub(super) fn traced_bio_based(filter_devt: Option<u32>) -> bool {
    crate::host::devices::bio_based_disks()
        .into_iter()
        .any(|d| filter_devt.is_none_or(|f| f == d))
}

/// The block object, opened and not loaded yet.
pub(super) type OpenSkelT = crate::skel::OpenIowardenSkel<'static>;

/// Points the blk-throttle program at this kernel's entry point.
pub(super) fn aim_held(open: &mut OpenSkelT, func: &str) -> Result<()> {
    let mut prog = open
        .open_object_mut()
        .progs_mut()
        .find(|p| p.name() == held::PROGRAM)
        .context("the BPF object has no blk-throttle program")?;
    prog.set_attach_target(0, Some(func.to_string()))?;
    Ok(())
}

/// Loads the programs of the claim method's set whose tracepoint the
/// kernel has (and IOWARDEN_HIDE_TRACEPOINTS does not hide: how tests
/// exercise the degraded mode on a kernel that has them all); the selftest
/// is never loaded. Returns the statuses of those left out.
pub(super) fn select(
    open: &mut OpenSkelT,
    btf: &Btf<'_>,
    claims: Claims,
    held: bool,
    delays: bool,
) -> Result<Vec<ProbeStatus>> {
    let mut wanted = Vec::new();
    if held {
        wanted.push(held::PROGRAM.to_string());
    } else {
        open.maps.held_bios.set_max_entries(1)?;
    }
    if delays {
        wanted.extend(delay::PROGRAMS.map(String::from));
    } else {
        open.maps.delay_since.set_max_entries(1)?;
        open.maps.task_delays.set_max_entries(1)?;
    }
    let mut probes = Vec::new();
    for &(prog, tp, when) in PROGRAMS {
        if tracepoint_available(btf, tp) {
            wanted.push(claims.program(prog));
        } else if when == Attach::Required {
            anyhow::bail!("the kernel has no {tp} tracepoint in its BTF; iowarden cannot account block I/O on it");
        } else {
            probes.push(status(
                prog,
                false,
                format!("kernel has no tracepoint {tp}"),
            ));
        }
    }
    let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
    load_only(open.open_object_mut(), &wanted)?;
    Ok(probes)
}

/// The name `prog` loads under: its claim method's variant (the
/// blk-throttle and task delay programs claim nothing and have one).
pub(super) fn loaded_name(claims: Claims, prog: &str) -> String {
    if prog == held::PROGRAM || delay::PROGRAMS.contains(&prog) {
        return prog.to_string();
    }
    claims.program(prog)
}
