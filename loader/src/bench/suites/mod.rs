//! The suites: which phases each runs, how each knob is set in them, and
//! how a phase's numbers become the report's rows.

mod burst;
mod fairness;
mod overhead;
mod prio_util;
mod schedulers;
mod shared;

pub use burst::{burst, burst_windows};
pub use fairness::{fairness, shared_window_bw};
pub use overhead::overhead;
pub use prio_util::{prio_util, sweep, Setting};
pub use schedulers::schedulers;
pub use shared::{calibration, Bench};
