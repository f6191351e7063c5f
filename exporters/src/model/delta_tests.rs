//! Every domain's delta, checked without trusting its `Delta`: each numeric
//! field is a label (the same in both readings), a gauge or ratio (the
//! later reading's) or a counter (the later less the earlier). The lists
//! below name the fields that are not counters, domain by domain; every
//! other number must subtract. A new counter left out of its record's
//! `metrics!` list, or a gauge listed as a counter, fails here. Every
//! domain of `snapshot_domains!` is checked (`Snapshot::DOMAINS`), on the
//! fixture's record of it (model/fixture.rs).

use serde_json::Value;

use super::fixture;
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

/// Domains that are state, not counts: a delta is the later reading whole.
const STATE: &[&str] = &["probes", "cpu_queue_map", "tuner", "volumes", "limits"];

/// Each domain's gauges: the numbers, besides LABELS and RATIOS, that keep
/// the later reading. A domain not named here has none.
const GAUGES: &[(&str, &[&str])] = &[
    ("queues", &["inflight"]),
    ("nvme_queue_cgroups", &["inflight"]),
    ("nvme_queues", &["sq_occupancy_last", "sq_occupancy_max"]),
    (
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
    ),
    (
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
    ),
    ("cost_models", &LinearModel::KEYS),
];

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
    let mut v = serde_json::to_value(fixture::snapshot()).unwrap();
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
/// keep the later reading. The wrong fields, as lines.
fn check(domain: &str, gauges: &[&str]) -> Vec<String> {
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
    if ev.len() < 2 {
        return vec![format!("{domain}: no numbers to check: fill its fixture")];
    }
    if ev.len() != dv.len() {
        return vec![format!("{domain}: the delta has other fields")];
    }
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
            wrong.push(format!(
                "{domain}.{field}: {d}, not {kind} {want} ({e} then {l})"
            ));
        }
    }
    wrong
}

/// A state domain's delta is its later reading, whole (and the fixture
/// has one).
fn check_state(domain: &str) -> Vec<String> {
    let (earlier, later) = readings(domain);
    let (l, d) = (
        serde_json::to_value(&later).unwrap(),
        serde_json::to_value(later.delta_since(&earlier)).unwrap(),
    );
    let empty = match &l[domain] {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        _ => false,
    };
    match (empty, l[domain] == d[domain]) {
        (true, _) => vec![format!("{domain}: empty: fill its fixture")],
        (false, false) => vec![format!("{domain}: the delta is not the later reading")],
        (false, true) => Vec::new(),
    }
}

#[test]
fn every_domain_s_delta_subtracts_its_counters_and_keeps_the_rest() {
    let mut wrong = Vec::new();
    for &domain in Snapshot::DOMAINS {
        if STATE.contains(&domain) {
            wrong.extend(check_state(domain));
        } else {
            let gauges = GAUGES.iter().find(|(d, _)| *d == domain);
            wrong.extend(check(domain, gauges.map_or(&[], |(_, g)| *g)));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn the_lists_name_domains_only() {
    let named = STATE.iter().chain(GAUGES.iter().map(|(d, _)| d));
    for d in named {
        assert!(Snapshot::DOMAINS.contains(d), "{d} is no domain");
    }
}
