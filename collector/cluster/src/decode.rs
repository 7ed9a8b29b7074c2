//! API JSON back into typed objects: the inverse of each kind's `to_json`, for what a client
//! writes (create, update) and for objects read back from a dataset.
//!
//! Spec types decode through their serde derives (which carry the API server's defaults);
//! metadata, status and the kinds rendered by hand decode here field by field. What the model
//! does not represent is kept as written (`extra` maps) and rendered back, so a `startupProbe` or
//! a `securityContext` a client writes comes back on GET; values the renderer computes
//! (`clusterIPs`, a pod's `serviceAccount`) are dropped from what is kept, since rendering writes
//! them again. A JSON value of the wrong type gives a [`Cause`] naming the field path.

use apiserver::status::Cause;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::kinds::Kind;
use super::objects::*;
use super::quantity;

type R<T> = Result<T, Cause>;

fn type_error(field: &str, expected: &str, got: &Value) -> Cause {
    let got = match got {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    Cause::new(
        "FieldValueTypeInvalid",
        field,
        format!("Invalid value: expected {expected}, got {got}"),
    )
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// A JSON object being decoded, with its field path for errors. A missing or null object reads
/// as empty.
#[derive(Clone, Copy)]
struct Obj<'a> {
    map: Option<&'a Map<String, Value>>,
    path: &'a str,
}

impl<'a> Obj<'a> {
    fn new(v: Option<&'a Value>, path: &'a str) -> R<Obj<'a>> {
        match v {
            None | Some(Value::Null) => Ok(Obj { map: None, path }),
            Some(Value::Object(m)) => Ok(Obj { map: Some(m), path }),
            Some(other) => Err(type_error(path, "object", other)),
        }
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.and_then(|m| m.get(key)).filter(|v| !v.is_null())
    }

    fn child(&self, key: &str, path: &'a str) -> R<Obj<'a>> {
        Obj::new(self.get(key), path)
    }

    fn str(&self, key: &str) -> R<Option<String>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(type_error(&join(self.path, key), "string", v)),
        }
    }

    fn int(&self, key: &str) -> R<Option<i64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| type_error(&join(self.path, key), "integer", v)),
        }
    }

    fn int32(&self, key: &str) -> R<Option<i32>> {
        match self.int(key)? {
            None => Ok(None),
            Some(n) => i32::try_from(n).map(Some).map_err(|_| {
                Cause::new(
                    "FieldValueInvalid",
                    &join(self.path, key),
                    format!("Invalid value: {n}: must fit in 32 bits"),
                )
            }),
        }
    }

    fn bool(&self, key: &str) -> R<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(type_error(&join(self.path, key), "boolean", v)),
        }
    }

    fn time(&self, key: &str) -> R<Option<i64>> {
        match self.str(key)? {
            None => Ok(None),
            Some(t) => schemas::time::parse_rfc3339(&t).map(Some).ok_or_else(|| {
                Cause::new(
                    "FieldValueInvalid",
                    &join(self.path, key),
                    format!("Invalid value: {t:?}: must be an RFC 3339 time"),
                )
            }),
        }
    }

    fn labels(&self, key: &str) -> R<Labels> {
        let path = join(self.path, key);
        let mut out = Labels::new();
        match self.get(key) {
            None => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    match v {
                        Value::String(s) => {
                            out.insert(k.clone(), s.clone());
                        }
                        Value::Null => {}
                        other => return Err(type_error(&join(&path, k), "string", other)),
                    }
                }
            }
            Some(other) => return Err(type_error(&path, "object", other)),
        }
        Ok(out)
    }

    fn array(&self, key: &str) -> R<&'a [Value]> {
        match self.get(key) {
            None => Ok(&[]),
            Some(Value::Array(a)) => Ok(a),
            Some(v) => Err(type_error(&join(self.path, key), "array", v)),
        }
    }

    fn typed<T: DeserializeOwned>(&self, key: &str) -> R<Option<T>> {
        self.get(key)
            .map(|v| serde_at(v, &join(self.path, key)))
            .transpose()
    }

    /// The fields not in `known`, kept as written.
    fn rest(&self, known: &[&str]) -> Map<String, Value> {
        self.map
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| !known.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Decodes a value through serde; the error names the path.
fn serde_at<T: DeserializeOwned>(v: &Value, path: &str) -> R<T> {
    T::deserialize(v).map_err(|e| Cause::new("FieldValueTypeInvalid", path, e.to_string()))
}

/// Drops kept fields whose value is what the renderer writes anyway (`always`: whatever it is).
fn drop_rendered(extra: &mut Map<String, Value>, always: &[&str], defaults: &[(&str, Value)]) {
    for k in always {
        extra.shift_remove(*k);
    }
    for (k, v) in defaults {
        if extra.get(*k) == Some(v) {
            extra.shift_remove(*k);
        }
    }
}

fn root(v: &Value) -> R<Obj<'_>> {
    match v {
        Value::Object(m) => Ok(Obj {
            map: Some(m),
            path: "",
        }),
        other => Err(type_error("", "object", other)),
    }
}

