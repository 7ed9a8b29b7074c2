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

/// What discovery says of a subresource: the kind it answers with (from another group for
/// `eviction` and `scale`; empty group and version mean the resource's own) and its verbs.
struct Subresource<'a> {
    group: &'static str,
    version: &'static str,
    kind: &'a str,
    verbs: &'static [&'static str],
}

fn subresource<'a>(r: &'a Resource, sub: &str) -> Subresource<'a> {
    const READ: &[&str] = &["get"];
    const READ_WRITE: &[&str] = &["get", "patch", "update"];
    // Streaming subresources: a POST (or GET) upgraded to a stream.
    const CONNECT: &[&str] = &["create", "get"];
    let (group, version, kind, verbs) = match sub {
        // kubectl drain checks that `pods/eviction` names group policy and version v1.
        "eviction" => ("policy", "v1", "Eviction", &["create"][..]),
        "scale" => ("autoscaling", "v1", "Scale", READ_WRITE),
        "log" => ("", "", "Pod", READ),
        "status" | "ephemeralcontainers" => ("", "", r.kind.as_str(), READ_WRITE),
        "attach" => ("", "", "PodAttachOptions", CONNECT),
        "exec" => ("", "", "PodExecOptions", CONNECT),
        "portforward" => ("", "", "PodPortForwardOptions", CONNECT),
        _ => ("", "", r.kind.as_str(), READ),
    };
    Subresource {
        group,
        version,
        kind,
        verbs,
    }
}

/// The verbs of a resource: reviews are only created, resource metrics only read.
fn verbs(r: &Resource) -> &'static [&'static str] {
    match r.group.as_str() {
        "authorization.k8s.io" => &["create"],
        super::metrics::GROUP => &["get", "list"],
        _ => &VERBS,
    }
}

fn discovery_resource(r: &Resource) -> Value {
    let mut v = json!({
        "resource": r.plural,
        "responseKind": {"group": "", "version": "", "kind": r.kind},
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": verbs(r),
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
                let f = subresource(r, sub);
                json!({"subresource": sub, "responseKind": {"group": f.group, "version": f.version, "kind": f.kind}, "verbs": f.verbs})
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
            "verbs": verbs(r),
        });
        if !r.short_names.is_empty() {
            v["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            v["categories"] = json!(r.categories);
        }
        out.push(v);
        for sub in &r.subresources {
            let f = subresource(r, sub);
            let mut v = json!({
                "name": format!("{}/{sub}", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": f.kind,
                "verbs": f.verbs,
            });
            // The legacy list names the group and version only where they are not the list's.
            if !f.version.is_empty() {
                v["group"] = f.group.into();
                v["version"] = f.version.into();
            }
            out.push(v);
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
        // What kubectl drain looks for before it evicts, and the scale verbs kubectl scale needs.
        let core = resource_list(&reg, "", "v1").unwrap();
        let eviction = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "pods/eviction")
            .expect("pods/eviction listed");
        assert_eq!(
            (&eviction["group"], &eviction["version"], &eviction["kind"]),
            (&json!("policy"), &json!("v1"), &json!("Eviction"))
        );
        assert_eq!(eviction["verbs"], json!(["create"]));
        let scale = apps["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "deployments/scale")
            .unwrap();
        assert_eq!(scale["verbs"], json!(["get", "patch", "update"]));
        assert_eq!(scale["group"], "autoscaling");
        let core_v2 = aggregated(&reg, true, "v2");
        let aggregated_pods = &core_v2["items"][0]["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "pods")
            .unwrap()["subresources"];
        assert!(
            aggregated_pods
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["subresource"] == "eviction"
                    && s["responseKind"]["group"] == "policy"
                    && s["verbs"] == json!(["create"]))
        );
        assert_eq!(
            api_group(&reg, "apps").unwrap()["preferredVersion"]["version"],
            "v1"
        );
    }
}
