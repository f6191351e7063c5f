//! A snapshot with one record of every domain, every optional value known,
//! so that encoding it writes every family iowarden can expose: what the
//! reference is read from. The values mean nothing; the labels are ones a
//! user would see.

use crate::model::*;

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

fn io(buckets: usize) -> IoSeries {
    IoSeries {
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
    }
}

fn nvme_parts() -> (NvmeQueueCgroup, NvmeQueue, Vec<HolSeries>) {
    let victim = cgroup("/victim");
    let hol = |culprit: Option<CgroupRef>| HolSeries {
        device: nvme(),
        qid: 1,
        victim: victim.clone(),
        culprit,
        count: 1,
        latency_sum_seconds: 1e-3,
    };
    (
        NvmeQueueCgroup {
            device: nvme(),
            qid: 1,
            cgroup: victim.clone(),
            commands: 1,
            completions: 1,
            bytes: 4096,
            inflight: 1,
            small_commands: 1,
            large_commands: 1,
        },
        NvmeQueue {
            device: nvme(),
            qid: 1,
            cpus: vec![0],
            sq_samples: 1,
            sq_occupancy_mean: 1.0,
            sq_occupancy_last: 1,
            sq_occupancy_max: 1,
        },
        vec![hol(Some(cgroup("/hog"))), hol(None)],
    )
}

fn iocost() -> (IocostDevice, IocostCgroup) {
    (
        IocostDevice {
            device: nvme(),
            vrate_ratio: 1.0,
            qos_vrate_min_ratio: Some(0.5),
            qos_vrate_max_ratio: Some(1.0),
            ..Default::default()
        },
        IocostCgroup {
            device: nvme(),
            cgroup: cgroup("/a"),
            usage_seconds: Some(1.0),
            ..Default::default()
        },
    )
}

fn locks() -> LockReport {
    LockReport {
        mode: "block".into(),
        top: vec![LockSiteRow {
            site: "blk_mq_get_tag".into(),
            cgroup: cgroup("/a"),
            count: 1,
            wait_seconds: 1e-6,
        }],
        ..Default::default()
    }
}

fn cost_model() -> DeviceCostModel {
    let model = LinearModel {
        rbps: 1,
        rseqiops: 1,
        rrandiops: 1,
        wbps: 1,
        wseqiops: 1,
        wrandiops: 1,
    };
    DeviceCostModel {
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
    }
}

fn tuner() -> TunerStatus {
    let param = ModelParam {
        name: "rbps".into(),
        fitted: Some(1),
        relative_error: Some(0.1),
        ..Default::default()
    };
    TunerStatus {
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
    }
}

fn limit() -> LimitVerdict {
    LimitVerdict {
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
    }
}

/// Every domain, one record each, with `lower_bounds` as the latency layout.
pub(super) fn snapshot(lower_bounds: Vec<f64>) -> Snapshot {
    let (nvme_queue_cgroup, nvme_queue, nvme_hol) = nvme_parts();
    let (iocost_device, iocost_cgroup) = iocost();
    Snapshot {
        io: vec![io(lower_bounds.len())],
        hist_lower_bounds_seconds: lower_bounds,
        queues: vec![QueueSeries {
            device: nvme(),
            inserted: Some(1),
            issued: Some(1),
            inflight: Some(1),
            ..Default::default()
        }],
        probes: vec![ProbeStatus {
            name: "nvme".into(),
            active: true,
            reason: String::new(),
        }],
        cpu_queue_map: vec![CpuQueueMap {
            device: "nvme0n1".into(),
            hctx: 0,
            cpus: vec![0],
        }],
        nvme_queue_cgroups: vec![nvme_queue_cgroup],
        nvme_queues: vec![nvme_queue],
        nvme_hol,
        iocost_devices: vec![iocost_device],
        iocost_cgroups: vec![iocost_cgroup],
        locks: Some(locks()),
        cost_models: vec![cost_model()],
        kernel_diskstats: vec![KernelDiskStats {
            device: nvme(),
            ..Default::default()
        }],
        tuner: Some(tuner()),
        volumes: vec![Volume {
            device: DeviceRef {
                name: "dm-0".into(),
                major: 253,
                minor: 0,
            },
            kind: "dm".into(),
            name: "vg0-data".into(),
            lower: vec!["nvme0n1".into()],
        }],
        limits: vec![limit()],
        task_delays: vec![TaskDelay {
            cgroup: cgroup("/kubepods.slice/pod-b"),
            device: nvme(),
            delays: 1,
            seconds: 1e-3,
        }],
        culprits: vec![CulpritSeries {
            device: nvme(),
            victim: cgroup("/kubepods.slice/pod-a"),
            op: Op::Read,
            culprit: Some(cgroup("/kubepods.slice/pod-b")),
            culprit_op: Some(Op::Write),
            stage: Stage::Device,
            seconds: 4e-3,
        }],
        ..Default::default()
    }
}

/// The exporter's own facts, every optional one known.
pub(super) fn self_metrics() -> SelfMetrics {
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
