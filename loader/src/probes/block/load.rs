//! Opening, configuring and loading the block object, before any program
//! attaches: its load-time switches and table sizes, the programs this
//! kernel can run, and the cost coefficients of the default model and of
//! the devices given their own.

use anyhow::{Context, Result};
use iowarden_exporters::ProbeStatus;
use libbpf_rs::btf::Btf;
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::{MapCore, MapFlags};

use super::capacity::{COST_DEFAULT, MAX_DEVS, MAX_HWQ};
use super::config::BlockConfig;
use super::programs::{self, Claims, OpenSkelT};
use super::{culprits, delay, held};
use crate::probes::features;
use crate::probes::objects::status;
use crate::probes::skeleton::{open_skel, rodata};
use crate::probes::tables::pod_bytes;
use crate::skel::types::{iow_const, iow_cost_coefs};
use crate::skel::{IowardenSkel, IowardenSkelBuilder};

/// What [`load`] gives: the loaded object and the statuses of the
/// programs left out.
pub(super) type Loaded = (IowardenSkel<'static>, Vec<ProbeStatus>);

/// Gives entry `idx` of the cost coefficients' table the coefficients
/// `lcoef` (iocost's lcoefs, vtime units).
pub(super) fn write_cost_coefs(map: &dyn MapCore, idx: u32, lcoef: [u64; 6]) -> Result<()> {
    let v = iow_cost_coefs {
        lcoef,
        valid: 1,
        ..Default::default()
    };
    // SAFETY: a skeleton type, its padding spelled out and zeroed.
    let bytes = unsafe { pod_bytes(&v) };
    map.update(&idx.to_ne_bytes(), bytes, MapFlags::ANY)?;
    Ok(())
}

/// Claims `devt`'s entry in the device table before load, probing exactly
/// as the BPF side's dev_index() does, so that it finds the entry there.
fn claim_dev(table: &mut [u32], devt: u32) -> Option<u32> {
    let n = table.len() as u32;
    let start =
        ((devt as u64).wrapping_mul(0x9E3779B97F4A7C15) >> (64 - n.trailing_zeros())) as u32;
    (0..iow_const::IOW_DEV_PROBES.0)
        .map(|i| (start + i) & (n - 1))
        .find(|&i| table[i as usize] == 0 || table[i as usize] == devt)
        .inspect(|&i| table[i as usize] = devt)
}

/// Opens, configures and loads the object, and gives the default cost
/// model and the preclaimed devices their coefficients. Returns the
/// statuses of the programs left out.
pub(super) fn load(cfg: &BlockConfig, claims: Claims) -> Result<Loaded> {
    let btf = Btf::from_vmlinux().context(
        "cannot read kernel BTF (/sys/kernel/btf/vmlinux): iowarden needs a kernel built with CONFIG_DEBUG_INFO_BTF=y",
    )?;
    let mut open = open_skel::<IowardenSkelBuilder>("block")?;
    let held = held::plan(&btf);
    let delays = delay::plan(&btf, cfg.measure.task_delays);
    configure(&mut open, cfg, &btf, claims)?;
    configure_culprits(&mut open, cfg.measure.culprits)?;
    let preclaimed = preclaim_devices(&mut open, cfg)?;
    let mut probes = programs::select(&mut open, &btf, claims, held.is_ok(), delays.is_ok())?;
    match held {
        Ok(func) => programs::aim_held(&mut open, func)?,
        Err(status) => probes.push(status),
    }
    probes.extend(delays.err());
    let skel = open
        .load()
        .map_err(|e| crate::probes::objects::load_error("the block", e))?;
    let default =
        crate::costmodel::lcoefs(&crate::costmodel::default_model(cfg.measure.cost_model));
    for &(idx, lcoef) in preclaimed.iter().chain([&(COST_DEFAULT, default)]) {
        write_cost_coefs(&skel.maps.cost_coefs, idx, lcoef)?;
    }
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

/// Claims the device entries of the devices with their own cost model.
fn preclaim_devices(open: &mut OpenSkelT, cfg: &BlockConfig) -> Result<Vec<(u32, [u64; 6])>> {
    let bss = open
        .maps
        .bss_data
        .as_deref_mut()
        .context("BPF object has no .bss")?;
    Ok(cfg
        .cost_devices
        .iter()
        .filter_map(|&(devt, c)| claim_dev(&mut bss.tables.dev_devt, devt).map(|i| (i, c)))
        .collect())
}
