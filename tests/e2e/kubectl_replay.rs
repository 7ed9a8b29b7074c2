//! The real `kubectl` against `collector replay` of a recorded cluster.

use std::path::PathBuf;
use std::process::{Command, Output};

use e2e::fixture::{NS, ReplayProcess, write_cluster};
use e2e::text;

/// A running `collector replay` of the recorded cluster with the kubeconfig it wrote.
struct Replay {
    _process: ReplayProcess,
    kubeconfig: PathBuf,
    cache: PathBuf,
    _tmp: tempfile::TempDir,
}

fn start(extra: &[&str]) -> Replay {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    write_cluster(&dir);
    let kubeconfig = tmp.path().join("kubeconfig");
    let mut args = vec!["--write-kubeconfig", kubeconfig.to_str().unwrap()];
    args.extend_from_slice(extra);
    let process = ReplayProcess::start(&dir, &args);
    assert!(process.url("kubernetes").starts_with("http://127.0.0.1:"));
    Replay {
        _process: process,
        kubeconfig,
        cache: tmp.path().join("kube-cache"),
        _tmp: tmp,
    }
}

/// Text with every run of spaces made one: kubectl aligns describe columns per section.
fn squeezed(s: &str) -> String {
    s.split(' ')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn kubectl(r: &Replay, args: &[&str]) -> Output {
    Command::new("kubectl")
        .env("KUBECONFIG", &r.kubeconfig)
        .arg("--cache-dir")
        .arg(&r.cache)
        .args(args)
        .output()
        .expect("kubectl is installed (apt-get install kubectl)")
}

fn ok(r: &Replay, args: &[&str]) -> String {
    let out = kubectl(r, args);
    assert!(out.status.success(), "kubectl {args:?}: {}", text(&out));
    String::from_utf8(out.stdout).unwrap()
}

fn fails(r: &Replay, args: &[&str]) -> String {
    let out = kubectl(r, args);
    assert!(
        !out.status.success(),
        "kubectl {args:?} should fail: {}",
        text(&out)
    );
    String::from_utf8(out.stderr).unwrap()
}

fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

const CRASHING: &str = "cart-5d8f7c9b4-x2x9z";
const HEALTHY: &str = "cart-5d8f7c9b4-q7k2m";

#[test]
fn kubectl_get_reads_the_recorded_cluster() {
    let r = start(&["--frozen"]);
    let pods = ok(&r, &["get", "pods", "-n", NS]);
    let t = rows(&pods);
    assert_eq!(t[0], ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert_eq!(t.len(), 3, "{pods}");
    let crash = t.iter().find(|row| row[0] == CRASHING).unwrap();
    assert_eq!(&crash[1..4], ["0/1", "CrashLoopBackOff", "5"]);
    assert_eq!(
        crash[4], "(5m10s",
        "restarts cell carries the last restart age: {pods}"
    );
    let healthy = t.iter().find(|row| row[0] == HEALTHY).unwrap();
    assert_eq!(&healthy[1..5], ["1/1", "Running", "0", "60m"]);

    let wide = ok(&r, &["get", "pods", "-A", "-o", "wide"]);
    let header = &rows(&wide)[0];
    assert_eq!(header[..2], ["NAMESPACE", "NAME"]);
    assert!(
        wide.contains("10.244.1.8") && wide.contains("worker-1"),
        "{wide}"
    );

    let names = ok(&r, &["get", "pods", "-n", NS, "-o", "name"]);
    assert_eq!(names, format!("pod/{HEALTHY}\npod/{CRASHING}\n"));

    let json: serde_json::Value =
        serde_json::from_str(&ok(&r, &["get", "pods", "-n", NS, "-o", "json"])).unwrap();
    assert_eq!(json["kind"], "List");
    assert_eq!(json["items"].as_array().unwrap().len(), 2);
    assert_eq!(
        json["items"][1]["status"]["containerStatuses"][0]["restartCount"],
        5
    );

    let yaml = ok(&r, &["get", "pod", CRASHING, "-n", NS, "-o", "yaml"]);
    assert!(
        yaml.contains("reason: OOMKilled") && yaml.contains("kind: Pod"),
        "{yaml}"
    );

    let labelled = ok(
        &r,
        &[
            "get",
            "pods",
            "-n",
            NS,
            "-l",
            "app=cart,pod-template-hash in (5d8f7c9b4)",
            "-o",
            "name",
        ],
    );
    assert_eq!(labelled.lines().count(), 2);
    assert_eq!(
        ok(
            &r,
            &["get", "pods", "-n", NS, "-l", "app!=cart", "-o", "name"]
        ),
        ""
    );

    let sorted = ok(
        &r,
        &[
            "get",
            "pods",
            "-n",
            NS,
            "--sort-by=.status.containerStatuses[0].restartCount",
            "-o",
            "name",
        ],
    );
    assert_eq!(sorted, format!("pod/{HEALTHY}\npod/{CRASHING}\n"));

    let labels = ok(&r, &["get", "pods", "-n", NS, "--show-labels"]);
    assert!(
        labels.contains("LABELS") && labels.contains("app=cart,pod-template-hash=5d8f7c9b4"),
        "{labels}"
    );

    let deploy = rows(&ok(&r, &["get", "deploy", "-n", NS]));
    assert_eq!(deploy[1][..4], ["cart", "1/2", "2", "1"]);
    let svc = rows(&ok(&r, &["get", "svc", "-n", NS]));
    assert_eq!(
        svc[1][..5],
        ["cart", "ClusterIP", "10.96.12.34", "<none>", "7070/TCP"]
    );
    let rs = rows(&ok(&r, &["get", "rs", "-n", NS]));
    assert_eq!(rs[1][..4], ["cart-5d8f7c9b4", "2", "2", "1"]);
    let ep = ok(&r, &["get", "endpoints", "-n", NS]);
    assert!(ep.contains("10.244.1.7:7070"), "{ep}");
    let cm = ok(&r, &["get", "cm", "-n", NS]);
    assert!(
        cm.contains("cart-config") && !cm.contains("old-config"),
        "deleted objects are gone: {cm}"
    );
    let nodes = rows(&ok(&r, &["get", "nodes"]));
    assert_eq!(nodes[1][..3], ["worker-1", "Ready", "worker"]);
    let ns = ok(&r, &["get", "ns"]);
    assert!(ns.contains("shop") && ns.contains("Active"), "{ns}");
    let all = ok(&r, &["get", "all", "-n", NS]);
    assert!(
        all.contains("pod/")
            && all.contains("deployment.apps/cart")
            && all.contains("service/cart"),
        "{all}"
    );
}

#[test]
fn kubectl_events_describe_and_logs() {
    let r = start(&["--frozen"]);
    let warnings = ok(
        &r,
        &[
            "get",
            "events",
            "-n",
            NS,
            "--field-selector",
            "type=Warning",
        ],
    );
    let t = rows(&warnings);
    assert_eq!(t.len(), 3, "{warnings}");
    assert!(warnings.contains("OOMKilling") && warnings.contains("BackOff"));
    assert!(!warnings.contains("Started"));
    let all_events = ok(&r, &["get", "events", "-A"]);
    assert!(
        all_events.contains("ScalingReplicaSet") && all_events.contains("deployment/cart"),
        "{all_events}"
    );

    let pod = ok(&r, &["describe", "pod", CRASHING, "-n", NS]);
    for needle in [
        "Name:             cart-5d8f7c9b4-x2x9z",
        "Controlled By:  ReplicaSet/cart-5d8f7c9b4",
        "State:          Waiting",
        "Reason:       CrashLoopBackOff",
        "Last State:     Terminated",
        "Reason:       OOMKilled",
        "Restart Count:  5",
        "Events:",
        "Warning  BackOff",
        "Back-off restarting failed container cart",
    ] {
        assert!(
            squeezed(&pod).contains(&squeezed(needle)),
            "missing {needle:?} in:\n{pod}"
        );
    }
    assert!(
        !pod.contains("Started container"),
        "events of the other pod leaked in:\n{pod}"
    );

    let deployment = ok(&r, &["describe", "deployment", "cart", "-n", NS]);
    assert!(
        deployment.contains("Replicas:") && deployment.contains("ScalingReplicaSet"),
        "{deployment}"
    );
    let node = ok(&r, &["describe", "node", "worker-1"]);
    assert!(
        node.contains("KubeletReady") && node.contains(CRASHING),
        "{node}"
    );
    let service = ok(&r, &["describe", "service", "cart", "-n", NS]);
    assert!(
        service.contains("10.96.12.34") && service.contains("Selector:"),
        "{service}"
    );

    let current = ok(&r, &["logs", "-n", NS, CRASHING]);
    assert_eq!(current, "info: cart service starting, instance 5\n");
    let previous = ok(&r, &["logs", "-n", NS, CRASHING, "--previous"]);
    assert_eq!(
        previous,
        "info: cart service starting, instance 4\nwarn: cache warm-up allocating 96MiB\n"
    );
    let tail = ok(
        &r,
        &["logs", "-n", NS, HEALTHY, "--tail", "2", "-c", "cart"],
    );
    assert_eq!(
        tail.lines().collect::<Vec<_>>(),
        [
            "info: GetCart user_id=48 items=3 took=2ms",
            "info: GetCart user_id=49 items=3 took=2ms"
        ]
    );
    // The healthy pod logs once a minute until 00:49:10; the virtual now is 01:00.
    let since = ok(&r, &["logs", "-n", NS, HEALTHY, "--since=15m"]);
    assert_eq!(since.lines().count(), 5, "{since}");
    let stamped = ok(&r, &["logs", "-n", NS, HEALTHY, "--tail=1", "--timestamps"]);
    assert_eq!(
        stamped,
        "2026-01-01T00:49:10.000000000Z info: GetCart user_id=49 items=3 took=2ms\n"
    );
    let via_deploy = ok(&r, &["logs", "-n", NS, "deploy/cart", "--tail=1"]);
    assert_eq!(via_deploy.lines().count(), 1);
}

#[test]
fn kubectl_errors_and_writes_are_refused_like_a_real_apiserver() {
    let r = start(&["--frozen"]);
    let missing = fails(&r, &["get", "pod", "nope", "-n", NS]);
    assert!(
        missing.contains(r#"Error from server (NotFound): pods "nope" not found"#),
        "{missing}"
    );
    // An object named like a stream subresource is an object like any other.
    let named = fails(&r, &["get", "configmap", "exec", "-n", NS]);
    assert!(
        named.contains(r#"Error from server (NotFound): configmaps "exec" not found"#),
        "{named}"
    );
    let bad_field = fails(
        &r,
        &["get", "pods", "-n", NS, "--field-selector", "spec.bogus=1"],
    );
    assert!(
        bad_field.contains("field label not supported: spec.bogus"),
        "{bad_field}"
    );
    // `apply` downloads the OpenAPI documents first: it must reach the read-only refusal, for a
    // recorded object and for a kind the recording never held.
    let manifests = tempfile::tempdir().unwrap();
    let deploy = manifests.path().join("deploy.yaml");
    std::fs::write(
        &deploy,
        format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: cart, namespace: {NS}}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: cart}}}}\n  template:\n    metadata: {{labels: {{app: cart}}}}\n    spec: {{containers: [{{name: cart, image: x}}]}}\n"),
    )
    .unwrap();
    let policy = manifests.path().join("policy.yaml");
    std::fs::write(
        &policy,
        format!("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: deny, namespace: {NS}}}\nspec: {{podSelector: {{}}}}\n"),
    )
    .unwrap();
    let (deploy, policy) = (deploy.display().to_string(), policy.display().to_string());
    for args in [
        vec!["scale", "deploy", "cart", "-n", NS, "--replicas=3"],
        vec!["delete", "pod", CRASHING, "-n", NS],
        vec!["label", "pod", CRASHING, "-n", NS, "x=y"],
        // A recording has no processes to run commands in or connect to.
        vec!["exec", CRASHING, "-n", NS, "--", "ls"],
        vec!["apply", "-f", &deploy],
        vec!["apply", "-f", &policy],
    ] {
        let err = fails(&r, &args);
        assert!(
            err.contains("MethodNotAllowed") && err.contains("read-only replay"),
            "{args:?}: {err}"
        );
    }
    // auth can-i answers for the read-only user a replay serves: reads yes, writes no.
    assert_eq!(
        ok(&r, &["auth", "can-i", "list", "pods", "-n", NS]).trim(),
        "yes"
    );
    let out = kubectl(&r, &["auth", "can-i", "delete", "pods", "-n", NS]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "no - the cluster is read-only"
    );
    // Nothing changed.
    assert!(ok(&r, &["get", "pod", CRASHING, "-n", NS, "-o", "name"]).contains(CRASHING));
}

