//! `iowarden run`'s options for what /metrics costs a Prometheus: which
//! latency stages are histograms, how fine the classic buckets are, and
//! how many cgroups keep their own series.

use std::num::NonZeroUsize;

use anyhow::{bail, Result};
use clap::Args;
use iowarden_exporters::{ClassicBuckets, ExpositionOptions, IoCounter, Stage};

#[derive(Args, Clone, Debug)]
pub struct ExportArgs {
    /// Counters exported per cgroup, device and op, comma-separated:
    /// requests, bytes, device (device time), held-io-max (time io.max
    /// held them: a series only once it did), throttle (the throttle
    /// stage's time: io.max and the rq-qos policies), merged, requeued,
    /// cost, random, or "all"
    #[arg(long, default_value = IoCounter::FLEET, value_parser = parse_counters)]
    pub io_counters: CounterList,
    /// Latency stages exported as histograms, comma-separated: throttle
    /// (held before the request existed: io.max, iocost, io.latency, wbt),
    /// queue, device, total (submission to completion), or "all". The
    /// default suits fleets; all four for diagnosis (each stage is one
    /// histogram per cgroup, device and op)
    #[arg(long, default_value = "total", value_parser = parse_stages)]
    pub histogram_stages: StageList,
    /// Classic (text) histogram buckets: pow4 (4 us to 1 s, 11 buckets) or
    /// pow2 (1 us to 4 s, 24 buckets). Native histograms keep full resolution
    #[arg(long, default_value = "pow4", value_parser = parse_classic)]
    pub classic_buckets: ClassicBuckets,
    /// Export at most this many cgroups (the most device time since start);
    /// the others are summed into cgroup="other" per device and op
    #[arg(long, value_parser = parse_max_cgroups)]
    pub max_cgroups: Option<NonZeroUsize>,
}

/// The counters of --io-counters, in exposition order.
#[derive(Clone, Debug, PartialEq)]
pub struct CounterList(pub Vec<IoCounter>);

/// The stages of --histogram-stages, in exposition order.
#[derive(Clone, Debug, PartialEq)]
pub struct StageList(pub Vec<Stage>);

impl ExportArgs {
    pub fn options(&self) -> ExpositionOptions {
        ExpositionOptions {
            counters: self.io_counters.0.clone(),
            stages: self.histogram_stages.0.clone(),
            classic: self.classic_buckets,
        }
    }
}

/// A comma-separated subset of `all` by name, or "all"; in `all`'s order.
fn parse_subset<T: Copy + PartialEq>(
    s: &str,
    all: &[T],
    name_of: fn(T) -> &'static str,
    what: &str,
) -> Result<Vec<T>> {
    if s.trim() == "all" {
        return Ok(all.to_vec());
    }
    let mut wanted = Vec::new();
    for name in s.split(',').map(str::trim) {
        match all.iter().find(|x| name_of(**x) == name) {
            Some(x) if !wanted.contains(x) => wanted.push(*x),
            Some(_) => bail!("{what} '{name}' given twice"),
            None => {
                let names: Vec<&str> = all.iter().map(|x| name_of(*x)).collect();
                bail!(
                    "no {what} '{name}': the {what}s are {} (or all)",
                    names.join(", ")
                )
            }
        }
    }
    Ok(all.iter().copied().filter(|x| wanted.contains(x)).collect())
}

pub fn parse_stages(s: &str) -> Result<StageList> {
    parse_subset(s, &Stage::ALL, Stage::as_str, "latency stage").map(StageList)
}

pub fn parse_counters(s: &str) -> Result<CounterList> {
    parse_subset(s, &IoCounter::all(), IoCounter::as_str, "counter").map(CounterList)
}

pub fn parse_classic(s: &str) -> Result<ClassicBuckets> {
    match s {
        "pow2" => Ok(ClassicBuckets::PowersOfTwo),
        "pow4" => Ok(ClassicBuckets::PowersOfFour),
        _ => bail!("no classic bucket layout '{s}': use pow4 or pow2"),
    }
}