// ---------------------------------------------------------------------------------------------
// Metadata and status pieces

fn meta(o: &Obj) -> R<Meta> {
    let m = o.child("metadata", "metadata")?;
    let mut meta = Meta {
        name: m.str("name")?.unwrap_or_default(),
        namespace: m.str("namespace")?,
        uid: m.str("uid")?.unwrap_or_default(),
        resource_version: m
            .str("resourceVersion")?
            .and_then(|r| r.parse().ok())
            .unwrap_or(0),
        created: m.time("creationTimestamp")?.unwrap_or(0),
        labels: m.labels("labels")?,
        annotations: m.labels("annotations")?,
        owner: None,
        generation: m.int("generation")?.unwrap_or(0),
        generate_name: m.str("generateName")?,
        deleted_at: m.time("deletionTimestamp")?,
        deletion_grace: m.int("deletionGracePeriodSeconds")?,
        extra: m.rest(&[
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "labels",
            "annotations",
            "generation",
            "generateName",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ]),
    };
    meta.owner = controller_owner(&m)?;
    if meta.owner.is_some() {
        meta.extra.shift_remove("ownerReferences");
    }
    Ok(meta)
}

/// The owner the model keeps: a single controller reference to a kind it stores. Other owner
/// lists stay as written in `extra`.
fn controller_owner(m: &Obj) -> R<Option<OwnerRef>> {
    let refs = m.array("ownerReferences")?;
    let [one] = refs else { return Ok(None) };
    let r = Obj::new(Some(one), "metadata.ownerReferences[0]")?;
    let kind = r.str("kind")?.unwrap_or_default();
    let Some(kind) = Kind::ALL.iter().copied().find(|k| k.name() == kind) else {
        return Ok(None);
    };
    let faithful = r.str("apiVersion")?.as_deref() == Some(kind.api_version())
        && r.bool("controller")? == Some(true)
        && r.bool("blockOwnerDeletion")? == Some(true)
        && r.rest(&[
            "apiVersion",
            "kind",
            "name",
            "uid",
            "controller",
            "blockOwnerDeletion",
        ])
        .is_empty();
    if !faithful {
        return Ok(None);
    }
    Ok(Some(OwnerRef {
        kind,
        name: r.str("name")?.unwrap_or_default(),
        uid: r.str("uid")?.unwrap_or_default(),
    }))
}

fn condition(v: &Value, path: &str) -> R<Condition> {
    let c = Obj::new(Some(v), path)?;
    let last_transition = c.time("lastTransitionTime")?.unwrap_or(0);
    Ok(Condition {
        kind: c.str("type")?.unwrap_or_default(),
        status: c.str("status")?.as_deref() == Some("True"),
        reason: c.str("reason")?,
        message: c.str("message")?,
        last_transition,
        last_update: c.time("lastUpdateTime")?.unwrap_or(last_transition),
    })
}

fn conditions(o: &Obj) -> R<Vec<Condition>> {
    let path = join(o.path, "conditions");
    o.array("conditions")?
        .iter()
        .enumerate()
        .map(|(i, c)| condition(c, &format!("{path}[{i}]")))
        .collect()
}

fn selector(spec: &Obj) -> R<Labels> {
    let path = join(spec.path, "selector");
    let s = spec.child("selector", &path)?;
    if let Some(e) = s
        .get("matchExpressions")
        .filter(|e| e.as_array().is_none_or(|a| !a.is_empty()))
    {
        return Err(Cause::new(
            "FieldValueNotSupported",
            &join(&path, "matchExpressions"),
            format!("Unsupported value: {e}: this cluster supports matchLabels selectors only"),
        ));
    }
    s.labels("matchLabels")
}

