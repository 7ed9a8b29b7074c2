//! The Kubernetes object timeline: every observed version of every object, and the state of the
//! cluster at any instant (each object's last version at or before it, unless that was a deletion).
//! Events are kept as core/v1 Event objects built from the events table.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use schemas::tables::{ChangeType, EventRow, ObjectRow};
use serde_json::{Value, json};

use schemas::time::rfc3339;

/// Identity of an object: (apiVersion, kind, namespace, name).
pub type ObjectKey = (String, String, String, String);

#[derive(Debug, Clone)]
pub struct Version {
    pub observed_ns: i64,
    pub change: ChangeType,
    /// The object, with `metadata.resourceVersion` set to [`Version::rv`] once sealed.
    pub object: Arc<Value>,
    /// Cluster-wide resource version: this version's place in observation order, from 1. Served
    /// instead of the recorded one, so that lists, objects and watches agree on one sequence.
    pub rv: u64,
}

/// Every version of every object, in observation order per object.
#[derive(Debug, Default, Clone)]
pub struct ObjectTimeline {
    versions: HashMap<ObjectKey, Vec<Version>>,
    /// Observation times of all versions, sorted: the position of a time in it is a monotonic
    /// "resource version" for the whole cluster.
    times: Vec<i64>,
    /// (key, index into its versions) in resource-version order.
    order: Vec<(ObjectKey, usize)>,
}

impl ObjectTimeline {
    /// Adds object rows (any order). Unparseable object JSON is an error naming the object.
    pub fn add_objects(&mut self, rows: impl IntoIterator<Item = ObjectRow>) -> Result<(), String> {
        for row in rows {
            let (key, version) = object_version(row)?;
            self.push(key, version);
        }
        Ok(())
    }

    /// Adds events as core/v1 Event objects; later rows of the same event update it.
    pub fn add_events(&mut self, rows: impl IntoIterator<Item = EventRow>) {
        for row in rows {
            let (key, version) = event_version(&row);
            self.push(key, version);
        }
    }

    /// Appends what a live cluster produced since the last append, after [`Self::seal`]: the new
    /// versions get the next resource versions at once, and `state` (the cluster now) follows.
    /// Rows must not be older than what is already there (a live cluster emits them in time
    /// order); an older one is an error and nothing after it is added.
    pub fn append(
        &mut self,
        objects: impl IntoIterator<Item = ObjectRow>,
        events: impl IntoIterator<Item = EventRow>,
        state: &mut ClusterState,
    ) -> Result<(), String> {
        let objects = objects.into_iter().map(object_version);
        let events = events.into_iter().map(|e| Ok(event_version(&e)));
        for item in objects.chain(events) {
            let (key, mut version) = item?;
            if self.times.last().is_some_and(|&t| version.observed_ns < t) {
                return Err(format!(
                    "objects: {} {}/{} observed at {} is older than what the timeline holds",
                    key.1, key.2, key.3, version.observed_ns
                ));
            }
            version.rv = self.order.len() as u64 + 1;
            set_resource_version(&mut version);
            state.apply(&key, &version);
            self.times.push(version.observed_ns);
            let versions = self.versions.entry(key.clone()).or_default();
            versions.push(version);
            self.order.push((key, versions.len() - 1));
        }
        Ok(())
    }

    /// The newest cluster-wide resource version.
    pub fn resource_version(&self) -> u64 {
        self.order.len() as u64
    }

    fn push(&mut self, key: ObjectKey, version: Version) {
        self.times.push(version.observed_ns);
        self.versions.entry(key).or_default().push(version);
    }

    /// Sorts what was added and numbers every version; call once after loading.
    pub fn seal(&mut self) {
        self.times.sort_unstable();
        let mut order = Vec::with_capacity(self.times.len());
        for (key, versions) in self.versions.iter_mut() {
            versions.sort_by_key(|v| v.observed_ns);
            for (i, v) in versions.iter().enumerate() {
                order.push((v.observed_ns, key.clone(), i));
            }
        }
        order.sort();
        for (rv, (_, key, i)) in order.iter().enumerate() {
            let version = &mut self.versions.get_mut(key).expect("key exists")[*i];
            version.rv = rv as u64 + 1;
            set_resource_version(version);
        }
        self.order = order.into_iter().map(|(_, k, i)| (k, i)).collect();
    }

