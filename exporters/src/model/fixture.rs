//! A snapshot with one record of every domain, every optional value known
//! and every list filled: encoded, it writes every family iowarden can
//! expose (what the reference is read from), and model/delta_tests.rs
//! checks every number of it in a delta. The values mean nothing; the
//! labels are ones a user would see. Each domain's record comes from the
//! function named as its field: [`snapshot`] calls one per line of
//! `snapshot_domains!`, so a new domain does not compile without its own.

use super::core::{CgroupRef, DeviceRef, Histogram, Op, Stage, StageHistograms};
use super::cost::{CostClass, DeviceCostModel, LinearModel};
use super::culprits::CulpritSeries;
use super::delay::TaskDelay;
use super::diskstats::KernelDiskStats;
use super::io::{DropCounters, IoSeries};
use super::iocost::{IocostCgroup, IocostDevice};
use super::limits::{LimitKnob, LimitReason, LimitState, LimitVerdict};
use super::locks::{LockReport, LockSeries, LockSiteRow, LockStack};
use super::nvme::{HolSeries, NvmeQueue, NvmeQueueCgroup};
use super::pressure::PressureSeries;
use super::queues::{CpuQueueMap, QueueSeries};
use super::runtime::{BpfProgramStats, ProbeStatus, RuntimeMetrics, SelfMetrics, TableFill};
use super::snapshot::{snapshot_domains, Snapshot};
use super::tune_model::{ModelParam, ModelTunerStatus};
use super::tuner::{TunerSlo, TunerStatus};
use super::volume::Volume;

/// The latency layout of the fixture's histograms: 24 buckets, powers of
/// two from 1 us.
pub(crate) fn lower_bounds() -> Vec<f64> {
    (0..24).map(|i| (1u64 << i) as f64 / 1e6).collect()
}

