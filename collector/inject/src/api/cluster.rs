//! The cluster's API through kube-rs: reading the objects a plan needs, trying each change as a
//! server dry run (so the journal records exactly what the server will store), making it guarded
//! by the version it was planned on, undoing a journaled change, and restarting pods.
//!
//! Writes record the field managers kubectl records (`kubectl-patch`, `kubectl-create`), as an
//! operator's change would: an object's managedFields do not tell an agent who changed it.

use std::path::{Path, PathBuf};

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    Preconditions,
};
use problems::app::AppSpec;
use problems::manifests;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::change::{Change, Judged, Step, judge};
use super::object::{self, Kind, ObjectRef, content, diff, for_create, patch_ops};
use super::plan::{self, Objects, Plan, PlanError, Planned};

/// Which cluster a journal entry's changes were made in, to find it again: the API server's
/// address, and the kubeconfig (never its credentials) and context used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterId {
    pub server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub message: String,
    /// The server's 409 Conflict: the object changed since it was read (a controller's status
    /// update is enough), so planning again from a fresh read may succeed.
    pub conflict: bool,
}

impl ApiError {
    pub fn new(message: impl Into<String>) -> ApiError {
        ApiError {
            message: message.into(),
            conflict: false,
        }
    }
}

type Result<T> = std::result::Result<T, ApiError>;

fn err(what: impl std::fmt::Display) -> impl FnOnce(kube::Error) -> ApiError {
    let what = what.to_string();
    move |e| ApiError {
        conflict: is_conflict(&e),
        message: format!("{what}: {e}"),
    }
}

/// Whether a kube error is the server's 409 Conflict (the object changed since it was read).
fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// A connection to one cluster.
#[derive(Clone)]
pub struct Cluster {
    client: kube::Client,
    pub id: ClusterId,
}

/// What undoing one change did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Undone {
    pub done: String,
    /// Someone else's later changes, left as found.
    pub kept: Vec<String>,
}

/// How many times an undo re-reads an object that changed while it was being undone.
const UNDO_ATTEMPTS: usize = 5;

