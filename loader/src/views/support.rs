//! What works on the running kernel, as one row of the kernel support
//! table of docs/kernels.md (the guest tests build that table from the rows iowarden
//! prints on each kernel line): per column, ✓, "degraded: what is
//! missing", or "✗ why".

use iowarden_exporters::ProbeStatus;

/// The block object's columns, and the probe statuses each summarises.
const BLOCK_COLUMNS: &[(&str, &[&str])] = &[
    ("block I/O", &["block_rq_complete"]),
    ("requeue, merge", &["block_rq_requeue", "block_rq_merge"]),
];

/// The table's columns after the kernel's: the block object's, then one
/// per optional probe of [`crate::probes::optional::ALL`].
fn columns() -> Vec<(&'static str, Vec<&'static str>)> {
    let block = BLOCK_COLUMNS.iter().map(|(c, of)| (*c, of.to_vec()));
    let optional = crate::probes::optional::ALL
        .iter()
        .map(|p| (p.name, vec![p.name]));
    block.chain(optional).collect()
}

/// The Markdown header of the table (kernel column first).
pub fn header() -> String {
    let names: Vec<&str> = columns().iter().map(|(c, _)| *c).collect();
    format!(
        "| kernel | {} |\n|---|{}",
        names.join(" | "),
        "---|".repeat(names.len())
    )
}

/// The cells of one kernel's row, as `| c1 | c2 | … |`.
pub fn row(probes: &[ProbeStatus]) -> String {
    let cells: Vec<String> = columns()
        .iter()
        .map(|(_, names)| {
            let of: Vec<&ProbeStatus> = names
                .iter()
                .filter_map(|n| probes.iter().find(|p| p.name == *n))
                .collect();
            cell(&of)
        })
        .collect();
    format!("| {} |", cells.join(" | "))
}

fn cell(statuses: &[&ProbeStatus]) -> String {
    if statuses.is_empty() {
        return "—".into();
    }
    let inactive: Vec<&str> = statuses
        .iter()
        .filter(|p| !p.active)
        .map(|p| p.reason.as_str())
        .collect();
    let caveats: Vec<&str> = statuses
        .iter()
        .filter(|p| p.active && !p.reason.is_empty())
        .map(|p| p.reason.as_str())
        .collect();
    if !inactive.is_empty() {
        format!("✗ {}", inactive.join("; ").replace('|', "/"))
    } else if !caveats.is_empty() {
        format!("degraded: {}", caveats.join("; ").replace('|', "/"))
    } else {
        "✓".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(name: &str, active: bool, reason: &str) -> ProbeStatus {
        ProbeStatus {
            name: name.into(),
            active,
            reason: reason.into(),
        }
    }

    #[test]
    fn a_row_has_a_cell_per_column_saying_what_works() {
        let probes = [
            st("block_rq_complete", true, "claims through a map"),
            st("block_rq_requeue", true, ""),
            st("block_rq_merge", true, ""),
            st("nvme", false, "no BTF for modules"),
            st("iocost", true, ""),
        ];
        // The optional probes after nvme and iocost have no status here.
        let rest = " — |".repeat(crate::probes::optional::ALL.len() - 2);
        assert_eq!(
            row(&probes),
            format!("| degraded: claims through a map | ✓ | ✗ no BTF for modules | ✓ |{rest}")
        );
        let cols = header().lines().next().unwrap().matches('|').count();
        assert_eq!(row(&probes).matches('|').count() + 1, cols);
    }

    /// docs/kernels.md's table has the columns the rows are printed with
    /// (t-01 counts a row's cells by its header; the rows are generated
    /// by make vmtest).
    #[test]
    fn the_documented_table_has_these_columns() {
        let doc = include_str!("../../../docs/kernels.md");
        let documented: Vec<&str> = doc
            .lines()
            .skip_while(|l| *l != "<!-- kernel-support-rows -->")
            .skip(1)
            .take(2)
            .collect();
        assert_eq!(
            documented.join("\n"),
            header(),
            "docs/kernels.md's support table header"
        );
    }

    #[test]
    fn one_missing_tracepoint_of_a_column_marks_it_missing() {
        let probes = [
            st("block_rq_requeue", true, ""),
            st(
                "block_rq_merge",
                false,
                "kernel has no tracepoint block_rq_merge",
            ),
        ];
        assert!(row(&probes).contains("| ✗ kernel has no tracepoint block_rq_merge |"));
    }
}
