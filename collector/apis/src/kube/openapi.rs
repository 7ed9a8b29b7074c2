//! The OpenAPI v3 documents kubectl fetches before `apply`, `create -f`, `replace -f` and `edit`
//! (without them it refuses to send anything). kubectl needs, per group/version, a `patch`
//! operation for every kind tagged with `x-kubernetes-group-version-kind` and taking the
//! `fieldValidation` query parameter; it then leaves validation to the server. No schemas are
//! served: kubectl computes client-side apply patches from the types compiled into it.

use serde_json::{Map, Value, json};

use super::resources::Registry;

/// `group/version` path as OpenAPI v3 names it: `api/v1`, `apis/apps/v1`.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: where each group/version's document is.
pub fn index(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for r in registry.all().iter() {
        let gv = gv_path(&r.group, &r.version);
        paths.entry(gv.clone()).or_insert_with(|| {
            // The hash only has to change when the document does; it never does while we run.
            json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash=0")})
        });
    }
    json!({"paths": paths})
}

/// `/openapi/v3/<api/v1 | apis/group/version>`: the document of one group/version.
pub fn group_version(registry: &Registry, rest: &[&str]) -> Option<Value> {
    let (group, version) = match rest {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return None,
    };
    let mut paths = Map::new();
    for r in registry
        .all()
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let prefix = format!("/{}", gv_path(group, version));
        let path = if r.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
        } else {
            format!("{prefix}/{}/{{name}}", r.plural)
        };
        let op = json!({
            "operationId": format!("patch{}", r.kind),
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": r.kind},
            "parameters": [
                {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            ],
            "responses": {"200": {"description": "OK"}},
        });
        paths.insert(path, json!({"patch": op}));
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}
