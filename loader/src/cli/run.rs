//! `iowarden run`: the daemon serving /metrics and /snapshot.json.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use iowarden::daemon;
use iowarden::duration::{parse_duration, parse_interval};
use iowarden::host::container::StaticPodDirectory;
use iowarden::host::privileges::NiceForThreads;
use iowarden::limits::watch::LimitsWatch;
use iowarden::probes::block::culprits::DRAIN_NICE;

use super::trace::{load_monitor, stop_flag, TraceArgs};

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// Address for the HTTP endpoint
    #[arg(long, default_value = "127.0.0.1:9617")]
    listen: SocketAddr,
    /// Prometheus exporter-toolkit web config: tls_server_config,
    /// basic_auth_users (bcrypt), http_server_config.headers
    #[arg(long = "web.config.file", value_name = "PATH")]
    web_config_file: Option<std::path::PathBuf>,
    /// Poll interval (e.g. 500ms, 1s)
    #[arg(long, default_value = "1s", value_parser = parse_interval)]
    interval: Duration,
    /// Exit after this long (default: run until SIGINT/SIGTERM)
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Have the kernel time the BPF programs (~20 ns per call; needs CAP_SYS_ADMIN)
    /// and export their run count and time
    #[arg(long)]
    bpf_stats: bool,
    /// JSON file naming pods and containers by uid and id, for iowarden_cgroup_info
    #[arg(long)]
    pod_map: Option<std::path::PathBuf>,
    /// Knob journal directory: what a killed `tune`/`knob set --hold` left
    /// changed is restored at start
    #[arg(long, default_value = iowarden::knobs::writer::DEFAULT_STATE_DIR)]
    state_dir: std::path::PathBuf,
    /// After loading and attaching (as root): become this unprivileged user.
    /// Every capability is dropped in any case
    #[arg(long, value_name = "NAME")]
    user: Option<String>,
    /// Every io limit and weight set on the host is judged (acting, idle,
    /// in effect, not in effect and why: iowarden_limit_state) over this
    /// window of I/O, and the hierarchy read again; 0 turns it off
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    limits_window: Duration,
    #[command(flatten)]
    export: iowarden::exposition::ExportArgs,
}

pub fn run(a: RunArgs) -> Result<()> {
    recover_knobs(a.state_dir);
    let pods = a
        .pod_map
        .as_deref()
        .map(StaticPodDirectory::load)
        .transpose()?
        .map(Arc::new);
    // Bind first: a bad web config or a taken port should fail before BPF is loaded.
    let server = iowarden::web::bind(a.listen, a.web_config_file.as_deref())?;
    // Held until exit: the kernel stops timing when the fd closes.
    let _stats = a
        .bpf_stats
        .then(iowarden::probes::bpf_stats::enable_bpf_stats)
        .transpose()?;
    // Before loading: a signal while the programs load must not kill the
    // process with them half set up (SIGHUP's default action).
    let stop = stop_flag()?;
    let mut monitor = load_monitor(&a.trace, &a.export.histogram_stages.0)?;
    // Before any thread starts: capabilities are per thread.
    let keep = iowarden::host::privileges::Keep {
        bpf_calls: iowarden::probes::features::bpf_calls_need_capability(),
        kallsyms: a
            .trace
            .enabled_probes()
            .contains(iowarden::probes::locks::NAME),
    };
    // The culprits' drain inherits its nice level (it says so where it
    // could not have it).
    let niced = NiceForThreads::lower(DRAIN_NICE);
    let kept = iowarden::host::privileges::drop_all(a.user.as_deref(), &keep)?;
    iowarden::say!("iowarden: {kept}");
    monitor.start_threads()?;
    if let Some(Err(e)) = niced.ok().map(NiceForThreads::restore) {
        iowarden::say!("iowarden: {e:#}");
    }
    let mut limits = limits_watch(a.limits_window);
    daemon::run(
        monitor,
        server,
        &daemon::RunOptions {
            interval: a.interval,
            duration: a.duration,
            bpf_stats: a.bpf_stats,
            pods,
            exposition: a.export.options(),
            max_cgroups: a.export.max_cgroups,
        },
        stop,
        &mut |snap| {
            if let Some(w) = limits.as_mut() {
                w.attach(snap);
            }
            Ok(())
        },
    )
}

/// The limits' judge, unless turned off or impossible here (said once).
fn limits_watch(window: Duration) -> Option<LimitsWatch> {
    if window.is_zero() {
        return None;
    }
    LimitsWatch::new(window)
        .inspect_err(|why| iowarden::say!("iowarden: limits are not judged: {why}"))
        .ok()
}

/// Restores what a killed iowarden left changed (it journaled the previous
/// values); a failure is reported but does not stop the daemon.
fn recover_knobs(state_dir: std::path::PathBuf) {
    use iowarden::knobs::writer::{Writer, WriterConfig};
    let mut w = Writer::new(WriterConfig {
        state_dir,
        ..Default::default()
    });
    match w.recover() {
        Ok(msgs) => msgs.iter().for_each(|m| iowarden::say!("iowarden: {m}")),
        Err(e) => {
            iowarden::say!(
                "iowarden: warning: could not restore knobs a killed run left changed: {e:#}"
            )
        }
    }
}
