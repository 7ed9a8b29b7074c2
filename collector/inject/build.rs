//! Compiles the BPF programs (`bpf/*.bpf.c`) with clang into `OUT_DIR`, where `src/objects.rs`
//! embeds them. The BPF side is C because the Rust BPF target needs a nightly toolchain with
//! `rust-src`; Debian's clang and libbpf-dev headers build it from a clean checkout.

use std::path::{Path, PathBuf};
use std::process::Command;

const OBJECTS: [&str; 2] = ["cgroup", "lsm"];

fn main() {
    let bpf_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo")).join("bpf");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-changed={}", bpf_dir.display());
    println!("cargo:rerun-if-env-changed=CLANG");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // linux/types.h includes asm/types.h, which Debian keeps under the multiarch directory; the
    // BPF target does not search it by itself.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").expect("set by cargo");
    let multiarch = format!("/usr/include/{arch}-linux-gnu");
    for name in OBJECTS {
        let src = bpf_dir.join(format!("{name}.bpf.c"));
        println!("cargo:rerun-if-changed={}", src.display());
        compile(&clang, &src, &out.join(format!("{name}.bpf.o")), &multiarch);
    }
}

fn compile(clang: &str, src: &Path, obj: &Path, multiarch: &str) {
    let status = Command::new(clang)
        .args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror"])
        .arg("-idirafter")
        .arg(multiarch)
        .arg("-c")
        .arg(src)
        .arg("-o")
        .arg(obj)
        .status();
    match status {
        Ok(status) if status.success() => {}
        Ok(status) => panic!(
            "clang failed ({status}) compiling {}; the BPF headers come from libbpf-dev and \
             linux-libc-dev: apt-get install clang libbpf-dev linux-libc-dev",
            src.display()
        ),
        Err(err) => panic!(
            "cannot run `{clang}` to compile {} ({err}): apt-get install clang libbpf-dev \
             (or set CLANG to a clang that targets bpf)",
            src.display()
        ),
    }
}