#[test]
fn kubectl_watch_streams_the_state_at_virtual_now() {
    let r = start(&["--frozen"]);
    let out = kubectl(&r, &["get", "pods", "-n", NS, "-w", "--request-timeout=3s"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(CRASHING) && stdout.contains(HEALTHY),
        "{}",
        text(&out)
    );
    let out = kubectl(
        &r,
        &[
            "get",
            "pods",
            "-n",
            NS,
            "--watch-only",
            "-o",
            "name",
            "--request-timeout=3s",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "",
        "a frozen recording has no changes: {}",
        text(&out)
    );
}

#[test]
fn by_default_client_side_ages_look_live() {
    let r = start(&[]);
    let pod = ok(&r, &["describe", "pod", CRASHING, "-n", NS]);
    // The BackOff event was last seen five minutes before the virtual now: with the shift, kubectl
    // (which ages it by its own clock) shows it five minutes old rather than months.
    let line = pod
        .lines()
        .find(|l| l.trim_start().starts_with("Warning") && l.contains("BackOff"))
        .unwrap_or_else(|| panic!("no BackOff event in:\n{pod}"));
    let age = line.split_whitespace().nth(2).unwrap();
    // "5m", or "5m1s" when the request straddles a second.
    assert!(age.starts_with("5m"), "{line}");
    let pods = ok(&r, &["get", "pods", "-n", NS]);
    assert!(
        rows(&pods).iter().any(|r| r.contains(&"60m".to_string())),
        "{pods}"
    );
}
