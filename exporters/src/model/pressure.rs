//! The kernel's pressure stall information (PSI) for I/O of each cgroup
//! with I/O series: how long its tasks stalled on I/O, from its
//! `io.pressure` (cgroup v2). Beside the culprit account, which says
//! behind whom its requests waited (docs/semantics.md).

use serde::{Deserialize, Serialize};

use super::core::CgroupRef;
use super::metric::metrics;

/// A cgroup's I/O stall time, as the kernel counts it since the cgroup
/// was created (io.pressure's `total`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct PressureSeries {
    pub cgroup: CgroupRef,
    /// Wall time at least one of its tasks stalled on I/O.
    pub some_seconds: f64,
    /// Wall time all of its non-idle tasks stalled on I/O at once.
    pub full_seconds: f64,
}

impl PressureSeries {
    pub fn key(&self) -> u64 {
        self.cgroup.id
    }
}

// One family with a kind label: openmetrics/pressure.rs.
metrics!(PressureSeries {
    counter some_seconds;
    counter full_seconds;
});
