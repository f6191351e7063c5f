//! `iowarden run`: polls the maps at an interval and serves the latest
//! snapshot as OpenMetrics text or, to a scraper that asks for it, the
//! Prometheus protobuf exposition with native histograms (/metrics), and as
//! JSON (/snapshot.json).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use iowarden_exporters::{
    encode_json, encode_openmetrics, encode_protobuf, negotiate, CgroupCap, Exposition,
    ExpositionOptions, RuntimeMetrics, SelfMetrics, Snapshot, OPENMETRICS_CONTENT_TYPE,
    OTHER_CGROUP, PROTOBUF_CONTENT_TYPE,
};

use crate::host::container::{attribute_with, PodDirectory, StaticPodDirectory};

use crate::monitor::Monitor;
use crate::web::{Handler, Listener, Query, Reply};

/// What the poll loop publishes and the HTTP thread serves. Snapshots are
/// shared, never copied: a request takes a reference and encodes from it
/// (a copy per request would hold several snapshots of thousands of series).
#[derive(Default)]
struct Shared {
    snapshot: Mutex<Arc<Snapshot>>,
    /// What /metrics serves: the snapshot under the cgroup cap (the same
    /// snapshot without a cap).
    exported: Mutex<Arc<Snapshot>>,
    exposition: ExpositionOptions,
    poll_duration_ns: AtomicU64,
    polls: AtomicU64,
    scrapes: AtomicU64,
    /// Self-metrics refreshed every poll.
    runtime: Mutex<RuntimeMetrics>,
    scrape_duration_ns: AtomicU64,
    pods: Option<Arc<StaticPodDirectory>>,
    /// Cgroups summed into "other" at the last poll; None without a cap.
    cgroups_folded: Mutex<Option<u64>>,
}

/// `iowarden_cgroup_info` rows: one per cgroup with I/O in the snapshot.
fn cgroup_info(
    snap: &Snapshot,
    pods: Option<&dyn PodDirectory>,
) -> Vec<(String, Vec<(String, String)>)> {
    let mut paths: Vec<&str> = snap
        .io
        .iter()
        .map(|s| s.cgroup.path.as_str())
        .filter(|p| *p != OTHER_CGROUP)
        .collect();
    paths.sort_unstable();
    paths.dedup();
    paths
        .into_iter()
        .map(|p| (p.to_string(), attribute_with(p, pods).labels()))
        .collect()
}

/// The latest exported snapshot in the exposition the request negotiates.
fn metrics_response(shared: &Shared, accept: Option<&str>) -> Reply {
    shared.scrapes.fetch_add(1, Ordering::Relaxed);
    let snap = Arc::clone(&shared.exported.lock().unwrap());
    let mut runtime = shared.runtime.lock().unwrap().clone();
    runtime.scrape_duration_seconds =
        shared.scrape_duration_ns.load(Ordering::Relaxed) as f64 / 1e9;
    runtime.cgroups = cgroup_info(
        &snap,
        shared.pods.as_deref().map(|p| p as &dyn PodDirectory),
    );
    let extra = Arc::new(SelfMetrics {
        poll_duration_seconds: shared.poll_duration_ns.load(Ordering::Relaxed) as f64 / 1e9,
        polls_total: shared.polls.load(Ordering::Relaxed),
        scrape_count: shared.scrapes.load(Ordering::Relaxed),
        cgroups_folded: *shared.cgroups_folded.lock().unwrap(),
        build_version: env!("CARGO_PKG_VERSION").to_string(),
        runtime,
    });
    let encoded = match negotiate(accept) {
        Exposition::Protobuf => {
            encode_protobuf(&snap, &extra, &shared.exposition).map(|b| (b, PROTOBUF_CONTENT_TYPE))
        }
        Exposition::OpenMetrics => encode_openmetrics(&snap, &extra, &shared.exposition)
            .map(|t| (t.into_bytes(), OPENMETRICS_CONTENT_TYPE))
            .map_err(|e| e.to_string()),
    };
    match encoded {
        Ok((body, content_type)) => Reply {
            status: 200,
            content_type,
            body,
        },
        Err(e) => text(500, format!("encoding failed: {e}")),
    }
}

fn text(status: u16, body: impl Into<String>) -> Reply {
    Reply {
        status,
        content_type: "text/plain; charset=utf-8",
        body: body.into().into_bytes(),
    }
}

