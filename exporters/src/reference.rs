//! The metrics reference (`iowarden metrics`, docs/metrics.md): every
//! family /metrics can serve, with its type, unit, labels and help read
//! from the exposition itself (a snapshot with one record of every domain,
//! encoded with every counter and stage on), grouped by what turns it on.
//! Nothing here repeats a family's name, help or labels: a family added to
//! an encoder appears, and one no domain claims fails the tests.

use std::fmt::Write as _;
use std::sync::Arc;

use crate::model::{fixture, Families, IoSeries, Stage};
use crate::openmetrics::{
    encode_openmetrics, unit_of, ClassicBuckets, ExpositionOptions, IoCounter,
};

/// One family as the exposition describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct FamilyDoc {
    /// As declared (`# TYPE`): the unit suffix included, `_total` not.
    pub name: String,
    pub kind: String,
    pub unit: String,
    pub help: String,
    /// Label names in exposition order (`le` left out).
    pub labels: Vec<String>,
}

impl FamilyDoc {
    /// The name a query uses: a counter's `_total`, a histogram's parts.
    pub fn query_name(&self) -> String {
        match self.kind.as_str() {
            "counter" => format!("{}_total", self.name),
            "histogram" => format!("{}_{{bucket,sum,count}}", self.name),
            _ => self.name.clone(),
        }
    }
}

/// A group of families and what makes iowarden serve them.
struct Domain {
    title: &'static str,
    /// Names start with one of these (the longest match wins).
    prefixes: &'static [&'static str],
    when: &'static str,
}

const DOMAINS: &[Domain] = &[
    Domain {
        title: "Block I/O per cgroup, device and op",
        prefixes: &["iowarden_io_", "iowarden_dropped"],
        when: "Always (`iowarden run`). Each counter family is one series per (cgroup, device, op) \
               and is chosen with `--io-counters` (its column below; `all` for every one); the latency histogram has \
               one series set per stage chosen with `--histogram-stages` (default: total; \
               `--no-latency` turns it off). `--max-cgroups N` sums the cgroups beyond the N \
               busiest into `cgroup=\"other\"`.",
    },
    Domain {
        title: "Task delays (io.latency, iocost debt)",
        prefixes: &["iowarden_io_task_delay"],
        when: "With `--task-delays`, where the kernel lets fentry/fexit attach to \
               blkcg_maybe_throttle_current (`iowarden_probe_active{probe=\"task_delay\"}`; the \
               request_queue needs its disk, Linux 5.15+): a series once io.latency or iocost \
               delayed a task of the cgroup on its way back to user space, between its I/Os.",
    },
    Domain {
        title: "Culprits (whom requests waited behind)",
        prefixes: &["iowarden_culprit_"],
        when: "Always (`--no-culprits` turns it off): per (device, victim, op), a series \
               for each cgroup and op whose requests shared the device with the victim's \
               (`stage=\"device\"`) or held it while the victim's waited in the I/O \
               scheduler (`stage=\"queue\"`), one for its own queue, one for its service \
               (`culprit=\"none\"`), and, past the device's 16 busiest series, one per op \
               for the rest (`culprit=\"other\"`); `--max-cgroups N` names a victim or \
               culprit beyond the N busiest `other`; see docs/culprits.md.",
    },
    Domain {
        title: "I/O pressure (PSI)",
        prefixes: &["iowarden_io_pressure"],
        when: "Where the io controller's hierarchy is cgroup v2 and the kernel has PSI \
               (`iowarden_probe_active{probe=\"io_pressure\"}` says why not): the kernel's \
               io.pressure of each cgroup with I/O series, read at every poll. \
               `--max-cgroups N` sums the cgroups beyond the N busiest into \
               `cgroup=\"other\"`. How it relates to the culprit account: docs/semantics.md.",
    },
    Domain {
        title: "Volumes (device-mapper, md)",
        prefixes: &["iowarden_volume_"],
        when: "When I/O went through a bio-based device (LVM, dm-crypt, dm-linear, md): one \
               sample per (volume, disk below it).",
    },
    Domain {
        title: "Hardware queues",
        prefixes: &["iowarden_hwq_"],
        when: "Unless `--no-hwq`. `inserted`, `issued` and `inflight` only with `--hwq-events` \
               (two more BPF programs per request).",
    },
    Domain {
        title: "The kernel's own counts",
        prefixes: &["iowarden_kernel_"],
        when: "Always: /proc/diskstats of the traced devices, to compare with iowarden's.",
    },
    Domain {
        title: "NVMe queues and head-of-line interference",
        prefixes: &["iowarden_nvme_"],
        when: "With `--nvme` (off by default: three more programs per NVMe command), where \
               the nvme driver is loaded and its tracepoints attach \
               (`iowarden_probe_active{probe=\"nvme\"}`).",
    },
    Domain {
        title: "iocost",
        prefixes: &["iowarden_iocost_"],
        when: "On devices where iocost is enabled (`io.cost.qos` enable=1, cgroup v2), unless \
               `--no-iocost`.",
    },
    Domain {
        title: "Kernel lock wait",
        prefixes: &["iowarden_lock_"],
        when: "With `--locks` (block-layer lock sites) or `--locks-all` (anywhere in the kernel).",
    },
    Domain {
        title: "The linear cost model",
        prefixes: &["iowarden_cost_"],
        when: "Unless `--no-cost`: each traced device's configured model, its error per class \
               against measured device time, and the model refitted from those measurements.",
    },
    Domain {
        title: "Limits",
        prefixes: &["iowarden_limit_"],
        when: "`iowarden run` with `--limits-window` (default 30s; 0 turns it off): every io \
               limit and weight set on the host, judged once a window.",
    },
    Domain {
        title: "The io.cost.qos tuner",
        prefixes: &["iowarden_tune_"],
        when: "`iowarden tune` only; `iowarden_tune_model_*` with `tune --model`.",
    },
    Domain {
        title: "iowarden itself",
        prefixes: &[
            "iowarden_probe_",
            "iowarden_poll",
            "iowarden_cgroups_folded",
            "iowarden_build_info",
            "iowarden_bpf_",
            "iowarden_map_",
            "iowarden_scrape",
            "iowarden_start_time",
            "iowarden_cgroup_info",
        ],
        when: "Always, except: `iowarden_bpf_program_run*` with `--bpf-stats` (or \
               kernel.bpf_stats_enabled), `iowarden_cgroups_folded` with `--max-cgroups`, \
               `iowarden_cgroup_info`'s pod and container names with `--pod-map`.",
    },
];

