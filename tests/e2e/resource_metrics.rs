//! `kubectl top` (the resource metrics API, `metrics.k8s.io/v1beta1`) and the kubelet's Summary
//! API through the node proxy, read by the real kubectl from a live environment and from a replay
//! started without any time flag: what a user sees, and that it agrees with the cAdvisor series
//! the same replay's Prometheus API serves.

use std::collections::BTreeMap;

use e2e::live::{Kubectl, NS, snapshot_replay, up};
use serde_json::Value;

/// The rows of a kubectl table, split on whitespace, header first.
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// `kubectl top nodes` as node → (CPU millicores, CPU %, memory Mi); `<unknown>` as None.
fn top_nodes(k: &Kubectl) -> BTreeMap<String, Option<(i64, i64, i64)>> {
    let out = k.ok(&["top", "nodes"]);
    let table = rows(&out);
    assert_eq!(
        table[0],
        ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"],
        "{out}"
    );
    let number = |s: &str, unit: &str| s.strip_suffix(unit).and_then(|n| n.parse().ok());
    table[1..]
        .iter()
        .map(|r| {
            let usage = (|| {
                Some((
                    number(&r[1], "m")?,
                    number(&r[2], "%")?,
                    number(&r[3], "Mi")?,
                ))
            })();
            (r[0].clone(), usage)
        })
        .collect()
}

