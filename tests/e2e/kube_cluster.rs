//! Real-cluster commands against `collector env up`'s writable API:
//!
//! - `collector deploy APP --dry-run`, applied with the real kubectl to a cluster without the app
//!   (`env up --app APP --bare`), gives the app running as the simulator deploys it itself: the
//!   same workloads, Services and ready endpoints, the same call graph in the traces; `collector
//!   deploy` again changes nothing.
//! - `collector capture` on a sick cluster: with a node's kubelet stopped (`astro-kubelet-down`),
//!   the apiserver answers 500 for the logs of every pod on that node, as a real apiserver does
//!   when it cannot dial the kubelet. The capture still completes: those logs are listed as gaps
//!   (pod, container, the error) in its summary, and everything else is captured.

use std::collections::BTreeSet;
use std::process::Command;

use e2e::cluster::{differences, state};
use e2e::{binary, live, text};
use serde_json::Value;

/// The pods of the cluster: (namespace, name, node).
fn pods(l: &live::Live) -> Vec<(String, String, String)> {
    let v: Value = serde_json::from_str(&l.ok(&["get", "pods", "-A", "-o", "json"])).unwrap();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (
                s(&p["metadata"]["namespace"]),
                s(&p["metadata"]["name"]),
                s(&p["spec"]["nodeName"]),
            )
        })
        .collect()
}

#[test]
fn unreadable_logs_are_gaps_and_the_rest_is_captured() {
    const SICK: &str = "kind-worker2";
    // With the problem's noise: the apps' logs below come from it. A noise pod kill can replace a
    // pod between kubectl listing it and asking for its logs, so the pod is looked up again then.
    let l = live::up_real_speed("astro-kubelet-down", &[]);
    let at_start = pods(&l);
    assert!(
        at_start.iter().any(|p| p.2 == SICK),
        "pods on the stopped node: {at_start:?}"
    );
    // kubectl meets the apiserver's answer.
    let err = (0..5)
        .find_map(|_| {
            let now = pods(&l);
            let (ns, pod, _) = now.iter().find(|p| p.2 == SICK)?;
            let err = l.fails(&["-n", ns, "logs", pod, "--all-containers"]);
            (!err.contains("NotFound") && !err.contains("not found")).then_some(err)
        })
        .expect("a pod on the stopped node that stays long enough to ask for its logs");
    assert!(
        err.contains("10250") && err.contains("connection refused"),
        "{err}"
    );

    // The apps log once the stopped node's pods fail their callers: wait for lines on a
    // healthy node, then capture a window reaching a little past now (captured live until then).
    // A noise pod kill between the two can leave no pod with lines to capture: then (and only
    // then, a pod having been replaced) the capture is taken again.
    let healthy = |ps: &[(String, String, String)]| -> BTreeSet<String> {
        ps.iter()
            .filter(|p| p.2 != SICK)
            .map(|p| p.1.clone())
            .collect()
    };
    let mut attempt = 0;
    let (out, out_dir) = loop {
        attempt += 1;
        l.until(
            &["-n", "astronomy-shop", "logs", "deploy/frontend"],
            "frontend logs",
            |o| !o.trim().is_empty(),
        );
        let before = healthy(&pods(&l));
        let until = chrono::Utc::now() + chrono::Duration::seconds(3);
        let out_dir = l.tmp.path().join(format!("captured-{attempt}"));
        let out = Command::new(binary("collector"))
            .args(["capture", "--json", "--since", "2m", "--until"])
            .arg(until.to_rfc3339())
            .arg("--kubeconfig")
            .arg(&l.kubeconfig)
            .arg("--out")
            .arg(&out_dir)
            .output()
            .expect("collector runs");
        assert!(out.status.success(), "{}", text(&out));
        let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
        if summary["rows"]["logs"].as_u64().unwrap_or(0) > 0 {
            break (out, out_dir);
        }
        assert!(
            attempt < 3 && healthy(&pods(&l)) != before,
            "no log lines captured, and no pod on a healthy node was replaced: {summary}"
        );
    };
    let at_end = pods(&l);
    let on = |node_sick: bool| -> BTreeSet<String> {
        at_start
            .iter()
            .chain(&at_end)
            .filter(|p| (p.2 == SICK) == node_sick)
            .map(|p| p.1.clone())
            .collect()
    };
    let (sick, healthy) = (on(true), on(false));
    // The pods on the stopped node through the whole capture.
    let stayed: BTreeSet<String> = at_end
        .iter()
        .filter(|p| p.2 == SICK && at_start.contains(p))
        .map(|p| p.1.clone())
        .collect();
    assert!(!stayed.is_empty());

    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let gaps = summary["log_gaps"].as_array().expect("log_gaps");
    let gap_pods: BTreeSet<String> = gaps
        .iter()
        .map(|g| g["pod"].as_str().unwrap().to_string())
        .collect();
    assert!(
        stayed.is_subset(&gap_pods),
        "every pod on the stopped node: {gaps:?}"
    );
    assert!(gap_pods.is_subset(&sick), "only those: {gaps:?}");
    for g in gaps {
        assert!(
            g["container"].as_str().is_some_and(|c| !c.is_empty()),
            "{g}"
        );
        let e = g["error"].as_str().unwrap();
        assert!(
            e.starts_with("500") && e.contains("connection refused"),
            "{g}"
        );
    }
    // The rest was captured: objects, and the logs of pods on healthy nodes.
    assert!(
        summary["rows"]["logs"].as_u64().unwrap_or(0) > 0,
        "{summary}"
    );
    assert!(
        summary["rows"]["objects"].as_u64().unwrap_or(0) > 0,
        "{summary}"
    );
    let dataset = datasets::Dataset::open(&out_dir).expect("a complete dataset");
    let logged: BTreeSet<String> = dataset
        .read_rows(schemas::tables::Table::Logs)
        .unwrap()
        .into_iter()
        .filter_map(|r| match r {
            schemas::tables::Row::Log(l) => Some(l.pod),
            _ => None,
        })
        .collect();
    assert!(logged.is_disjoint(&gap_pods), "{logged:?}");
    assert!(
        !logged.is_empty() && logged.is_subset(&healthy),
        "{logged:?}"
    );
    l.assert_no_panic();
}

