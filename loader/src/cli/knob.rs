//! `iowarden knob get|set|restore`: read, set and restore cgroup io.*
//! knobs through the journaled writer (knobs::writer).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Subcommand;

use iowarden::duration::parse_duration;
use iowarden::knobs::writer::{self, Writer, WriterConfig, DEFAULT_STATE_DIR};

#[derive(Subcommand, Debug)]
pub enum KnobCmd {
    /// Print a cgroup io.* file, parsed and checked (exit 1 if it does not parse)
    Get {
        /// e.g. /sys/fs/cgroup/io.cost.qos or /sys/fs/cgroup/app/io.weight
        path: PathBuf,
    },
    /// Write one value (journaled first). Without --hold the change is kept;
    /// with --hold it is restored after SECS, on SIGINT/SIGTERM, or by the
    /// next iowarden run if this one is killed
    Set {
        path: PathBuf,
        /// Write-side form, e.g. '259:0 enable=1 rlat=2000', 'default 100', '8:0 rbps=max'
        value: String,
        /// Print what would be written and restored; write nothing
        #[arg(long)]
        dry_run: bool,
        /// Where the journal of previous values lives
        #[arg(long, default_value = DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
        /// Keep the change this many seconds, then restore it
        #[arg(long, value_name = "SECS")]
        hold: Option<f64>,
        /// Minimum time between io.cost.* writes to one device (each freezes its queue)
        #[arg(long, default_value = "1s", value_parser = parse_duration)]
        iocost_interval: Duration,
    },
    /// Restore what a killed or crashed run left changed
    Restore {
        #[arg(long, default_value = DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
        /// Say what would be restored; write nothing
        #[arg(long)]
        dry_run: bool,
    },
}

fn say(msgs: &[String]) {
    for m in msgs {
        iowarden::say!("iowarden: {m}");
    }
}

pub fn run(cmd: KnobCmd) -> Result<()> {
    match cmd {
        KnobCmd::Get { path } => {
            iowarden::out!("{}", writer::get(&path)?)?;
            Ok(())
        }
        KnobCmd::Restore { state_dir, dry_run } => restore(state_dir, dry_run),
        KnobCmd::Set {
            path,
            value,
            dry_run,
            state_dir,
            hold,
            iocost_interval,
        } => {
            let hold = hold.map(hold_duration).transpose()?;
            let w = Writer::new(WriterConfig {
                state_dir,
                dry_run,
                iocost_min_interval: iocost_interval,
            });
            set(w, &path, &value, hold)
        }
    }
}

/// `knob restore`: what a killed or crashed run left changed.
fn restore(state_dir: PathBuf, dry_run: bool) -> Result<()> {
    let mut w = Writer::new(WriterConfig {
        state_dir,
        dry_run,
        ..WriterConfig::default()
    });
    let msgs = w.recover()?;
    if msgs.is_empty() {
        iowarden::say!("iowarden: nothing to restore");
    }
    say(&msgs);
    Ok(())
}

/// `--hold SECS` as a duration; try_from: from_secs_f64 panics on NaN,
/// negative or huge values.
fn hold_duration(h: f64) -> Result<Duration> {
    match Duration::try_from_secs_f64(h) {
        Ok(d) => Ok(d),
        Err(_) => bail!("--hold {h:?}: not a usable number of seconds"),
    }
}

/// `knob set`: one journaled write, kept, or restored after `hold`.
fn set(mut w: Writer, path: &Path, value: &str, hold: Option<Duration>) -> Result<()> {
    let dry_run = w.config().dry_run;
    let stop = Arc::new(AtomicBool::new(false));
    if hold.is_some() && !dry_run {
        let s = stop.clone();
        ctrlc::set_handler(move || s.store(true, Ordering::Relaxed))
            .context("installing the SIGINT/SIGTERM handler")?;
    }
    say(&w.recover()?);
    let msg = w.set(path, value)?;
    iowarden::say!("iowarden: {msg}");
    if dry_run {
        return Ok(());
    }
    let Some(hold) = hold else {
        w.keep_all()?;
        iowarden::say!("iowarden: change kept (use --hold SECS for a temporary one)");
        return Ok(());
    };
    iowarden::say!(
        "iowarden: {}",
        iowarden::host::privileges::keeping(
            "knob set --hold",
            "restore the knob when the hold ends"
        )
    );
    let start = Instant::now();
    while start.elapsed() < hold && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20).min(hold));
    }
    if stop.load(Ordering::Relaxed) {
        iowarden::say!("iowarden: signal received, restoring");
    }
    say(&w.restore_all()?);
    Ok(())
}