impl Cluster {
    /// Connects with a kubeconfig file (its current context), or as kubectl finds one
    /// (`KUBECONFIG`, `~/.kube/config`, in-cluster) when none is given.
    pub async fn connect(kubeconfig: Option<&Path>) -> Result<Cluster> {
        let (config, context) = match kubeconfig {
            Some(path) => {
                let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| {
                    ApiError::new(format!("reading the kubeconfig {}: {e}", path.display()))
                })?;
                let context = kc.current_context.clone();
                let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
                    .await
                    .map_err(|e| {
                        ApiError::new(format!("using the kubeconfig {}: {e}", path.display()))
                    })?;
                (config, context)
            }
            None => (
                kube::Config::infer().await.map_err(|e| {
                    ApiError::new(format!(
                        "no kubeconfig found (KUBECONFIG, ~/.kube/config) and not in a cluster: {e}"
                    ))
                })?,
                None,
            ),
        };
        let id = ClusterId {
            server: config
                .cluster_url
                .to_string()
                .trim_end_matches('/')
                .to_string(),
            kubeconfig: kubeconfig.map(|p| std::path::absolute(p).unwrap_or(p.to_path_buf())),
            context,
        };
        let client = kube::Client::try_from(config)
            .map_err(|e| ApiError::new(format!("building the Kubernetes client: {e}")))?;
        Ok(Cluster { client, id })
    }

    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    fn api(&self, r: &ObjectRef) -> Api<DynamicObject> {
        let resource = resource(r.kind.api_version(), r.kind.name(), r.kind.plural());
        match &r.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        }
    }

    /// The object as the server has it; `None` when absent.
    pub async fn get(&self, r: &ObjectRef) -> Result<Option<Value>> {
        let found = self
            .api(r)
            .get_opt(&r.name)
            .await
            .map_err(err(format!("GET {r}")))?;
        found
            .map(|o| serde_json::to_value(o).map_err(|e| ApiError::new(format!("{r}: {e}"))))
            .transpose()
    }

    /// Plans a primitive, reading the objects it needs as it asks for them.
    pub async fn plan(&self, p: &problems::Primitive, app: &AppSpec) -> Result<Plan> {
        let mut read = Objects::new();
        loop {
            match plan::plan(p, app, &read) {
                Ok(plan) => return Ok(plan),
                Err(PlanError::Read(r)) => {
                    let v = self.get(&r).await?;
                    read.insert(r, v);
                }
                Err(PlanError::Invalid(e)) => return Err(ApiError::new(e)),
            }
        }
    }

    /// The change as the server would store it: sent as a dry run, nothing changes.
    pub async fn dry_run(&self, planned: &Planned) -> Result<Change> {
        let target = planned.target().clone();
        match planned {
            Planned::Modify { before, after, .. } => {
                let fields = diff(&content(before), &content(after));
                let ops = patch_ops(&fields, object::resource_version(before), true);
                let params = PatchParams {
                    dry_run: true,
                    field_manager: Some("kubectl-patch".into()),
                    ..Default::default()
                };
                let stored = self
                    .api(&target)
                    .patch(&target.name, &params, &Patch::Json::<()>(ops))
                    .await
                    .map_err(err(format!("{target}: the server refuses the change")))?;
                let stored =
                    serde_json::to_value(stored).map_err(|e| ApiError::new(e.to_string()))?;
                Ok(Change::Modify {
                    fields: diff(&content(before), &content(&stored)),
                    target,
                })
            }
            Planned::Create { body, .. } => {
                let stored = self
                    .api(&target)
                    .create(&create_params(true), &dynamic(body)?)
                    .await
                    .map_err(err(format!("{target}: the server refuses to create it")))?;
                let stored =
                    serde_json::to_value(stored).map_err(|e| ApiError::new(e.to_string()))?;
                Ok(Change::Create {
                    content: content(&stored),
                    target,
                    uid: None,
                })
            }
            Planned::Delete { before, .. } => Ok(Change::Delete {
                object: before.clone(),
                target,
            }),
        }
    }

    /// Makes a planned change, guarded by the version it was planned on (409 Conflict when the
    /// object changed since); for a created object, its uid.
    pub async fn apply(&self, planned: &Planned) -> Result<Option<String>> {
        let target = planned.target();
        let api = self.api(target);
        match planned {
            Planned::Modify { before, after, .. } => {
                let fields = diff(&content(before), &content(after));
                let ops = patch_ops(&fields, object::resource_version(before), true);
                let params = PatchParams {
                    field_manager: Some("kubectl-patch".into()),
                    ..Default::default()
                };
                api.patch(&target.name, &params, &Patch::Json::<()>(ops))
                    .await
                    .map_err(err(format!("PATCH {target}")))?;
                Ok(None)
            }
            Planned::Create { body, .. } => {
                let made = api
                    .create(&create_params(false), &dynamic(body)?)
                    .await
                    .map_err(err(format!("POST {target}")))?;
                Ok(made.metadata.uid)
            }
            Planned::Delete { before, .. } => {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: object::uid(before).map(str::to_string),
                        resource_version: object::resource_version(before).map(str::to_string),
                    }),
                    ..Default::default()
                };
                api.delete(&target.name, &params)
                    .await
                    .map_err(err(format!("DELETE {target}")))?;
                Ok(None)
            }
        }
    }

    /// Undoes one journaled change, leaving others' later changes as found; re-reads and judges
    /// again when the object changes while it is being undone.
    pub async fn undo(&self, change: &Change) -> Result<Undone> {
        let target = change.target();
        for _ in 0..UNDO_ATTEMPTS {
            let current = self.get(target).await?;
            let Judged { step, kept } = judge(change, current.as_ref());
            let api = self.api(target);
            let done = match step {
                Step::Nothing(why) => Ok(why),
                Step::Patch {
                    fields,
                    resource_version,
                } => {
                    let ops = patch_ops(&fields, resource_version.as_deref(), false);
                    let params = PatchParams {
                        field_manager: Some("kubectl-patch".into()),
                        ..Default::default()
                    };
                    let names: Vec<String> = fields.iter().map(object::Field::dotted).collect();
                    api.patch(&target.name, &params, &Patch::Json::<()>(ops))
                        .await
                        .map(|_| format!("{target}: put back {}", names.join(", ")))
                }
                Step::Delete {
                    uid,
                    resource_version,
                } => {
                    let params = DeleteParams {
                        preconditions: Some(Preconditions {
                            uid,
                            resource_version,
                        }),
                        ..Default::default()
                    };
                    api.delete(&target.name, &params)
                        .await
                        .map(|_| format!("{target}: deleted"))
                }
                Step::Create(body) => api
                    .create(&create_params(false), &dynamic(&body)?)
                    .await
                    .map(|_| format!("{target}: created again")),
            };
            match done {
                Ok(done) => return Ok(Undone { done, kept }),
                Err(e) if is_conflict(&e) => continue,
                Err(kube::Error::Api(s)) if s.code == 404 => continue,
                Err(e) => return Err(ApiError::new(format!("undoing {}: {e}", change.describe()))),
            }
        }
        Err(ApiError::new(format!(
            "undoing {}: the object kept changing while it was being undone",
            change.describe()
        )))
    }

    /// The pods API of an app's namespace, and the pods of one of its services.
    async fn pods_of(
        &self,
        app: &AppSpec,
        service: &str,
    ) -> Result<(Api<DynamicObject>, Vec<DynamicObject>)> {
        let pods: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &app.namespace,
            &resource("v1", "Pod", "pods"),
        );
        let selector = selector_text(&manifests::selector(app, service));
        let list = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(err(format!("listing the pods of {service}")))?;
        Ok((pods, list.items))
    }

    /// Deletes the pods of an app service so that its controller starts new ones; how many.
    pub async fn restart(&self, app: &AppSpec, service: &str) -> Result<usize> {
        let (pods, items) = self.pods_of(app, service).await?;
        let mut n = 0;
        for pod in items {
            let Some(name) = pod.metadata.name else {
                continue;
            };
            match pods.delete(&name, &DeleteParams::default()).await {
                Ok(_) => n += 1,
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(ApiError::new(format!("deleting pod {name}: {e}"))),
            }
        }
        Ok(n)
    }

    /// Kills one pod of an app service at once (grace period 0), as noise does: the first by
    /// name that is not already terminating; its controller starts another. The pod's name, or
    /// `None` when the service has no running pod.
    pub async fn kill_one(&self, app: &AppSpec, service: &str) -> Result<Option<String>> {
        let (pods, items) = self.pods_of(app, service).await?;
        let mut names: Vec<String> = items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.metadata.name)
            .collect();
        names.sort();
        let Some(name) = names.into_iter().next() else {
            return Ok(None);
        };
        match pods
            .delete(&name, &DeleteParams::default().grace_period(0))
            .await
        {
            Ok(_) => Ok(Some(name)),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(ApiError::new(format!("deleting pod {name}: {e}"))),
        }
    }

    /// After a Deployment's template changed, scales its ReplicaSets of other templates to zero,
    /// so that the change reaches every pod at once (as the simulator models a fault) instead of
    /// waiting on a rollout that a faulty template stalls. The Deployment controller never scales
    /// an old ReplicaSet up again; undoing the template makes it the current one again.
    pub async fn roll_out_at_once(&self, target: &ObjectRef) -> Result<usize> {
        if target.kind != Kind::Deployment {
            return Ok(0);
        }
        let Some(deployment) = self.get(target).await? else {
            return Ok(0);
        };
        let uid = object::uid(&deployment).unwrap_or_default().to_string();
        let template = &deployment["spec"]["template"];
        let ns = target.namespace.as_deref().unwrap_or_default();
        let sets: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            ns,
            &resource("apps/v1", "ReplicaSet", "replicasets"),
        );
        let list = sets
            .list(&ListParams::default())
            .await
            .map_err(err(format!("listing the ReplicaSets of {target}")))?;
        let mut scaled = 0;
        for rs in list.items {
            let owned = rs
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.uid == uid);
            let v = serde_json::to_value(&rs).map_err(|e| ApiError::new(e.to_string()))?;
            let replicas = v.pointer("/spec/replicas").and_then(Value::as_i64);
            if !owned || replicas == Some(0) || same_template(&v["spec"]["template"], template) {
                continue;
            }
            let Some(name) = rs.metadata.name else {
                continue;
            };
            let params = PatchParams {
                field_manager: Some("kube-controller-manager".into()),
                ..Default::default()
            };
            sets.patch(
                &name,
                &params,
                &Patch::Merge(json!({"spec": {"replicas": 0}})),
            )
            .await
            .map_err(err(format!("scaling ReplicaSet {name} to 0")))?;
            scaled += 1;
        }
        Ok(scaled)
    }
}

/// Whether a ReplicaSet's template is the Deployment's (the controller adds `pod-template-hash`).
fn same_template(rs: &Value, deployment: &Value) -> bool {
    let mut rs = rs.clone();
    if let Some(labels) = rs
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove("pod-template-hash");
    }
    rs == *deployment
}

fn create_params(dry_run: bool) -> PostParams {
    PostParams {
        dry_run,
        field_manager: Some("kubectl-create".into()),
    }
}

fn dynamic(body: &Value) -> Result<DynamicObject> {
    serde_json::from_value(for_create(body)).map_err(|e| {
        ApiError::new(format!(
            "an object to create is not a Kubernetes object: {e}"
        ))
    })
}

/// `k=v,k2=v2`.
pub fn selector_text(labels: &std::collections::BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The resource of an API version, kind and plural, for a dynamic client.
fn resource(api_version: &str, kind: &str, plural: &str) -> ApiResource {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}
