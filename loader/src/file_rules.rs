//! The rules docs/architecture.md gives the files inside a folder, checked
//! against the sources of both crates (layers.rs checks the arrows between
//! top modules): a file does not import its own folder's facade (mod.rs)
//! back, no chain of imports between files comes back to where it started,
//! and no hand-written source file is over 600 lines.
//!
//! The sources are read as source_paths.rs reads them: every path
//! resolved in the module tree to the file that holds what it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::source_paths::{is_tests, paths_of, Tree};

/// The longest a hand-written source file may be.
const MAX_LINES: usize = 600;

/// Generated files, excepted from MAX_LINES by name (relative to the
/// workspace root).
const GENERATED: &[&str] = &["bpf/vmlinux.h"];

/// The file extensions MAX_LINES applies to.
const SOURCE_EXTENSIONS: &[&str] = &["rs", "c", "h", "py", "sh"];

/// Folders of the workspace never walked: build outputs and fuzzing data.
const NOT_SOURCES: &[&str] = &["target", "artifacts", "coverage", "corpus"];

/// What the files of the crates checked show: facades imported back, and
/// the import arrows between files.
#[derive(Default)]
struct Findings {
    facade_imports: Vec<String>,
    arrows: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
}

/// Reads every file of the crate rooted at `root` (lib.rs or main.rs);
/// `workspace` is what the findings name files relative to.
fn check_crate(root: &Path, workspace: &Path, found: &mut Findings) {
    let tree = Tree::from_root(root);
    for (module, file) in &tree.files {
        let src = std::fs::read_to_string(file).unwrap();
        let rel = file.strip_prefix(workspace).unwrap_or(file);
        let folder = &module[..module.len().saturating_sub(1)];
        // A module's unit tests in a file of their own (tests.rs,
        // *_tests.rs) are that module's, as an inline `mod tests` is: their
        // `use super::*` names the module they test.
        let tests = module.last().is_some_and(|m| is_tests(m));
        let arrows = found.arrows.entry(rel.to_path_buf()).or_default();
        for (abs, in_tests) in paths_of(&src, module, &tree, &["crate"]) {
            let (target, name) = tree.resolve(&abs);
            let to = &tree.files[&target];
            // Unit tests are leaves: nothing imports them, so what they
            // use closes no cycle.
            if to != file && !tests && !in_tests {
                arrows.insert(to.strip_prefix(workspace).unwrap_or(to).to_path_buf());
            }
            // A child naming what its folder's facade defines or
            // re-exports. The crate root's children are left to layers.rs
            // (the root holds the macros and skeletons every layer uses).
            if !tests && !folder.is_empty() && target == folder && name.is_some() {
                found
                    .facade_imports
                    .push(format!("{}: {}", rel.display(), abs.join("::")));
            }
        }
    }
}

/// The cycles in `arrows` (strongly connected sets of two files or more),
/// each as its files, sorted.
fn cycles(arrows: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    // Tarjan's algorithm, iterative.
    let nodes: Vec<&PathBuf> = arrows.keys().collect();
    let index_of: BTreeMap<&PathBuf, usize> =
        nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let succ: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| {
            arrows[*n]
                .iter()
                .filter_map(|m| index_of.get(m).copied())
                .collect()
        })
        .collect();
    let n = nodes.len();
    let (mut index, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut next, mut out) = (Vec::new(), 0, Vec::new());
    for s in 0..n {
        if index[s] != usize::MAX {
            continue;
        }
        let mut work = vec![(s, 0)];
        while let Some((v, k)) = work.pop() {
            if k == 0 {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on[v] = true;
            }
            if let Some(&w) = succ[v].get(k) {
                work.push((v, k + 1));
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            if low[v] == index[v] {
                let mut scc = Vec::new();
                while let Some(w) = stack.pop() {
                    on[w] = false;
                    scc.push(nodes[w].clone());
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort();
                    out.push(scc);
                }
            }
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
        }
    }
    out.sort();
    out
}

/// The workspace root: the folder above loader/.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Both crates' files: the library and the binary of loader/, exporters/.
fn findings() -> Findings {
    let ws = workspace();
    let mut found = Findings::default();
    for root in [
        "loader/src/lib.rs",
        "loader/src/main.rs",
        "exporters/src/lib.rs",
    ] {
        check_crate(&ws.join(root), &ws, &mut found);
    }
    found
}

/// The hand-written source files below `dir` longer than MAX_LINES, as
/// "path: N lines".
fn long_files(dir: &Path, root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().to_string();
            if p.is_dir() {
                if !name.starts_with('.') && !NOT_SOURCES.contains(&name.as_str()) {
                    todo.push(p);
                }
            } else if p
                .extension()
                .is_some_and(|x| SOURCE_EXTENSIONS.contains(&x.to_string_lossy().as_ref()))
                && !GENERATED.contains(&rel.as_str())
            {
                let n = std::fs::read_to_string(&p).map_or(0, |s| s.lines().count());
                if n > MAX_LINES {
                    out.push(format!("{rel}: {n} lines"));
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn no_file_imports_its_own_folders_facade_back() {
    let bad = findings().facade_imports;
    assert!(
        bad.is_empty(),
        "files naming their own folder's mod.rs (use the sibling that holds it):\n{}",
        bad.join("\n")
    );
}

#[test]
fn no_import_cycle_between_files() {
    let bad: Vec<String> = cycles(&findings().arrows)
        .iter()
        .map(|c| {
            c.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" <-> ")
        })
        .collect();
    assert!(
        bad.is_empty(),
        "files importing each other (through any chain):\n{}",
        bad.join("\n")
    );
}

#[test]
fn no_hand_written_source_file_is_over_the_limit() {
    let ws = workspace();
    let bad = long_files(&ws, &ws);
    assert!(
        bad.is_empty(),
        "source files over {MAX_LINES} lines (split them; a generated one goes in GENERATED):\n{}",
        bad.join("\n")
    );
}

#[test]
fn a_cycle_through_three_files_is_found() {
    let p = |s: &str| PathBuf::from(s);
    let arrows: BTreeMap<PathBuf, BTreeSet<PathBuf>> = [
        (p("a"), [p("b")].into()),
        (p("b"), [p("c")].into()),
        (p("c"), [p("a"), p("d")].into()),
        (p("d"), BTreeSet::new()),
    ]
    .into();
    assert_eq!(cycles(&arrows), [vec![p("a"), p("b"), p("c")]]);
}
