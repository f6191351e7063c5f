//! The [`Snapshot`] and its domains, declared once in
//! [`snapshot_domains!`]: each field with how a window of it is taken,
//! its place in the OpenMetrics exposition and the records whose
//! `metrics!` families it carries. From that list follow the struct (and
//! so the JSON), [`Snapshot::delta_since`], [`Snapshot::with_io`],
//! [`Snapshot::DOMAINS`], openmetrics/'s order, the fixture's one record
//! of each domain (model/fixture.rs) and the delta checks
//! (model/delta_tests.rs).

use serde::{Deserialize, Serialize};

use super::core::{delta_by_key, delta_if_earlier, Delta};
use super::cost::DeviceCostModel;
use super::culprits::CulpritSeries;
use super::delay::TaskDelay;
use super::diskstats::KernelDiskStats;
use super::io::{DropCounters, IoSeries};
use super::iocost::{IocostCgroup, IocostDevice};
use super::limits::LimitVerdict;
use super::locks::LockReport;
use super::nvme::{HolSeries, NvmeQueue, NvmeQueueCgroup};
use super::pressure::PressureSeries;
use super::queues::{CpuQueueMap, QueueSeries};
use super::runtime::ProbeStatus;
use super::tuner::TunerStatus;
use super::volume::Volume;

/// Version of the JSON schema of [`Snapshot`]; bump on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// The snapshot's domains, in the JSON's order, handed to `$then!` (a
/// macro that reads the list: the struct below, openmetrics/'s order, the
/// fixture, the reference's tests). Each line:
///
/// `field: Type, window, exposed N, families [Record, …];`
///
/// - window: how [`Snapshot::delta_since`] takes it: `keyed` (a list of
///   series matched by their `key()`, each less its earlier reading by its
///   `Delta`, new ones whole), `counted` (the field's `Delta`),
///   `if_earlier` (an optional report: its `Delta` where the earlier
///   reading has one, else whole) or `latest` (state: the later reading);
/// - exposed N: its families' place in /metrics, smallest first (its
///   encoder is openmetrics/'s `Expose` impl for the field's type);
/// - families: the records whose `metrics!` list declares families, nested
///   ones included (the reference checks each is exposed).
///
/// Attributes (docs, serde) go before the field, as on a struct. A line
/// whose parts are missing does not compile: "cannot find function
/// `field`" asks for its record in model/fixture.rs, "`Type: Expose` is not
/// satisfied" for its encoder in openmetrics/.
macro_rules! snapshot_domains {
    ($then:ident) => {
        $then! {
            io: Vec<IoSeries>, keyed, exposed 10, families [IoSeries];
            queues: Vec<QueueSeries>, keyed, exposed 50, families [QueueSeries];
            probes: Vec<ProbeStatus>, latest, exposed 70, families [];
            drops: DropCounters, counted, exposed 80, families [];
            /// blk-mq CPU -> hardware queue map of the traced devices.
            #[serde(default)]
            cpu_queue_map: Vec<CpuQueueMap>, latest, exposed 100, families [];
            /// NVMe per-queue, per-cgroup commands (where the nvme driver is).
            #[serde(default)]
            nvme_queue_cgroups: Vec<NvmeQueueCgroup>, keyed, exposed 110,
                families [NvmeQueueCgroup];
            #[serde(default)]
            nvme_queues: Vec<NvmeQueue>, keyed, exposed 120, families [NvmeQueue];
            /// NVMe head-of-line interference (cumulative).
            #[serde(default)]
            nvme_hol: Vec<HolSeries>, keyed, exposed 130, families [HolSeries];
            /// iocost state (where iocost is enabled).
            #[serde(default)]
            iocost_devices: Vec<IocostDevice>, keyed, exposed 140, families [IocostDevice];
            #[serde(default)]
            iocost_cgroups: Vec<IocostCgroup>, keyed, exposed 150, families [IocostCgroup];
            /// Kernel lock contention (None when the lock programs are off).
            #[serde(default)]
            locks: Option<LockReport>, if_earlier, exposed 160, families [LockSiteRow];
            /// The linear cost model of every traced device: configured, measured
            /// against device time per class (in a delta: the window's samples and
            /// the configured model's error over them), refitted (from every sample
            /// since start, in a delta too).
            #[serde(default)]
            cost_models: Vec<DeviceCostModel>, keyed, exposed 170, families [CostClass];
            /// The kernel's own completion counts of the traced devices
            /// (/proc/diskstats, cumulative since boot).
            #[serde(default)]
            kernel_diskstats: Vec<KernelDiskStats>, keyed, exposed 60,
                families [KernelDiskStats];
            /// The online io.cost.qos tuner's state (`iowarden tune` only).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            tuner: Option<TunerStatus>, latest, exposed 190, families [TunerSlo, ModelParam];
            /// The bio-based volumes with traced I/O and the disks below them.
            #[serde(default)]
            volumes: Vec<Volume>, latest, exposed 20, families [];
            /// Every io limit and weight set on the host, judged over the last
            /// judging window (`iowarden run`; empty elsewhere).
            #[serde(default)]
            limits: Vec<LimitVerdict>, latest, exposed 180, families [];
            /// The delays io.latency and iocost put on each cgroup's tasks between
            /// their I/Os (where the kernel lets them be timed).
            #[serde(default)]
            task_delays: Vec<TaskDelay>, keyed, exposed 30, families [TaskDelay];
            /// Whom each cgroup's requests waited behind, on the device and
            /// in the I/O scheduler (empty with `--no-culprits`).
            #[serde(default)]
            culprits: Vec<CulpritSeries>, keyed, exposed 40, families [CulpritSeries];
            /// The kernel's I/O stall time (io.pressure) of each cgroup with
            /// I/O series (cgroup v2 with PSI; empty elsewhere).
            #[serde(default)]
            io_pressure: Vec<PressureSeries>, keyed, exposed 45, families [];
        }
    };
}
pub(crate) use snapshot_domains;

