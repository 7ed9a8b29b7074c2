//! The built-in catalog loads, validates and holds what the issue asks for.

use problems::primitive::PRIMITIVE_NAMES;
use problems::{Catalog, SourceFile, SpecKind};

#[test]
fn builtin_catalog_is_valid() {
    let catalog = match Catalog::builtin() {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let apps: &[&str] = &["hotel-reservation", "astronomy-shop", "social-network"];
    for app in apps {
        let spec = catalog
            .app(app)
            .unwrap_or_else(|| panic!("app {app} missing"));
        assert!(
            spec.services.len() >= 10,
            "{app} has {} services",
            spec.services.len()
        );
    }
    assert!(catalog.noise("default").is_some());
}

#[test]
fn every_primitive_name_is_distinct() {
    let mut names = PRIMITIVE_NAMES.to_vec();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), PRIMITIVE_NAMES.len());
    assert!(names.len() >= 30);
}

#[test]
fn hotel_call_graph_reaches_the_stores() {
    let catalog = Catalog::builtin().expect("valid");
    let app = catalog.app("hotel-reservation").expect("app");
    assert_eq!(app.dependencies("search"), vec!["geo", "rate"]);
    assert!(app.callers("mongodb-geo").contains(&"geo"));
    // The geo service finds its database through the mounted config.json.
    assert_eq!(
        app.address_of("geo", "mongodb-geo"),
        Some(problems::app::AddressSource::ConfigMap {
            config_map: "service-config".into(),
            key: "config.json".into(),
            port: 27018
        })
    );
    let mongo = app.service("mongodb-geo").expect("mongodb-geo");
    assert_eq!(mongo.ports[0].target_port(), 27017);
}

#[test]
fn syntax_errors_name_file_and_line() {
    let bad = SourceFile {
        path: "user/problems/x.toml".into(),
        text: "id = \"x\"\napplication = \n".into(),
    };
    let err = Catalog::from_files(vec![(SpecKind::Problem, bad)]).unwrap_err();
    let d = &err.diagnostics[0];
    assert_eq!(d.file, "user/problems/x.toml");
    assert_eq!(d.line, Some(2));
}

#[test]
fn catalog_covers_apps_layers_compound_and_decoys() {
    use schemas::ground_truth::Layer;
    let catalog = Catalog::builtin().expect("valid");
    let problems: Vec<_> = catalog.problems().collect();
    assert!(problems.len() >= 60, "{} problems", problems.len());
    for app in ["hotel-reservation", "astronomy-shop", "social-network"] {
        assert!(
            problems.iter().filter(|p| p.application == app).count() >= 10,
            "{app}"
        );
    }
    assert!(problems.iter().filter(|p| p.is_compound()).count() >= 4);
    assert!(problems.iter().filter(|p| !p.decoys.is_empty()).count() >= 3);
    let layers: Vec<Layer> = problems.iter().flat_map(|p| p.layers()).collect();
    for l in [
        Layer::Kubernetes,
        Layer::Application,
        Layer::Network,
        Layer::Node,
        Layer::Kernel,
        Layer::Load,
    ] {
        assert!(layers.contains(&l), "no problem on layer {l:?}");
    }
    let used: std::collections::BTreeSet<&str> = problems
        .iter()
        .flat_map(|p| p.faults.iter().map(|f| f.primitive.name()))
        .collect();
    assert!(used.len() >= 30, "only {} primitives used", used.len());
    // Every ground truth builds and checks.
    for p in &problems {
        let ns = &catalog.app(&p.application).expect("app").namespace;
        p.ground_truth(ns, chrono::Utc::now()).check().expect(&p.id);
    }
}

fn problem_file(text: &str) -> Vec<(SpecKind, SourceFile)> {
    let mut files = problems::catalog::builtin_files();
    files.retain(|(k, _)| *k != SpecKind::Problem);
    files.push((
        SpecKind::Problem,
        SourceFile {
            path: "user/x.toml".into(),
            text: text.into(),
        },
    ));
    files
}

const GOOD: &str = r#"id = "x"
application = "hotel-reservation"
title = "t"

[[faults]]
primitive = "scale"
service = "search"
replicas = 0

[oracle]
state = [{ assert = "replicas_at_least", service = "search", replicas = 1 }]

[ground_truth]
description = "d"
components = [{ id = "search", kind = "Deployment", name = "search", root_cause = true }]
faults = [{ target = { component = "search", kind = "Deployment", name = "search" }, mechanism = "scaled to zero" }]

[[visibility]]
check = "endpoints_empty"
service = "search"
"#;

fn errors(text: &str) -> Vec<problems::Diagnostic> {
    match Catalog::from_files(problem_file(text)) {
        Ok(_) => Vec::new(),
        Err(e) => e.diagnostics,
    }
}

#[test]
fn a_good_user_problem_loads() {
    assert_eq!(errors(GOOD), Vec::new());
}

#[test]
fn a_target_missing_from_the_app_is_reported_at_its_line() {
    let e = errors(&GOOD.replace(
        "service = \"search\"\nreplicas",
        "service = \"serch\"\nreplicas",
    ));
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].field, "faults[0].service");
    assert_eq!(e[0].line, Some(7));
    assert!(e[0].message.contains("serch"));
}

#[test]
fn unknown_primitive_and_bad_params_are_reported() {
    let e = errors(&GOOD.replace("\"scale\"", "\"teleport\""));
    assert!(e[0].message.contains("teleport"), "{e:?}");
    assert_eq!(e[0].field, "faults[0].primitive", "{e:?}");
    assert_eq!(e[0].line, Some(6));
    let e = errors(&GOOD.replace("replicas = 0", "replicas = \"none\""));
    assert!(e[0].line.is_some() && e[0].file == "user/x.toml", "{e:?}");
}

#[test]
fn onset_beyond_duration_and_ground_truth_references_are_reported() {
    let e = errors(&GOOD.replace("replicas = 0", "replicas = 0\nonset = \"20m\""));
    assert!(
        e.iter()
            .any(|d| d.field == "faults[0].onset" && d.line == Some(9)),
        "{e:?}"
    );
    let e = errors(&GOOD.replace("component = \"search\", kind", "component = \"nope\", kind"));
    assert!(e.iter().any(|d| d.message.contains("nope")), "{e:?}");
}

#[test]
fn duplicate_ids_and_leaking_names_are_reported() {
    let mut files = problem_file(GOOD);
    files.push((
        SpecKind::Problem,
        SourceFile {
            path: "user/x2/x.toml".into(),
            text: GOOD.into(),
        },
    ));
    let e = Catalog::from_files(files).unwrap_err().diagnostics;
    assert!(
        e.iter().any(|d| d.message.contains("already defined")),
        "{e:?}"
    );
    let leaky = GOOD.replace(
        "primitive = \"scale\"\nservice = \"search\"\nreplicas = 0",
        "primitive = \"network_policy_deny\"\nname = \"chaos-zone\"\nservice = \"search\"",
    );
    let e = errors(&leaky);
    assert!(
        e.iter()
            .any(|d| d.message.contains("gives the injection away")),
        "{e:?}"
    );
}

/// CI fails when CATALOG.md is stale: regenerate it with `collector problems catalog-md`.
#[test]
fn catalog_md_is_up_to_date() {
    let catalog = Catalog::builtin().expect("valid");
    let expected = problems::catalog_md::render(&catalog);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("CATALOG.md");
    if std::env::var_os("FAULTLINE_BLESS").is_some() {
        std::fs::write(&path, &expected).expect("write CATALOG.md");
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "{} is stale: run `collector problems catalog-md` and commit the result",
        path.display()
    );
}