/// A pod spec. An `affinity` the model cannot represent exactly is kept as written.
fn pod_spec(v: Option<&Value>, path: &str) -> R<PodSpec> {
    let o = Obj::new(v, path)?;
    let mut raw = o.map.cloned().unwrap_or_default();
    let mut kept_affinity = None;
    if let Some(a) = raw.get("affinity").filter(|a| !a.is_null()) {
        let exact = serde_json::from_value::<Affinity>(a.clone())
            .ok()
            .filter(|typed| serde_json::to_value(typed).ok().as_ref() == Some(a));
        if exact.is_none() {
            kept_affinity = raw.shift_remove("affinity");
        }
    }
    let raw = Value::Object(raw);
    let mut spec: PodSpec = serde_at(&raw, path).map_err(|e| locate_container(&raw, path, e))?;
    if let Some(a) = kept_affinity {
        spec.extra.insert("affinity".into(), a);
    }
    drop_rendered(
        &mut spec.extra,
        &["serviceAccount"],
        &[
            ("enableServiceLinks", json!(true)),
            ("priority", json!(0)),
            ("preemptionPolicy", json!("PreemptLowerPriority")),
        ],
    );
    Ok(spec)
}

/// Narrows a pod spec's decoding error to the container it is in, when it is in one.
fn locate_container(raw: &Value, path: &str, whole: Cause) -> Cause {
    for list in ["initContainers", "containers"] {
        let Some(items) = raw.get(list).and_then(Value::as_array) else {
            continue;
        };
        for (i, c) in items.iter().enumerate() {
            if let Err(e) = serde_at::<Container>(c, &format!("{path}.{list}[{i}]")) {
                return e;
            }
        }
    }
    whole
}

fn template(spec: &Obj) -> R<PodTemplate> {
    let path = join(spec.path, "template");
    let t = spec.child("template", &path)?;
    let metadata: TemplateMeta = t.typed("metadata")?.unwrap_or_default();
    Ok(PodTemplate {
        metadata,
        spec: pod_spec(t.get("spec"), &join(&path, "spec"))?,
    })
}

fn counts(st: &Obj) -> R<ReplicaCounts> {
    Ok(ReplicaCounts {
        replicas: st.int32("replicas")?.unwrap_or(0),
        updated: st.int32("updatedReplicas")?.unwrap_or(0),
        ready: st.int32("readyReplicas")?.unwrap_or(0),
        available: st.int32("availableReplicas")?.unwrap_or(0),
    })
}

// ---------------------------------------------------------------------------------------------
// Pods

fn terminated(v: &Value, path: &str) -> R<Terminated> {
    let t = Obj::new(Some(v), path)?;
    Ok(Terminated {
        reason: t.str("reason")?.unwrap_or_default(),
        exit_code: t.int32("exitCode")?.unwrap_or(0),
        started: t.time("startedAt")?.unwrap_or(0),
        finished: t.time("finishedAt")?.unwrap_or(0),
        container_id: t.str("containerID")?.unwrap_or_default(),
        message: t.str("message")?,
    })
}

fn container_state(s: &Obj) -> R<CState> {
    if let Some(w) = s.get("waiting") {
        let w = Obj::new(Some(w), s.path)?;
        return Ok(CState::Waiting {
            reason: w.str("reason")?.unwrap_or_default(),
            message: w.str("message")?,
        });
    }
    if let Some(r) = s.get("running") {
        let r = Obj::new(Some(r), s.path)?;
        return Ok(CState::Running {
            started: r.time("startedAt")?.unwrap_or(0),
        });
    }
    if let Some(t) = s.get("terminated") {
        return terminated(t, &join(s.path, "terminated")).map(CState::Terminated);
    }
    Ok(CState::waiting("ContainerCreating", None))
}

fn container_status(v: &Value, path: &str) -> R<ContainerStatus> {
    let o = Obj::new(Some(v), path)?;
    let mut s = ContainerStatus::new(
        &o.str("name")?.unwrap_or_default(),
        &o.str("image")?.unwrap_or_default(),
    );
    s.image_id = o.str("imageID")?.filter(|i| !i.is_empty());
    s.container_id = o.str("containerID")?;
    s.ready = o.bool("ready")?.unwrap_or(false);
    s.started = o.bool("started")?.unwrap_or(false);
    s.restart_count = o.int32("restartCount")?.unwrap_or(0);
    let state_path = join(path, "state");
    s.state = container_state(&o.child("state", &state_path)?)?;
    let last_path = join(path, "lastState");
    let last = o.child("lastState", &last_path)?;
    s.last = last
        .get("terminated")
        .map(|t| terminated(t, &join(&last_path, "terminated")))
        .transpose()?;
    Ok(s)
}

