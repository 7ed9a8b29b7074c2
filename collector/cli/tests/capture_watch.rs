//! A watch interrupted mid-capture loses and duplicates nothing: a small Kubernetes API server on
//! loopback (real HTTP, scripted answers) closes the first watch stream, then answers the resumed
//! watch with 410 Gone (as a watch ERROR event, or as the HTTP status of the watch request), so
//! `collector capture` must resume, relist, record only versions it has not recorded, and infer
//! the deletion that happened while it was not watching.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use datasets::Dataset;
use schemas::tables::{Row, Table};
use serde_json::{Value, json};

#[derive(Default)]
struct Script {
    lists: usize,
    gone_as_status: bool,
    forbid_lists: bool,
    requests: Vec<String>,
}

fn cm(name: &str, rv: u32) -> Value {
    json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                        "resourceVersion": rv.to_string()},
           "data": {"version": rv.to_string()}})
}

fn lines(events: &[Value]) -> String {
    events.iter().map(|e| format!("{e}\n")).collect()
}

fn gone() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired",
           "message": "too old resource version: 12 (20)", "code": 410})
}

/// A watch answer: the given lines, then (if `hold`) a stream that stays open.
fn watch_body(text: String, hold: bool) -> Response {
    let first = futures_util::stream::iter([Ok::<_, std::convert::Infallible>(
        axum::body::Bytes::from(text),
    )]);
    let body = if hold {
        Body::from_stream(futures_util::StreamExt::chain(
            first,
            futures_util::stream::pending(),
        ))
    } else {
        Body::from_stream(first)
    };
    (StatusCode::OK, [("content-type", "application/json")], body).into_response()
}

async fn api(State(script): State<Arc<Mutex<Script>>>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let mut s = script.lock().unwrap();
    s.requests.push(format!("{path}?{query}"));
    let watch_from = query.contains("watch=true").then(|| {
        form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == "resourceVersion")
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    });
    let json = |v: Value| axum::Json(v).into_response();
    match (path.as_str(), watch_from.as_deref()) {
        ("/api", _) => json(json!({"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})),
        ("/apis", _) => json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})),
        ("/api/v1", _) => json(json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
            {"name": "configmaps", "singularName": "configmap", "namespaced": true, "kind": "ConfigMap",
             "verbs": ["get", "list", "watch"]}]})),
        ("/api/v1/namespaces/ns/configmaps", None) if s.forbid_lists => (
            StatusCode::FORBIDDEN,
            axum::Json(json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                "message": "configmaps is forbidden: User \"capture\" cannot list resource \"configmaps\"", "code": 403})),
        )
            .into_response(),
        ("/api/v1/namespaces/ns/configmaps", None) => {
            s.lists += 1;
            let (rv, items) = match s.lists {
                1 => ("10", vec![cm("a", 5), cm("b", 6)]),
                // After the gap: c changed, d appeared, b was deleted.
                _ => ("20", vec![cm("a", 11), cm("c", 15), cm("d", 16)]),
            };
            json(json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": rv}, "items": items}))
        }
        ("/api/v1/namespaces/ns/configmaps", Some("10")) => watch_body(
            lines(&[json!({"type": "MODIFIED", "object": cm("a", 11)}), json!({"type": "ADDED", "object": cm("c", 12)})]),
            false,
        ),
        ("/api/v1/namespaces/ns/configmaps", Some("12")) if s.gone_as_status => {
            (StatusCode::GONE, axum::Json(gone())).into_response()
        }
        ("/api/v1/namespaces/ns/configmaps", Some("12")) => {
            watch_body(lines(&[json!({"type": "ERROR", "object": gone()})]), false)
        }
        ("/api/v1/namespaces/ns/configmaps", Some("20")) => {
            let mut deleted = cm("c", 21);
            deleted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
            watch_body(
                lines(&[
                    json!({"type": "DELETED", "object": deleted}),
                    json!({"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": "21"}}}),
                ]),
                true,
            )
        }
        ("/api/v1/namespaces/ns/configmaps", Some(_)) => watch_body(String::new(), true),
        _ => (StatusCode::NOT_FOUND, axum::Json(json!({"kind": "Status", "code": 404, "status": "Failure", "reason": "NotFound", "message": "not found"}))).into_response(),
    }
}

