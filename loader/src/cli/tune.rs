//! `iowarden tune`: io.cost.qos online against latency SLOs.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use iowarden_exporters::ExpositionOptions;

use iowarden::daemon;
use iowarden::duration::{parse_duration, parse_interval};
use iowarden::host::devices::resolve_device;

use super::trace::{start_monitor, stop_flag, TraceArgs};

#[derive(Args)]
pub struct TuneArgs {
    /// The device to tune: a whole disk by name (nvme0n1) or MAJ:MIN
    #[arg(long)]
    pub device: String,
    /// A cgroup whose SLOs must hold (path on the io hierarchy, e.g. /lc); repeatable
    #[arg(long, required = true)]
    pub protect: Vec<String>,
    /// Latency SLO of every protected cgroup, <read|write|any>-p<pct>=<latency>,
    /// e.g. read-p99=2ms; repeatable
    #[arg(long, required = true)]
    pub slo: Vec<String>,
    /// Lowest vrate (percent of the cost model) the tuner may set
    #[arg(long, default_value_t = 5.0)]
    pub vrate_min: f64,
    /// Highest vrate (percent) the tuner may set
    #[arg(long, default_value_t = 100.0)]
    pub vrate_max: f64,
    /// First vrate to write. Without it the first period writes nothing and
    /// measures the device as found: where the SLOs were missed there, the
    /// tuner starts at 40 % of the cost rate the device completed, where
    /// they held at that rate up by the headroom left
    #[arg(long)]
    pub start: Option<f64>,
    /// Largest vrate change per decision, percentage points (above 100 %,
    /// one increase/decrease factor where that is more)
    #[arg(long, default_value_t = 30.0)]
    pub max_step: f64,
    /// Slack (fraction of the target) needed before raising vrate
    #[arg(long, default_value_t = 0.15)]
    pub margin: f64,
    /// Decision period: one bounded step per period
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub period: Duration,
    /// Fewer I/Os of an SLO's class in a period: no decision
    #[arg(long, default_value_t = 100)]
    pub min_samples: u64,
    /// Also set io.weight 'default W' on the protected cgroups
    #[arg(long)]
    pub protect_weight: Option<u32>,
    /// Print the decisions; write nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Where the journal of previous knob values lives
    #[arg(long, default_value = iowarden::knobs::writer::DEFAULT_STATE_DIR)]
    pub state_dir: std::path::PathBuf,
    /// Address for /metrics and /snapshot.json (with iowarden_tune_* metrics)
    #[arg(long, default_value = "127.0.0.1:9617")]
    pub listen: SocketAddr,
    /// Prometheus exporter-toolkit web config (TLS, basic auth, headers)
    #[arg(long = "web.config.file", value_name = "PATH")]
    pub web_config_file: Option<std::path::PathBuf>,
    /// Poll interval
    #[arg(long, default_value = "500ms", value_parser = parse_interval)]
    pub interval: Duration,
    /// Stop (and restore the knobs) after this long
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    #[command(flatten)]
    pub model: iowarden::tune::model_run::ModelArgs,
}

pub fn tune(a: TuneArgs) -> Result<()> {
    use iowarden::tune::{controller::ControllerConfig, runner, slo::parse_slo};
    let device = resolve_device(&a.device)?;
    let slos = a
        .slo
        .iter()
        .map(|s| parse_slo(s).map_err(anyhow::Error::msg))
        .collect::<Result<Vec<_>>>()?;
    let controller = ControllerConfig {
        vrate_min: a.vrate_min,
        vrate_max: a.vrate_max,
        start: a.start.unwrap_or(a.vrate_max),
        observe_first: a.start.is_none(),
        max_step: a.max_step,
        margin: a.margin,
        min_samples: a.min_samples,
        ..ControllerConfig::default()
    };
    let resolver = iowarden::host::cgroups::CgroupResolver::for_host()?;
    let mut tuner = runner::Tuner::prepare(
        runner::TuneOptions {
            device: device.clone(),
            protect: a.protect,
            slos,
            controller,
            period: a.period,
            protect_weight: a.protect_weight,
            writer: iowarden::knobs::writer::WriterConfig {
                state_dir: a.state_dir,
                dry_run: a.dry_run,
                ..Default::default()
            },
            model: a.model.options(),
        },
        &resolver,
    )?;
    let server = iowarden::web::bind(a.listen, a.web_config_file.as_deref())?;
    let trace = TraceArgs {
        device: Some(format!("{}:{}", device.major, device.minor)),
        ..TraceArgs::defaults()
    };
    // Before loading: a signal while the programs load must not kill the
    // process with them half set up (SIGHUP's default action).
    let stop = stop_flag()?;
    let monitor = start_monitor(&trace, &ExpositionOptions::default().stages)?;
    tuner.start()?;
    iowarden::say!(
        "iowarden: {}",
        iowarden::host::privileges::keeping(
            "tune",
            "write io.cost.qos every period and restore it at exit"
        )
    );
    let result = daemon::run(
        monitor,
        server,
        &daemon::RunOptions {
            interval: a.interval,
            duration: a.duration,
            bpf_stats: false,
            pods: None,
            exposition: Default::default(),
            max_cgroups: None,
        },
        stop,
        &mut |snap| tuner.on_poll(snap),
    );
    iowarden::say!("iowarden tune: {}", tuner.summary());
    let restored = tuner.finish();
    for m in restored.as_deref().unwrap_or_default() {
        iowarden::say!("iowarden: {m}");
    }
    match (result, restored) {
        (Err(e), Ok(_)) => Err(e.context("tuner stopped; what it changed was restored")),
        (Err(e), Err(r)) => Err(e.context(format!("tuner stopped, and restoring failed: {r:#}"))),
        (Ok(()), Err(e)) => Err(e),
        (Ok(()), Ok(_)) => Ok(()),
    }
}
