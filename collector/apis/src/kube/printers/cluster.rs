//! Nodes, Namespaces and Events.

use serde_json::Value;

use super::*;

pub(super) const NODE: Printer = Printer {
    columns: &[
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
    cells: node_cells,
};

pub(super) const NAMESPACE: Printer = Printer {
    columns: &[NAME, col("Status", 0, "The status of the namespace"), AGE],
    cells: namespace,
};

fn namespace(v: &Value, now_ns: i64) -> Vec<Value> {
    let name = name_of(v);
    let created = created_age(v, now_ns);
    vec![name.into(), s(v, "/status/phase").into(), created.into()]
}

pub(super) const EVENT: Printer = Printer {
    columns: &[
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
    cells: event,
};

fn event(v: &Value, now_ns: i64) -> Vec<Value> {
    let name = name_of(v);
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

fn node_cells(v: &Value, now_ns: i64) -> Vec<Value> {
    let created = created_age(v, now_ns);
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