/// Each Service's ready endpoint addresses (count), and each workload's ready replicas, by name.
#[derive(Debug, PartialEq)]
struct Topology {
    endpoints: Vec<(String, usize)>,
    ready: Vec<(String, i64)>,
}

/// The services that report traces and the calls between them (parent, child), from the
/// environment's Jaeger.
fn call_graph(l: &live::Live) -> (Vec<String>, BTreeSet<(String, String)>) {
    let jaeger = l.endpoints["jaeger"]
        .as_str()
        .unwrap()
        .trim_end_matches('/');
    let services: Value = e2e::http_get(format!("{jaeger}/api/services"))
        .json()
        .unwrap();
    let mut services: Vec<String> = services["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    services.sort();
    let end_ms = chrono::Utc::now().timestamp_millis() + 3_600_000;
    let deps: Value = e2e::http_get(format!(
        "{jaeger}/api/dependencies?endTs={end_ms}&lookback=86400000"
    ))
    .json()
    .unwrap();
    let edges = deps["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let s = |k: &str| d[k].as_str().unwrap().to_string();
            (s("parent"), s("child"))
        })
        .collect();
    (services, edges)
}

fn topology(l: &live::Live, ns: &str) -> Topology {
    let endpoints: Value =
        serde_json::from_str(&l.ok(&["-n", ns, "get", "endpoints", "-o", "json"])).unwrap();
    let mut services: Vec<(String, usize)> = endpoints["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let ready = e["subsets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| s["addresses"].as_array().map_or(0, Vec::len))
                .sum();
            (e["metadata"]["name"].as_str().unwrap().to_string(), ready)
        })
        .collect();
    services.sort();
    let workloads: Value =
        serde_json::from_str(&l.ok(&["-n", ns, "get", "deployments,statefulsets", "-o", "json"]))
            .unwrap();
    let mut ready: Vec<(String, i64)> = workloads["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                format!(
                    "{}/{}",
                    w["kind"].as_str().unwrap(),
                    w["metadata"]["name"].as_str().unwrap()
                ),
                w["status"]["readyReplicas"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    ready.sort();
    Topology {
        endpoints: services,
        ready,
    }
}

