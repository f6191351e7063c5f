//! OpenMetrics about iowarden itself: probes attached, polls, build, BPF
//! program cost, table fill, scrape cost, start time, and the workload
//! behind each cgroup.

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use super::expose::{Expose, Input};
use super::family::{counter, gauge, Labels, Rows};
use crate::model::{BpfProgramStats, ProbeStatus, RuntimeMetrics, SelfMetrics, TableFill};

impl Expose for Vec<ProbeStatus> {
    fn expose(&self, enc: &mut DescriptorEncoder, _: &Input) -> std::fmt::Result {
        encode_probes(enc, self)
    }
}

/// iowarden's own families (not the snapshot's): polls, build, BPF
/// programs, tables, scrapes, cgroup attribution.
pub(crate) fn encode_self(enc: &mut DescriptorEncoder, input: &Input) -> std::fmt::Result {
    let Input { snap, extra, .. } = *input;
    encode_polls(enc, extra)?;
    encode_build_info(enc, extra, &snap.kernel, &snap.hostname)?;
    encode_runtime(enc, &extra.runtime, extra.scrape_count)
}

fn encode_probes(enc: &mut DescriptorEncoder, probes: &[ProbeStatus]) -> std::fmt::Result {
    let rows: Rows = probes
        .iter()
        .map(|p| {
            (
                vec![
                    ("probe".into(), p.name.clone()),
                    ("reason".into(), p.reason.clone()),
                ],
                if p.active { 1.0 } else { 0.0 },
            )
        })
        .collect();
    gauge(
        enc,
        "iowarden_probe_active",
        "Whether a BPF probe is attached (1) or not (0, with the reason)",
        None,
        &rows,
    )
}

fn encode_polls(enc: &mut DescriptorEncoder, extra: &SelfMetrics) -> std::fmt::Result {
    gauge(
        enc,
        "iowarden_poll_duration",
        "Duration of the last map poll",
        Some(Unit::Seconds),
        &[(vec![], extra.poll_duration_seconds)],
    )?;
    counter(
        enc,
        "iowarden_polls",
        "Map polls",
        None,
        &[(vec![], extra.polls_total as f64)],
    )?;
    match extra.cgroups_folded {
        Some(n) => gauge(
            enc,
            "iowarden_cgroups_folded",
            "Cgroups with I/O beyond --max-cgroups, summed into cgroup=\"other\"",
            None,
            &[(vec![], n as f64)],
        ),
        None => Ok(()),
    }
}

fn encode_build_info(
    enc: &mut DescriptorEncoder,
    extra: &SelfMetrics,
    kernel: &str,
    hostname: &str,
) -> std::fmt::Result {
    let info = vec![
        ("version".to_string(), extra.build_version.clone()),
        ("kernel".to_string(), kernel.to_string()),
        ("hostname".to_string(), hostname.to_string()),
    ];
    gauge(
        enc,
        "iowarden_build_info",
        "iowarden build and host",
        None,
        &[(info, 1.0)],
    )
}

/// BPF program cost, table fill, scrapes, start time, cgroup attribution.
fn encode_runtime(
    enc: &mut DescriptorEncoder,
    m: &RuntimeMetrics,
    scrapes: u64,
) -> std::fmt::Result {
    encode_programs(enc, m)?;
    encode_tables(enc, &m.tables)?;
    encode_scrapes(enc, m, scrapes)?;
    encode_cgroup_info(enc, &m.cgroups)
}

fn encode_programs(enc: &mut DescriptorEncoder, m: &RuntimeMetrics) -> std::fmt::Result {
    let rows = |f: fn(&BpfProgramStats) -> f64| -> Rows {
        m.programs
            .iter()
            .map(|p| (vec![("program".to_string(), p.program.clone())], f(p)))
            .collect()
    };
    gauge(
        enc,
        "iowarden_bpf_stats_enabled",
        "Whether the kernel times BPF programs (iowarden run --bpf-stats or sysctl kernel.bpf_stats_enabled)",
        None,
        &[(vec![], if m.bpf_stats_enabled { 1.0 } else { 0.0 })],
    )?;
    if m.bpf_stats_enabled {
        counter(
            enc,
            "iowarden_bpf_program_run",
            "Time spent running the BPF program (kernel run-time stats)",
            Some(Unit::Seconds),
            &rows(|p| p.run_time_seconds),
        )?;
        counter(
            enc,
            "iowarden_bpf_program_runs",
            "Runs of the BPF program (kernel run-time stats)",
            None,
            &rows(|p| p.run_count as f64),
        )?;
    }
    counter(
        enc,
        "iowarden_bpf_program_recursion_misses",
        "Runs of the BPF program skipped because it was already running on the CPU",
        None,
        &rows(|p| p.recursion_misses as f64),
    )
}