#[test]
fn kubectl_top_in_a_live_environment_shows_the_saturated_node() {
    // Without noise: a noise pod kill would replace a pod between `kubectl top pods` and the
    // list of running pods it is compared with.
    let l = up("hotel-node-cpu-stress", &["--no-noise"]);
    let k = l.client();
    // The stressors take all four cores of kind-worker; the other nodes have room.
    let nodes = top_nodes(&k);
    let names = l.ok(&["get", "nodes", "-o", "name"]);
    assert_eq!(nodes.len(), names.lines().count(), "{nodes:?}");
    let (cpu, percent, memory) = nodes["kind-worker"].expect("kind-worker has metrics");
    assert_eq!((cpu, percent), (4000, 100), "{nodes:?}");
    assert!(memory > 0);
    for (node, usage) in &nodes {
        let (_, percent, _) = usage.unwrap_or_else(|| panic!("{node} has no metrics"));
        if node != "kind-worker" {
            assert!(percent < 60, "{node} is not the saturated node: {nodes:?}");
        }
    }

    // Pods: every running pod of the app has a row, in millicores and mebibytes.
    let pods = l.ok(&["top", "pods", "-n", NS]);
    let table = rows(&pods);
    assert_eq!(table[0], ["NAME", "CPU(cores)", "MEMORY(bytes)"], "{pods}");
    let running = l.ok(&[
        "get",
        "pods",
        "-n",
        NS,
        "--field-selector=status.phase=Running",
        "-o",
        "name",
    ]);
    assert_eq!(
        table.len() - 1,
        running.lines().count(),
        "{pods}\n{running}"
    );
    for r in &table[1..] {
        assert!(r[1].ends_with('m') && r[2].ends_with("Mi"), "{r:?}");
    }

    // Containers across namespaces, sorted by memory, largest first.
    let containers = l.ok(&["top", "pods", "-A", "--containers", "--sort-by=memory"]);
    let table = rows(&containers);
    assert_eq!(
        table[0],
        ["NAMESPACE", "POD", "NAME", "CPU(cores)", "MEMORY(bytes)"]
    );
    let memory: Vec<i64> = table[1..]
        .iter()
        .map(|r| r[4].trim_end_matches("Mi").parse().expect("Mi"))
        .collect();
    assert!(memory.windows(2).all(|w| w[0] >= w[1]), "{containers}");

    // A label selector narrows the list; an unknown pod is NotFound as metrics-server says it.
    let frontend = l.ok(&["top", "pods", "-n", NS, "-l", "io.kompose.service=frontend"]);
    let table = rows(&frontend);
    assert_eq!(table.len(), 2, "{frontend}");
    assert!(table[1][0].starts_with("frontend-"), "{frontend}");
    let missing = l.fails(&["top", "pod", "nope", "-n", NS]);
    assert!(
        missing.contains(r#"podmetrics.metrics.k8s.io "hotel-reservation/nope" not found"#),
        "{missing}"
    );
}

#[test]
fn a_stopped_kubelet_has_no_metrics_and_its_proxy_is_refused() {
    let l = up("astro-kubelet-down", &[]);
    let nodes = top_nodes(&l.client());
    assert_eq!(nodes["kind-worker2"], None, "{nodes:?}");
    assert!(nodes["kind-worker"].is_some(), "{nodes:?}");

    // The kubelet's Summary API through the apiserver's node proxy.
    let refused = l.fails(&[
        "get",
        "--raw",
        "/api/v1/nodes/kind-worker2/proxy/stats/summary",
    ]);
    assert!(
        refused.contains("error trying to reach service") && refused.contains("connection refused"),
        "{refused}"
    );
    let summary = l.ok(&[
        "get",
        "--raw",
        "/api/v1/nodes/kind-worker/proxy/stats/summary",
    ]);
    let summary: Value = serde_json::from_str(&summary).expect("Summary JSON");
    assert_eq!(summary["node"]["nodeName"], "kind-worker");
    assert!(summary["node"]["cpu"]["usageNanoCores"].as_i64() > Some(0));
    let pods = summary["pods"].as_array().expect("pods");
    assert!(!pods.is_empty());
    assert!(
        pods.iter()
            .all(|p| p["containers"][0]["memory"]["workingSetBytes"].as_i64() > Some(0))
    );

    // Prometheus sees the same: the node's kubelet target is down, the others are up.
    let prometheus = l.endpoints["prometheus"].as_str().expect("prometheus URL");
    let answer: Value = e2e::http_get(format!(
        "{prometheus}/api/v1/query?query=up%7Bjob%3D%22kubelet%22%7D"
    ))
    .json()
    .expect("Prometheus JSON");
    let up: BTreeMap<String, String> = answer["data"]["result"]
        .as_array()
        .expect("a vector")
        .iter()
        .map(|s| {
            (
                s["metric"]["node"].as_str().unwrap_or_default().to_string(),
                s["value"][1].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        up.get("kind-worker2").map(String::as_str),
        Some("0"),
        "{up:?}"
    );
    assert_eq!(
        up.get("kind-worker").map(String::as_str),
        Some("1"),
        "{up:?}"
    );
}

/// An instant query to a replay's Prometheus API: (labels, value) per series.
fn query(prometheus: &str, promql: &str) -> Vec<(Value, f64)> {
    let url =
        reqwest::Url::parse_with_params(&format!("{prometheus}/api/v1/query"), [("query", promql)])
            .expect("a URL");
    let answer: Value = e2e::http_get(url).json().expect("Prometheus JSON");
    answer["data"]["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{promql}: {answer}"))
        .iter()
        .map(|s| {
            let v = s["value"][1].as_str().and_then(|v| v.parse().ok());
            (s["metric"].clone(), v.expect("a number"))
        })
        .collect()
}

#[test]
fn kubectl_top_on_a_replay_agrees_with_the_cadvisor_series() {
    // No time flag: the replay looks live.
    let r = snapshot_replay("hotel-geo-target-port", &["--duration", "2m"]);
    let k = &r.kubectl;
    let prometheus = r.replay.url("prometheus");

    // Memory: the newest working set, in whole pages, printed in Mi (rounded down).
    let top = k.ok(&["top", "pods", "-n", NS, "--containers"]);
    let table = rows(&top);
    assert!(table.len() > 5, "{top}");
    let series = |metric: &str| -> BTreeMap<(String, String), f64> {
        query(&prometheus, metric)
            .into_iter()
            .map(|(l, v)| {
                let s = |k: &str| l[k].as_str().unwrap_or_default().to_string();
                ((s("pod"), s("container")), v)
            })
            .collect()
    };
    let memory = series(&format!(
        "container_memory_working_set_bytes{{namespace=\"{NS}\",container!=\"\"}}"
    ));
    // CPU: the rate between the two newest samples, printed in millicores (rounded up).
    let cpu = series(&format!(
        "irate(container_cpu_usage_seconds_total{{namespace=\"{NS}\",container!=\"\"}}[2m])"
    ));
    for r in &table[1..] {
        let key = (r[0].clone(), r[1].clone());
        let bytes = memory[&key] as i64;
        let mi = (bytes - bytes % 4096) / (1024 * 1024);
        assert_eq!(r[3], format!("{mi}Mi"), "{key:?} in\n{top}");
        let milli = (cpu[&key] * 1000.0 - 1e-6).ceil() as i64;
        assert_eq!(r[2], format!("{milli}m"), "{key:?} in\n{top}");
    }

    // The metrics are stamped at the real now, as the rest of the replay's answers are.
    let list: Value = serde_json::from_str(&k.ok(&[
        "get",
        "--raw",
        &format!("/apis/metrics.k8s.io/v1beta1/namespaces/{NS}/pods"),
    ]))
    .expect("PodMetricsList JSON");
    assert_eq!(list["kind"], "PodMetricsList");
    let stamp = list["items"][0]["timestamp"].as_str().expect("a timestamp");
    let stamp = chrono::DateTime::parse_from_rfc3339(stamp).expect("RFC 3339");
    let age = chrono::Utc::now().signed_duration_since(stamp);
    assert!(
        age.num_seconds() >= 0 && age.num_seconds() < 120,
        "stamped {age} ago"
    );
    assert_eq!(list["items"][0]["window"], "15s");
}