/// Container statuses as written, or fresh ones when they do not match the containers (the
/// kubelet keeps one per container, in order).
fn statuses(st: &Obj, key: &str, containers: &[Container]) -> R<Vec<ContainerStatus>> {
    let path = join(st.path, key);
    let written: Vec<ContainerStatus> = st
        .array(key)?
        .iter()
        .enumerate()
        .map(|(i, v)| container_status(v, &format!("{path}[{i}]")))
        .collect::<R<_>>()?;
    let matches = written.len() == containers.len()
        && written
            .iter()
            .zip(containers)
            .all(|(s, c)| s.name == c.name);
    Ok(if matches {
        written
    } else {
        containers
            .iter()
            .map(|c| ContainerStatus::new(&c.name, &c.image))
            .collect()
    })
}

fn pod(v: &Value) -> R<Pod> {
    let o = root(v)?;
    let meta = meta(&o)?;
    let spec = pod_spec(o.get("spec"), "spec")?;
    let st = o.child("status", "status")?;
    Ok(Pod {
        meta,
        phase: st.str("phase")?.unwrap_or_else(|| "Pending".into()),
        conditions: conditions(&st)?,
        host_ip: st.str("hostIP")?,
        pod_ip: st.str("podIP")?,
        start_time: st.time("startTime")?,
        init_statuses: statuses(&st, "initContainerStatuses", &spec.init_containers)?,
        statuses: statuses(&st, "containerStatuses", &spec.containers)?,
        ephemeral_statuses: statuses(
            &st,
            "ephemeralContainerStatuses",
            &spec.ephemeral_containers,
        )?,
        reason: st.str("reason")?,
        spec,
        next_schedule: 0,
        schedule_backoff: 0,
        init_done: 0,
    })
}

// ---------------------------------------------------------------------------------------------
// Workloads

fn deployment(v: &Value) -> R<Deployment> {
    let o = root(v)?;
    let meta = meta(&o)?;
    let spec = o.child("spec", "spec")?;
    let st = o.child("status", "status")?;
    let mut strategy: Strategy = spec.typed("strategy")?.unwrap_or_else(Strategy::rolling);
    if strategy.kind == "RollingUpdate" && strategy.rolling_update.is_none() {
        strategy.rolling_update = Strategy::rolling().rolling_update;
    }
    let mut spec_extra = spec.rest(&["replicas", "selector", "template", "strategy"]);
    drop_rendered(
        &mut spec_extra,
        &[],
        &[
            ("revisionHistoryLimit", json!(10)),
            ("progressDeadlineSeconds", json!(600)),
        ],
    );
    let revision = meta
        .annotations
        .get("deployment.kubernetes.io/revision")
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    Ok(Deployment {
        replicas: spec.int32("replicas")?.unwrap_or(1),
        selector: selector(&spec)?,
        template: template(&spec)?,
        strategy,
        observed_generation: st.int("observedGeneration")?.unwrap_or(0),
        counts: counts(&st)?,
        conditions: conditions(&st)?,
        revision,
        spec_extra,
        meta,
    })
}

fn statefulset(v: &Value) -> R<StatefulSet> {
    let o = root(v)?;
    let spec = o.child("spec", "spec")?;
    let st = o.child("status", "status")?;
    Ok(StatefulSet {
        meta: meta(&o)?,
        replicas: spec.int32("replicas")?.unwrap_or(1),
        selector: selector(&spec)?,
        service_name: spec.str("serviceName")?.unwrap_or_default(),
        template: template(&spec)?,
        observed_generation: st.int("observedGeneration")?.unwrap_or(0),
        counts: ReplicaCounts {
            replicas: st.int32("replicas")?.unwrap_or(0),
            updated: st.int32("updatedReplicas")?.unwrap_or(0),
            ready: st.int32("readyReplicas")?.unwrap_or(0),
            available: st.int32("availableReplicas")?.unwrap_or(0),
        },
        revision: st.str("currentRevision")?.unwrap_or_default(),
    })
}

