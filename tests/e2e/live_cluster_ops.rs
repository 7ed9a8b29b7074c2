//! The real `kubectl` on cluster operations in `collector env up`: EndpointSlices kept by the
//! controller (what `kubectl describe svc` reads), cordon / drain / uncordon of a node, and the
//! slices carried into a snapshot dataset and served again by `collector replay`.

use e2e::live::{self, Live, NS, snapshot_replay, squeezed};
use e2e::text;
use serde_json::Value;

/// `kubectl get pods -o wide` in the app's namespace: (name, status, node) per pod.
fn pods_wide(l: &Live) -> Vec<(String, String, String)> {
    l.ok(&["-n", NS, "get", "pods", "-o", "wide", "--no-headers"])
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split_whitespace().collect();
            // NAME READY STATUS RESTARTS [AGE-suffix] AGE IP NODE ...: the node is the
            // column after the IP, found by the pod-IP prefix since RESTARTS may span cells.
            let ip = cells.iter().position(|c| c.starts_with("10.244."))?;
            Some((
                cells.first()?.to_string(),
                cells.get(2)?.to_string(),
                cells.get(ip + 1)?.to_string(),
            ))
        })
        .collect()
}

/// The ReplicaSet part of a pod name (`geo-5d8f7c9b4`), which the replacement shares.
fn owner_prefix(pod: &str) -> &str {
    pod.rsplit_once('-').map_or(pod, |(p, _)| p)
}

fn slices_of(l: &Live, service: &str) -> Vec<Value> {
    let out = l.ok(&[
        "-n",
        NS,
        "get",
        "endpointslices",
        "-l",
        &format!("kubernetes.io/service-name={service}"),
        "-o",
        "json",
    ]);
    let v: Value = serde_json::from_str(&out).expect("a JSON list");
    v["items"].as_array().cloned().unwrap_or_default()
}

/// kubectl's list of the search Service's EndpointSlices, by name.
const SEARCH_SLICES: [&str; 8] = [
    "-n",
    NS,
    "get",
    "endpointslices",
    "-l",
    "kubernetes.io/service-name=search",
    "-o",
    "name",
];

