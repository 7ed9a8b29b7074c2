//! The cluster's state: every object by kind, the virtual clock, the seeded generator, the
//! hidden runtime conditions faults and noise act on, and the bookkeeping that turns changes into
//! object rows (one per observed version) and Kubernetes Events (aggregated with counts).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use schemas::tables::{ChangeType, EventRow, ObjectRow, Row};
use serde_json::Value;

use super::objects::*;
use super::runtime::Runtime;
use super::util::{self, NS_PER_SEC};

/// Mixed into the seed of [`World::slice_rng`] so that its draws differ from the main stream's.
const SLICE_STREAM: u64 = 0x5eed_511c_e5ee_d511;

/// Everything the simulator knows about the cluster at one instant.
#[derive(Debug, Clone)]
pub struct World {
    pub now: i64,
    pub rng: ChaCha8Rng,
    /// Names and uids of EndpointSlices. A stream of its own: slices came to the model after
    /// datasets were recorded, and drawing them from `rng` would move every later name and uid.
    pub slice_rng: ChaCha8Rng,
    rv: u64,
    // One map per kind of the list in `kinds.rs`, reached generically through `Object` (typed) or
    // `Kind::objects` (by kind value).
    pub namespaces: BTreeMap<String, Namespace>,
    pub nodes: BTreeMap<String, Node>,
    pub deployments: BTreeMap<Key, Deployment>,
    pub statefulsets: BTreeMap<Key, StatefulSet>,
    pub replicasets: BTreeMap<Key, ReplicaSet>,
    pub pods: BTreeMap<Key, Pod>,
    pub services: BTreeMap<Key, Service>,
    pub endpoints: BTreeMap<Key, Endpoints>,
    pub endpoint_slices: BTreeMap<Key, EndpointSlice>,
    pub configmaps: BTreeMap<Key, ConfigMap>,
    pub secrets: BTreeMap<Key, Secret>,
    pub service_accounts: BTreeMap<Key, ServiceAccount>,
    pub roles: BTreeMap<Key, Role>,
    pub autoscalers: BTreeMap<Key, HorizontalPodAutoscaler>,
    pub role_bindings: BTreeMap<Key, RoleBinding>,
    pub pvcs: BTreeMap<Key, Pvc>,
    pub quotas: BTreeMap<Key, ResourceQuota>,
    pub netpols: BTreeMap<Key, NetworkPolicy>,
    /// Conditions below the API: node stress, network impairments, application state.
    pub runtime: Runtime,
    dirty: BTreeSet<(Kind, Key)>,
    /// Last emitted rendering (without resourceVersion) and uid of each object, to skip no-op
    /// updates and to report deletions.
    emitted: HashMap<(Kind, Key), (String, String)>,
    events: BTreeMap<(String, String, String), EventRecord>,
    /// Rows produced since the last drain.
    pub out: Vec<Row>,
    /// Counts object changes, so caches of derived state know when to refresh.
    pub epoch: i64,
    /// Counts object changes and events: a controller pass that leaves it unchanged did nothing.
    pub actions: u64,
    /// Per controller, the `actions` count after a pass that did nothing and does not wait on
    /// time: until something changes, another pass would do nothing again.
    pub quiescent: HashMap<&'static str, u64>,
    /// Pod-template hash of each Deployment at a generation (hashing the template is costly).
    pub template_hashes: HashMap<Key, (i64, String)>,
    /// Images each node has pulled: (node, image).
    pub pulled: BTreeSet<(String, String)>,
    /// CPU the workload asks of each pod's main container this tick, in cores.
    pub demand: BTreeMap<Key, f64>,
    /// Requests a second each pod's main container serves this tick (the grain of its demand).
    pub requests: BTreeMap<Key, f64>,
    /// CPU seconds each node has used (its root cgroup's counter: containers, stressors and the
    /// node's own daemons), kept by the kubelet's sync.
    pub node_cpu_seconds: BTreeMap<String, f64>,
    /// Next free IPs.
    next_pod_ip: u32,
    next_cluster_ip: u32,
}