/// The struct and its window from the list.
macro_rules! declare_snapshot {
    ($(
        $(#[$attr:meta])*
        $field:ident: $ty:ty, $window:ident, exposed $at:literal, families [$($fam:ty),*];
    )+) => {
        #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
        pub struct Snapshot {
            pub schema: u32,
            /// Wall clock time the snapshot was taken, seconds since the Unix epoch.
            pub taken_at_unix_seconds: f64,
            /// Seconds covered: since the daemon started for a cumulative snapshot, the
            /// window length for a delta.
            pub window_seconds: f64,
            pub hostname: String,
            pub kernel: String,
            /// Lower bound, in seconds, of every latency histogram bucket.
            pub hist_lower_bounds_seconds: Vec<f64>,
            $($(#[$attr])* pub $field: $ty,)+
        }

        impl Snapshot {
            /// The domains' field names (their JSON keys), in the JSON's order.
            pub const DOMAINS: &'static [&'static str] = &[$(stringify!($field)),+];

            /// The activity between `prev` and `self` (both cumulative): each
            /// domain taken as its line in [`snapshot_domains!`] says,
            /// `window_seconds` set to the wall time between the two.
            pub fn delta_since(&self, prev: &Snapshot) -> Snapshot {
                Snapshot {
                    window_seconds: (self.taken_at_unix_seconds - prev.taken_at_unix_seconds)
                        .max(0.0),
                    $($field: declare_snapshot!(@window $window, &self.$field, &prev.$field),)+
                    ..self.header()
                }
            }

            /// This snapshot with other I/O series (everything else cloned).
            pub fn with_io(&self, io: Vec<IoSeries>) -> Snapshot {
                Snapshot {
                    $($field: declare_snapshot!(@other_io $field, self, io),)+
                    ..self.header()
                }
            }

            /// The fields that are no domain's, every domain empty.
            fn header(&self) -> Snapshot {
                Snapshot {
                    schema: self.schema,
                    taken_at_unix_seconds: self.taken_at_unix_seconds,
                    window_seconds: self.window_seconds,
                    hostname: self.hostname.clone(),
                    kernel: self.kernel.clone(),
                    hist_lower_bounds_seconds: self.hist_lower_bounds_seconds.clone(),
                    ..Default::default()
                }
            }
        }
    };
    (@window keyed, $now:expr, $earlier:expr) => {
        delta_by_key($now, $earlier, |s| s.key())
    };
    (@window counted, $now:expr, $earlier:expr) => {
        Delta::delta($now, $earlier)
    };
    (@window if_earlier, $now:expr, $earlier:expr) => {
        delta_if_earlier($now, $earlier)
    };
    (@window latest, $now:expr, $earlier:expr) => {
        Clone::clone($now)
    };
    (@other_io io, $self:ident, $io:ident) => {
        $io
    };
    (@other_io $field:ident, $self:ident, $io:ident) => {
        $self.$field.clone()
    };
}

snapshot_domains!(declare_snapshot);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::core::{CgroupRef, DeviceRef, Histogram, Op, StageHistograms};

    #[test]
    fn delta_subtracts_matching_series() {
        let series = |ios, c| IoSeries {
            cgroup: CgroupRef {
                id: 7,
                path: "/a".into(),
            },
            device: DeviceRef {
                name: "loop0".into(),
                major: 7,
                minor: 0,
            },
            op: Op::Read,
            ios,
            bytes: ios * 4096,
            latency: StageHistograms {
                total: Histogram {
                    counts: vec![c, 0],
                    sum_seconds: c as f64,
                },
                ..Default::default()
            },
            ..Default::default()
        };
        let a = Snapshot {
            taken_at_unix_seconds: 10.0,
            io: vec![series(5, 5)],
            ..Default::default()
        };
        let b = Snapshot {
            taken_at_unix_seconds: 12.5,
            io: vec![series(12, 9)],
            ..Default::default()
        };
        let d = b.delta_since(&a);
        assert_eq!(d.window_seconds, 2.5);
        assert_eq!(d.io[0].ios, 7);
        assert_eq!(d.io[0].bytes, 7 * 4096);
        assert_eq!(d.io[0].latency.total.counts, vec![4, 0]);
        assert_eq!(d.io[0].latency.total.sum_seconds, 4.0);
    }

    #[test]
    fn with_io_replaces_the_io_series_only() {
        let snap = Snapshot {
            hostname: "h".into(),
            io: vec![IoSeries::default()],
            culprits: vec![CulpritSeries::default()],
            ..Default::default()
        };
        let other = snap.with_io(Vec::new());
        assert_eq!(other.io, Vec::new());
        assert_eq!(
            other,
            Snapshot {
                io: Vec::new(),
                ..snap
            }
        );
    }
}