#[test]
fn endpoint_slices_follow_the_service_and_describe_shows_them() {
    // Without noise: a noise pod kill would replace the search pod, and its address in the
    // slice, between the slice read and describe.
    let l = live::up("hotel-geo-target-port", &["--no-noise"]);
    let slices = slices_of(&l, "search");
    assert_eq!(slices.len(), 1, "{slices:?}");
    let slice = &slices[0];
    let name = slice["metadata"]["name"].as_str().unwrap_or_default();
    // `<service>-` and five characters of the generator's alphabet.
    let suffix = name
        .strip_prefix("search-")
        .expect("named after the service");
    assert_eq!(suffix.len(), 5, "{name}");
    assert!(
        suffix
            .bytes()
            .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b))
    );
    assert_eq!(slice["metadata"]["generateName"], "search-");
    assert_eq!(
        slice["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );
    let svc: Value = serde_json::from_str(&l.ok(&["-n", NS, "get", "svc", "search", "-o", "json"]))
        .expect("the Service");
    let owner = &slice["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "Service");
    assert_eq!(owner["uid"], svc["metadata"]["uid"]);
    assert_eq!(owner["controller"], true);
    assert_eq!(slice["addressType"], "IPv4");
    let endpoints = slice["endpoints"].as_array().cloned().unwrap_or_default();
    assert!(!endpoints.is_empty(), "{slice}");
    let ep = &endpoints[0];
    assert_eq!(ep["conditions"]["ready"], true, "{ep}");
    assert_eq!(ep["conditions"]["serving"], true);
    assert_eq!(ep["conditions"]["terminating"], false);
    assert_eq!(ep["targetRef"]["kind"], "Pod");
    assert!(
        ep["nodeName"]
            .as_str()
            .is_some_and(|n| n.starts_with("kind-"))
    );
    let port = slice["ports"][0]["port"].as_i64().expect("a port");
    assert_eq!(slice["ports"][0]["protocol"], "TCP");

    // describe reads the slice (not the Endpoints object) for its Endpoints line.
    let ip = ep["addresses"][0].as_str().expect("an address");
    let described = squeezed(&l.ok(&["-n", NS, "describe", "svc", "search"]));
    assert!(
        described.contains(&format!("Endpoints: {ip}:{port}")),
        "{described}"
    );
    // The table printer's columns.
    let table = l.ok(&["-n", NS, "get", "endpointslices", name]);
    assert!(
        squeezed(&table).contains(&format!("{name} IPv4 {port} {ip}")),
        "{table}"
    );

    // Scaling the Deployment adds endpoints to the same slice, in a new generation.
    let generation = slice["metadata"]["generation"]
        .as_i64()
        .expect("a generation");
    l.ok(&["-n", NS, "scale", "deploy/search", "--replicas=2"]);
    l.until(
        &[
            "-n",
            NS,
            "get",
            "endpointslice",
            name,
            "-o",
            "jsonpath={.endpoints[*].addresses[0]}",
        ],
        "two addresses in the slice",
        |o| o.split_whitespace().count() == 2,
    );
    let gen_after = l.ok(&[
        "-n",
        NS,
        "get",
        "endpointslice",
        name,
        "-o",
        "jsonpath={.metadata.generation}",
    ]);
    assert!(
        gen_after.parse::<i64>().is_ok_and(|g| g > generation),
        "{gen_after}"
    );

    // A deleted slice is made again, under a new name.
    l.ok(&["-n", NS, "delete", "endpointslice", name]);
    let again = l.until(&SEARCH_SLICES, "a new slice", |o| {
        o.lines().count() == 1 && !o.contains(name)
    });
    assert!(
        again.contains("endpointslice.discovery.k8s.io/search-"),
        "{again}"
    );

    // Deleting the Service takes its slices with it.
    l.ok(&["-n", NS, "delete", "svc", "search"]);
    l.until(&SEARCH_SLICES, "the slice gone with its Service", |o| {
        o.trim().is_empty()
    });
}

#[test]
fn cordon_drain_and_uncordon_move_pods_off_a_node() {
    // Without noise: the pods on the node are named before the drain, and only the drain may
    // replace them.
    let l = live::up("hotel-geo-target-port", &["--no-noise"]);
    let node = "kind-worker";
    let before = pods_wide(&l);
    let victims: Vec<String> = before
        .iter()
        .filter(|(_, _, n)| n == node)
        .map(|(p, _, _)| p.clone())
        .collect();
    assert!(!victims.is_empty(), "no pod on {node}: {before:?}");

    assert_eq!(
        l.ok(&["cordon", node]).trim(),
        format!("node/{node} cordoned")
    );
    assert_eq!(
        l.ok(&["get", "node", node, "-o", "jsonpath={.spec.unschedulable}"]),
        "true"
    );
    // The node lifecycle controller mirrors the cordon as a taint.
    l.until(
        &["get", "node", node, "-o", "jsonpath={.spec.taints[*].key}"],
        "the unschedulable taint",
        |o| o.contains("node.kubernetes.io/unschedulable"),
    );
    let status = l.ok(&["get", "node", node]);
    assert!(status.contains("SchedulingDisabled"), "{status}");

    let drained = l.kubectl(&[
        "drain",
        node,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=120s",
    ]);
    let out = text(&drained);
    assert!(drained.status.success(), "{out}");
    assert!(out.contains(&format!("node/{node} drained")), "{out}");
    assert!(out.contains("evicting pod"), "{out}");

    // Every evicted pod is replaced on another node, and nothing lands on the cordoned one.
    let after = l.until(
        &["-n", NS, "get", "pods", "-o", "wide", "--no-headers"],
        "replacements running elsewhere",
        |_| {
            let now = pods_wide(&l);
            !now.iter().any(|(_, _, n)| n == node)
                && victims.iter().all(|v| {
                    now.iter().any(|(p, s, _)| {
                        p != v && owner_prefix(p) == owner_prefix(v) && s == "Running"
                    })
                })
        },
    );
    // (`kind-worker` is a prefix of the other workers' names: compare whole cells.)
    assert!(
        after
            .lines()
            .all(|line| !line.split_whitespace().any(|cell| cell == node)),
        "{after}"
    );

    assert_eq!(
        l.ok(&["uncordon", node]).trim(),
        format!("node/{node} uncordoned")
    );
    l.until(
        &["get", "node", node, "-o", "jsonpath={.spec.taints[*].key}"],
        "the unschedulable taint removed",
        |o| !o.contains("node.kubernetes.io/unschedulable"),
    );
    assert_eq!(
        l.ok(&["get", "node", node, "-o", "jsonpath={.spec.unschedulable}"]),
        ""
    );
}

#[test]
fn snapshot_datasets_carry_slices_that_replay_serves() {
    let r = snapshot_replay("hotel-geo-target-port", &["--duration", "2m"]);
    let kubectl = |args: &[&str]| r.kubectl.ok(args);
    let ip = kubectl(&[
        "-n",
        NS,
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=search",
        "-o",
        "jsonpath={.items[0].endpoints[0].addresses[0]}",
    ]);
    assert!(ip.starts_with("10.244."), "{ip}");
    let described = squeezed(&kubectl(&["-n", NS, "describe", "svc", "search"]));
    assert!(
        described.contains(&format!("Endpoints: {ip}:")),
        "{described}"
    );
}