fn encode_tables(enc: &mut DescriptorEncoder, tables: &[TableFill]) -> std::fmt::Result {
    let rows = |f: fn(&TableFill) -> u64| -> Rows {
        tables
            .iter()
            .map(|t| (vec![("map".to_string(), t.table.clone())], f(t) as f64))
            .collect()
    };
    gauge(
        enc,
        "iowarden_map_entries",
        "Entries in use in a BPF map or table (series: the (cgroup, device, op) slot table)",
        None,
        &rows(|t| t.entries),
    )?;
    gauge(
        enc,
        "iowarden_map_capacity",
        "Capacity of a BPF map or table; when it is full new entries are dropped (iowarden_dropped_total)",
        None,
        &rows(|t| t.capacity),
    )
}

fn encode_scrapes(
    enc: &mut DescriptorEncoder,
    m: &RuntimeMetrics,
    scrapes: u64,
) -> std::fmt::Result {
    gauge(
        enc,
        "iowarden_scrape_duration",
        "Duration of the previous /metrics request",
        Some(Unit::Seconds),
        &[(vec![], m.scrape_duration_seconds)],
    )?;
    counter(
        enc,
        "iowarden_scrapes",
        "/metrics requests served",
        None,
        &[(vec![], scrapes as f64)],
    )?;
    if m.start_time_seconds > 0.0 {
        gauge(
            enc,
            "iowarden_start_time",
            "Unix time the daemon started",
            Some(Unit::Seconds),
            &[(vec![], m.start_time_seconds)],
        )?;
    }
    Ok(())
}

fn encode_cgroup_info(
    enc: &mut DescriptorEncoder,
    cgroups: &[(String, Labels)],
) -> std::fmt::Result {
    let rows: Rows = cgroups
        .iter()
        .map(|(path, l)| {
            let mut labels = vec![("cgroup".to_string(), path.clone())];
            labels.extend(l.iter().cloned());
            (labels, 1.0)
        })
        .collect();
    gauge(
        enc,
        "iowarden_cgroup_info",
        "Workload behind a cgroup path (pod uid, container id, systemd service); join on cgroup",
        None,
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use crate::model::{BpfProgramStats, RuntimeMetrics, SelfMetrics, Snapshot, TableFill};
    use crate::openmetrics::test_text::text_with;

    fn text(bpf_stats_enabled: bool) -> String {
        let extra = SelfMetrics {
            runtime: RuntimeMetrics {
                bpf_stats_enabled,
                programs: vec![BpfProgramStats {
                    program: "block_rq_complete".into(),
                    run_time_seconds: 0.25,
                    run_count: 1000,
                    recursion_misses: 0,
                }],
                tables: vec![TableFill {
                    table: "series".into(),
                    entries: 3,
                    capacity: 1024,
                }],
                scrape_duration_seconds: 0.001,
                start_time_seconds: 1.7e9,
                cgroups: vec![(
                    "/system.slice/a.service".into(),
                    vec![("service".into(), "a.service".into())],
                )],
            },
            scrape_count: 4,
            ..Default::default()
        };
        text_with(Snapshot::default(), extra, &Default::default())
    }

    #[test]
    fn folded_cgroups_exported_only_under_a_cap() {
        let encode = |cgroups_folded| {
            let extra = SelfMetrics {
                cgroups_folded,
                ..Default::default()
            };
            text_with(Snapshot::default(), extra, &Default::default())
        };
        assert!(encode(Some(7)).contains("\niowarden_cgroups_folded{} 7"));
        assert!(!encode(None).contains("iowarden_cgroups_folded"));
    }

    #[test]
    fn program_cost_only_when_the_kernel_counts_it() {
        let on = text(true);
        assert!(
            on.contains(
                r#"iowarden_bpf_program_run_seconds_total{program="block_rq_complete"} 0.25"#
            ),
            "{on}"
        );
        assert!(
            on.contains(r#"iowarden_bpf_program_runs_total{program="block_rq_complete"} 1000.0"#)
        );
        assert!(on.contains("iowarden_bpf_stats_enabled{} 1.0"));
        let off = text(false);
        assert!(!off.contains("iowarden_bpf_program_run"), "{off}");
        assert!(off.contains("iowarden_bpf_stats_enabled{} 0.0"));
        assert!(off.contains("iowarden_bpf_program_recursion_misses_total"));
    }

    #[test]
    fn tables_scrapes_and_cgroup_info() {
        let t = text(true);
        for line in [
            r#"iowarden_map_entries{map="series"} 3.0"#,
            r#"iowarden_map_capacity{map="series"} 1024.0"#,
            "iowarden_scrapes_total{} 4.0",
            "iowarden_scrape_duration_seconds{} 0.001",
            r#"iowarden_cgroup_info{cgroup="/system.slice/a.service",service="a.service"} 1.0"#,
        ] {
            assert!(t.contains(line), "{line} in\n{t}");
        }
        assert!(t.ends_with("# EOF\n"));
    }
}