    /// The versions with resource versions in `(after, upto]`, in order: what a watch from
    /// `after` has missed.
    pub fn changes(&self, after: u64, upto: u64) -> impl Iterator<Item = (&ObjectKey, &Version)> {
        let (lo, hi) = (after as usize, (upto as usize).min(self.order.len()));
        self.order[lo.min(hi)..hi]
            .iter()
            .map(|(key, i)| (key, &self.versions[key][*i]))
    }

    /// The cluster-wide resource version at `t`: how many versions were observed by then.
    pub fn resource_version_at(&self, t: i64) -> u64 {
        self.times.partition_point(|&x| x <= t) as u64
    }

    /// The objects that exist at `t`.
    pub fn state_at(&self, t: i64) -> ClusterState {
        let mut kinds: BTreeMap<KindKey, ObjectsOfKind> = BTreeMap::new();
        for ((api_version, kind, ns, name), versions) in &self.versions {
            let upto = versions.partition_point(|v| v.observed_ns <= t);
            let Some(last) = upto.checked_sub(1).map(|i| &versions[i]) else {
                continue;
            };
            if last.change == ChangeType::Deleted {
                continue;
            }
            kinds
                .entry((api_version.clone(), kind.clone()))
                .or_default()
                .insert((ns.clone(), name.clone()), last.object.clone());
        }
        ClusterState {
            kinds,
            resource_version: self.resource_version_at(t),
        }
    }

    /// (apiVersion, kind, namespaced) of every kind in the timeline.
    pub fn kinds(&self) -> Vec<(String, String, bool)> {
        let mut kinds: BTreeMap<(String, String), bool> = BTreeMap::new();
        for (api_version, kind, ns, _) in self.versions.keys() {
            *kinds
                .entry((api_version.clone(), kind.clone()))
                .or_default() |= !ns.is_empty();
        }
        kinds.into_iter().map(|((a, k), n)| (a, k, n)).collect()
    }
}

/// (apiVersion, kind).
pub type KindKey = (String, String);
/// The objects of one kind by (namespace, name); cluster-scoped objects have an empty namespace.
pub type ObjectsOfKind = BTreeMap<(String, String), Arc<Value>>;

/// The objects that exist at one instant, by (apiVersion, kind), then by (namespace, name).
#[derive(Debug, Default, Clone)]
pub struct ClusterState {
    pub kinds: BTreeMap<KindKey, ObjectsOfKind>,
    pub resource_version: u64,
}

impl ClusterState {
    /// Moves the state past one new version of an object.
    fn apply(&mut self, key: &ObjectKey, version: &Version) {
        let (api_version, kind, ns, name) = key;
        let of_kind = self
            .kinds
            .entry((api_version.clone(), kind.clone()))
            .or_default();
        if version.change == ChangeType::Deleted {
            of_kind.remove(&(ns.clone(), name.clone()));
        } else {
            of_kind.insert((ns.clone(), name.clone()), version.object.clone());
        }
        self.resource_version = version.rv;
    }

    pub fn objects(&self, api_version: &str, kind: &str) -> impl Iterator<Item = &Arc<Value>> {
        self.kinds
            .get(&(api_version.to_string(), kind.to_string()))
            .into_iter()
            .flat_map(|m| m.values())
    }

    pub fn get(&self, api_version: &str, kind: &str, ns: &str, name: &str) -> Option<&Arc<Value>> {
        self.kinds
            .get(&(api_version.to_string(), kind.to_string()))?
            .get(&(ns.to_string(), name.to_string()))
    }
}

/// An object row as a timeline version (not yet numbered).
fn object_version(row: ObjectRow) -> Result<(ObjectKey, Version), String> {
    let mut object: Value = serde_json::from_str(&row.object).map_err(|e| {
        format!(
            "objects: {} {}/{}: the object is not JSON: {e}",
            row.kind,
            row.namespace.as_deref().unwrap_or(""),
            row.name
        )
    })?;
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        // Captures drop managedFields; make sure nothing else slips it through.
        meta.remove("managedFields");
    }
    let key = (
        row.api_version,
        row.kind,
        row.namespace.unwrap_or_default(),
        row.name,
    );
    let version = Version {
        observed_ns: row.observed_ns,
        change: row.change,
        object: Arc::new(object),
        rv: 0,
    };
    Ok((key, version))
}