macro_rules! one_of_each {
    ($(
        $(#[$attr:meta])*
        $field:ident: $ty:ty, $window:ident, exposed $at:literal, families [$($fam:ty),*];
    )+) => {
        /// Every domain, one record (or report) each.
        pub(crate) fn snapshot() -> Snapshot {
            Snapshot {
                $($field: $field(),)+
                hist_lower_bounds_seconds: lower_bounds(),
                ..Default::default()
            }
        }
    };
}
snapshot_domains!(one_of_each);

fn cgroup(path: &str) -> CgroupRef {
    CgroupRef {
        id: 4242,
        path: path.into(),
    }
}

fn nvme() -> DeviceRef {
    DeviceRef {
        name: "nvme0n1".into(),
        major: 259,
        minor: 0,
    }
}

fn histogram(buckets: usize) -> Histogram {
    let mut counts = vec![0; buckets];
    counts[buckets / 2] = 1;
    Histogram {
        counts,
        sum_seconds: 1e-3,
    }
}

fn io() -> Vec<IoSeries> {
    let buckets = lower_bounds().len();
    vec![IoSeries {
        cgroup: cgroup("/kubepods.slice/pod-a"),
        device: nvme(),
        op: Op::Read,
        ios: 1,
        bytes: 4096,
        merged: 1,
        requeued: 1,
        cost_seconds: 1e-4,
        random_ios: 1,
        held_io_max_seconds: 1e-3,
        latency: StageHistograms {
            throttle: histogram(buckets),
            queue: histogram(buckets),
            device: histogram(buckets),
            total: histogram(buckets),
        },
    }]
}

fn queues() -> Vec<QueueSeries> {
    vec![QueueSeries {
        device: nvme(),
        inserted: Some(1),
        issued: Some(1),
        inflight: Some(1),
        ..Default::default()
    }]
}

fn probes() -> Vec<ProbeStatus> {
    vec![ProbeStatus {
        name: "nvme".into(),
        active: true,
        reason: String::new(),
    }]
}

fn drops() -> DropCounters {
    DropCounters::default()
}

fn cpu_queue_map() -> Vec<CpuQueueMap> {
    vec![CpuQueueMap {
        device: "nvme0n1".into(),
        hctx: 0,
        cpus: vec![0],
    }]
}

fn nvme_queue_cgroups() -> Vec<NvmeQueueCgroup> {
    vec![NvmeQueueCgroup {
        device: nvme(),
        qid: 1,
        cgroup: cgroup("/victim"),
        commands: 1,
        completions: 1,
        bytes: 4096,
        inflight: 1,
        small_commands: 1,
        large_commands: 1,
    }]
}

fn nvme_queues() -> Vec<NvmeQueue> {
    vec![NvmeQueue {
        device: nvme(),
        qid: 1,
        cpus: vec![0],
        sq_samples: 1,
        sq_occupancy_mean: 1.0,
        sq_occupancy_last: 1,
        sq_occupancy_max: 1,
    }]
}

fn nvme_hol() -> Vec<HolSeries> {
    let hol = |culprit: Option<CgroupRef>| HolSeries {
        device: nvme(),
        qid: 1,
        victim: cgroup("/victim"),
        culprit,
        count: 1,
        latency_sum_seconds: 1e-3,
    };
    vec![hol(Some(cgroup("/hog"))), hol(None)]
}

fn iocost_devices() -> Vec<IocostDevice> {
    vec![IocostDevice {
        device: nvme(),
        vrate_ratio: 1.0,
        io_stat_vrate_ratio: Some(1.0),
        qos_vrate_min_ratio: Some(0.5),
        qos_vrate_max_ratio: Some(1.0),
        ..Default::default()
    }]
}

fn iocost_cgroups() -> Vec<IocostCgroup> {
    vec![IocostCgroup {
        device: nvme(),
        cgroup: cgroup("/a"),
        usage_seconds: Some(1.0),
        ..Default::default()
    }]
}

fn locks() -> Option<LockReport> {
    Some(LockReport {
        mode: "block".into(),
        series: vec![LockSeries {
            site: "blk_mq_get_tag".into(),
            cgroup: cgroup("/a"),
            kind: "spin".into(),
            count: 1,
            wait_seconds: 1e-6,
            hist_log2_ns: vec![0, 1, 0],
            ..Default::default()
        }],
        stacks: vec![LockStack {
            id: 0,
            frames: vec!["blk_mq_get_tag+0x1f".into()],
        }],
        top: vec![LockSiteRow {
            site: "blk_mq_get_tag".into(),
            cgroup: cgroup("/a"),
            count: 1,
            wait_seconds: 1e-6,
        }],
        dropped: vec![("stack".into(), 1)],
        ..Default::default()
    })
}

fn cost_models() -> Vec<DeviceCostModel> {
    let model = LinearModel {
        rbps: 1,
        rseqiops: 1,
        rrandiops: 1,
        wbps: 1,
        wseqiops: 1,
        wrandiops: 1,
    };
    vec![DeviceCostModel {
        device: nvme(),
        configured: model,
        fitted: model,
        classes: vec![CostClass {
            op: Op::Read,
            size_bytes: 4096,
            ios: 1,
            device_seconds: 1e-4,
            model_seconds: 1e-4,
            error: Some(0.0),
            fitted_error: Some(0.0),
            ..Default::default()
        }],
        ..Default::default()
    }]
}

fn kernel_diskstats() -> Vec<KernelDiskStats> {
    vec![KernelDiskStats {
        device: nvme(),
        ..Default::default()
    }]
}

fn tuner() -> Option<TunerStatus> {
    let param = ModelParam {
        name: "rbps".into(),
        fitted: Some(1),
        relative_error: Some(0.1),
        ..Default::default()
    };
    Some(TunerStatus {
        device: nvme(),
        slos: vec![TunerSlo {
            cgroup: "/lc".into(),
            slo: "read-p99".into(),
            observed_seconds: Some(1e-3),
            worst_after_convergence_seconds: Some(1e-3),
            ..Default::default()
        }],
        qos: vec![("min".into(), 50.0)],
        decisions: vec![("decrease".into(), 1)],
        model: Some(ModelTunerStatus {
            params: vec![param],
            fit_error: Some(0.1),
            decisions: vec![("keep".into(), 1)],
            ..Default::default()
        }),
        ..Default::default()
    })
}

fn volumes() -> Vec<Volume> {
    vec![Volume {
        device: DeviceRef {
            name: "dm-0".into(),
            major: 253,
            minor: 0,
        },
        kind: "dm".into(),
        name: "vg0-data".into(),
        lower: vec!["nvme0n1".into()],
    }]
}

fn limits() -> Vec<LimitVerdict> {
    vec![LimitVerdict {
        knob: LimitKnob {
            cgroup: "/a".into(),
            knob: "io.max".into(),
            devnum: Some("259:0".into()),
            value: "riops=200".into(),
        },
        device: "nvme0n1".into(),
        state: LimitState::Acting,
        reason: LimitReason::Held,
        why: String::new(),
    }]
}

fn task_delays() -> Vec<TaskDelay> {
    vec![TaskDelay {
        cgroup: cgroup("/kubepods.slice/pod-b"),
        device: nvme(),
        delays: 1,
        seconds: 1e-3,
    }]
}

fn culprits() -> Vec<CulpritSeries> {
    vec![CulpritSeries {
        device: nvme(),
        victim: cgroup("/kubepods.slice/pod-a"),
        op: Op::Read,
        culprit: Some(cgroup("/kubepods.slice/pod-b")),
        culprit_op: Some(Op::Write),
        stage: Stage::Device,
        seconds: 4e-3,
    }]
}

fn io_pressure() -> Vec<PressureSeries> {
    vec![PressureSeries {
        cgroup: cgroup("/kubepods.slice/pod-a"),
        some_seconds: 2e-3,
        full_seconds: 1e-3,
    }]
}

/// The exporter's own facts, every optional one known.
pub(crate) fn self_metrics() -> SelfMetrics {
    SelfMetrics {
        cgroups_folded: Some(0),
        build_version: "0.0.0".into(),
        runtime: RuntimeMetrics {
            bpf_stats_enabled: true,
            programs: vec![BpfProgramStats {
                program: "iow_complete".into(),
                ..Default::default()
            }],
            tables: vec![TableFill {
                table: "series".into(),
                entries: 1,
                capacity: 2,
            }],
            start_time_seconds: 1.0,
            cgroups: vec![(
                "/kubepods.slice/pod-a".into(),
                vec![("pod".into(), "a".into())],
            )],
            ..Default::default()
        },
        ..Default::default()
    }
}
