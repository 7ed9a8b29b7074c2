//! Every `collector` command answers `--help` with an example. (Also makes cargo build the binary
//! that the workspace end-to-end tests in `tests/` drive.)

use std::process::Command;

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_collector"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The commands a help text lists. Names sit at a two-space indent; a wrapped description continues
/// on deeper-indented lines.
fn subcommands_of(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect()
}

#[test]
fn every_command_has_help_with_an_example() {
    let top = help(&[]);
    assert!(top.contains("Example"), "{top}");
    // Each subcommand listed at the top level, and each of theirs, shows an example.
    let commands = subcommands_of(&top);
    assert!(!commands.is_empty());
    for command in &commands {
        let text = help(&[command]);
        let subcommands = subcommands_of(&text);
        assert!(
            text.contains("Example"),
            "collector {command} --help:\n{text}"
        );
        for sub in subcommands {
            let text = help(&[command, &sub]);
            assert!(
                text.contains("Example"),
                "collector {command} {sub} --help:\n{text}"
            );
        }
    }
}
