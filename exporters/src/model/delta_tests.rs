//! Every domain's delta, checked without trusting its `Delta`: each numeric
//! field is a label (the same in both readings), a gauge or ratio (the
//! later reading's) or a counter (the later less the earlier). The lists
//! below name the fields that are not counters, domain by domain; every
//! other number must subtract. A new counter left out of its record's
//! `metrics!` list, or a gauge listed as a counter, fails here.

use serde_json::Value;

use super::*;

/// Numeric fields that name a series (or a bucket's place): never changed.
const LABELS: &[&str] = &[
    "id",
    "major",
    "minor",
    "hctx",
    "qid",
    "stack_id",
    "size_bytes",
    "cpus",
];

/// Ratios and means: the same in both readings here, so that a window
/// recomputed from the counters equals them too.
const RATIOS: &[&str] = &["sq_occupancy_mean", "error", "fitted_error"];

/// One record (or report) in every domain, with its optional numbers set.
fn one_of_each() -> Snapshot {
    let hist = || Histogram {
        counts: vec![0; 3],
        sum_seconds: 0.0,
    };
    let stages = StageHistograms {
        throttle: hist(),
        queue: hist(),
        device: hist(),
        total: hist(),
    };
    let cgroup = CgroupRef {
        id: 7,
        path: "/a".into(),
    };
    Snapshot {
        io: vec![IoSeries {
            latency: stages,
            ..Default::default()
        }],
        queues: vec![QueueSeries {
            inserted: Some(0),
            issued: Some(0),
            inflight: Some(0),
            ..Default::default()
        }],
        nvme_queue_cgroups: vec![NvmeQueueCgroup::default()],
        nvme_queues: vec![NvmeQueue {
            cpus: vec![0, 1],
            ..Default::default()
        }],
        nvme_hol: vec![HolSeries {
            culprit: Some(cgroup.clone()),
            ..Default::default()
        }],
        iocost_devices: vec![IocostDevice {
            io_stat_vrate_ratio: Some(0.0),
            qos_vrate_min_ratio: Some(0.0),
            qos_vrate_max_ratio: Some(0.0),
            ..Default::default()
        }],
        iocost_cgroups: vec![IocostCgroup {
            usage_seconds: Some(0.0),
            ..Default::default()
        }],
        locks: Some(LockReport {
            series: vec![LockSeries {
                hist_log2_ns: vec![0; 3],
                ..Default::default()
            }],
            stacks: vec![LockStack::default()],
            top: vec![LockSiteRow::default()],
            dropped: vec![("no_stack".into(), 0)],
            ..Default::default()
        }),
        cost_models: vec![DeviceCostModel {
            classes: vec![CostClass {
                error: Some(0.0),
                fitted_error: Some(0.0),
                ..Default::default()
            }],
            ..Default::default()
        }],
        kernel_diskstats: vec![KernelDiskStats::default()],
        task_delays: vec![TaskDelay::default()],
        ..Default::default()
    }
}

/// Every number under `v`, with the name of the field that holds it.
fn numbers<'a>(v: &'a mut Value, field: &str, out: &mut Vec<(String, &'a mut Value)>) {
    match v {
        Value::Number(_) => out.push((field.to_string(), v)),
        Value::Array(a) => a.iter_mut().for_each(|x| numbers(x, field, out)),
        Value::Object(o) => o.iter_mut().for_each(|(k, x)| numbers(x, k, out)),
        _ => {}
    }
}

fn not_a_counter(field: &str, gauges: &[&str]) -> bool {
    LABELS.contains(&field) || RATIOS.contains(&field) || gauges.contains(&field)
}

/// The earlier reading (every number distinct) and the later one (every
/// counter and gauge doubled) of `domain`.
fn readings(domain: &str) -> (Snapshot, Snapshot) {
    let mut v = serde_json::to_value(one_of_each()).unwrap();
    let mut fields = Vec::new();
    numbers(&mut v[domain], domain, &mut fields);
    for (i, (_, n)) in fields.into_iter().enumerate() {
        *n = Value::from(i as u64 + 1);
    }
    let mut earlier: Snapshot = serde_json::from_value(v.clone()).unwrap();
    earlier.taken_at_unix_seconds = 10.0;
    // The configured model's error is what the class's sums make it.
    for c in earlier.cost_models.iter_mut().flat_map(|m| &mut m.classes) {
        c.error = Some((c.model_seconds - c.device_seconds) / c.device_seconds);
    }
    let mut later = serde_json::to_value(&earlier).unwrap();
    let mut fields = Vec::new();
    numbers(&mut later[domain], domain, &mut fields);
    for (field, n) in fields {
        if !LABELS.contains(&field.as_str()) && !RATIOS.contains(&field.as_str()) {
            *n = match n.as_u64() {
                Some(u) => Value::from(u * 2),
                None => Value::from(n.as_f64().unwrap() * 2.0),
            };
        }
    }
    let mut later: Snapshot = serde_json::from_value(later).unwrap();
    later.taken_at_unix_seconds = 20.0;
    (earlier, later)
}

