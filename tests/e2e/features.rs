//! One build for every way of running the tests: a member built alone (`cargo test -p e2e --test
//! X`, `cargo test -p collector`, `cargo build -p collector`) must resolve every dependency with the
//! features `cargo test --workspace` gives it, or cargo compiles a second copy of it and of
//! everything above it (polars and its dependents: minutes on two cores). Compared through `cargo
//! tree`, which resolves as a build would and builds nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Every package of the tree `cargo tree ARGS` resolves, with the features it is built with.
fn features(args: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(&cargo)
        .current_dir(&root)
        .args([
            "tree",
            "--offline",
            "--prefix",
            "none",
            "-e",
            "normal,build,dev",
        ])
        .args(["-f", "{p}|{f}"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo} tree: {e}"));
    assert!(
        out.status.success(),
        "cargo tree {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut packages: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((package, features)) = line.split_once('|') else {
            continue;
        };
        // `name vX.Y.Z (path) (*)`: the name and version say which build it is.
        let package = package.split(" (").next().unwrap_or(package).trim();
        let features = features.trim_end_matches(" (*)").trim();
        packages.entry(package.to_string()).or_default().extend(
            features
                .split(',')
                .filter(|f| !f.is_empty())
                .map(String::from),
        );
    }
    assert!(packages.len() > 100, "too few packages: {packages:?}");
    packages
}

#[test]
fn a_member_built_alone_resolves_features_as_the_workspace_does() {
    let workspace = features(&["--workspace"]);
    let mut differences = Vec::new();
    for member in ["e2e", "collector", "session"] {
        for (package, alone) in features(&["-p", member]) {
            let Some(all) = workspace.get(&package) else {
                continue;
            };
            if alone != *all {
                let missing: Vec<_> = all.difference(&alone).collect();
                let extra: Vec<_> = alone.difference(all).collect();
                differences.push(format!(
                    "-p {member}: {package} lacks {missing:?}, adds {extra:?}"
                ));
            }
        }
    }
    assert!(
        differences.is_empty(),
        "set these features in the workspace's dependency table (or workspace-hack/Cargo.toml \
         for a crate no member names):\n{}",
        differences.join("\n")
    );
}