fn replicaset(v: &Value) -> R<ReplicaSet> {
    let o = root(v)?;
    let spec = o.child("spec", "spec")?;
    let st = o.child("status", "status")?;
    let failure = conditions(&st)?
        .into_iter()
        .find(|c| c.kind == "ReplicaFailure")
        .and_then(|c| c.message);
    let replicas = st.int32("replicas")?.unwrap_or(0);
    Ok(ReplicaSet {
        meta: meta(&o)?,
        replicas: spec.int32("replicas")?.unwrap_or(1),
        selector: selector(&spec)?,
        template: template(&spec)?,
        observed_generation: st.int("observedGeneration")?.unwrap_or(0),
        counts: ReplicaCounts {
            replicas,
            updated: replicas,
            ready: st.int32("readyReplicas")?.unwrap_or(0),
            available: st.int32("availableReplicas")?.unwrap_or(0),
        },
        failure,
    })
}

// ---------------------------------------------------------------------------------------------
// Services, endpoints, configuration, storage, policy, nodes

fn service(v: &Value) -> R<Service> {
    let o = root(v)?;
    let spec = o.child("spec", "spec")?;
    let mut spec_extra = spec.rest(&["selector", "ports", "clusterIP", "internalTrafficPolicy"]);
    drop_rendered(
        &mut spec_extra,
        &["clusterIPs"],
        &[
            ("ipFamilies", json!(["IPv4"])),
            ("ipFamilyPolicy", json!("SingleStack")),
            ("sessionAffinity", json!("None")),
            ("type", json!("ClusterIP")),
        ],
    );
    Ok(Service {
        meta: meta(&o)?,
        selector: spec.labels("selector")?,
        ports: spec.typed("ports")?.unwrap_or_default(),
        cluster_ip: spec.str("clusterIP")?.unwrap_or_default(),
        internal_traffic_policy: spec
            .str("internalTrafficPolicy")?
            .unwrap_or_else(|| "Cluster".into()),
        spec_extra,
    })
}

fn endpoint_address(v: &Value, path: &str) -> R<EndpointAddress> {
    let a = Obj::new(Some(v), path)?;
    let t = a.child("targetRef", path)?;
    Ok(EndpointAddress {
        ip: a.str("ip")?.unwrap_or_default(),
        node: a.str("nodeName")?.unwrap_or_default(),
        pod: t.str("name")?.unwrap_or_default(),
        pod_uid: t.str("uid")?.unwrap_or_default(),
    })
}

fn endpoints(v: &Value) -> R<Endpoints> {
    let o = root(v)?;
    let mut e = Endpoints {
        meta: meta(&o)?,
        ready: vec![],
        not_ready: vec![],
        ports: vec![],
    };
    for (i, s) in o.array("subsets")?.iter().enumerate() {
        let path = format!("subsets[{i}]");
        let s = Obj::new(Some(s), &path)?;
        for (key, list) in [
            ("addresses", &mut e.ready),
            ("notReadyAddresses", &mut e.not_ready),
        ] {
            for (j, a) in s.array(key)?.iter().enumerate() {
                list.push(endpoint_address(a, &format!("{path}.{key}[{j}]"))?);
            }
        }
        for (j, p) in s.array("ports")?.iter().enumerate() {
            let pp = format!("{path}.ports[{j}]");
            let p = Obj::new(Some(p), &pp)?;
            e.ports
                .push((p.str("name")?, p.int32("port")?.unwrap_or(0)));
        }
    }
    Ok(e)
}

fn endpoint_slice(v: &Value) -> R<EndpointSlice> {
    let o = root(v)?;
    Ok(EndpointSlice {
        meta: meta(&o)?,
        address_type: o.str("addressType")?.unwrap_or_default(),
        endpoints: o.typed("endpoints")?.unwrap_or_default(),
        ports: o.typed("ports")?.unwrap_or_default(),
    })
}

fn config_map(v: &Value) -> R<ConfigMap> {
    let o = root(v)?;
    Ok(ConfigMap {
        meta: meta(&o)?,
        data: o.labels("data")?,
        extra: o.rest(&["apiVersion", "kind", "metadata", "data"]),
    })
}

fn secret(v: &Value) -> R<Secret> {
    let o = root(v)?;
    let mut data = o.labels("data")?;
    // stringData is write-only: it lands in data (the dataset shows no values either way).
    data.extend(o.labels("stringData")?);
    let mut extra = o.rest(&["apiVersion", "kind", "metadata", "data", "stringData"]);
    drop_rendered(&mut extra, &[], &[("type", json!("Opaque"))]);
    Ok(Secret {
        meta: meta(&o)?,
        data,
        extra,
    })
}