/// Families that exist in test builds only (model/diskstats.rs).
const TEST_ONLY: &[&str] = &["iowarden_walkthrough"];

/// Every family, in exposition order. `cgroup_labels`: the attribution
/// labels `iowarden_cgroup_info` can carry (the loader knows them).
pub fn families(cgroup_labels: &[(String, String)]) -> Vec<FamilyDoc> {
    let snap = Arc::new(fixture::snapshot());
    let mut extra = fixture::self_metrics();
    extra.runtime.cgroups[0].1 = cgroup_labels.to_vec();
    let opts = ExpositionOptions {
        counters: IoCounter::all(),
        stages: Stage::ALL.to_vec(),
        classic: ClassicBuckets::PowersOfTwo,
    };
    let text = encode_openmetrics(&snap, &Arc::new(extra), &opts).unwrap_or_default();
    parse(&text)
        .into_iter()
        .filter(|f| !TEST_ONLY.contains(&f.name.as_str()))
        .collect()
}

/// The families of an OpenMetrics text exposition.
pub fn parse(text: &str) -> Vec<FamilyDoc> {
    let mut out: Vec<FamilyDoc> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (what, name, value) = (parts.next(), parts.next(), parts.next());
            let (Some(what), Some(name)) = (what, name) else {
                continue;
            };
            if out.last().is_none_or(|f| f.name != name) {
                out.push(FamilyDoc {
                    name: name.into(),
                    kind: String::new(),
                    unit: String::new(),
                    help: String::new(),
                    labels: Vec::new(),
                });
            }
            let f = out.last_mut().expect("pushed");
            let value = value.unwrap_or_default().to_string();
            match what {
                "TYPE" => f.kind = value,
                "UNIT" => f.unit = value,
                "HELP" => f.help = value,
                _ => {}
            }
        } else if let Some(f) = out.last_mut() {
            for l in label_names(line) {
                if l != "le" && !f.labels.contains(&l) {
                    f.labels.push(l);
                }
            }
        }
    }
    out
}

/// The label names of one sample line (values may hold escaped quotes).
fn label_names(line: &str) -> Vec<String> {
    let Some(start) = line.find('{') else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let mut rest = &line[start + 1..];
    while let Some(eq) = rest.find("=\"") {
        names.push(rest[..eq].trim_start_matches(',').to_string());
        // Skip the value: up to the first quote not escaped.
        let value = &rest[eq + 2..];
        let mut end = 0;
        let mut escaped = false;
        for (i, c) in value.char_indices() {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    end = i;
                    break;
                }
                _ => escaped = false,
            }
        }
        rest = &value[end + 1..];
        if rest.starts_with('}') {
            break;
        }
    }
    names
}

/// The domain a family belongs to (the longest prefix that names it).
fn domain_of(name: &str) -> Option<&'static Domain> {
    DOMAINS
        .iter()
        .flat_map(|d| d.prefixes.iter().map(move |p| (d, p)))
        .filter(|(_, p)| name.starts_with(*p))
        .max_by_key(|(_, p)| p.len())
        .map(|(d, _)| d)
}

/// The `--io-counters` name that selects a family of IoSeries, if any.
fn io_counter_of(name: &str) -> Option<String> {
    IoSeries::families().iter().find_map(|f| {
        let select = f.select?;
        // prometheus-client appends the unit to the declared name.
        let full = match f.unit.map(unit_of) {
            Some(u) => format!("{}_{}", f.name, u.as_str()),
            None => f.name.to_string(),
        };
        (full == name).then(|| {
            let default = if IoCounter::FLEET.split(',').any(|n| n == select) {
                " (default)"
            } else {
                ""
            };
            format!("`{select}`{default}")
        })
    })
}

