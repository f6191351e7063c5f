//! iocost's linear device cost model (paper §3.2, block/blk-iocost.c), in
//! one place: the parameters and their parsing (model.rs), the
//! coefficients the BPF side charges with, derived exactly as the kernel's
//! calc_lcoefs does (charge.rs), each traced device's model and its report
//! (devices.rs), the refit from measured device time (fit.rs), the online
//! estimator and guard `tune --model` runs (online/), the saturating fio
//! profile (profile.rs, the one part that runs anything) and the text view
//! (view.rs); iocost's units are units.rs. The knob's file format is knobs/cost_model.rs, beside the
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

mod charge;
mod fit;
mod model;
mod units;
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

pub use charge::{calc_lcoefs, price, request_cost, size_class, size_class_bytes, Charged};
pub use fit::{fit_op, ClassSample, DeviceFit, OpFit, MIN_CLASS_IOS};
pub use model::{
    default_model, lcoefs, parse_kernel_line, parse_over, LinearModel, AUTOP_HDD, AUTOP_SSD_DFL,
};
pub use units::{PAGE_SIZE, SIZES, VTIME_PER_SEC};

#[cfg(test)]
mod tests;
