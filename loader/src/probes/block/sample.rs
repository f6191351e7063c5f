//! What one read of the block object's maps gives: the sharded counters
//! of every occupied series, hardware queue and cost class, the device
//! table and the drop counters (RawSample), for accumulate.rs to sum.

use super::delay;
use crate::skel::types::{iow_cost_class, iow_drops, iow_hwq_stats, iow_series};

/// The shards of one occupied series slot.
pub struct RawSeries {
    pub slot: u32,
    pub key: u64,
    pub shards: Vec<iow_series>,
}

pub struct RawHwq {
    pub devt: u32,
    pub hctx: u32,
    pub shards: Vec<iow_hwq_stats>,
}

/// The shards of one cost class of one device.
pub struct RawCostClass {
    pub devt: u32,
    /// Class within the device: (op * 2 + random) * IOW_COST_SIZES + size.
    pub class: u32,
    pub shards: Vec<iow_cost_class>,
}

#[derive(Default)]
pub struct RawSample {
    pub series: Vec<RawSeries>,
    pub hwqs: Vec<RawHwq>,
    /// Cost classes that have samples.
    pub cost_classes: Vec<RawCostClass>,
    pub drops: iow_drops,
    /// Device table: index -> kernel dev_t, for occupied entries.
    pub devs: Vec<(u32, u32)>,
    /// The task delays' table (empty where its programs are not attached).
    pub delays: Vec<delay::RawDelay>,
    /// Requests whose time the culprit account could not (wholly) split,
    /// since start (from its drain, not the maps).
    pub culprit_untold: crate::culprits::Untold,
}