/// Runs a capture against the scripted server; returns (name, resourceVersion, change) of every
/// object row, and the capture's summary.
/// Serves `script` on loopback and runs `collector capture` against it for a live 4 s window.
fn run(
    script: Script,
) -> (
    std::process::Output,
    tempfile::TempDir,
    std::path::PathBuf,
    Arc<Mutex<Script>>,
) {
    let script = Arc::new(Mutex::new(script));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().fallback(api).with_state(script.clone());
    runtime.spawn(async move { axum::serve(listener, app).await });

    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: http://{addr}\ncontexts:\n- name: t\n  context:\n    cluster: t\n    user: t\ncurrent-context: t\nusers:\n- name: t\n  user: {{}}\n"),
    )
    .unwrap();
    let out_dir = tmp.path().join("out");
    // A live window: the watch runs until it ends, and the script is over within milliseconds.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_collector"))
        .arg("capture")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--namespaces", "ns", "--duration", "4s", "--json", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    (out, tmp, out_dir, script)
}

fn capture(gone_as_status: bool) -> (Vec<(String, String, String)>, Value, Vec<String>) {
    let (out, _tmp, out_dir, script) = run(Script {
        gone_as_status,
        ..Default::default()
    });
    assert!(
        out.status.success(),
        "capture failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let report = datasets::validate(&out_dir);
    assert!(report.is_valid(), "{report:?}");
    let rows = Dataset::open(&out_dir)
        .unwrap()
        .read_rows(Table::Objects)
        .unwrap();
    let mut versions: Vec<(i64, String, String, String)> = rows
        .into_iter()
        .map(|r| match r {
            Row::Object(o) => (
                o.observed_ns,
                o.name,
                o.resource_version,
                o.change.as_str().to_string(),
            ),
            _ => unreachable!(),
        })
        .collect();
    versions.sort();
    let requests = script.lock().unwrap().requests.clone();
    (
        versions
            .into_iter()
            .map(|(_, n, rv, c)| (n, rv, c))
            .collect(),
        summary,
        requests,
    )
}

fn expected() -> BTreeSet<(String, String, String)> {
    [
        ("a", "5", "added"),
        ("b", "6", "added"),
        ("a", "11", "modified"),
        ("c", "12", "added"),
        // Seen by the relist after 410 Gone.
        ("c", "15", "modified"),
        ("d", "16", "added"),
        ("b", "6", "deleted"),
        ("c", "21", "deleted"),
    ]
    .into_iter()
    .map(|(n, rv, c)| (n.to_string(), rv.to_string(), c.to_string()))
    .collect()
}

fn check(gone_as_status: bool) {
    let (versions, summary, requests) = capture(gone_as_status);
    let unique: BTreeSet<_> = versions.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        versions.len(),
        "duplicated versions: {versions:?}"
    );
    assert_eq!(unique, expected(), "requests: {requests:#?}");
    let lists = requests
        .iter()
        .filter(|r| r.contains("configmaps") && !r.contains("watch=true"))
        .count();
    assert_eq!(lists, 2, "one list, one relist: {requests:#?}");
    assert!(
        summary["watch_recoveries"].as_u64().unwrap() >= 1,
        "{summary}"
    );
}

#[test]
fn gone_as_a_watch_event_relists_without_loss_or_duplicates() {
    check(false);
}

#[test]
fn gone_as_the_watch_status_relists_without_loss_or_duplicates() {
    check(true);
}

#[test]
fn a_failed_capture_names_the_request_and_leaves_no_dataset() {
    let (out, tmp, out_dir, _) = run(Script {
        forbid_lists: true,
        ..Default::default()
    });
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("configmaps in namespace ns") && stderr.contains("forbidden"),
        "{stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "kubeconfig")
        .collect();
    assert!(
        !out_dir.exists() && left.is_empty(),
        "left behind: {left:?}"
    );
}
