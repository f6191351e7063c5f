//! Compiles bpf/*.bpf.c and writes their libbpf-rs skeletons to OUT_DIR.
use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const OBJECTS: &[&str] = &["iowarden", "nvme", "iocost", "locks"];

fn main() {
    let bpf_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../bpf");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    for name in OBJECTS {
        let src = bpf_dir.join(format!("{name}.bpf.c"));
        SkeletonBuilder::new()
            .source(&src)
            .obj(out.join(format!("{name}.bpf.o")))
            .clang_args([
                "-I".into(),
                bpf_dir.clone().into_os_string(),
                "-mcpu=v3".into(),
                "-Wall".into(),
                "-Werror".into(),
            ])
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building {}: {e:#}", src.display()));
        println!("cargo:rerun-if-changed={}", src.display());
    }
    // Every header both sides read, and the committed vmlinux.h.
    for entry in std::fs::read_dir(&bpf_dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "h") {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
}