/// Checks `domain`'s delta field by field; `gauges` are its fields that
/// keep the later reading.
fn check(domain: &str, gauges: &[&str]) {
    let (earlier, later) = readings(domain);
    let delta = later.delta_since(&earlier);
    assert_eq!(delta.window_seconds, 10.0);
    let (mut e, mut l, mut d) = (
        serde_json::to_value(&earlier).unwrap(),
        serde_json::to_value(&later).unwrap(),
        serde_json::to_value(&delta).unwrap(),
    );
    let (mut ev, mut lv, mut dv) = (Vec::new(), Vec::new(), Vec::new());
    numbers(&mut e[domain], domain, &mut ev);
    numbers(&mut l[domain], domain, &mut lv);
    numbers(&mut d[domain], domain, &mut dv);
    assert!(ev.len() > 1, "{domain}: no numbers to check");
    assert_eq!(ev.len(), dv.len(), "{domain}: the delta has other fields");
    let mut wrong = Vec::new();
    for ((field, e), ((_, l), (_, d))) in ev.iter().zip(lv.iter().zip(&dv)) {
        let (e, l, d) = (
            e.as_f64().unwrap(),
            l.as_f64().unwrap(),
            d.as_f64().unwrap(),
        );
        let (kind, want) = if not_a_counter(field, gauges) {
            ("the later reading", l)
        } else {
            ("the difference", l - e)
        };
        if (d - want).abs() > 1e-9 * want.abs().max(1.0) {
            wrong.push(format!("{field}: {d}, not {kind} {want} ({e} then {l})"));
        }
    }
    assert!(wrong.is_empty(), "{domain} delta: {wrong:#?}");
}

#[test]
fn io_counters_and_histograms_subtract() {
    check("io", &[]);
}

#[test]
fn drop_counters_subtract() {
    check("drops", &[]);
}

#[test]
fn hardware_queue_counters_subtract_and_inflight_is_the_latest() {
    check("queues", &["inflight"]);
}

#[test]
fn nvme_queue_cgroup_counters_subtract() {
    check("nvme_queue_cgroups", &["inflight"]);
}

#[test]
fn nvme_queue_samples_subtract_and_their_mean_is_the_windows() {
    check("nvme_queues", &["sq_occupancy_last", "sq_occupancy_max"]);
}

#[test]
fn head_of_line_counts_subtract() {
    check("nvme_hol", &[]);
}

#[test]
fn iocost_device_adjustments_subtract_and_its_state_is_the_latest() {
    check(
        "iocost_devices",
        &[
            "vrate_ratio",
            "vrate_effective_ratio",
            "io_stat_vrate_ratio",
            "busy_level",
            "missed_ppm_read",
            "missed_ppm_write",
            "rq_wait_ratio",
            "nr_lagging",
            "nr_shortages",
            "qos_vrate_min_ratio",
            "qos_vrate_max_ratio",
        ],
    );
}

#[test]
fn iocost_cgroup_events_and_usage_subtract_and_weights_are_the_latest() {
    check(
        "iocost_cgroups",
        &[
            "weight",
            "inuse",
            "hweight_active_ratio",
            "hweight_active_cached_ratio",
            "hweight_inuse_ratio",
            "vtime_budget_seconds",
            "debt_seconds",
            "delay_seconds",
        ],
    );
}

#[test]
fn lock_waits_subtract() {
    check("locks", &[]);
}

#[test]
fn cost_class_samples_subtract_and_the_models_are_the_latest() {
    check("cost_models", &LinearModel::KEYS);
}

#[test]
fn kernel_diskstats_subtract() {
    check("kernel_diskstats", &[]);
}

#[test]
fn task_delays_subtract() {
    check("task_delays", &[]);
}
