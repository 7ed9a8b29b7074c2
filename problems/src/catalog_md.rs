//! `problems/CATALOG.md`, generated from the specs so the listing can never drift from the data.

use std::fmt::Write as _;

use crate::catalog::Catalog;

/// The Markdown catalog: counts, then one table of problems per application.
pub fn render(catalog: &Catalog) -> String {
    let mut out = String::new();
    let problems: Vec<_> = catalog.problems().collect();
    let _ = writeln!(out, "# Problem catalog\n");
    let _ = writeln!(
        out,
        "Generated from `problems/catalog/` by `collector problems catalog-md`; do not edit by hand.\n"
    );
    let _ = writeln!(
        out,
        "{} problems over {} applications; {} compound or timed, {} with decoys.\n",
        problems.len(),
        catalog.apps().count(),
        problems.iter().filter(|p| p.is_compound()).count(),
        problems.iter().filter(|p| !p.decoys.is_empty()).count(),
    );
    for app in catalog.apps() {
        let _ = writeln!(out, "## {} (namespace `{}`)\n", app.name, app.namespace);
        let _ = writeln!(out, "{}\n", app.description);
        let _ = writeln!(out, "| id | layer | primitives | title | flags |");
        let _ = writeln!(out, "|---|---|---|---|---|");
        for p in problems.iter().filter(|p| p.application == app.name) {
            let layers: Vec<String> = p
                .layers()
                .iter()
                .map(|l| format!("{l:?}").to_lowercase())
                .collect();
            let prims: Vec<&str> = p.faults.iter().map(|f| f.primitive.name()).collect();
            let mut flags = Vec::new();
            if p.is_compound() {
                flags.push("compound");
            }
            if !p.decoys.is_empty() {
                flags.push("decoys");
            }
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} |",
                p.id,
                layers.join(", "),
                prims.join(" + "),
                p.title.replace('|', "\\|"),
                flags.join(", ")
            );
        }
        out.push('\n');
    }
    out
}
