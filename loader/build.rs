//! Compiles bpf/*.bpf.c and writes their libbpf-rs skeletons to OUT_DIR,
//! and the headers' #define constants as Rust (bindgen, as sched-ext does
//! for its intf.h): the enums reach Rust through the skeletons' BTF, the
//! macros through bpf_consts.rs. Nothing is copied by hand.
//!
//! bpf/'s layout: `*.bpf.c` the objects; `*.h` the headers shared with the
//! loader; `*.bpf.h` BPF-only helpers that objects share (each included by
//! two or more, checked here); `block/` the parts of iowarden.bpf.c, which
//! it includes mid-file (read by clang only, through that include).
use std::env;
use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

/// The kernel's fixed-width types, which the BPF side takes from vmlinux.h.
const UAPI_TYPES: &str = "typedef unsigned char __u8; typedef unsigned short __u16; \
    typedef unsigned int __u32; typedef unsigned long long __u64; \
    typedef signed int __s32; typedef signed long long __s64; typedef _Bool bool;";

fn main() {
    let bpf_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../bpf");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let objects = files(&bpf_dir, ".bpf.c");
    check_helpers_shared(&bpf_dir, &objects);
    for name in &objects {
        build_skeleton(&bpf_dir, &out, name);
    }
    generate_constants(&bpf_dir, &out.join("bpf_consts.rs"));
    // A new or removed source or header reruns the build, as does any edit
    // (a folder, bpf/block/, is watched whole).
    println!("cargo:rerun-if-changed={}", bpf_dir.display());
    for entry in std::fs::read_dir(&bpf_dir).unwrap() {
        println!("cargo:rerun-if-changed={}", entry.unwrap().path().display());
    }
}

/// The stems of bpf/*<suffix>, sorted: every BPF object (".bpf.c") and
/// every header the loader shares with them (".h" less the BPF-only
/// "*.bpf.h" and vmlinux.h) is found, never listed by hand. One level:
/// the parts in bpf/block/ are not read.
fn files(dir: &Path, suffix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(suffix).map(str::to_string))
        .filter(|stem| !stem.ends_with(".bpf") && stem != "vmlinux")
        .collect();
    v.sort();
    v
}

/// Each bpf/*.bpf.h is included by two or more objects: a file that only
/// one object includes is a part of it, kept in that object's folder (as
/// iowarden.bpf.c's are in bpf/block/), so a reader tells the two apart.
fn check_helpers_shared(bpf_dir: &Path, objects: &[String]) {
    let sources: Vec<String> = objects
        .iter()
        .map(|name| read(&bpf_dir.join(format!("{name}.bpf.c"))))
        .collect();
    for helper in files(bpf_dir, ".bpf.h") {
        let include = format!("#include \"{helper}.bpf.h\"");
        let users = sources.iter().filter(|s| s.contains(&include)).count();
        assert!(
            users >= 2,
            "bpf/{helper}.bpf.h is included by {users} object(s): a helper that \
             objects share needs two or more, a part of one object goes in its \
             folder (bpf/block/ for iowarden.bpf.c)"
        );
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn build_skeleton(bpf_dir: &Path, out: &Path, name: &str) {
    let src = bpf_dir.join(format!("{name}.bpf.c"));
    SkeletonBuilder::new()
        .source(&src)
        .obj(out.join(format!("{name}.bpf.o")))
        .clang_args([
            "-I".into(),
            bpf_dir.to_path_buf().into_os_string(),
            "-mcpu=v3".into(),
            "-Wall".into(),
            "-Werror".into(),
        ])
        .build_and_generate(out.join(format!("{name}.skel.rs")))
        .unwrap_or_else(|e| panic!("building {}: {e:#}", src.display()));
    println!("cargo:rerun-if-changed={}", src.display());
}

/// The value-carrying #defines of every shared header (bpf/*.h but
/// *.bpf.h and vmlinux.h) as `pub const`s: the names come from the
/// headers themselves, with no list of prefixes to keep in step.
fn generate_constants(bpf_dir: &Path, dest: &Path) {
    let headers = files(bpf_dir, ".h");
    let wrapper: String = std::iter::once(UAPI_TYPES.to_string())
        .chain(headers.iter().map(|h| format!("#include \"{h}.h\"")))
        .collect::<Vec<_>>()
        .join("\n");
    let names: Vec<String> = headers
        .iter()
        .flat_map(|h| defined_values(&bpf_dir.join(format!("{h}.h"))))
        .collect();
    bindgen::Builder::default()
        .header_contents("bpf_consts.h", &wrapper)
        .clang_arg(format!("-I{}", bpf_dir.display()))
        .allowlist_var(format!("^({})$", names.join("|")))
        .generate()
        .unwrap_or_else(|e| panic!("bindgen over bpf/*.h: {e}"))
        .write_to_file(dest)
        .unwrap_or_else(|e| panic!("writing {}: {e}", dest.display()));
}

/// Names of the `#define NAME value` lines of a header (not function-like
/// macros, not include guards without a value).
fn defined_values(header: &Path) -> Vec<String> {
    read(header)
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("#define"))
        .filter_map(|rest| {
            let mut words = rest.split_whitespace();
            let name = words.next()?;
            let plain = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            (plain && words.next().is_some()).then(|| name.to_string())
        })
        .collect()
}
