//! Driving MCP servers as an MCP client does, with the official inspector CLI from npx's cache
//! (`tests/run` installs it and the third-party servers; npx runs with `--no`, so a test never
//! downloads anything, and a missing tool fails with its install command).

use std::process::{Command, Output};

use serde_json::Value;

use crate::text;

pub const INSPECTOR: &str = "@modelcontextprotocol/inspector@2.12.0";
/// Flux159's `mcp-server-kubernetes` (npm).
pub const K8S_MCP: &str = "mcp-server-kubernetes@4.1.7";
/// containers' `kubernetes-mcp-server` (npm, which ships the Go binary; its PyPI wrapper
/// downloads the binary at run time instead).
pub const KUBERNETES_MCP: &str = "kubernetes-mcp-server@0.0.67";
pub const PROM_MCP: &str = "prometheus-mcp-server";
pub const PROM_MCP_INSTALL: &str = "python3 -m pip install prometheus_mcp_server==1.6.2";

/// The inspector CLI, from npx's cache.
pub fn inspector() -> Command {
    let mut c = Command::new("npx");
    c.args(["--no", "--", INSPECTOR, "--cli", "--format", "json", "-q"]);
    // A server started through npx can take longer than the inspector's 15 s default to answer
    // `initialize` on a loaded machine; the answers, not the start-up time, are under test.
    c.args(["--connect-timeout", "120000"]);
    c
}

/// Runs an inspector command; its output, with a clear message when the inspector is missing.
pub fn run(mut cmd: Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("npx is needed (apt-get install nodejs npm): {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("npx canceled") && !stderr.contains("could not determine executable"),
        "the MCP inspector is not installed: run `npx -y {INSPECTOR} --cli --help` (or bash tests/run)\n{}",
        text(&out)
    );
    out
}

/// The JSON the inspector printed on stdout.
pub fn json_out(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("inspector JSON expected ({e}):\n{}", text(out)))
}

/// The text of a tool result (`content[].text` joined).
pub fn result_text(v: &Value) -> String {
    let content = v
        .pointer("/result/content")
        .or_else(|| v.get("content"))
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("no content in {v}"));
    content
        .iter()
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// An inspector call to a third-party stdio server with environment variables for it.
pub fn third_party(env: &[(&str, String)], argv: &[&str], tool: &str, args: Value) -> Output {
    let mut cmd = inspector();
    for (k, v) in env {
        cmd.arg("-e").arg(format!("{k}={v}"));
    }
    cmd.args(["--method", "tools/call", "--tool-name", tool])
        .arg("--tool-args-json")
        .arg(args.to_string())
        .arg("--")
        .args(argv);
    run(cmd)
}