/// Families no domain claims (a new prefix needs a domain).
pub fn unclaimed(families: &[FamilyDoc]) -> Vec<String> {
    families
        .iter()
        .filter(|f| domain_of(&f.name).is_none())
        .map(|f| f.name.clone())
        .collect()
}

/// A table cell: no pipes or line breaks.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The reference as markdown (docs/metrics.md).
pub fn metrics_reference(cgroup_labels: &[(String, String)]) -> String {
    let fams = families(cgroup_labels);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Metrics reference\n\n\
         Every family `iowarden run` (and `iowarden tune`) can serve at `/metrics`, with its \
         type, unit, labels and help as the exposition writes them, grouped by what turns it \
         on. Generated by `iowarden metrics` (`make docs` writes this file; `cargo test` fails \
         when it is stale). The protobuf exposition (native histograms) carries the same \
         families. A family with no sample is not written at all.\n"
    );
    for d in DOMAINS {
        let _ = writeln!(out, "- [{}](#{})", d.title, anchor(d.title));
    }
    for d in DOMAINS {
        let mine: Vec<&FamilyDoc> = fams
            .iter()
            .filter(|f| domain_of(&f.name).is_some_and(|x| std::ptr::eq(x, d)))
            .collect();
        let _ = writeln!(out, "\n## {}\n\n{}\n", d.title, d.when);
        let io = d.prefixes.contains(&"iowarden_io_");
        let _ = writeln!(
            out,
            "| Metric | Type | Labels |{} Help |\n|---|---|---|{}---|",
            if io { " `--io-counters` |" } else { "" },
            if io { "---|" } else { "" }
        );
        for f in mine {
            let flag = if io {
                let c = io_counter_of(&f.name).unwrap_or_else(|| match f.kind.as_str() {
                    "histogram" => "`--histogram-stages`".into(),
                    _ => "always".into(),
                });
                format!(" {c} |")
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "| `{}` | {}{} | {} |{flag} {} |",
                f.query_name(),
                f.kind,
                if f.unit.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", f.unit)
                },
                f.labels
                    .iter()
                    .map(|l| format!("`{l}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                cell(&f.help)
            );
        }
    }
    out
}

/// GitHub's anchor of a heading.
fn anchor(title: &str) -> String {
    title
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    /// The families every domain's records declare (snapshot_domains!'s
    /// `families`).
    fn declared() -> Vec<(&'static str, Option<MetricUnit>)> {
        fn of<T: Families>() -> Vec<(&'static str, Option<MetricUnit>)> {
            T::families().iter().map(|f| (f.name, f.unit)).collect()
        }
        macro_rules! families_of_every_domain {
            ($(
                $(#[$attr:meta])*
                $field:ident: $ty:ty, $window:ident, exposed $at:literal, families [$($fam:ty),*];
            )+) => {
                [$($(of::<$fam>(),)*)+].concat()
            };
        }
        snapshot_domains!(families_of_every_domain)
    }

    #[test]
    fn every_declared_family_is_in_the_reference() {
        let fams = families(&[("kind".into(), "pod".into())]);
        let names: Vec<&str> = fams.iter().map(|f| f.name.as_str()).collect();
        for (name, _) in declared() {
            if TEST_ONLY.contains(&name) {
                continue;
            }
            assert!(
                names.iter().any(|n| n.starts_with(name)),
                "{name} is declared but the reference's snapshot does not expose it: \
                 fill its record in model/fixture.rs"
            );
        }
        assert!(!names.contains(&"iowarden_walkthrough"));
        assert_eq!(unclaimed(&fams), Vec::<String>::new(), "give them a domain");
    }

    #[test]
    fn labels_and_counter_flags_come_from_the_exposition() {
        let fams = families(&[("kind".into(), "pod".into())]);
        let get = |n: &str| fams.iter().find(|f| f.name == n).unwrap();
        let lat = get("iowarden_io_latency_seconds");
        assert_eq!(lat.kind, "histogram");
        assert_eq!(lat.unit, "seconds");
        assert_eq!(
            lat.labels,
            ["cgroup", "cgroup_id", "device", "op", "stage"],
            "le left out"
        );
        assert_eq!(get("iowarden_cgroup_info").labels, ["cgroup", "kind"]);
        assert_eq!(
            io_counter_of("iowarden_io_bytes").as_deref(),
            Some("`bytes` (default)")
        );
        assert_eq!(
            io_counter_of("iowarden_io_throttle_seconds").as_deref(),
            Some("`throttle`")
        );
        assert_eq!(
            get("iowarden_io_requests").query_name(),
            "iowarden_io_requests_total"
        );
    }

    #[test]
    fn label_names_skip_escaped_quotes() {
        assert_eq!(
            label_names(r#"x_total{a="q\"b,c=\"d",e="f"} 1"#),
            ["a", "e"]
        );
        assert_eq!(label_names("x 1"), Vec::<String>::new());
    }
}