#[derive(Debug, Clone)]
struct EventRecord {
    name: String,
    uid: String,
    first: i64,
    last: i64,
    count: i32,
}

/// Who reports an event.
#[derive(Debug, Clone)]
pub enum Source {
    Kubelet(String),
    Scheduler,
    Controller(&'static str),
    KernelMonitor(String),
}

/// The object an event is about.
#[derive(Debug, Clone)]
pub struct Involved {
    pub kind: Kind,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
    pub field_path: Option<String>,
}

impl World {
    pub fn new(seed: u64, start_ns: i64, runtime: Runtime) -> World {
        World {
            now: start_ns,
            rng: ChaCha8Rng::seed_from_u64(seed),
            slice_rng: ChaCha8Rng::seed_from_u64(seed ^ SLICE_STREAM),
            rv: 1000,
            namespaces: BTreeMap::new(),
            nodes: BTreeMap::new(),
            deployments: BTreeMap::new(),
            statefulsets: BTreeMap::new(),
            replicasets: BTreeMap::new(),
            pods: BTreeMap::new(),
            services: BTreeMap::new(),
            endpoints: BTreeMap::new(),
            endpoint_slices: BTreeMap::new(),
            configmaps: BTreeMap::new(),
            secrets: BTreeMap::new(),
            service_accounts: BTreeMap::new(),
            roles: BTreeMap::new(),
            autoscalers: BTreeMap::new(),
            role_bindings: BTreeMap::new(),
            pvcs: BTreeMap::new(),
            quotas: BTreeMap::new(),
            netpols: BTreeMap::new(),
            runtime,
            dirty: BTreeSet::new(),
            emitted: HashMap::new(),
            events: BTreeMap::new(),
            out: Vec::new(),
            epoch: 0,
            actions: 0,
            quiescent: HashMap::new(),
            template_hashes: HashMap::new(),
            pulled: BTreeSet::new(),
            demand: BTreeMap::new(),
            requests: BTreeMap::new(),
            node_cpu_seconds: BTreeMap::new(),
            next_pod_ip: 10,
            next_cluster_ip: 20,
        }
    }

    pub fn secs(&self) -> f64 {
        self.now as f64 / NS_PER_SEC as f64
    }

    /// Metadata for a new object.
    pub fn meta(&mut self, namespace: Option<&str>, name: &str, labels: Labels) -> Meta {
        Meta {
            name: name.to_string(),
            namespace: namespace.map(str::to_string),
            uid: util::uuid(&mut self.rng),
            resource_version: 0,
            created: self.now,
            labels,
            annotations: Labels::new(),
            owner: None,
            generation: 1,
            generate_name: None,
            deleted_at: None,
            deletion_grace: None,
            extra: serde_json::Map::new(),
        }
    }

    pub fn touch(&mut self, kind: Kind, key: &Key) {
        self.dirty.insert((kind, key.clone()));
        self.epoch += 1;
        self.actions += 1;
    }

    /// Marks a derived object (an EndpointSlice) changed for the next flush without counting an
    /// action or a new epoch: nothing in the simulation reads these objects, so no cache or
    /// controller pass needs to see the change, and the simulation runs as it did without them.
    pub fn touch_derived(&mut self, kind: Kind, key: &Key) {
        self.dirty.insert((kind, key.clone()));
    }

    /// Forgets what was emitted and marks every object changed, so the next flush reports the
    /// whole cluster as added (the start of a captured window).
    pub fn restart_capture(&mut self) {
        self.out.clear();
        self.emitted.clear();
        self.events.clear();
        for &kind in Kind::ALL {
            for k in kind.objects().keys(self) {
                self.touch(kind, &k);
            }
        }
    }

    pub fn pod_ip(&mut self, node_index: usize) -> String {
        self.next_pod_ip += 1;
        format!("10.244.{}.{}", node_index, 2 + self.next_pod_ip % 250)
    }