#[test]
fn deployed_manifests_run_the_app_as_the_simulator_deploys_it() {
    let app = "hotel-reservation";
    let ns = live::NS;
    // The built-in app stays up beside the deployed one: a rare call (a user logging in) may
    // show in either's traces only after a few simulated minutes, so the two graphs are compared
    // as both grow.
    let built_in = live::up_app(app, &[]);
    let reference = topology(&built_in, ns);
    assert!(
        reference.endpoints.iter().all(|(_, n)| *n > 0),
        "{reference:?}"
    );

    let l = live::up_app(app, &["--bare"]);
    assert!(
        l.fails(&["get", "namespace", ns]).contains("NotFound"),
        "a bare cluster has no app"
    );
    assert_eq!(call_graph(&l).0, Vec::<String>::new(), "nor traces");
    let out = Command::new(binary("collector"))
        .args(["deploy", app, "--dry-run"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let manifests = l.tmp.path().join("manifests.yaml");
    std::fs::write(&manifests, &out.stdout).unwrap();
    l.ok(&["apply", "-f", manifests.to_str().unwrap()]);
    // The simulated cluster starts the pods in simulated time: poll until every workload is
    // ready as in the reference (or a minute of wall time passes).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let got = loop {
        let got = topology(&l, ns);
        if got == reference || std::time::Instant::now() > deadline {
            break got;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    assert_eq!(got, reference, "the deployed app runs as the built-in one");
    // Its requests flow as the built-in app's: the same traced services and calls between them
    // (a rare call may take a few simulated minutes to appear).
    let (calls, reference_calls) = loop {
        let (calls, reference_calls) = (call_graph(&l), call_graph(&built_in));
        if calls == reference_calls || std::time::Instant::now() > deadline {
            break (calls, reference_calls);
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    assert!(reference_calls.1.len() >= 5, "{reference_calls:?}");
    assert_eq!(calls, reference_calls, "the same call graph in the traces");
    drop(built_in);

    // Deploying again through kube-rs finds every object and changes nothing.
    let before = state(&l.kubeconfig, ns);
    let out = Command::new(binary("collector"))
        .args(["deploy", app, "--json", "--kubeconfig"])
        .arg(&l.kubeconfig)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() > 10, "{lines:?}");
    assert!(
        lines.iter().all(|l| l["outcome"] == "configured"),
        "{lines:?}"
    );
    let left = differences(&before, &state(&l.kubeconfig, ns));
    assert!(left.is_empty(), "{}", left.join("\n"));
}

#[test]
fn a_snapshot_on_a_cluster_captures_the_fault_and_leaves_the_cluster_as_it_was() {
    let l = live::up_app("hotel-reservation", &[]);
    let before = state(&l.kubeconfig, live::NS);
    let out_dir = l.tmp.path().join("snap");
    let out = e2e::cluster::snapshot(
        &l.kubeconfig,
        "hotel-geo-target-port",
        ("3s", "6s"),
        &l.tmp.path().join("journal"),
        &out_dir,
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["kept"], serde_json::json!([]), "{report}");
    // Reverted: the cluster is as before, the journal empty.
    let left = differences(&before, &state(&l.kubeconfig, live::NS));
    assert!(left.is_empty(), "{}", left.join("\n"));
    assert_eq!(
        std::fs::read_dir(l.tmp.path().join("journal"))
            .unwrap()
            .count(),
        0
    );
    // The dataset holds geo's Service as it was and as the fault made it.
    let dataset = datasets::Dataset::open(&out_dir.join("dataset")).expect("a complete dataset");
    let ports: BTreeSet<String> = dataset
        .read_rows(schemas::tables::Table::Objects)
        .unwrap()
        .into_iter()
        .filter_map(|r| match r {
            schemas::tables::Row::Object(o) if o.kind == "Service" && o.name == "geo" => {
                let v: Value = serde_json::from_str(&o.object).ok()?;
                Some(v["spec"]["ports"][0]["targetPort"].to_string())
            }
            _ => None,
        })
        .collect();
    assert!(ports.contains("8083") && ports.len() >= 2, "{ports:?}");
    let gt: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("ground_truth.json")).unwrap()).unwrap();
    assert!(gt.to_string().contains("geo"), "{gt}");
    let inj: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("injections.json")).unwrap()).unwrap();
    assert!(
        inj["injections"][0]["changes"]
            .to_string()
            .contains("targetPort"),
        "{inj}"
    );
    l.assert_no_panic();
}
