//! Services, Endpoints, EndpointSlices and NetworkPolicies.

use serde_json::Value;

use super::*;

pub(super) const SERVICE: Printer = Printer {
    columns: &[
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
    cells: service,
};

fn service(v: &Value, now_ns: i64) -> Vec<Value> {
    let name = name_of(v);
    let created = created_age(v, now_ns);
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

pub(super) const ENDPOINTS: Printer = Printer {
    columns: &[NAME, col("Endpoints", 0, "Endpoints of the service"), AGE],
    cells: endpoints,
};

fn endpoints(v: &Value, now_ns: i64) -> Vec<Value> {
    let name = name_of(v);
    let created = created_age(v, now_ns);
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

pub(super) const ENDPOINT_SLICE: Printer = Printer {
    columns: &[
        NAME,
        col(
            "AddressType",
            0,
            "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type.",
        ),
        col(
            "Ports",
            0,
            "ports specifies the list of network ports exposed by each endpoint in this slice.",
        ),
        col(
            "Endpoints",
            0,
            "endpoints is a list of unique endpoints in this slice.",
        ),
        AGE,
    ],
    cells: endpoint_slice,
};

/// The first three items and a count of the rest, `<unset>` when there are none (the printer's
/// `listWithMoreString`).
fn first_three(items: Vec<String>) -> String {
    match items.len() {
        0 => "<unset>".into(),
        1..=3 => items.join(","),
        n => format!("{} + {} more...", items[..3].join(","), n - 3),
    }
}

fn endpoint_slice(v: &Value, now_ns: i64) -> Vec<Value> {
    let ports: Vec<String> = arr(v, "/ports")
        .iter()
        .map(
            |p| match (p.get("port").and_then(Value::as_i64), s(p, "/name")) {
                (Some(port), _) => port.to_string(),
                (None, "") => "*".into(),
                (None, name) => name.into(),
            },
        )
        .collect();
    let addresses: Vec<String> = arr(v, "/endpoints")
        .iter()
        .flat_map(|e| arr(e, "/addresses"))
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    vec![
        name_of(v).into(),
        s(v, "/addressType").into(),
        first_three(ports).into(),
        first_three(addresses).into(),
        created_age(v, now_ns).into(),
    ]
}

pub(super) const NETWORK_POLICY: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Pod-Selector",
            0,
            "Selects the pods to which this NetworkPolicy object applies.",
        ),
        AGE,
    ],
    cells: network_policy,
};

fn network_policy(v: &Value, now_ns: i64) -> Vec<Value> {
    let name = name_of(v);
    let created = created_age(v, now_ns);
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