    pub fn cluster_ip(&mut self) -> String {
        self.next_cluster_ip += 1;
        format!(
            "10.96.{}.{}",
            self.next_cluster_ip / 200,
            1 + (self.next_cluster_ip * 37) % 250
        )
    }

    /// Renders one object, if it exists.
    pub fn render(&self, kind: Kind, k: &Key) -> Option<(Value, u64)> {
        kind.objects().render(self, k)
    }

    fn set_resource_version(&mut self, kind: Kind, k: &Key, rv: u64) {
        if let Some(m) = kind.objects().meta_mut(self, k) {
            m.resource_version = rv;
        }
    }

    /// Emits an object row for every changed object (a new resourceVersion each), and a deleted
    /// row for every object that went away.
    pub fn flush_objects(&mut self) {
        let dirty = std::mem::take(&mut self.dirty);
        for (kind, k) in dirty {
            match self.render(kind, &k) {
                Some((mut v, _)) => {
                    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove("resourceVersion");
                    }
                    let text = v.to_string();
                    let id = (kind, k.clone());
                    if self.emitted.get(&id).is_some_and(|(t, _)| *t == text) {
                        continue;
                    }
                    self.rv += 1;
                    let rv = self.rv;
                    self.set_resource_version(kind, &k, rv);
                    let change = if self.emitted.contains_key(&id) {
                        ChangeType::Modified
                    } else {
                        ChangeType::Added
                    };
                    let uid = v["metadata"]["uid"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    self.push_object_row(kind, &k, uid.clone(), change, v);
                    self.emitted.insert(id, (text, uid));
                }
                None => {
                    if let Some((text, uid)) = self.emitted.remove(&(kind, k.clone())) {
                        self.rv += 1;
                        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                        self.push_object_row(kind, &k, uid, ChangeType::Deleted, v);
                    }
                }
            }
        }
    }

