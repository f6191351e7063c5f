//! Opening, configuring and loading the block object, before any program
//! attaches: its load-time switches and table sizes, and the programs this
//! kernel can run.

use anyhow::{Context, Result};
use iowarden_exporters::ProbeStatus;
use libbpf_rs::btf::Btf;
use libbpf_rs::skel::OpenSkel;

use super::capacity::{MAX_DEVS, MAX_HWQ};
use super::config::BlockConfig;
use super::programs::{self, Claims, OpenSkelT};
use super::{culprits, delay, held};
use crate::probes::features;
use crate::probes::objects::status;
use crate::probes::skeleton::{open_skel, rodata};
use crate::skel::types::iow_const;
use crate::skel::{IowardenSkel, IowardenSkelBuilder};

/// What [`load`] gives: the loaded object and the statuses of the
/// programs left out.
pub(super) type Loaded = (IowardenSkel<'static>, Vec<ProbeStatus>);

/// Opens, configures and loads the object. Returns the statuses of the
/// programs left out.
pub(super) fn load(cfg: &BlockConfig, claims: Claims) -> Result<Loaded> {
    let btf = Btf::from_vmlinux().context(
        "cannot read kernel BTF (/sys/kernel/btf/vmlinux): iowarden needs a kernel built with CONFIG_DEBUG_INFO_BTF=y",
    )?;
    let mut open = open_skel::<IowardenSkelBuilder>("block")?;
    let held = held::plan(&btf);
    let delays = delay::plan(&btf, cfg.measure.task_delays);
    configure(&mut open, cfg, &btf, claims)?;
    configure_culprits(&mut open, cfg.measure.culprits)?;
    let mut probes = programs::select(&mut open, &btf, claims, held.is_ok(), delays.is_ok())?;
    match held {
        Ok(func) => programs::aim_held(&mut open, func)?,
        Err(status) => probes.push(status),
    }
    probes.extend(delays.err());
    let skel = open
        .load()
        .map_err(|e| crate::probes::objects::load_error("the block", e))?;
    Ok((skel, probes))
}

/// The statuses of what the options switched off.
pub(super) fn switched_off(cfg: &BlockConfig) -> Vec<ProbeStatus> {
    [
        (cfg.measure.latency, "latency", "--no-latency"),
        (cfg.measure.hwq, "hwq", "--no-hwq"),
        (cfg.measure.cost, "cost", "--no-cost"),
    ]
    .into_iter()
    .filter(|(on, _, _)| !on)
    .map(|(_, name, flag)| status(name, false, format!("disabled by {flag}")))
    .collect()
}

/// Load-time switches and the sizes of the sharded arrays.
pub(super) fn configure(
    open: &mut OpenSkelT,
    cfg: &BlockConfig,
    btf: &Btf<'_>,
    claims: Claims,
) -> Result<()> {
    let cap = cfg.capacity;
    let rodata = rodata(&mut open.maps.rodata_data, "block")?;
    rodata.enable_latency = cfg.measure.latency;
    rodata.enable_stage_hists = cfg.measure.stage_histograms;
    rodata.enable_hwq = cfg.measure.hwq;
    rodata.enable_hwq_events = cfg.measure.hwq_events;
    rodata.enable_cost = cfg.measure.cost;
    rodata.filter_devt = cfg.filter_devt.unwrap_or(0);
    rodata.slot_mask = cap.slots - 1;
    rodata.shard_mask = cap.shards - 1;
    rodata.exclusive_shards = cap.shards as usize >= libbpf_rs::num_possible_cpus()?;
    // How tests exercise the fallback issue stamps on a kernel whose
    // queues all stamp requests themselves.
    rodata.use_kernel_issue_stamps =
        std::env::var_os("IOWARDEN_IGNORE_KERNEL_ISSUE_STAMPS").is_none();
    rodata.queue_flag_stats_bit = features::kernel_enum_value(btf, "QUEUE_FLAG_STATS")
        .and_then(|v| u32::try_from(v).ok())
        .filter(|&v| v < 64)
        .unwrap_or(64);
    rodata.rq_after_queue_arg =
        crate::probes::features::tracepoint_arg_count(btf, "block_rq_issue") == Some(2);
    if claims == Claims::CompareAndSwap {
        open.maps.claims.set_max_entries(1)?;
    }
    open.maps.series.set_max_entries(cap.slots * cap.shards)?;
    open.maps
        .hwq_stats
        .set_max_entries(MAX_DEVS * MAX_HWQ * cap.shards)?;
    open.maps
        .cost_classes
        .set_max_entries(iow_const::IOW_COST_CLASSES.0 * cap.shards)?;
    Ok(())
}

/// The culprits' switch, and their log's rings: one per possible CPU
/// (one entry when off).
pub(super) fn configure_culprits(open: &mut OpenSkelT, on: bool) -> Result<()> {
    let cpus = libbpf_rs::num_possible_cpus()? as u32;
    let bits = culprits::ring_bits(cpus);
    let rodata = rodata(&mut open.maps.rodata_data, "block")?;
    rodata.enable_culprits = on;
    rodata.flight_ring_bits = bits;
    if on {
        open.maps.flight_log.set_max_entries(cpus << bits)?;
        open.maps.flight_heads.set_max_entries(cpus)?;
    }
    Ok(())
}
