//! Rust sources read as tokens, not compiled, for the file rules
//! (file_rules.rs): comments and string contents are left out, `mod x;`
//! declarations (and `#[path]`) give a crate's module tree, and every
//! `crate::`, `super::`, `self::` or child-module path (use trees
//! included) is made absolute, to be resolved in that tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Ident(String),
    Str(String),
    /// `::`
    Sep,
    Open,
    Close,
    Punct(char),
}

/// The tokens of Rust source `src`, comments left out; string and char
/// literals give one token each (a string its contents, for `#[path]`).
pub(crate) fn tokens(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            loop {
                if at(i) == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if at(i) == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else if i >= c.len() {
                    break;
                } else {
                    i += 1;
                }
            }
        } else if ch == '"' {
            let (s, end) = quoted(&c, i + 1, '"');
            out.push(Tok::Str(s));
            i = end;
        } else if ch == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if at(i + 1) == '\\' {
                i = quoted(&c, i + 1, '\'').1;
                out.push(Tok::Str(String::new()));
            } else if at(i + 2) == '\'' {
                i += 3;
                out.push(Tok::Str(String::new()));
            } else {
                i += 1;
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while at(i).is_alphanumeric() || at(i) == '_' {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let raw = (word == "r" || word == "br") && (at(i) == '"' || at(i) == '#');
            if raw {
                let hashes = (i..).take_while(|&k| at(k) == '#').count();
                let open = i + hashes;
                let mut k = open + 1;
                while k < c.len() && !(c[k] == '"' && (1..=hashes).all(|h| at(k + h) == '#')) {
                    k += 1;
                }
                out.push(Tok::Str(c[(open + 1).min(k)..k].iter().collect()));
                i = k + 1 + hashes;
            } else if word == "b" && (at(i) == '"' || at(i) == '\'') {
                let (s, end) = quoted(&c, i + 1, at(i));
                out.push(Tok::Str(s));
                i = end;
            } else {
                out.push(Tok::Ident(word));
            }
        } else if ch == ':' && at(i + 1) == ':' {
            out.push(Tok::Sep);
            i += 2;
        } else {
            match ch {
                '{' => out.push(Tok::Open),
                '}' => out.push(Tok::Close),
                _ if ch.is_whitespace() => {}
                _ => out.push(Tok::Punct(ch)),
            }
            i += 1;
        }
    }
    out
}

/// The contents of a literal from `i` (after its opening quote) to its
/// closing `quote`, escapes skipped; and the index after it.
fn quoted(c: &[char], mut i: usize, quote: char) -> (String, usize) {
    let start = i;
    while i < c.len() && c[i] != quote {
        i += if c[i] == '\\' { 2 } else { 1 };
    }
    (c[start..i.min(c.len())].iter().collect(), i + 1)
}

/// The paths the use tree or path at `t[i..]` names, each as its segments
/// after `prefix` (`a::{b, c::*}` gives a::b and a::c::*); returns the
/// index after it.
fn use_tree(t: &[Tok], mut i: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut segs = prefix.to_vec();
    loop {
        match t.get(i) {
            Some(Tok::Ident(s)) => {
                segs.push(s.clone());
                i += 1;
                if t.get(i) == Some(&Tok::Sep) {
                    i += 1;
                    continue;
                }
                out.push(segs);
                return i;
            }
            Some(Tok::Open) => {
                i += 1;
                while i < t.len() && t[i] != Tok::Close {
                    i = use_tree(t, i, &segs, out);
                    // `as` renames and anything else up to the next item.
                    while i < t.len() && t[i] != Tok::Close && t[i] != Tok::Punct(',') {
                        i += 1;
                    }
                    if t.get(i) == Some(&Tok::Punct(',')) {
                        i += 1;
                    }
                }
                return i + 1;
            }
            Some(Tok::Punct('*')) => {
                segs.push("*".into());
                out.push(segs);
                return i + 1;
            }
            _ => {
                out.push(segs);
                return i;
            }
        }
    }
}

/// A module path: its names from the crate root.
pub(crate) type ModPath = Vec<String>;

/// A crate's modules, as `mod x;` declarations reach them from its root.
pub(crate) struct Tree {
    pub(crate) files: BTreeMap<ModPath, PathBuf>,
}

impl Tree {
    pub(crate) fn from_root(root: &Path) -> Tree {
        let mut files = BTreeMap::new();
        let mut todo = vec![(Vec::new(), root.to_path_buf())];
        while let Some((path, file)) = todo.pop() {
            let src = std::fs::read_to_string(&file).unwrap();
            for (name, file_of) in declared_modules(&tokens(&src)) {
                let dir = if is_folder_root(&file) {
                    file.parent().unwrap().to_path_buf()
                } else {
                    file.with_extension("")
                };
                let child = match file_of {
                    Some(p) => file.parent().unwrap().join(p),
                    None if dir.join(format!("{name}.rs")).exists() => {
                        dir.join(format!("{name}.rs"))
                    }
                    None => dir.join(&name).join("mod.rs"),
                };
                if child.exists() {
                    let mut p: ModPath = path.clone();
                    p.push(name);
                    todo.push((p, child));
                }
            }
            files.insert(path, file);
        }
        Tree { files }
    }

    /// The module `segs` (absolute, `super` and `self` resolved) lands in,
    /// and the name it then takes from that module's file, if any.
    pub(crate) fn resolve(&self, segs: &[String]) -> (ModPath, Option<String>) {
        let mut cur = Vec::new();
        for s in segs {
            let mut next = cur.clone();
            next.push(s.clone());
            if !self.files.contains_key(&next) {
                return (cur, Some(s.clone()));
            }
            cur = next;
        }
        (cur, None)
    }
}

