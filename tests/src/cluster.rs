//! A cluster's desired state for comparisons field by field: every object a fault can change,
//! create or delete (workloads, Services, ConfigMaps, quotas, policies, RBAC of the app's
//! namespace; cluster DNS; nodes), each reduced to what clients set (no status, no server-set
//! metadata), read with the real kubectl or with kube-rs.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use inject::api::object::{content, diff};
use serde_json::Value;

/// `collector snapshot --env kube --json` of `problem` on the cluster of `kubeconfig` for
/// `baseline` then `hold`, its journal in `journal`, written to `out`.
pub fn snapshot(
    kubeconfig: &Path,
    problem: &str,
    (baseline, hold): (&str, &str),
    journal: &Path,
    out: &Path,
) -> Command {
    let mut c = Command::new(crate::binary("collector"));
    c.args(["snapshot", "--env", "kube", "--json", "--problem", problem])
        .args(["--baseline", baseline, "--hold", hold, "--kubeconfig"])
        .arg(kubeconfig)
        .arg("--journal")
        .arg(journal)
        .arg("--out")
        .arg(out);
    c
}

/// The kinds of the app's namespace a fault touches, as kubectl names them.
pub const KINDS: &str = "deployments,statefulsets,services,configmaps,resourcequotas,networkpolicies,serviceaccounts,roles,rolebindings";

/// Objects by `Kind namespace/name`.
pub type State = BTreeMap<String, Value>;

fn key(o: &Value) -> String {
    let m = &o["metadata"];
    match m["namespace"].as_str() {
        Some(ns) => format!(
            "{} {ns}/{}",
            o["kind"].as_str().unwrap_or("?"),
            m["name"].as_str().unwrap_or("?")
        ),
        None => format!(
            "{} {}",
            o["kind"].as_str().unwrap_or("?"),
            m["name"].as_str().unwrap_or("?")
        ),
    }
}

fn kubectl_items(kubeconfig: &Path, args: &[&str]) -> Vec<Value> {
    let out = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .args(["-o", "json"])
        .output()
        .expect("kubectl is installed (apt-get install kubectl, or bash tests/run)");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        crate::text(&out)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("kubectl -o json");
    match v["items"].as_array() {
        Some(items) => items.clone(),
        None => vec![v],
    }
}

/// The state, read with the real kubectl.
pub fn state(kubeconfig: &Path, namespace: &str) -> State {
    let mut items = kubectl_items(kubeconfig, &["-n", namespace, "get", KINDS]);
    items.extend(kubectl_items(
        kubeconfig,
        &["-n", "kube-system", "get", "configmap", "coredns"],
    ));
    items.extend(kubectl_items(kubeconfig, &["get", "nodes"]));
    items.iter().map(|o| (key(o), content(o))).collect()
}

/// The resources [`state`] reads, for a dynamic kube-rs client: (apiVersion, kind, plural).
const RESOURCES: &[(&str, &str, &str)] = &[
    ("apps/v1", "Deployment", "deployments"),
    ("apps/v1", "StatefulSet", "statefulsets"),
    ("v1", "Service", "services"),
    ("v1", "ConfigMap", "configmaps"),
    ("v1", "ResourceQuota", "resourcequotas"),
    ("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies"),
    ("v1", "ServiceAccount", "serviceaccounts"),
    ("rbac.authorization.k8s.io/v1", "Role", "roles"),
    (
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        "rolebindings",
    ),
];

fn resource(api_version: &str, kind: &str, plural: &str) -> kube::api::ApiResource {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    kube::api::ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// The same state, read with kube-rs.
pub async fn state_kube_rs(client: &kube::Client, namespace: &str) -> State {
    use kube::api::{Api, DynamicObject, ListParams};
    let mut items: Vec<Value> = Vec::new();
    let mut add = |list: kube::core::ObjectList<DynamicObject>, api_version: &str, kind: &str| {
        for o in list.items {
            let mut v = serde_json::to_value(o).expect("JSON");
            v["kind"] = kind.into();
            v["apiVersion"] = api_version.into();
            items.push(v);
        }
    };
    for (api_version, kind, plural) in RESOURCES {
        let r = resource(api_version, kind, plural);
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &r);
        add(
            api.list(&ListParams::default()).await.expect("list"),
            api_version,
            kind,
        );
    }
    let cms: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "kube-system",
        &resource("v1", "ConfigMap", "configmaps"),
    );
    let coredns = cms.get("coredns").await.expect("the coredns ConfigMap");
    add(
        kube::core::ObjectList {
            types: Default::default(),
            metadata: Default::default(),
            items: vec![coredns],
        },
        "v1",
        "ConfigMap",
    );
    let nodes: Api<DynamicObject> = Api::all_with(client.clone(), &resource("v1", "Node", "nodes"));
    add(
        nodes.list(&ListParams::default()).await.expect("nodes"),
        "v1",
        "Node",
    );
    items.iter().map(|o| (key(o), content(o))).collect()
}

/// Every difference between two states, field by field (`Service ns/geo spec.ports[0].targetPort:
/// 8083 -> 9999`); empty when they are the same.
pub fn differences(before: &State, after: &State) -> Vec<String> {
    let mut out = Vec::new();
    let keys: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for k in keys {
        match (before.get(k), after.get(k)) {
            (Some(_), None) => out.push(format!("{k}: gone")),
            (None, Some(_)) => out.push(format!("{k}: new")),
            (Some(a), Some(b)) => {
                for f in diff(a, b) {
                    let show = |v: &Option<Value>| {
                        v.as_ref().map_or("absent".to_string(), |v| v.to_string())
                    };
                    out.push(format!(
                        "{k} {}: {} -> {}",
                        f.dotted(),
                        show(&f.before),
                        show(&f.after)
                    ));
                }
            }
            (None, None) => {}
        }
    }
    out
}

/// A kube-rs client from a kubeconfig file.
pub async fn client(kubeconfig: &Path) -> kube::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("a kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("a client configuration");
    kube::Client::try_from(config).expect("a client")
}