fn quantity_at(
    v: Option<&Value>,
    path: &str,
    parse: fn(&str) -> Result<i64, &'static str>,
) -> R<Option<i64>> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let text = quantity::text(v).ok_or_else(|| type_error(path, "quantity", v))?;
    parse(&text)
        .map(Some)
        .map_err(|e| Cause::new("FieldValueInvalid", path, e))
}

fn pvc(v: &Value) -> R<Pvc> {
    let o = root(v)?;
    let spec = o.child("spec", "spec")?;
    let requests = spec
        .child("resources", "spec.resources")?
        .child("requests", "spec.resources.requests")?;
    let modes = spec.array("accessModes")?;
    Ok(Pvc {
        meta: meta(&o)?,
        storage: quantity_at(
            requests.get("storage"),
            "spec.resources.requests.storage",
            quantity::bytes,
        )?
        .unwrap_or(0),
        access_mode: modes
            .first()
            .and_then(Value::as_str)
            .unwrap_or("ReadWriteOnce")
            .to_string(),
        volume_name: spec.str("volumeName")?.unwrap_or_default(),
        storage_class: spec
            .str("storageClassName")?
            .unwrap_or_else(|| "standard".into()),
    })
}

/// A map of quantities kept as text (a quota's `hard` and `used`).
fn quantities(o: &Obj, key: &str) -> R<std::collections::BTreeMap<String, String>> {
    let path = join(o.path, key);
    let mut out = std::collections::BTreeMap::new();
    for (k, v) in Obj::new(o.get(key), &path)?.rest(&[]) {
        let text =
            quantity::text(&v).ok_or_else(|| type_error(&join(&path, &k), "quantity", &v))?;
        out.insert(k, text);
    }
    Ok(out)
}

fn quota(v: &Value) -> R<ResourceQuota> {
    let o = root(v)?;
    Ok(ResourceQuota {
        meta: meta(&o)?,
        hard: quantities(&o.child("spec", "spec")?, "hard")?,
        used: quantities(&o.child("status", "status")?, "used")?,
    })
}

/// A NetworkPolicy as the model sees it: a direction is denied when the policy governs it and
/// lists no rule for it (rules that allow some traffic are read as allowing all).
fn network_policy(v: &Value) -> R<NetworkPolicy> {
    let o = root(v)?;
    let spec = o.child("spec", "spec")?;
    let types: Vec<&str> = spec
        .array("policyTypes")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let denies = |ty: &str, rules: &str| -> R<bool> {
        Ok(types.contains(&ty) && spec.array(rules)?.is_empty())
    };
    Ok(NetworkPolicy {
        meta: meta(&o)?,
        pod_selector: spec
            .child("podSelector", "spec.podSelector")?
            .labels("matchLabels")?,
        deny_ingress: denies("Ingress", "ingress")?,
        deny_egress: denies("Egress", "egress")?,
    })
}

