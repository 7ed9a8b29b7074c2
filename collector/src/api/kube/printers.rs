//! Server-side printing: the Table columns and cells kubectl shows for each kind, computed as the
//! apiserver's printers compute them (pod status reasons, restarts with "(2m ago)", ages relative to
//! the server's now). Kinds without a printer get the apiserver's default Name / Created At table.

use serde_json::{Value, json};

use crate::clock::parse_rfc3339;

/// One column: name, OpenAPI type, format, priority (1 = only with `-o wide`).
pub struct Column {
    pub name: &'static str,
    pub kind: &'static str,
    pub format: &'static str,
    pub priority: u8,
    pub description: &'static str,
}

const fn col(name: &'static str, priority: u8, description: &'static str) -> Column {
    Column {
        name,
        kind: "string",
        format: "",
        priority,
        description,
    }
}

const fn int(name: &'static str, priority: u8, description: &'static str) -> Column {
    Column {
        name,
        kind: "integer",
        format: "",
        priority,
        description,
    }
}

const NAME: Column = Column {
    name: "Name",
    kind: "string",
    format: "name",
    priority: 0,
    description: "Name must be unique within a namespace.",
};
const AGE: Column = col(
    "Age",
    0,
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
);

/// The columns of `kind`'s table.
pub fn columns(kind: &str) -> Vec<Column> {
    match kind {
        "Pod" => vec![
            NAME,
            col(
                "Ready",
                0,
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            col(
                "Status",
                0,
                "The aggregate status of the containers in this pod.",
            ),
            col(
                "Restarts",
                0,
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            AGE,
            col("IP", 1, "IP address allocated to the pod."),
            col("Node", 1, "Name of the Node the Pod is assigned to."),
            col(
                "Nominated Node",
                1,
                "nominatedNodeName is set when this pod preempts other pods on the node.",
            ),
            col(
                "Readiness Gates",
                1,
                "If specified, all readiness gates will be evaluated for pod readiness.",
            ),
        ],
        "Deployment" => vec![
            NAME,
            col("Ready", 0, "Number of the pod with ready state"),
            int(
                "Up-to-date",
                0,
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
            ),
            int(
                "Available",
                0,
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
            ),
            AGE,
            col("Containers", 1, "Names of each container in the template."),
            col(
                "Images",
                1,
                "Images referenced by each container in the template.",
            ),
            col("Selector", 1, "Label selector for pods."),
        ],
        "ReplicaSet" => vec![
            NAME,
            int("Desired", 0, "Replicas is the number of desired replicas."),
            int(
                "Current",
                0,
                "Replicas is the most recently observed number of replicas.",
            ),
            int(
                "Ready",
                0,
                "The number of ready replicas for this replica set.",
            ),
            AGE,
            col("Containers", 1, "Names of each container in the template."),
            col(
                "Images",
                1,
                "Images referenced by each container in the template.",
            ),
            col(
                "Selector",
                1,
                "Selector is a label query over pods that should match the replica count.",
            ),
        ],
        "StatefulSet" => vec![
            NAME,
            col("Ready", 0, "Number of the pod with ready state"),
            AGE,
            col("Containers", 1, "Names of each container in the template."),
            col(
                "Images",
                1,
                "Images referenced by each container in the template.",
            ),
        ],
        "DaemonSet" => vec![
            NAME,
            int(
                "Desired",
                0,
                "The total number of nodes that should be running the daemon pod.",
            ),
            int(
                "Current",
                0,
                "The number of nodes that are running at least 1 daemon pod.",
            ),
            int(
                "Ready",
                0,
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
            ),
            int(
                "Up-to-date",
                0,
                "The total number of nodes that are running updated daemon pod",
            ),
            int(
                "Available",
                0,
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
            ),
            col(
                "Node Selector",
                0,
                "NodeSelector is a selector which must be true for the pod to fit on a node.",
            ),
            AGE,
            col("Containers", 1, "Names of each container in the template."),
            col(
                "Images",
                1,
                "Images referenced by each container in the template.",
            ),
            col(
                "Selector",
                1,
                "A label query over pods that are managed by the daemon set.",
            ),
        ],
        "Service" => vec![
            NAME,
            col("Type", 0, "type determines how the Service is exposed."),
            col(
                "Cluster-IP",
                0,
                "clusterIP is the IP address of the service.",
            ),
            col(
                "External-IP",
                0,
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
            ),
            col(
                "Port(s)",
                0,
                "The list of ports that are exposed by this service.",
            ),
            AGE,
            col(
                "Selector",
                1,
                "Route service traffic to pods with label keys and values matching this selector.",
            ),
        ],
        "Endpoints" => vec![NAME, col("Endpoints", 0, "Endpoints of the service"), AGE],
        "ConfigMap" => vec![NAME, int("Data", 0, "Number of keys"), AGE],
        "Secret" => vec![
            NAME,
            col(
                "Type",
                0,
                "Used to facilitate programmatic handling of secret data.",
            ),
            int("Data", 0, "Number of keys"),
            AGE,
        ],
        "Event" => vec![
            col(
                "Last Seen",
                0,
                "The time at which the most recent occurrence of this event was recorded.",
            ),
            col(
                "Type",
                0,
                "Type of this event (Normal, Warning), new types could be added in the future",
            ),
            col(
                "Reason",
                0,
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            ),
            col("Object", 0, "The object that this event is about."),
            col(
                "Subobject",
                1,
                "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement.",
            ),
            col(
                "Source",
                1,
                "The component reporting this event. Should be a short machine understandable string.",
            ),
            col(
                "Message",
                0,
                "A human-readable description of the status of this operation.",
            ),
            col(
                "First Seen",
                1,
                "The time at which the event was first recorded.",
            ),
            int("Count", 1, "The number of times this event has occurred."),
            col("Name", 1, "Name must be unique within a namespace."),
        ],
        "Node" => vec![
            NAME,
            col("Status", 0, "The status of the node"),
            col("Roles", 0, "The roles of the node"),
            AGE,
            col("Version", 0, "Kubelet Version reported by the node."),
            col("Internal-IP", 1, "List of addresses reachable to the node."),
            col("External-IP", 1, "List of addresses reachable to the node."),
            col(
                "OS-Image",
                1,
                "OS Image reported by the node from /etc/os-release.",
            ),
            col(
                "Kernel-Version",
                1,
                "Kernel Version reported by the node from 'uname -r'.",
            ),
            col(
                "Container-Runtime",
                1,
                "ContainerRuntime Version reported by the node through runtime remote API.",
            ),
        ],
        "Namespace" => vec![NAME, col("Status", 0, "The status of the namespace"), AGE],
        "PersistentVolumeClaim" => vec![
            NAME,
            col(
                "Status",
                0,
                "Phase represents the current phase of PersistentVolumeClaim.",
            ),
            col(
                "Volume",
                0,
                "volumeName is the binding reference to the PersistentVolume backing this claim.",
            ),
            col(
                "Capacity",
                0,
                "capacity represents the actual resources of the underlying volume.",
            ),
            col(
                "Access Modes",
                0,
                "accessModes contains the actual access modes the volume backing the PVC has.",
            ),
            col(
                "StorageClass",
                0,
                "storageClassName is the name of the StorageClass required by the claim.",
            ),
            col(
                "VolumeAttributesClass",
                0,
                "volumeAttributesClassName may be used to set the VolumeAttributesClass used by this claim.",
            ),
            AGE,
            col(
                "VolumeMode",
                1,
                "volumeMode defines what type of volume is required by the claim.",
            ),
        ],
        "ServiceAccount" => vec![
            NAME,
            int(
                "Secrets",
                0,
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
            ),
            AGE,
        ],
        "NetworkPolicy" => vec![
            NAME,
            col(
                "Pod-Selector",
                0,
                "Selects the pods to which this NetworkPolicy object applies.",
            ),
            AGE,
        ],
        "ResourceQuota" => vec![
            NAME,
            AGE,
            col(
                "Request",
                0,
                "Request represents a minimum amount of cpu/memory that a container may consume.",
            ),
            col(
                "Limit",
                0,
                "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
            ),
        ],
        _ => vec![
            NAME,
            Column {
                name: "Created At",
                kind: "date",
                format: "",
                priority: 0,
                description: "CreationTimestamp is a timestamp representing the server time when this object was created.",
            },
        ],
    }
}

/// The column definitions as Table JSON.
pub fn column_definitions(kind: &str) -> Value {
    Value::Array(
        columns(kind)
            .into_iter()
            .map(|c| {
                json!({"name": c.name, "type": c.kind, "format": c.format,
                       "description": c.description, "priority": c.priority})
            })
            .collect(),
    )
}

fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn n(v: &Value, pointer: &str) -> i64 {
    v.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn arr<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn or_none(x: String) -> String {
    if x.is_empty() { "<none>".into() } else { x }
}

/// Age of a timestamp field relative to `now_ns`, as kubectl prints it.
fn age(v: &Value, pointer: &str, now_ns: i64) -> String {
    match parse_rfc3339(s(v, pointer)) {
        Some(t) => human_duration((now_ns - t) / 1_000_000_000),
        None => "<unknown>".into(),
    }
}

/// kubectl's human-readable duration (apimachinery `duration.HumanDuration`), in seconds.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        return match secs % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = hours / 24 % 365;
        return match days {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn labels_string(map: Option<&Value>) -> String {
    let parts: Vec<String> = map
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    parts.join(",")
}

fn containers_and_images(v: &Value) -> (String, String) {
    let containers = arr(v, "/spec/template/spec/containers");
    let names: Vec<&str> = containers.iter().map(|c| s(c, "/name")).collect();
    let images: Vec<&str> = containers.iter().map(|c| s(c, "/image")).collect();
    (names.join(","), images.join(","))
}

fn selector_string(v: &Value) -> String {
    let mut parts: Vec<String> = v
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    for e in arr(v, "/spec/selector/matchExpressions") {
        let values: Vec<&str> = arr(e, "/values").iter().filter_map(Value::as_str).collect();
        let op = s(e, "/operator").to_lowercase();
        parts.push(match op.as_str() {
            "exists" => s(e, "/key").to_string(),
            "doesnotexist" => format!("!{}", s(e, "/key")),
            _ => format!("{} {op} ({})", s(e, "/key"), values.join(",")),
        });
    }
    or_none(parts.join(","))
}

/// The cells of one object's row.
pub fn cells(kind: &str, v: &Value, now_ns: i64) -> Vec<Value> {
    let name = s(v, "/metadata/name").to_string();
    let created = age(v, "/metadata/creationTimestamp", now_ns);
    match kind {
        "Pod" => pod_cells(v, now_ns),
        "Deployment" => {
            let (containers, images) = containers_and_images(v);
            vec![
                name.into(),
                format!(
                    "{}/{}",
                    n(v, "/status/readyReplicas"),
                    n(v, "/spec/replicas")
                )
                .into(),
                n(v, "/status/updatedReplicas").into(),
                n(v, "/status/availableReplicas").into(),
                created.into(),
                containers.into(),
                images.into(),
                selector_string(v).into(),
            ]
        }
        "ReplicaSet" => {
            let (containers, images) = containers_and_images(v);
            vec![
                name.into(),
                n(v, "/spec/replicas").into(),
                n(v, "/status/replicas").into(),
                n(v, "/status/readyReplicas").into(),
                created.into(),
                containers.into(),
                images.into(),
                selector_string(v).into(),
            ]
        }
        "StatefulSet" => {
            let (containers, images) = containers_and_images(v);
            vec![
                name.into(),
                format!(
                    "{}/{}",
                    n(v, "/status/readyReplicas"),
                    n(v, "/spec/replicas")
                )
                .into(),
                created.into(),
                containers.into(),
                images.into(),
            ]
        }
        "DaemonSet" => {
            let (containers, images) = containers_and_images(v);
            vec![
                name.into(),
                n(v, "/status/desiredNumberScheduled").into(),
                n(v, "/status/currentNumberScheduled").into(),
                n(v, "/status/numberReady").into(),
                n(v, "/status/updatedNumberScheduled").into(),
                n(v, "/status/numberAvailable").into(),
                or_none(labels_string(v.pointer("/spec/template/spec/nodeSelector"))).into(),
                created.into(),
                containers.into(),
                images.into(),
                selector_string(v).into(),
            ]
        }
        "Service" => {
            let ports: Vec<String> = arr(v, "/spec/ports")
                .iter()
                .map(|p| {
                    let port = n(p, "/port");
                    let proto = match s(p, "/protocol") {
                        "" => "TCP",
                        x => x,
                    };
                    match n(p, "/nodePort") {
                        0 => format!("{port}/{proto}"),
                        np => format!("{port}:{np}/{proto}"),
                    }
                })
                .collect();
            let ty = match s(v, "/spec/type") {
                "" => "ClusterIP",
                t => t,
            };
            let external: Vec<String> = arr(v, "/status/loadBalancer/ingress")
                .iter()
                .map(|i| s(i, "/ip").to_string())
                .chain(
                    arr(v, "/spec/externalIPs")
                        .iter()
                        .filter_map(|x| x.as_str().map(str::to_string)),
                )
                .collect();
            let external = match (ty, external.is_empty()) {
                ("LoadBalancer", true) => "<pending>".to_string(),
                ("ExternalName", _) => s(v, "/spec/externalName").to_string(),
                _ => or_none(external.join(",")),
            };
            vec![
                name.into(),
                ty.into(),
                or_none(s(v, "/spec/clusterIP").to_string()).into(),
                external.into(),
                or_none(ports.join(",")).into(),
                created.into(),
                or_none(labels_string(v.pointer("/spec/selector"))).into(),
            ]
        }
        "Endpoints" => {
            let mut eps = Vec::new();
            for subset in arr(v, "/subsets") {
                for addr in arr(subset, "/addresses") {
                    for port in arr(subset, "/ports") {
                        eps.push(format!("{}:{}", s(addr, "/ip"), n(port, "/port")));
                    }
                }
            }
            let shown = if eps.len() > 3 {
                format!("{} + {} more...", eps[..3].join(","), eps.len() - 3)
            } else {
                or_none(eps.join(","))
            };
            vec![name.into(), shown.into(), created.into()]
        }
        "ConfigMap" => {
            let count = ["/data", "/binaryData"]
                .iter()
                .filter_map(|p| v.pointer(p).and_then(Value::as_object))
                .map(|m| m.len())
                .sum::<usize>();
            vec![name.into(), count.into(), created.into()]
        }
        "Secret" => {
            let count = v
                .pointer("/data")
                .and_then(Value::as_object)
                .map_or(0, |m| m.len());
            vec![
                name.into(),
                s(v, "/type").into(),
                count.into(),
                created.into(),
            ]
        }
        "Event" => {
            let last = if s(v, "/lastTimestamp").is_empty() {
                age(v, "/eventTime", now_ns)
            } else {
                age(v, "/lastTimestamp", now_ns)
            };
            let object = format!(
                "{}/{}",
                s(v, "/involvedObject/kind").to_lowercase(),
                s(v, "/involvedObject/name")
            );
            let source = {
                let c = s(v, "/source/component");
                let c = if c.is_empty() {
                    s(v, "/reportingComponent")
                } else {
                    c
                };
                let h = s(v, "/source/host");
                let h = if h.is_empty() {
                    s(v, "/reportingInstance")
                } else {
                    h
                };
                if h.is_empty() {
                    c.to_string()
                } else {
                    format!("{c}, {h}")
                }
            };
            vec![
                last.into(),
                s(v, "/type").into(),
                s(v, "/reason").into(),
                object.into(),
                s(v, "/involvedObject/fieldPath").into(),
                source.into(),
                s(v, "/message").trim().into(),
                age(v, "/firstTimestamp", now_ns).into(),
                n(v, "/count").into(),
                name.into(),
            ]
        }
        "Node" => node_cells(v, created),
        "Namespace" => vec![name.into(), s(v, "/status/phase").into(), created.into()],
        "PersistentVolumeClaim" => {
            let modes: Vec<String> = arr(v, "/status/accessModes")
                .iter()
                .filter_map(Value::as_str)
                .map(|m| match m {
                    "ReadWriteOnce" => "RWO".into(),
                    "ReadOnlyMany" => "ROX".into(),
                    "ReadWriteMany" => "RWX".into(),
                    "ReadWriteOncePod" => "RWOP".into(),
                    other => other.to_string(),
                })
                .collect();
            vec![
                name.into(),
                s(v, "/status/phase").into(),
                s(v, "/spec/volumeName").into(),
                s(v, "/status/capacity/storage").into(),
                modes.join(",").into(),
                s(v, "/spec/storageClassName").into(),
                or_unset(s(v, "/spec/volumeAttributesClassName")).into(),
                created.into(),
                match s(v, "/spec/volumeMode") {
                    "" => "Filesystem",
                    m => m,
                }
                .into(),
            ]
        }
        "ServiceAccount" => vec![name.into(), arr(v, "/secrets").len().into(), created.into()],
        "NetworkPolicy" => {
            let sel = labels_string(v.pointer("/spec/podSelector/matchLabels"));
            vec![
                name.into(),
                if sel.is_empty() {
                    "<none>".to_string()
                } else {
                    sel
                }
                .into(),
                created.into(),
            ]
        }
        "ResourceQuota" => {
            let mut req = Vec::new();
            let mut lim = Vec::new();
            if let Some(hard) = v.pointer("/status/hard").and_then(Value::as_object) {
                for (k, h) in hard {
                    let used = v
                        .pointer(&format!("/status/used/{}", k.replace('/', "~1")))
                        .and_then(Value::as_str)
                        .unwrap_or("0");
                    let item = format!("{k}: {used}/{}", h.as_str().unwrap_or(""));
                    if k.starts_with("limits") {
                        lim.push(item);
                    } else {
                        req.push(item);
                    }
                }
            }
            vec![
                name.into(),
                created.into(),
                req.join(", ").into(),
                lim.join(", ").into(),
            ]
        }
        _ => vec![name.into(), s(v, "/metadata/creationTimestamp").into()],
    }
}

fn or_unset(x: &str) -> String {
    if x.is_empty() {
        "<unset>".into()
    } else {
        x.into()
    }
}

fn node_cells(v: &Value, created: String) -> Vec<Value> {
    let mut status: Vec<String> = Vec::new();
    for c in arr(v, "/status/conditions") {
        if s(c, "/type") == "Ready" {
            status.push(
                if s(c, "/status") == "True" {
                    "Ready"
                } else {
                    "NotReady"
                }
                .into(),
            );
        }
    }
    if status.is_empty() {
        status.push("Unknown".into());
    }
    if v.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled".into());
    }
    let mut roles: Vec<String> = v
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.keys()
                .filter_map(|k| {
                    k.strip_prefix("node-role.kubernetes.io/")
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    let addr = |ty: &str| {
        arr(v, "/status/addresses")
            .iter()
            .find(|a| s(a, "/type") == ty)
            .map_or("<none>".to_string(), |a| s(a, "/address").to_string())
    };
    vec![
        s(v, "/metadata/name").into(),
        status.join(",").into(),
        or_none(roles.join(",")).into(),
        created.into(),
        s(v, "/status/nodeInfo/kubeletVersion").into(),
        addr("InternalIP").into(),
        addr("ExternalIP").into(),
        s(v, "/status/nodeInfo/osImage").into(),
        s(v, "/status/nodeInfo/kernelVersion").into(),
        s(v, "/status/nodeInfo/containerRuntimeVersion").into(),
    ]
}

/// The Ready / Status / Restarts cells follow kubectl's `printPod`.
fn pod_cells(v: &Value, now_ns: i64) -> Vec<Value> {
    let containers = arr(v, "/spec/containers");
    let statuses = arr(v, "/status/containerStatuses");
    let mut reason = match s(v, "/status/reason") {
        "" => s(v, "/status/phase").to_string(),
        r => r.to_string(),
    };
    let mut restarts = 0;
    let mut ready = 0;
    let mut last_restart: Option<i64> = None;
    let mut note_restart = |c: &Value| {
        if let Some(t) = parse_rfc3339(s(c, "/lastState/terminated/finishedAt")) {
            last_restart = Some(last_restart.map_or(t, |x: i64| x.max(t)));
        }
    };

    let init = arr(v, "/spec/initContainers");
    let mut initializing = false;
    for (i, c) in arr(v, "/status/initContainerStatuses").iter().enumerate() {
        restarts += n(c, "/restartCount");
        note_restart(c);
        let terminated = c.pointer("/state/terminated");
        if terminated.is_some_and(|t| n(t, "/exitCode") == 0) {
            continue;
        }
        initializing = true;
        reason = if let Some(t) = terminated {
            match s(t, "/reason") {
                "" if n(t, "/signal") != 0 => format!("Init:Signal:{}", n(t, "/signal")),
                "" => format!("Init:ExitCode:{}", n(t, "/exitCode")),
                r => format!("Init:{r}"),
            }
        } else {
            match s(c, "/state/waiting/reason") {
                "" | "PodInitializing" => format!("Init:{i}/{}", init.len()),
                r => format!("Init:{r}"),
            }
        };
        break;
    }
    if !initializing {
        restarts = 0;
        let mut has_running = false;
        for c in statuses.iter().rev() {
            restarts += n(c, "/restartCount");
            note_restart(c);
            let waiting = s(c, "/state/waiting/reason");
            if !waiting.is_empty() {
                reason = waiting.to_string();
            } else if let Some(t) = c.pointer("/state/terminated") {
                reason = match s(t, "/reason") {
                    "" if n(t, "/signal") != 0 => format!("Signal:{}", n(t, "/signal")),
                    "" => format!("ExitCode:{}", n(t, "/exitCode")),
                    r => r.to_string(),
                };
            } else if c.pointer("/state/running").is_some()
                && c.get("ready").and_then(Value::as_bool) == Some(true)
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = arr(v, "/status/conditions")
                .iter()
                .any(|c| s(c, "/type") == "Ready" && s(c, "/status") == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.into();
        }
    }
    if !s(v, "/metadata/deletionTimestamp").is_empty() {
        reason = if s(v, "/status/reason") == "NodeLost" {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    let restarts_cell = match last_restart {
        Some(t) if restarts > 0 => format!(
            "{restarts} ({} ago)",
            human_duration((now_ns - t) / 1_000_000_000)
        ),
        _ => restarts.to_string(),
    };
    let gates = arr(v, "/spec/readinessGates");
    let gates_cell = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let true_gates = gates
            .iter()
            .filter(|g| {
                arr(v, "/status/conditions")
                    .iter()
                    .any(|c| s(c, "/type") == s(g, "/conditionType") && s(c, "/status") == "True")
            })
            .count();
        format!("{true_gates}/{}", gates.len())
    };
    vec![
        s(v, "/metadata/name").into(),
        format!("{ready}/{}", containers.len()).into(),
        reason.into(),
        restarts_cell.into(),
        age(v, "/metadata/creationTimestamp", now_ns).into(),
        or_none(s(v, "/status/podIP").to_string()).into(),
        or_none(s(v, "/spec/nodeName").to_string()).into(),
        or_none(s(v, "/status/nominatedNodeName").to_string()).into(),
        gates_cell.into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_match_kubectl() {
        for (secs, want) in [
            (-5, "<invalid>"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (150, "2m30s"),
            (600, "10m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60 * 5, "3h5m"),
            (30 * 3600, "30h"),
            (3 * 86400 + 3600, "3d1h"),
            (30 * 86400, "30d"),
            (3 * 365 * 86400 + 86400, "3y1d"),
        ] {
            assert_eq!(human_duration(secs), want, "{secs}");
        }
    }

    #[test]
    fn crash_looping_pod_prints_like_kubectl() {
        let now = parse_rfc3339("2026-01-01T01:00:00Z").unwrap();
        let pod = json!({
            "metadata": {"name": "geo-1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "geo"}], "nodeName": "worker-1"},
            "status": {"phase": "Running", "podIP": "10.0.0.5", "containerStatuses": [{
                "name": "geo", "ready": false, "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137, "finishedAt": "2026-01-01T00:58:00Z"}}
            }]}
        });
        let cells = cells("Pod", &pod, now);
        assert_eq!(
            cells,
            vec![
                json!("geo-1"),
                json!("0/1"),
                json!("CrashLoopBackOff"),
                json!("4 (2m ago)"),
                json!("60m"),
                json!("10.0.0.5"),
                json!("worker-1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        assert_eq!(cells.len(), columns("Pod").len());
    }

    #[test]
    fn every_printer_fills_every_column() {
        let empty = json!({"metadata": {"name": "x"}});
        for kind in [
            "Pod",
            "Deployment",
            "ReplicaSet",
            "StatefulSet",
            "DaemonSet",
            "Service",
            "Endpoints",
            "ConfigMap",
            "Secret",
            "Event",
            "Node",
            "Namespace",
            "PersistentVolumeClaim",
            "ServiceAccount",
            "NetworkPolicy",
            "ResourceQuota",
            "Lease",
        ] {
            assert_eq!(cells(kind, &empty, 0).len(), columns(kind).len(), "{kind}");
        }
    }
}