/// Answers one GET or HEAD the server let through (authenticated, method checked).
fn handle(shared: &Shared, query: &Query) -> Reply {
    let t0 = Instant::now();
    match query.path.as_str() {
        "/metrics" => {
            let reply = metrics_response(shared, query.accept.as_deref());
            shared
                .scrape_duration_ns
                .store(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
            reply
        }
        "/snapshot.json" => {
            let snap = Arc::clone(&shared.snapshot.lock().unwrap());
            Reply {
                status: 200,
                content_type: "application/json",
                body: encode_json(&snap).into_bytes(),
            }
        }
        "/" => text(200, "iowarden: /metrics (OpenMetrics), /snapshot.json\n"),
        _ => text(404, "not found\n"),
    }
}

pub struct RunOptions {
    pub interval: Duration,
    pub duration: Option<Duration>,
    /// BPF run-time stats were enabled (--bpf-stats).
    pub bpf_stats: bool,
    /// Pod and container names (--pod-map).
    pub pods: Option<Arc<StaticPodDirectory>>,
    /// Histogram stages and classic buckets of /metrics.
    pub exposition: ExpositionOptions,
    /// Cap on the cgroups with their own series (--max-cgroups).
    pub max_cgroups: Option<std::num::NonZeroUsize>,
}

/// Called with every snapshot before it is served (the tuner decides and
/// attaches its state here); an error stops the daemon.
pub type PollHook<'a> = &'a mut dyn FnMut(&mut Snapshot) -> Result<()>;

/// Runs until `stop` is set or `duration` elapses.
pub fn run(
    mut monitor: Monitor,
    listener: Listener,
    opts: &RunOptions,
    stop: Arc<AtomicBool>,
    hook: PollHook,
) -> Result<()> {
    let shared = Arc::new(Shared {
        pods: opts.pods.clone(),
        exposition: opts.exposition.clone(),
        ..Default::default()
    });
    let mut cap = opts.max_cgroups.map(CgroupCap::new);
    let mut folding_logged = false;
    let mut publish = |s: Snapshot, cap: &mut Option<CgroupCap>| {
        let s = Arc::new(s);
        *shared.exported.lock().unwrap() = match cap {
            Some(c) => {
                let capped = Arc::new(c.apply(&s));
                note_folding(c, &mut folding_logged);
                *shared.cgroups_folded.lock().unwrap() = Some(c.folded() as u64);
                capped
            }
            None => Arc::clone(&s),
        };
        *shared.snapshot.lock().unwrap() = s;
    };
    let start_time_seconds = crate::host::clock::since_epoch().as_secs_f64();
    let refresh_runtime = |monitor: &Monitor| {
        let on = opts.bpf_stats || crate::host::selfstats::sysctl_bpf_stats_enabled();
        *shared.runtime.lock().unwrap() = RuntimeMetrics {
            start_time_seconds,
            ..monitor.runtime_stats(on)
        };
    };
    let mut first = monitor.poll()?;
    hook(&mut first)?;
    publish(first, &mut cap);
    refresh_runtime(&monitor);
    crate::say!(
        "iowarden: serving {}://{}/metrics and /snapshot.json, polling every {:?}",
        listener.scheme(),
        listener.local_addr(),
        opts.interval
    );
    let http = {
        let stop = stop.clone();
        let handler: Handler = {
            let shared = shared.clone();
            Arc::new(move |q: &Query| handle(&shared, q))
        };
        std::thread::spawn(move || crate::web::serve(listener, handler, stop))
    };
    let started = Instant::now();
    let mut next = Instant::now() + opts.interval;
    let result = loop {
        if stop.load(Ordering::Relaxed) || opts.duration.is_some_and(|d| started.elapsed() >= d) {
            break Ok(());
        }
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(100)));
            continue;
        }
        next += opts.interval;
        let t0 = Instant::now();
        match monitor.poll().and_then(|mut s| hook(&mut s).map(|_| s)) {
            Ok(s) => publish(s, &mut cap),
            Err(e) => break Err(e),
        }
        shared
            .poll_duration_ns
            .store(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        refresh_runtime(&monitor);
        shared.polls.fetch_add(1, Ordering::Relaxed);
    };
    stop.store(true, Ordering::Relaxed);
    match http.join() {
        Ok(Err(e)) if result.is_ok() => Err(e.context("HTTP server")),
        _ => result,
    }
}

/// Says once, when it first happens, that --max-cgroups folds cgroups into
/// "other" (iowarden_cgroups_folded counts them at every poll).
fn note_folding(cap: &CgroupCap, logged: &mut bool) {
    if !*logged && cap.folded() > 0 {
        *logged = true;
        crate::say!(
            "iowarden: --max-cgroups {}: {} more cgroups with I/O are summed into cgroup=\"other\" \
             (iowarden_cgroups_folded counts them; said once)",
            cap.max(),
            cap.folded()
        );
    }
}
