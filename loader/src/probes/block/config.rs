//! What the block object is loaded with: its tables' sizes, the device it
//! traces, and what it measures besides counts and bytes.

use super::capacity::{self, Capacity};

/// What the block programs record and how big their tables are.
#[derive(Debug, Clone)]
pub struct BlockConfig {
    /// Series slots and counter shards (capacity::plan).
    pub capacity: Capacity,
    /// Trace only this device (kernel dev_t: major << 20 | minor).
    pub filter_devt: Option<u32>,
    pub measure: BlockMeasures,
}

/// What the block object measures besides counts and bytes: the command
/// line's choices, carried unchanged from crate::monitor::TraceOptions.
/// The default is the command line's.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockMeasures {
    pub latency: bool,
    /// Count the queue and device stages' histograms too (their sums are
    /// always kept): only when they are exported or shown.
    pub stage_histograms: bool,
    pub hwq: bool,
    /// Count inserted/issued per hardware queue: two more programs per request.
    pub hwq_events: bool,
    /// Time the delays iocost and io.latency put on tasks (`--task-delays`):
    /// a fentry/fexit pair on every return to user space with work pending.
    pub task_delays: bool,
    /// Charge every read/write the linear iocost model's cost.
    pub cost: bool,
    /// Split each request's time by whom it waited behind (on by default;
    /// `--no-culprits`): the completion program logs each timed request,
    /// a thread replays the log (crate::culprits).
    pub culprits: bool,
    /// The model for every device (`--cost-model`); None: each device's own
    /// (see crate::costmodel::devices).
    pub cost_model: Option<crate::costmodel::LinearModel>,
}

impl Default for BlockMeasures {
    fn default() -> Self {
        BlockMeasures {
            latency: true,
            stage_histograms: false,
            hwq: true,
            hwq_events: false,
            task_delays: false,
            cost: true,
            culprits: true,
            cost_model: None,
        }
    }
}

impl Default for BlockConfig {
    fn default() -> Self {
        BlockConfig {
            capacity: Capacity {
                slots: capacity::DEFAULT_SERIES,
                shards: capacity::auto_shards(libbpf_rs::num_possible_cpus().unwrap_or(1) as u32),
            },
            filter_devt: None,
            measure: BlockMeasures::default(),
        }
    }
}