pub fn parse_max_cgroups(s: &str) -> Result<NonZeroUsize> {
    let n: usize = s
        .parse()
        .map_err(|_| anyhow::anyhow!("'{s}' is not a number of cgroups"))?;
    NonZeroUsize::new(n).ok_or_else(|| {
        anyhow::anyhow!("a cap of 0 cgroups would export none: give at least 1, or leave --max-cgroups out for no cap")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_lists_parse_and_bad_ones_are_refused() {
        assert_eq!(parse_stages("total").unwrap().0, vec![Stage::Total]);
        assert_eq!(parse_stages("all").unwrap().0, Stage::ALL.to_vec());
        assert_eq!(
            parse_stages("total, queue").unwrap().0,
            vec![Stage::Queue, Stage::Total]
        );
        let e = parse_stages("total,latency").unwrap_err().to_string();
        assert!(
            e.contains("'latency'") && e.contains("queue, device, total"),
            "{e}"
        );
        assert!(parse_stages("").is_err());
        assert!(parse_stages("total,total").is_err());
        assert_eq!(parse_counters("all").unwrap().0, IoCounter::all());
        assert_eq!(
            parse_counters("device,requests").unwrap().0,
            ["requests", "device"].map(|n| IoCounter::named(n).unwrap())
        );
        let e = parse_counters("iops").unwrap_err().to_string();
        assert!(e.contains("'iops'") && e.contains("requests, bytes"), "{e}");
    }

    #[test]
    fn the_io_counters_help_names_every_counter() {
        use clap::Args;
        let cmd = ExportArgs::augment_args(clap::Command::new("t"));
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_id() == "io_counters")
            .unwrap();
        let help = arg.get_help().unwrap().to_string();
        for c in IoCounter::all() {
            assert!(
                help.contains(c.as_str()),
                "--io-counters' help lacks {}",
                c.as_str()
            );
        }
        let default: Vec<_> = arg.get_default_values().iter().collect();
        assert_eq!(default, [IoCounter::FLEET]);
    }

    /// The default of `ExportArgs`' argument `id`, as `--help` shows it.
    fn default_of(id: &str) -> String {
        use clap::Args;
        let cmd = ExportArgs::augment_args(clap::Command::new("t"));
        let arg = cmd.get_arguments().find(|a| a.get_id() == id).unwrap();
        let default = arg.get_default_values()[0].to_str().unwrap();
        default.to_string()
    }

    /// docs/fleet.md's series-budget row of a subset option: its default
    /// and what `all` adds to it.
    fn fleet_md_row(option: &str, default: &str, all: &[&str]) -> String {
        let chosen: Vec<&str> = default.split(',').collect();
        let added: Vec<&str> = all
            .iter()
            .copied()
            .filter(|n| !chosen.contains(n))
            .collect();
        format!(
            "| `{option}` | `{default}` | `all` (adds {}) |",
            added.join(", ")
        )
    }

    /// docs/fleet.md's series budget names what `all` adds to each
    /// default: a counter or stage added without its row fails here.
    #[test]
    fn docs_fleet_md_rows_are_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/fleet.md");
        let written = std::fs::read_to_string(path).unwrap_or_default();
        let counters: Vec<&str> = IoCounter::all()
            .into_iter()
            .map(IoCounter::as_str)
            .collect();
        let stages: Vec<&str> = Stage::ALL.into_iter().map(Stage::as_str).collect();
        let rows = [
            fleet_md_row("--io-counters", &default_of("io_counters"), &counters),
            fleet_md_row(
                "--histogram-stages",
                &default_of("histogram_stages"),
                &stages,
            ),
        ];
        for row in rows {
            assert!(
                written.lines().any(|l| l == row),
                "{path} is stale: its series budget needs this row in place of the old one:\n{row}"
            );
        }
    }

    #[test]
    fn max_cgroups_refuses_zero_and_junk() {
        assert_eq!(parse_max_cgroups("200").unwrap().get(), 200);
        assert!(parse_max_cgroups("0")
            .unwrap_err()
            .to_string()
            .contains("at least 1"));
        assert!(parse_max_cgroups("-3").is_err());
        assert!(parse_max_cgroups("many").is_err());
        assert!(parse_classic("pow3").is_err());
    }
}