fn node(v: &Value) -> R<Node> {
    let o = root(v)?;
    let spec = o.child("spec", "spec")?;
    let st = o.child("status", "status")?;
    let capacity = st.child("capacity", "status.capacity")?;
    let conds = st.array("conditions")?;
    let heartbeat = conds
        .first()
        .map(|c| Obj::new(Some(c), "status.conditions[0]")?.time("lastHeartbeatTime"))
        .transpose()?
        .flatten()
        .unwrap_or(0);
    let kubelet_up = !conds.iter().any(|c| {
        c.get("type") == Some(&json!("Ready")) && c.get("status") == Some(&json!("Unknown"))
    });
    let ip = st
        .array("addresses")?
        .iter()
        .find(|a| a.get("type") == Some(&json!("InternalIP")))
        .and_then(|a| a.get("address"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    Ok(Node {
        meta: meta(&o)?,
        cpu_milli: quantity_at(
            capacity.get("cpu"),
            "status.capacity.cpu",
            quantity::cpu_milli,
        )?
        .unwrap_or(0),
        memory: quantity_at(
            capacity.get("memory"),
            "status.capacity.memory",
            quantity::bytes,
        )?
        .unwrap_or(0),
        max_pods: quantity_at(
            capacity.get("pods"),
            "status.capacity.pods",
            quantity::bytes,
        )?
        .unwrap_or(110),
        ip,
        pod_cidr: spec.str("podCIDR")?.unwrap_or_default(),
        taints: spec.typed("taints")?.unwrap_or_default(),
        unschedulable: spec.bool("unschedulable")?.unwrap_or(false),
        conditions: conditions(&st)?,
        kubelet_up,
        heartbeat,
    })
}

/// Metadata plus the rest of the object as written (kinds the simulator only stores).
fn simple(v: &Value) -> R<(Meta, Value)> {
    let o = root(v)?;
    Ok((
        meta(&o)?,
        Value::Object(o.rest(&["apiVersion", "kind", "metadata"])),
    ))
}

macro_rules! from_api {
    ($($ty:ident => $f:expr;)*) => {$(
        impl $ty {
            /// Decodes the object from its API JSON (what `to_json` renders, or what a client
            /// writes). The causes name the field that could not be read.
            pub fn from_api(v: &Value) -> Result<$ty, Vec<Cause>> {
                let f: fn(&Value) -> R<$ty> = $f;
                f(v).map_err(|c| vec![c])
            }
        }
    )*};
}

from_api! {
    Pod => pod;
    Deployment => deployment;
    StatefulSet => statefulset;
    ReplicaSet => replicaset;
    Service => service;
    Endpoints => endpoints;
    EndpointSlice => endpoint_slice;
    ConfigMap => config_map;
    Secret => secret;
    Pvc => pvc;
    ResourceQuota => quota;
    NetworkPolicy => network_policy;
    Node => node;
    Namespace => |v| simple(v).map(|(meta, body)| Namespace { meta, body });
    ServiceAccount => |v| simple(v).map(|(meta, body)| ServiceAccount { meta, body });
    Role => |v| simple(v).map(|(meta, body)| Role { meta, body });
    RoleBinding => |v| simple(v).map(|(meta, body)| RoleBinding { meta, body });
    HorizontalPodAutoscaler => |v| simple(v).map(|(meta, body)| HorizontalPodAutoscaler { meta, body });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Object;
    use crate::runtime::Runtime;
    use crate::world::World;
    use crate::{bootstrap, controllers};

    /// Renders, decodes and renders again every object of kind `T`; the text must not move.
    fn round_trip_all<T: Object>(w: &World, app: &str) -> usize {
        let mut n = 0;
        for o in w.objects::<T>() {
            let v = o.to_json();
            let back = T::from_api(&v).unwrap_or_else(|e| panic!("{app} {:?}: {e:?}", T::KIND));
            assert_eq!(
                back.to_json().to_string(),
                v.to_string(),
                "{app} {:?} {}",
                T::KIND,
                o.meta().name
            );
            n += 1;
        }
        n
    }

    /// A world per catalog app, with ReplicaSets and pods made, one pod shown running after a
    /// restart, one ReplicaSet refused by a quota and one node lost (every rendering branch).
    fn worlds() -> Vec<(String, World)> {
        let catalog = problems::Catalog::builtin().expect("builtin catalog");
        catalog
            .apps()
            .map(|app| {
                let mut w = World::new(7, 1_700_000_000_000_000_000, Runtime::new());
                bootstrap::build(&mut w, app);
                for _ in 0..3 {
                    controllers::reconcile(&mut w);
                    w.now += 1_000_000_000;
                }
                if let Some(p) = w.pods.values_mut().next() {
                    p.start_time = Some(w.now);
                    p.pod_ip = Some("10.244.1.7".into());
                    p.host_ip = Some("172.18.0.2".into());
                    p.phase = "Running".into();
                    set_condition(&mut p.conditions, "Ready", true, None, None, w.now);
                    if let Some(s) = p.statuses.first_mut() {
                        s.state = CState::Running { started: w.now };
                        s.container_id = Some("containerd://abc".into());
                        s.image_id = Some("docker.io/x@sha256:1".into());
                        s.restart_count = 2;
                        s.last = Some(Terminated {
                            reason: "OOMKilled".into(),
                            exit_code: 137,
                            started: w.now - 5_000_000_000,
                            finished: w.now - 1_000_000_000,
                            container_id: "containerd://old".into(),
                            message: Some("out of memory".into()),
                        });
                    }
                    p.meta.deleted_at = Some(w.now);
                }
                if let Some(rs) = w.replicasets.values_mut().next() {
                    rs.failure = Some("exceeded quota".into());
                }
                if let Some(n) = w.nodes.values_mut().next() {
                    n.kubelet_up = false;
                    n.unschedulable = true;
                }
                (app.name.clone(), w)
            })
            .collect()
    }

    #[test]
    fn every_catalog_object_survives_a_round_trip() {
        for (app, w) in worlds() {
            let mut n = 0;
            n += round_trip_all::<Namespace>(&w, &app);
            n += round_trip_all::<Node>(&w, &app);
            n += round_trip_all::<ConfigMap>(&w, &app);
            n += round_trip_all::<Secret>(&w, &app);
            n += round_trip_all::<ServiceAccount>(&w, &app);
            n += round_trip_all::<Role>(&w, &app);
            n += round_trip_all::<RoleBinding>(&w, &app);
            n += round_trip_all::<Pvc>(&w, &app);
            n += round_trip_all::<ResourceQuota>(&w, &app);
            n += round_trip_all::<NetworkPolicy>(&w, &app);
            n += round_trip_all::<Service>(&w, &app);
            n += round_trip_all::<Deployment>(&w, &app);
            n += round_trip_all::<StatefulSet>(&w, &app);
            n += round_trip_all::<ReplicaSet>(&w, &app);
            n += round_trip_all::<Pod>(&w, &app);
            n += round_trip_all::<Endpoints>(&w, &app);
            n += round_trip_all::<EndpointSlice>(&w, &app);
            assert!(!w.pods.is_empty() && !w.endpoints.is_empty(), "{app}");
            assert_eq!(w.endpoint_slices.len(), w.endpoints.len(), "{app}");
            assert!(n > 30, "{app}: only {n} objects");
        }
    }

    #[test]
    fn fields_the_model_does_not_know_come_back() {
        let written = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "app", "finalizers": ["x/y"]},
            "spec": {
                "hostname": "h",
                "securityContext": {"runAsUser": 1000},
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}},
                "containers": [{
                    "name": "c", "image": "nginx:1.27",
                    "startupProbe": {"tcpSocket": {"port": 80}},
                    "securityContext": {"readOnlyRootFilesystem": true},
                    "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    "resources": {"limits": {"cpu": "1.5", "memory": "1.5Gi"}}
                }]
            }
        });
        let pod = Pod::from_api(&written).unwrap();
        let c = &pod.spec.containers[0];
        assert_eq!(c.resources.limits.cpu_milli, Some(1500));
        assert_eq!(c.resources.limits.memory, Some(3 << 29));
        assert_eq!(c.termination_message_path, "/dev/termination-log");
        let v = pod.to_json();
        assert_eq!(v["metadata"]["finalizers"], json!(["x/y"]));
        assert_eq!(v["spec"]["hostname"], "h");
        assert_eq!(v["spec"]["securityContext"]["runAsUser"], 1000);
        assert!(v["spec"]["affinity"]["nodeAffinity"].is_object());
        assert_eq!(
            v["spec"]["containers"][0]["startupProbe"]["tcpSocket"]["port"],
            80
        );
        assert_eq!(
            v["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"],
            true
        );
        assert_eq!(
            v["spec"]["containers"][0]["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.name"
        );
        assert_eq!(
            v["spec"]["containers"][0]["resources"]["limits"]["memory"],
            "1536Mi"
        );
        // And again: what was kept decodes to the same object.
        assert_eq!(Pod::from_api(&v).unwrap().to_json(), v);
    }

    #[test]
    fn wrong_types_name_the_field() {
        let cases = [
            (json!([1, 2]), ""),
            (json!({"metadata": "x"}), "metadata"),
            (
                json!({"metadata": {"labels": {"a": 1}}}),
                "metadata.labels.a",
            ),
            (json!({"metadata": {"name": 5}}), "metadata.name"),
            (json!({"spec": {"replicas": "three"}}), "spec.replicas"),
            (
                json!({"spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": 3}]}}}}),
                "spec.template.spec.containers[1]",
            ),
            (
                json!({"spec": {"template": {"spec": {"containers": {"a": 1}}}}}),
                "spec.template.spec",
            ),
            (json!({"spec": {"selector": []}}), "spec.selector"),
        ];
        for (v, field) in cases {
            let e = Deployment::from_api(&v).expect_err(&v.to_string());
            assert_eq!(e[0].field, field, "{v}");
        }
        let e = Deployment::from_api(&json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "i", "resources": {"requests": {"cpu": "lots"}}}
        ]}}}}))
        .unwrap_err();
        assert_eq!(e[0].field, "spec.template.spec.containers[0]");
        assert_eq!(e[0].message, quantity::FORMAT_ERROR);
        assert!(Service::from_api(&json!({"spec": {"ports": [{"port": "x"}]}})).is_err());
        assert!(Node::from_api(&json!({"status": {"capacity": {"cpu": true}}})).is_err());
        assert!(Pod::from_api(&json!(null)).is_err());
    }
}
