//! Metrics about iowarden itself beyond the poll counters: BPF program cost,
//! table fill, scrape cost, start time, and the workload behind each cgroup.
//! A separate collector so that it grows without touching the data families.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use crate::openmetrics::{counter, gauge};

type Labels = Vec<(String, String)>;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct BpfProgramStats {
    pub program: String,
    pub run_time_seconds: f64,
    pub run_count: u64,
    pub recursion_misses: u64,
}

/// One fixed-size table the BPF side fills.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableFill {
    pub table: String,
    pub entries: u64,
    pub capacity: u64,
}

#[derive(Debug, Clone, Default)]
pub struct RuntimeMetrics {
    /// Whether the kernel is timing BPF programs (ours or a sysctl). Run
    /// count and time are exported only then: zeros would read as "never ran".
    pub bpf_stats_enabled: bool,
    pub programs: Vec<BpfProgramStats>,
    pub tables: Vec<TableFill>,
    /// Duration of the previous /metrics request (encoding and sending).
    pub scrape_duration_seconds: f64,
    /// Unix time the daemon started; 0 = unknown (not exported).
    pub start_time_seconds: f64,
    /// (cgroup path, attribution labels) for `iowarden_cgroup_info`.
    pub cgroups: Vec<(String, Labels)>,
}

#[derive(Debug)]
pub(crate) struct RuntimeCollector {
    pub(crate) m: RuntimeMetrics,
    pub(crate) scrapes: u64,
}

impl Collector for RuntimeCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let m = &self.m;
        let prog = |p: &BpfProgramStats| vec![("program".to_string(), p.program.clone())];
        gauge(
            &mut enc,
            "iowarden_bpf_stats_enabled",
            "Whether the kernel times BPF programs (iowarden run --bpf-stats or sysctl kernel.bpf_stats_enabled)",
            None,
            &[(vec![], if m.bpf_stats_enabled { 1.0 } else { 0.0 })],
        )?;
        if m.bpf_stats_enabled {
            let rows: Vec<_> = m
                .programs
                .iter()
                .map(|p| (prog(p), p.run_time_seconds))
                .collect();
            counter(
                &mut enc,
                "iowarden_bpf_program_run",
                "Time spent running the BPF program (kernel run-time stats)",
                Some(Unit::Seconds),
                &rows,
            )?;
            let rows: Vec<_> = m
                .programs
                .iter()
                .map(|p| (prog(p), p.run_count as f64))
                .collect();
            counter(
                &mut enc,
                "iowarden_bpf_program_runs",
                "Runs of the BPF program (kernel run-time stats)",
                None,
                &rows,
            )?;
        }
        let rows: Vec<_> = m
            .programs
            .iter()
            .map(|p| (prog(p), p.recursion_misses as f64))
            .collect();
        counter(
            &mut enc,
            "iowarden_bpf_program_recursion_misses",
            "Runs of the BPF program skipped because it was already running on the CPU",
            None,
            &rows,
        )?;
        let table = |t: &TableFill| vec![("map".to_string(), t.table.clone())];
        let rows: Vec<_> = m
            .tables
            .iter()
            .map(|t| (table(t), t.entries as f64))
            .collect();
        gauge(
            &mut enc,
            "iowarden_map_entries",
            "Entries in use in a BPF map or table (series: the (cgroup, device, op) slot table)",
            None,
            &rows,
        )?;
        let rows: Vec<_> = m
            .tables
            .iter()
            .map(|t| (table(t), t.capacity as f64))
            .collect();
        gauge(
            &mut enc,
            "iowarden_map_capacity",
            "Capacity of a BPF map or table; when it is full new entries are dropped (iowarden_dropped_total)",
            None,
            &rows,
        )?;
        gauge(
            &mut enc,
            "iowarden_scrape_duration",
            "Duration of the previous /metrics request",
            Some(Unit::Seconds),
            &[(vec![], m.scrape_duration_seconds)],
        )?;
        counter(
            &mut enc,
            "iowarden_scrapes",
            "/metrics requests served",
            None,
            &[(vec![], self.scrapes as f64)],
        )?;
        if m.start_time_seconds > 0.0 {
            gauge(
                &mut enc,
                "iowarden_start_time",
                "Unix time the daemon started",
                Some(Unit::Seconds),
                &[(vec![], m.start_time_seconds)],
            )?;
        }
        let rows: Vec<_> = m
            .cgroups
            .iter()
            .map(|(path, l)| {
                let mut labels = vec![("cgroup".to_string(), path.clone())];
                labels.extend(l.iter().cloned());
                (labels, 1.0)
            })
            .collect();
        gauge(
            &mut enc,
            "iowarden_cgroup_info",
            "Workload behind a cgroup path (pod uid, container id, systemd service); join on cgroup",
            None,
            &rows,
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::openmetrics::{encode_openmetrics, SelfMetrics};
    use crate::selfmetrics::*;
    use crate::Snapshot;

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
        encode_openmetrics(&Snapshot::default(), &extra, &Default::default()).unwrap()
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
