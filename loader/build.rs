//! Compiles bpf/*.bpf.c and writes their libbpf-rs skeletons to OUT_DIR,
//! and the headers' #define constants as Rust (bindgen, as sched-ext does
//! for its intf.h): the enums reach Rust through the skeletons' BTF, the
//! macros through bpf_consts.rs. Nothing is copied by hand.
use std::env;
use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

const OBJECTS: &[&str] = &["iowarden", "nvme", "iocost", "locks"];

/// The headers the BPF objects and the loader share.
const HEADERS: &[&str] = &["iowarden.h", "nvme.h", "iocost.h", "locks.h"];

/// The kernel's fixed-width types, which the BPF side takes from vmlinux.h.
const UAPI_TYPES: &str = "typedef unsigned char __u8; typedef unsigned short __u16; \
    typedef unsigned int __u32; typedef unsigned long long __u64; \
    typedef signed int __s32; typedef signed long long __s64; typedef _Bool bool;";

fn main() {
    let bpf_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../bpf");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    for name in OBJECTS {
        build_skeleton(&bpf_dir, &out, name);
    }
    generate_constants(&bpf_dir, &out.join("bpf_consts.rs"));
    // Every header both sides read, and the committed vmlinux.h.
    for entry in std::fs::read_dir(&bpf_dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "h") {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
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

/// The value-carrying #defines of the shared headers (IOW_*, LK_*,
/// NVME_IOW_*, IOCOST_IOW_*) as `pub const`s.
fn generate_constants(bpf_dir: &Path, dest: &Path) {
    let wrapper: String = std::iter::once(UAPI_TYPES.to_string())
        .chain(HEADERS.iter().map(|h| format!("#include \"{h}\"")))
        .collect::<Vec<_>>()
        .join("\n");
    bindgen::Builder::default()
        .header_contents("bpf_consts.h", &wrapper)
        .clang_arg(format!("-I{}", bpf_dir.display()))
        .allowlist_var("(IOW|LK|NVME_IOW|IOCOST_IOW)_[A-Z0-9_]+")
        .generate()
        .unwrap_or_else(|e| panic!("bindgen over bpf/*.h: {e}"))
        .write_to_file(dest)
        .unwrap_or_else(|e| panic!("writing {}: {e}", dest.display()));
}