/// An event row as a timeline version of its core/v1 Event.
fn event_version(row: &EventRow) -> (ObjectKey, Version) {
    let key = (
        "v1".to_string(),
        "Event".to_string(),
        row.namespace.clone(),
        row.name.clone(),
    );
    let version = Version {
        observed_ns: row.time_ns,
        change: ChangeType::Modified,
        object: Arc::new(event_object(row)),
        rv: 0,
    };
    (key, version)
}

/// Serves the version's number as the object's `metadata.resourceVersion`.
fn set_resource_version(version: &mut Version) {
    if let Some(meta) = Arc::make_mut(&mut version.object)
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
    {
        meta.insert("resourceVersion".into(), version.rv.to_string().into());
    }
}

/// A core/v1 Event as the apiserver serves it.
fn event_object(e: &EventRow) -> Value {
    let mut involved = serde_json::Map::new();
    let mut put = |k: &str, v: &Option<String>| {
        if let Some(v) = v {
            involved.insert(k.into(), v.clone().into());
        }
    };
    put("kind", &Some(e.involved_kind.clone()));
    put("namespace", &e.involved_namespace);
    put("name", &Some(e.involved_name.clone()));
    put("uid", &e.involved_uid);
    put("apiVersion", &e.involved_api_version);
    put("fieldPath", &e.involved_field_path);
    let first = e.first_time_ns.unwrap_or(e.time_ns);
    let mut source = serde_json::Map::new();
    if let Some(c) = &e.source_component {
        source.insert("component".into(), c.clone().into());
    }
    if let Some(h) = &e.source_host {
        source.insert("host".into(), h.clone().into());
    }
    let mut ev = json!({
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {
            "name": e.name,
            "namespace": e.namespace,
            "uid": e.uid,
            "resourceVersion": format!("{}", e.time_ns / 1_000_000),
            "creationTimestamp": rfc3339(first),
        },
        "involvedObject": involved,
        "reason": e.reason,
        "message": e.message,
        "source": source,
        "firstTimestamp": rfc3339(first),
        "lastTimestamp": rfc3339(e.time_ns),
        "count": e.count,
        "type": e.event_type,
        "eventTime": null,
        "reportingComponent": e.reporting_controller.clone().or_else(|| e.source_component.clone()).unwrap_or_default(),
        "reportingInstance": e.reporting_instance.clone().or_else(|| e.source_host.clone()).unwrap_or_default(),
    });
    if let Some(action) = &e.action {
        ev["action"] = action.clone().into();
    }
    ev
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t: i64, name: &str, change: ChangeType, phase: &str) -> ObjectRow {
        ObjectRow {
            observed_ns: t,
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: Some("ns".into()),
            name: name.into(),
            uid: format!("uid-{name}"),
            resource_version: t.to_string(),
            change,
            object: json!({"metadata": {"name": name, "managedFields": [{}]}, "status": {"phase": phase}}).to_string(),
        }
    }

    #[test]
    fn state_follows_the_last_version_and_deletions() {
        let mut tl = ObjectTimeline::default();
        tl.add_objects([
            row(10, "a", ChangeType::Added, "Pending"),
            row(20, "a", ChangeType::Modified, "Running"),
            row(15, "b", ChangeType::Added, "Running"),
            row(30, "b", ChangeType::Deleted, "Running"),
        ])
        .unwrap();
        tl.seal();
        let at = |t| tl.state_at(t);
        assert_eq!(at(5).objects("v1", "Pod").count(), 0);
        let s = at(25);
        assert_eq!(s.objects("v1", "Pod").count(), 2);
        assert_eq!(
            s.get("v1", "Pod", "ns", "a").unwrap()["status"]["phase"],
            "Running"
        );
        assert!(
            s.get("v1", "Pod", "ns", "a").unwrap()["metadata"]
                .get("managedFields")
                .is_none()
        );
        assert_eq!(s.resource_version, 3);
        assert_eq!(
            s.get("v1", "Pod", "ns", "a").unwrap()["metadata"]["resourceVersion"],
            "3"
        );
        let changes: Vec<u64> = tl.changes(1, 4).map(|(_, v)| v.rv).collect();
        assert_eq!(changes, vec![2, 3, 4]);
        assert_eq!(tl.changes(4, 4).count(), 0);
        assert_eq!(at(30).objects("v1", "Pod").count(), 1);
        assert_eq!(tl.kinds(), vec![("v1".into(), "Pod".into(), true)]);
    }
}
