//! Real-cluster commands against `collector env up`'s writable API:
//!
//! - `collector deploy APP --dry-run`, applied with the real kubectl to a cluster without the app
//!   (`env up --app APP --bare`), gives the app running as the simulator deploys it itself: the
//!   same workloads, Services and ready endpoints; `collector deploy` again changes nothing.
//! - `collector capture` on a sick cluster: with a node's kubelet stopped (`astro-kubelet-down`),
//!   the apiserver answers 500 for the logs of every pod on that node, as a real apiserver does
//!   when it cannot dial the kubelet. The capture still completes: those logs are listed as gaps
//!   (pod, container, the error) in its summary, and everything else is captured.

use std::collections::BTreeSet;
use std::process::Command;

use e2e::cluster::{differences, state};
use e2e::{binary, live, text};
use serde_json::Value;

#[test]
fn unreadable_logs_are_gaps_and_the_rest_is_captured() {
    let l = live::up("astro-kubelet-down", &[]);
    let pods: Value = serde_json::from_str(&l.ok(&["get", "pods", "-A", "-o", "json"])).unwrap();
    let on_node = |want: bool| -> BTreeSet<String> {
        pods["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| (p["spec"]["nodeName"] == "kind-worker2") == want)
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let (sick, healthy) = (on_node(true), on_node(false));
    assert!(
        !sick.is_empty() && !healthy.is_empty(),
        "{sick:?} {healthy:?}"
    );
    // kubectl meets the same answer.
    let pod = sick.iter().next().unwrap();
    let ns = pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["metadata"]["name"] == pod.as_str())
        .unwrap()["metadata"]["namespace"]
        .as_str()
        .unwrap()
        .to_string();
    let err = l.fails(&["-n", &ns, "logs", pod, "--all-containers"]);
    assert!(
        err.contains("10250") && err.contains("connection refused"),
        "{err}"
    );

    let out_dir = l.tmp.path().join("captured");
    let out = Command::new(binary("collector"))
        .args(["capture", "--json", "--since", "5m", "--until", "now"])
        .arg("--kubeconfig")
        .arg(&l.kubeconfig)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("collector runs");
    assert!(out.status.success(), "{}", text(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let gaps = summary["log_gaps"].as_array().expect("log_gaps");
    let gap_pods: BTreeSet<String> = gaps
        .iter()
        .map(|g| g["pod"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        gap_pods, sick,
        "every pod on the stopped node, and only those: {gaps:?}"
    );
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
    assert!(out_dir.join("manifest.json").exists());
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
    assert!(logged.is_disjoint(&sick), "{logged:?}");
    assert!(
        !logged.is_empty() && logged.is_subset(&healthy),
        "{logged:?}"
    );
}

/// Each Service's ready endpoint addresses (count), and each workload's ready replicas, by name.
fn topology(l: &live::Live, ns: &str) -> (Vec<(String, usize)>, Vec<(String, i64)>) {
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
    (services, ready)
}

#[test]
fn deployed_manifests_run_the_app_as_the_simulator_deploys_it() {
    let app = "hotel-reservation";
    let ns = live::NS;
    let reference = {
        let l = live::up_app(app, &[]);
        topology(&l, ns)
    };
    assert!(reference.0.iter().all(|(_, n)| *n > 0), "{reference:?}");

    let l = live::up_app(app, &["--bare"]);
    assert!(
        l.fails(&["get", "namespace", ns]).contains("NotFound"),
        "a bare cluster has no app"
    );
    let out = Command::new(binary("collector"))
        .args(["deploy", app, "--dry-run"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let manifests = l.tmp.path().join("manifests.json");
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
