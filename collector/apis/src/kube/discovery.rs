//! Discovery: `/api`, `/apis` (aggregated apidiscovery v2/v2beta1 when asked, legacy otherwise) and
//! the per-group-version resource lists kubectl falls back to.

use serde_json::{Value, json};

use super::resources::{Registry, Resource};

/// Verbs advertised per resource: what a real apiserver advertises, so that kubectl sends writes
/// to the server (which refuses them with a clear message) instead of failing in the client.
const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The aggregated discovery version the client asked for, if any (`v2` preferred).
pub fn aggregated_version(accept: &str) -> Option<&'static str> {
    let asks = |v: &str| {
        accept.split(',').any(|part| {
            part.contains("as=APIGroupDiscoveryList")
                && part.contains("g=apidiscovery.k8s.io")
                && part.split(';').any(|p| p.trim() == format!("v={v}"))
        })
    };
    if asks("v2") {
        Some("v2")
    } else if asks("v2beta1") {
        Some("v2beta1")
    } else {
        None
    }
}

pub fn aggregated_content_type(version: &str) -> String {
    format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList")
}

fn discovery_resource(r: &Resource) -> Value {
    let mut v = json!({
        "resource": r.plural,
        "responseKind": {"group": "", "version": "", "kind": r.kind},
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": VERBS,
    });
    if !r.short_names.is_empty() {
        v["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        v["categories"] = json!(r.categories);
    }
    if !r.subresources.is_empty() {
        v["subresources"] = r
            .subresources
            .iter()
            .map(|sub| {
                let kind = match sub.as_str() {
                    "scale" => "Scale",
                    "log" => "Pod",
                    _ => r.kind.as_str(),
                };
                json!({"subresource": sub, "responseKind": {"group": "", "version": "", "kind": kind}, "verbs": ["get"]})
            })
            .collect();
    }
    v
}

/// `APIGroupDiscoveryList` for the core group (`core = true`, answers `/api`) or the named groups.
pub fn aggregated(registry: &Registry, core: bool, version: &str) -> Value {
    let items: Vec<Value> = registry
        .groups()
        .into_iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = registry
                        .all()
                        .iter()
                        .filter(|r| r.group == group && &r.version == v)
                        .map(discovery_resource)
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            let mut meta = json!({"creationTimestamp": null});
            if !group.is_empty() {
                meta["name"] = group.clone().into();
            }
            json!({"metadata": meta, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}

/// Legacy `/api`.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_json(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs[0]})
}

/// Legacy `/apis`.
pub fn api_group_list(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| group_json(&g, &vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`.
pub fn api_group(registry: &Registry, group: &str) -> Option<Value> {
    let (g, versions) = registry.groups().into_iter().find(|(g, _)| g == group)?;
    let mut v = group_json(&g, &versions);
    v["kind"] = "APIGroup".into();
    v["apiVersion"] = "v1".into();
    Some(v)
}

/// `/api/v1`, `/apis/{group}/{version}`.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let resources: Vec<&Resource> = registry
        .all()
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if resources.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for r in &resources {
        let mut v = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": VERBS,
        });
        if !r.short_names.is_empty() {
            v["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            v["categories"] = json!(r.categories);
        }
        out.push(v);
        for sub in &r.subresources {
            out.push(json!({
                "name": format!("{}/{sub}", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": if sub == "log" { "Pod" } else { r.kind.as_str() },
                "verbs": ["get"],
            }));
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": out}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_aggregated_version_kubectl_asks_for() {
        let kubectl = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(aggregated_version(kubectl), Some("v2"));
        assert_eq!(
            aggregated_version(
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
            ),
            Some("v2beta1")
        );
        assert_eq!(aggregated_version("application/json"), None);
    }

    #[test]
    fn discovery_documents_have_the_recorded_shape() {
        let reg = Registry::new([]);
        let core = aggregated(&reg, true, "v2");
        assert_eq!(core["items"].as_array().unwrap().len(), 1);
        let pods = core["items"][0]["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "pods")
            .unwrap();
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(pods["categories"], json!(["all"]));
        let apps = resource_list(&reg, "apps", "v1").unwrap();
        assert!(
            apps["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["name"] == "deployments/scale")
        );
        assert!(resource_list(&reg, "nope", "v1").is_none());
        assert_eq!(
            api_group(&reg, "apps").unwrap()["preferredVersion"]["version"],
            "v1"
        );
    }
}