/// mod.rs, lib.rs and main.rs: their children live beside them.
fn is_folder_root(file: &Path) -> bool {
    let name = file.file_name().unwrap().to_string_lossy();
    name == "mod.rs" || name == "lib.rs" || name == "main.rs"
}

/// The `mod x;` declarations in `t`, each with the file a `#[path]` right
/// before it names.
fn declared_modules(t: &[Tok]) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for (i, w) in t.windows(3).enumerate() {
        let [Tok::Ident(m), Tok::Ident(name), Tok::Punct(';')] = w else {
            continue;
        };
        if m != "mod" {
            continue;
        }
        // Back over a visibility (`pub`, `pub(crate)`) to the attribute.
        let mut k = i;
        while k > 0
            && match &t[k - 1] {
                Tok::Ident(v) => v == "pub" || v == "crate" || v == "super",
                Tok::Punct(c) => *c == '(' || *c == ')',
                _ => false,
            }
        {
            k -= 1;
        }
        let path = match t.get(k.saturating_sub(4)..k) {
            Some([Tok::Ident(p), Tok::Punct('='), Tok::Str(s), Tok::Punct(']')]) if p == "path" => {
                Some(s.clone())
            }
            _ => None,
        };
        out.push((name.clone(), path));
    }
    out
}

/// Every path of `file` (module `module`) that starts at the crate root,
/// `super`, `self` or a child module, made absolute (a macro's `$crate::`
/// paths are its callers', not this file's): `crate_names` are
/// the names meaning this crate's root (`crate`, and the library's name in
/// its own binary). Inline modules (`mod tests { .. }`) count: their
/// `super` is the file's module.
pub(crate) fn paths_of(
    src: &str,
    module: &[String],
    tree: &Tree,
    crate_names: &[&str],
) -> Vec<(ModPath, bool)> {
    let t = tokens(src);
    let mut out = Vec::new();
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < t.len() {
        match &t[i] {
            Tok::Open => depth += 1,
            Tok::Close => {
                depth -= 1;
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            Tok::Ident(m) if m == "mod" => {
                if let (Some(Tok::Ident(name)), Some(Tok::Open)) = (t.get(i + 1), t.get(i + 2)) {
                    inline.push((name.clone(), depth));
                }
            }
            _ => {}
        }
        let starts = matches!(&t[i], Tok::Ident(_))
            && t.get(i + 1) == Some(&Tok::Sep)
            && !(i > 0 && [Tok::Sep, Tok::Punct('.'), Tok::Punct('$')].contains(&t[i - 1]));
        if !starts {
            i += 1;
            continue;
        }
        let mut here: ModPath = module.to_vec();
        here.extend(inline.iter().map(|(n, _)| n.clone()));
        let in_tests = inline.iter().any(|(n, _)| is_tests(n));
        let Tok::Ident(first) = &t[i] else {
            unreachable!()
        };
        let mut child = here.clone();
        child.push(first.clone());
        let relative = first == "super" || first == "self" || tree.files.contains_key(&child);
        if !relative && !crate_names.contains(&first.as_str()) {
            i += 1;
            continue;
        }
        let mut named = Vec::new();
        i = use_tree(&t, i, &[], &mut named);
        for segs in named {
            let mut abs = if relative { here.clone() } else { Vec::new() };
            for (k, s) in segs.iter().enumerate() {
                match s.as_str() {
                    _ if k == 0 && !relative => {}
                    "super" => {
                        abs.pop();
                    }
                    "self" => {}
                    _ => abs.push(s.clone()),
                }
            }
            out.push((abs, in_tests));
        }
    }
    out
}

/// A module of unit tests: `tests`, or `*_tests` (a file named by `#[path]`).
pub(crate) fn is_tests(name: &str) -> bool {
    name == "tests" || name.ends_with("_tests")
}

#[test]
fn paths_are_read_as_the_compiler_resolves_them() {
    let src = "use super::{a::B, c as d, *};\n// crate::x in a comment\n\
               let s = \"crate::y\"; let c = '{'; f::<'a>(crate::z::W);\n\
               mod tests { use super::*; }";
    let tree = Tree {
        files: [vec![], vec!["m".into()], vec!["m".into(), "f".into()]]
            .into_iter()
            .map(|p| (p, PathBuf::new()))
            .collect(),
    };
    let module = ["m".to_string(), "f".to_string()];
    let got: Vec<(String, bool)> = paths_of(src, &module, &tree, &["crate"])
        .iter()
        .map(|(p, in_tests)| (p.join("::"), *in_tests))
        .collect();
    let want = [
        ("m::a::B", false),
        ("m::c", false),
        ("m::*", false),
        ("z::W", false),
        ("m::f::*", true),
    ];
    assert_eq!(got, want.map(|(p, t)| (p.to_string(), t)));
    assert_eq!(
        tree.resolve(&["m".into(), "a".into(), "B".into()]),
        (vec!["m".to_string()], Some("a".to_string()))
    );
    let declared = declared_modules(&tokens(
        "#[cfg(test)]\n#[path = \"x_tests.rs\"]\nmod tests;\npub(crate) mod a;",
    ));
    assert_eq!(
        declared,
        [
            ("tests".to_string(), Some("x_tests.rs".to_string())),
            ("a".to_string(), None)
        ]
    );
}
