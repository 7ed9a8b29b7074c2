//! Embeds every spec file under `catalog/` into the library, so the built-in catalog needs no
//! files at run time and adding a spec needs no code change.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    // Read at run time: a build-script binary reused from a checkout elsewhere (a shared target
    // directory) must not embed that other checkout's (possibly absent) catalog.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest_dir).join("catalog");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    for sub in ["apps", "noise", "problems"] {
        let dir = root.join(sub);
        println!("cargo:rerun-if-changed={}", dir.display());
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot read the catalog folder {}: {e}", dir.display()));
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "toml") {
                let name = path
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                files.push((format!("{sub}/{name}"), path));
            }
        }
    }
    files.sort();
    let mut out = String::from("pub(crate) static FILES: &[(&str, &str)] = &[\n");
    for (rel, path) in &files {
        writeln!(
            out,
            "    ({rel:?}, include_str!({:?})),",
            path.display().to_string()
        )
        .unwrap();
    }
    out.push_str("];\n");
    let dest =
        Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("catalog_files.rs");
    std::fs::write(dest, out).expect("write catalog_files.rs");
}
