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
