//! Every catalog primitive that is an API change plans against the objects its app deploys (the
//! app's manifests, its cluster's nodes and CoreDNS): the plan changes something, reads only what
//! exists or what it creates, and every other primitive is refused before anything is read.

use problems::Catalog;
use problems::app::AppSpec;
use serde_json::{Value, json};

use super::*;
use crate::api::object::{ObjectRef, diff};
use crate::api::refusal;

/// The objects a deployed app leaves in a cluster, as a plan reads them.
fn deployed(app: &AppSpec) -> Objects {
    let mut objects = Objects::new();
    for o in problems::manifests::render(app) {
        let kind = match o["kind"].as_str() {
            Some("Service") => Kind::Service,
            Some("ConfigMap") => Kind::ConfigMap,
            Some("Deployment") => Kind::Deployment,
            Some("StatefulSet") => Kind::StatefulSet,
            Some("ServiceAccount") => Kind::ServiceAccount,
            _ => continue,
        };
        let name = o["metadata"]["name"].as_str().unwrap();
        objects.insert(ObjectRef::namespaced(kind, &app.namespace, name), Some(o));
    }
    for n in &app.nodes {
        objects.insert(
            ObjectRef::node(&n.name),
            Some(json!({"metadata": {"name": n.name}, "spec": {}})),
        );
    }
    objects.insert(
        ObjectRef::namespaced(Kind::ConfigMap, "kube-system", "coredns"),
        Some(json!({"data": {"Corefile": ".:53 {\n    kubernetes cluster.local\n}\n"}})),
    );
    objects
}

/// Plans as the cluster client does: objects asked for and not deployed are absent.
fn plan_on(p: &problems::Primitive, app: &AppSpec, objects: &mut Objects) -> Result<Plan> {
    loop {
        match plan(p, app, objects) {
            Err(PlanError::Read(r)) => {
                objects.insert(r, None);
            }
            other => return other,
        }
    }
}

#[test]
fn every_api_primitive_of_the_catalog_plans_and_the_rest_are_refused() {
    let catalog = Catalog::builtin().unwrap();
    let mut planned = std::collections::BTreeSet::new();
    let mut refused = std::collections::BTreeSet::new();
    for problem in catalog.problems() {
        let app = catalog.app(&problem.application).unwrap();
        for (spec, _) in problem.injections() {
            let p = &spec.primitive;
            if let Some(r) = refusal(p, app) {
                assert!(!r.needs.is_empty() && !r.detail.is_empty(), "{r:?}");
                refused.insert(p.name());
                continue;
            }
            let mut objects = deployed(app);
            let plan = plan_on(p, app, &mut objects)
                .unwrap_or_else(|e| panic!("{} {}: {e}", problem.id, p.name()));
            assert!(
                !plan.changes.is_empty(),
                "{} {}: changes nothing",
                problem.id,
                p.name()
            );
            for c in &plan.changes {
                if let Planned::Modify { before, after, .. } = c {
                    assert!(!diff(before, after).is_empty());
                }
            }
            planned.insert(p.name());
        }
    }
    for name in [
        "kubelet_down",
        "node_cpu_stress",
        "network_loss",
        "database_auth",
    ] {
        assert!(refused.contains(name), "{name} is refused: {refused:?}");
    }
    assert!(
        planned.len() >= 30,
        "{} planned: {planned:?}",
        planned.len()
    );
}

#[test]
fn a_target_port_fault_is_one_field_and_a_missing_object_is_named() {
    let catalog = Catalog::builtin().unwrap();
    let app = catalog.app("hotel-reservation").unwrap();
    let p: problems::Primitive = toml::from_str(
        "primitive = \"service_target_port\"\nservice = \"geo\"\ntarget_port = 9999\n",
    )
    .unwrap();
    let mut objects = deployed(app);
    let plan = plan_on(&p, app, &mut objects).unwrap();
    let [Planned::Modify { before, after, .. }] = plan.changes.as_slice() else {
        panic!("one modify: {plan:?}")
    };
    let fields = diff(before, after);
    assert_eq!(fields.len(), 1);
    assert_eq!(fields[0].dotted(), "spec.ports[0].targetPort");
    assert_eq!(fields[0].after, Some(Value::from(9999)));

    objects.insert(
        ObjectRef::namespaced(Kind::Service, &app.namespace, "geo"),
        None,
    );
    let e = plan_on(&p, app, &mut objects).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Service hotel-reservation/geo does not exist"
    );
}
