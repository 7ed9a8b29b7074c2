//! A catalog application's manifests applied to a real cluster as `kubectl apply` would: each
//! object created, or merged into the one that exists.

use anyhow::Context;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::Value;

/// Creates an object, or merges its fields into the one that exists; (`kind/name`, outcome).
pub async fn apply(client: &kube::Client, o: &Value) -> anyhow::Result<(String, &'static str)> {
    let api_version = o["apiVersion"].as_str().unwrap_or_default();
    let kind = o["kind"].as_str().unwrap_or_default();
    let name = o["metadata"]["name"].as_str().unwrap_or_default();
    let what = format!("{}/{name}", kind.to_lowercase());
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("{what}: the cluster does not serve {api_version} {kind}"))?;
    let api: Api<DynamicObject> = match (caps.scope, o["metadata"]["namespace"].as_str()) {
        (kube::discovery::Scope::Namespaced, Some(ns)) => {
            Api::namespaced_with(client.clone(), ns, &resource)
        }
        _ => Api::all_with(client.clone(), &resource),
    };
    let body: DynamicObject =
        serde_json::from_value(o.clone()).with_context(|| format!("{what}: not an object"))?;
    let params = PostParams {
        field_manager: Some("faultline-deploy".into()),
        ..Default::default()
    };
    match api.create(&params, &body).await {
        Ok(_) => Ok((what, "created")),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let params = PatchParams {
                field_manager: Some("faultline-deploy".into()),
                ..Default::default()
            };
            api.patch(name, &params, &Patch::Merge(o))
                .await
                .with_context(|| format!("{what}: merging into the existing object"))?;
            Ok((what, "configured"))
        }
        Err(e) => Err(e).with_context(|| format!("{what}: the cluster refuses it")),
    }
}
