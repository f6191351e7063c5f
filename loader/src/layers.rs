//! The import rules of docs/architecture.md, checked against the sources:
//! the layers listed there (between `<!-- layers CRATE -->` and
//! `<!-- /layers -->`, top first) are the only rule, and every module of
//! src/ may use only modules of the layers below its own (and the crate
//! root's macros and generated skeletons). A module the list does not
//! name fails too, so a new one gets its place in the picture.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers of `krate` in the document, top first.
fn layers_in_doc(doc: &str, krate: &str) -> Vec<Vec<String>> {
    let open = format!("<!-- layers {krate} -->");
    let start = doc
        .find(&open)
        .unwrap_or_else(|| panic!("no '{open}' in the document"));
    let rest = &doc[start + open.len()..];
    let end = rest
        .find("<!-- /layers -->")
        .expect("no '<!-- /layers -->'");
    rest[..end]
        .lines()
        .map(|l| l.split('(').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty() && !l.starts_with("```"))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// The top module a file of src/ belongs to: its folder, or its stem.
fn module_of(rel: &Path) -> String {
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// Every .rs file below `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out
}

/// The first segment of every `crate::` (or `prefix::`) path in `src`,
/// comments left out; `use crate::{a, b::c}` gives a and b.
fn used_modules(src: &str, prefix: &str) -> BTreeSet<String> {
    let code: String = src
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeSet::new();
    for p in ["crate", prefix] {
        let head = format!("{p}::");
        for (i, _) in code.match_indices(&head) {
            let before = code[..i].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let after = &code[i + head.len()..];
            if let Some(group) = after.strip_prefix('{') {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                for item in group.split(',') {
                    let name = item.trim().split("::").next().unwrap_or("").trim();
                    if !name.is_empty() {
                        out.insert(name.to_string());
                    }
                }
            } else {
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.insert(name);
            }
        }
    }
    out
}

/// The arrows of crate `krate` (its src/ at `src`, the binary naming it
/// `prefix::`) the layers forbid, as "a -> b" lines.
fn forbidden_arrows(src: &Path, krate: &str, prefix: &str, root_items: &[&str]) -> Vec<String> {
    let doc = std::fs::read_to_string(src.join("../../docs/architecture.md")).unwrap();
    let mut rank = BTreeMap::new();
    for (i, layer) in layers_in_doc(&doc, krate).iter().rev().enumerate() {
        for m in layer {
            rank.insert(m.clone(), i);
        }
    }
    let mut bad = Vec::new();
    for file in sources(src) {
        let rel = file.strip_prefix(src).unwrap();
        if ["layers.rs", "file_rules.rs", "source_paths.rs"]
            .iter()
            .any(|c| rel == Path::new(c))
        {
            continue; // the checkers: their examples name modules, they use none
        }
        let from = module_of(rel);
        let Some(&r_from) = rank.get(&from) else {
            bad.push(format!("{}: module {from} is in no layer", rel.display()));
            continue;
        };
        for to in used_modules(&std::fs::read_to_string(&file).unwrap(), prefix) {
            if to == from || root_items.contains(&to.as_str()) || to.ends_with("_skel") {
                continue;
            }
            match rank.get(&to) {
                Some(&r_to) if r_to < r_from => {}
                Some(_) => bad.push(format!("{}: {from} -> {to}", rel.display())),
                None => bad.push(format!("{}: {from} -> {to} (no layer)", rel.display())),
            }
        }
    }
    bad.sort();
    bad
}

#[test]
fn loader_imports_follow_the_layers_of_the_architecture_document() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    // lib.rs's macros and generated code, which every layer may use.
    let root = ["say", "out", "outln", "skel", "bpf_consts"];
    let bad = forbidden_arrows(&src, "loader", "iowarden", &root);
    assert!(
        bad.is_empty(),
        "imports the layers forbid:\n{}",
        bad.join("\n")
    );
}

#[test]
fn exporters_imports_follow_the_layers_of_the_architecture_document() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../exporters/src");
    let bad = forbidden_arrows(&src, "exporters", "iowarden_exporters", &[]);
    assert!(
        bad.is_empty(),
        "imports the layers forbid:\n{}",
        bad.join("\n")
    );
}

#[test]
fn an_upward_arrow_is_found() {
    let used = used_modules(
        "use crate::{host::x, probes};\n// crate::views in a comment\nlet a = iowarden::cli::f();",
        "iowarden",
    );
    let want: BTreeSet<String> = ["host", "probes", "cli"].map(String::from).into();
    assert_eq!(used, want);
    let doc = "<!-- layers t -->\n    top\n    mid other (a note)\n    low\n<!-- /layers -->";
    assert_eq!(
        layers_in_doc(doc, "t"),
        [vec!["top"], vec!["mid", "other"], vec!["low"]]
    );
}
