//! Pods and the controllers that own them: Deployments, ReplicaSets, StatefulSets, DaemonSets.

use serde_json::Value;

use super::*;

/// The template's containers and images, shown with `-o wide` by every pod controller.
const CONTAINERS: Column = col("Containers", 1, "Names of each container in the template.");
const IMAGES: Column = col(
    "Images",
    1,
    "Images referenced by each container in the template.",
);

pub(super) const POD: Printer = Printer {
    columns: &[
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
    cells: pod_cells,
};

pub(super) const DEPLOYMENT: Printer = Printer {
    columns: &[
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
        CONTAINERS,
        IMAGES,
        col("Selector", 1, "Label selector for pods."),
    ],
    cells: deployment,
};

fn deployment(v: &Value, now_ns: i64) -> Vec<Value> {
    let name = name_of(v);
    let created = created_age(v, now_ns);
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

pub(super) const REPLICA_SET: Printer = Printer {
    columns: &[
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
        CONTAINERS,
        IMAGES,
        col(
            "Selector",
            1,
            "Selector is a label query over pods that should match the replica count.",
        ),
    ],
    cells: replica_set,
};

fn replica_set(v: &Value, now_ns: i64) -> Vec<Value> {
    let name = name_of(v);
    let created = created_age(v, now_ns);
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

pub(super) const STATEFUL_SET: Printer = Printer {
    columns: &[
        NAME,
        col("Ready", 0, "Number of the pod with ready state"),
        AGE,
        CONTAINERS,
        IMAGES,
    ],
    cells: stateful_set,
};

fn stateful_set(v: &Value, now_ns: i64) -> Vec<Value> {
    let name = name_of(v);
    let created = created_age(v, now_ns);
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

pub(super) const DAEMON_SET: Printer = Printer {
    columns: &[
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
        CONTAINERS,
        IMAGES,
        col(
            "Selector",
            1,
            "A label query over pods that are managed by the daemon set.",
        ),
    ],
    cells: daemon_set,
};

fn daemon_set(v: &Value, now_ns: i64) -> Vec<Value> {
    let name = name_of(v);
    let created = created_age(v, now_ns);
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