    /// One object row at the current resource version, the object's JSON carrying it.
    fn push_object_row(
        &mut self,
        kind: Kind,
        k: &Key,
        uid: String,
        change: ChangeType,
        mut v: Value,
    ) {
        let rv = self.rv.to_string();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), Value::String(rv.clone()));
        }
        self.out.push(Row::Object(ObjectRow {
            observed_ns: self.now,
            api_version: kind.api_version().to_string(),
            kind: kind.name().to_string(),
            namespace: kind.namespaced().then(|| k.0.clone()),
            name: k.1.clone(),
            uid,
            resource_version: rv,
            change,
            object: v.to_string(),
        }));
    }

    /// Records an Event, aggregating repeats of the same reason and message on the same object
    /// (the count grows and lastTimestamp moves, as the event recorder does).
    pub fn event(
        &mut self,
        involved: &Involved,
        warning: bool,
        reason: &str,
        message: &str,
        source: Source,
    ) {
        let ns = involved
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let agg_key = (
            involved.uid.clone(),
            reason.to_string(),
            message.to_string(),
        );
        let now = self.now;
        self.actions += 1;
        let rec = match self.events.get_mut(&agg_key) {
            Some(r) if now - r.last < 3600 * NS_PER_SEC => {
                r.count += 1;
                r.last = now;
                r.clone()
            }
            _ => {
                let hex = format!("{:x}", (now as u64) ^ self.rng_u32() as u64);
                let r = EventRecord {
                    name: format!("{}.{}", involved.name, &hex[hex.len().saturating_sub(16)..]),
                    uid: util::uuid(&mut self.rng),
                    first: now,
                    last: now,
                    count: 1,
                };
                self.events.insert(agg_key, r.clone());
                r
            }
        };
        let (component, host, controller, instance, action) = match &source {
            Source::Kubelet(node) => (
                Some("kubelet".to_string()),
                Some(node.clone()),
                Some("kubelet".to_string()),
                Some(node.clone()),
                None,
            ),
            Source::Scheduler => (
                Some("default-scheduler".to_string()),
                None,
                Some("default-scheduler".to_string()),
                Some("default-scheduler-kind-control-plane".to_string()),
                Some("Scheduling".to_string()),
            ),
            Source::Controller(c) => (Some(c.to_string()), None, Some(c.to_string()), None, None),
            Source::KernelMonitor(node) => (
                Some("kernel-monitor".to_string()),
                Some(node.clone()),
                Some("kernel-monitor".to_string()),
                Some(node.clone()),
                None,
            ),
        };
        self.out.push(Row::Event(EventRow {
            time_ns: now,
            first_time_ns: Some(rec.first),
            namespace: ns,
            name: rec.name,
            uid: rec.uid,
            event_type: if warning { "Warning" } else { "Normal" }.to_string(),
            reason: reason.to_string(),
            message: message.to_string(),
            count: rec.count,
            involved_api_version: Some(involved.kind.api_version().to_string()),
            involved_kind: involved.kind.name().to_string(),
            involved_namespace: involved.namespace.clone(),
            involved_name: involved.name.clone(),
            involved_uid: Some(involved.uid.clone()),
            involved_field_path: involved.field_path.clone(),
            source_component: component,
            source_host: host,
            reporting_controller: controller,
            reporting_instance: instance,
            action,
        }));
    }

    fn rng_u32(&mut self) -> u32 {
        use rand::Rng;
        self.rng.random()
    }

    /// The Involved reference for a pod (optionally one of its containers).
    pub fn pod_ref(pod: &Pod, container: Option<&str>) -> Involved {
        Involved {
            kind: Kind::Pod,
            namespace: pod.meta.namespace.clone(),
            name: pod.meta.name.clone(),
            uid: pod.meta.uid.clone(),
            field_path: container.map(|c| format!("spec.containers{{{c}}}")),
        }
    }

    pub fn meta_ref(kind: Kind, meta: &Meta) -> Involved {
        Involved {
            kind,
            namespace: meta.namespace.clone(),
            name: meta.name.clone(),
            uid: meta.uid.clone(),
            field_path: None,
        }
    }

    /// Appends a container log line.
    pub fn log(&mut self, k: &Key, container: &str, restart: i32, stream: &str, line: String) {
        self.out.push(Row::Log(schemas::tables::LogRow {
            time_ns: self.now,
            namespace: k.0.clone(),
            pod: k.1.clone(),
            container: container.to_string(),
            restart,
            stream: stream.to_string(),
            line,
        }));
    }

    /// Index of a node in name order (for pod CIDRs).
    pub fn node_index(&self, node: &str) -> usize {
        self.nodes.keys().position(|n| n == node).unwrap_or(0) + 1
    }

    /// Whether a RoleBinding of namespace `ns` grants ServiceAccount `sa` a Role naming
    /// `resource` (the simulation's RBAC: resources only, any verb).
    pub fn rbac_allows(&self, ns: &str, sa: &str, resource: &str) -> bool {
        self.role_bindings
            .values()
            .filter(|b| b.meta.namespace.as_deref() == Some(ns))
            .any(|b| {
                let subject = b.body["subjects"]
                    .as_array()
                    .is_some_and(|subs| subs.iter().any(|s| s["name"] == sa));
                let role = b.body["roleRef"]["name"].as_str().unwrap_or_default();
                let grants = self.roles.get(&key(ns, role)).is_some_and(|r| {
                    r.body["rules"].as_array().is_some_and(|rules| {
                        rules.iter().any(|rule| {
                            rule["resources"]
                                .as_array()
                                .is_some_and(|res| res.iter().any(|x| x == resource))
                        })
                    })
                });
                subject && grants
            })
    }

    /// Pods a label selector picks in a namespace.
    pub fn pods_selected<'a>(
        &'a self,
        ns: &'a str,
        selector: &'a Labels,
    ) -> impl Iterator<Item = &'a Pod> + 'a {
        self.pods
            .range((ns.to_string(), String::new())..)
            .take_while(move |((n, _), _)| n == ns)
            .map(|(_, p)| p)
            .filter(move |p| selects(selector, &p.meta.labels))
    }
}
