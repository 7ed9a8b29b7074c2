//! Helpers for end-to-end tests: locating the real binaries, running them, recorded fixtures, and a
//! scripted LLM server for agents.

pub mod cluster;
pub mod fixture;
pub mod live;
pub mod llm_server;
pub mod mcp;
pub mod openenv;
pub mod s3;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The directory cargo puts binaries in for this build (the test executable's parent's parent).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps dir");
    deps.parent().expect("profile dir").to_path_buf()
}

/// Path of a workspace binary. Cargo builds every workspace binary before integration tests run when
/// the whole workspace is tested; when it is missing, say how to build it.
pub fn binary(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.exists(),
        "{} not built: run `cargo build --workspace` (or `cargo test --workspace`) first",
        path.display()
    );
    path
}

/// Runs a workspace binary with arguments and returns its output.
pub fn run(name: &str, args: &[&str]) -> Output {
    Command::new(binary(name))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {name}: {e}"))
}

/// The shared facts folder beside the repository.
pub fn shared_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared")
}

/// GET over plain http. In a workspace build reqwest is compiled with `rustls-no-provider` (the judge
/// needs it), so the process picks its TLS provider before building any client.
pub fn http_get(url: impl reqwest::IntoUrl) -> reqwest::blocking::Response {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::blocking::get(url).unwrap_or_else(|e| panic!("GET failed: {e}"))
}

/// A JSON file, or a panic naming it.
pub fn read_json(path: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Stdout and stderr of an output, for assertion messages.
pub fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A problem's reference fix (its command lines, one a line; empty when it has none through the
/// API) and the diagnosis a correct agent gives (`ProblemSpec::reference_diagnosis`).
pub fn reference(catalog: &problems::Catalog, problem: &problems::ProblemSpec) -> (String, String) {
    let commands = problem
        .reference_fix
        .as_ref()
        .map(|f| f.commands.join("\n"))
        .unwrap_or_default();
    let namespace = &catalog
        .app(&problem.application)
        .expect("the problem's app")
        .namespace;
    (commands, problem.reference_diagnosis(namespace))
}
