//! iocost's linear device cost model (paper §3.2, block/blk-iocost.c), in
//! one place: the parameters and their parsing (model.rs), the
//! coefficients the BPF side charges with, derived exactly as the kernel's
//! calc_lcoefs does (charge.rs), each traced device's model and its report
//! (devices.rs), the refit from measured device time (fit.rs), the online
//! estimator and guard `tune --model` runs (online/), the saturating fio
//! profile (profile.rs, the one part that runs anything) and the text view
//! (view.rs). The knob's file format is knobs/cost_model.rs, beside the
//! other knobs the journaled writer handles.
//!
//! The model: cost = base[op][seq|rand] + per_byte[op] × bytes, with
//! per_byte = 1 s / bps and base = 1 s / iops − per_byte × 4 KiB.
//!
//! The refit is latency-based: it fits each request's device time (issue to
//! completion) against its size. At queue depth 1 that is the device time a
//! request occupies; at higher depths requests overlap, each one's device
//! time includes waiting behind the others inside the device, and the
//! fitted iops/bps come out lower than the device's throughput (the
//! kernel's profiles measure random IOPS at QD64). Read the fitted model as
//! what a request costs in latency, not in capacity.

/// iocost's virtual time: 2^37 per second (VTIME_PER_SEC).
pub const VTIME_PER_SEC: u64 = 1 << 37;
/// The model's page (IOC_PAGE_SIZE).
pub const PAGE_SIZE: u64 = 4096;
/// Size classes: <= 4 KiB, 8 KiB, ..., >= 1 MiB (IOW_COST_SIZES).
pub const SIZES: usize = 9;
/// Fewest samples a class needs to take part in a fit.
pub const MIN_CLASS_IOS: u64 = 8;

mod charge;
mod fit;
mod model;
// The fuzz targets (fuzz/) compile only the pure parsers and arithmetic
// above, with --cfg fuzzing.
#[cfg(not(fuzzing))]
pub mod devices;
#[cfg(not(fuzzing))]
pub mod online;
#[cfg(not(fuzzing))]
pub mod profile;
#[cfg(not(fuzzing))]
pub mod view;

pub use charge::{calc_lcoefs, request_cost, size_class, size_class_bytes};
pub use fit::{fit_op, ClassSample, DeviceFit, OpFit};
pub use model::{
    default_model, lcoefs, parse_kernel_line, parse_over, LinearModel, AUTOP_HDD, AUTOP_SSD_DFL,
};

#[cfg(test)]
mod tests;
