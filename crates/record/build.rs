//! Compiles the BPF program (src/bpf/record.bpf.c) with clang and generates
//! its Rust skeleton into OUT_DIR (libbpf-cargo). Needs clang on the build
//! machine (Debian: `apt-get install clang`); the program is CO-RE: its few
//! kernel types are declared in src/bpf/record.h with
//! `preserve_access_index` and relocated against the running kernel's BTF
//! at load time, so no vmlinux.h is generated here.
use libbpf_cargo::SkeletonBuilder;
use std::path::PathBuf;

const SRC: &str = "src/bpf/record.bpf.c";

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR set by cargo"))
        .join("record.skel.rs");
    SkeletonBuilder::new()
        .source(SRC)
        .clang_args(["-O2", "-Wall", "-Werror"])
        .build_and_generate(&out)
        .unwrap_or_else(|e| {
            panic!("building {SRC} failed (is clang installed? `apt-get install clang`): {e:#}")
        });
    println!("cargo:rerun-if-changed={SRC}");
    println!("cargo:rerun-if-changed=src/bpf/record.h");
}
