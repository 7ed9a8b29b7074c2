//! What an agent did, recorded: real `kubectl` and an HTTP client drive `collector env up --out`,
//! and the dataset written when it stops holds every request as an audit event (the `audit`
//! table), and the deployment controller's Events for the agent's scale and template change.

use std::path::Path;
use std::process::Command;

use e2e::live::{GEO_PORT_FIX, Live, NS};
use e2e::text;
use schemas::tables::{AuditRow, EventRow, Row, Table};

/// Starts `problem` live, writing its run to `out` when stopped. --for is long: the test stops
/// the environment itself once done, as Ctrl-C would.
fn up(problem: &str, out: &Path) -> Live {
    e2e::live::up(problem, &["--for", "10m", "--out", out.to_str().unwrap()])
}

fn ok(l: &Live, args: &[&str]) -> String {
    l.ok(args)
}

fn rows<T: TryFrom<Row>>(dataset: &Path, table: Table) -> Vec<T> {
    datasets::Dataset::open(dataset)
        .unwrap()
        .read_rows(table)
        .unwrap()
        .into_iter()
        .filter_map(|r| T::try_from(r).ok())
        .collect()
}

#[test]
fn every_request_of_a_live_session_is_in_the_audit_table() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let l = up("hotel-geo-target-port", &out);
    let prometheus = l.endpoints["prometheus"]
        .as_str()
        .expect("a prometheus endpoint")
        .to_string();
    ok(&l, &["-n", NS, "get", "pods"]);
    let patched = ok(&l, &["-n", NS, "patch", "svc", "geo", "-p", GEO_PORT_FIX]);
    assert_eq!(patched.trim(), "service/geo patched");
    assert!(ok(&l, &["-n", NS, "scale", "deploy/geo", "--replicas=2"]).contains("scaled"));
    assert!(ok(&l, &["-n", NS, "set", "env", "deploy/search", "FOO=bar"]).contains("env updated"));
    let query = Command::new("curl")
        .args(["-sf", "--get", "--data-urlencode", "query=up"])
        .arg(format!("{prometheus}/api/v1/query"))
        .output()
        .expect("curl is installed");
    assert!(query.status.success(), "curl: {}", text(&query));
    assert!(String::from_utf8_lossy(&query.stdout).contains("\"success\""));
    // The controller's Events, as the agent would look for them.
    l.until(
        &[
            "-n",
            NS,
            "get",
            "events",
            "--field-selector=reason=ScalingReplicaSet",
        ],
        "the scale and the new search ReplicaSet reported",
        |o| {
            o.lines()
                .any(|l| l.contains("replica set geo-") && l.contains(" to 2"))
                && o.contains("Scaled up replica set search-")
        },
    );
    l.stop();
    let dataset = out.join("dataset");

    let audit: Vec<AuditRow> = rows(&dataset, Table::Audit);
    let kubectl: Vec<&AuditRow> = audit
        .iter()
        .filter(|a| {
            a.user_agent
                .as_deref()
                .is_some_and(|u| u.starts_with("kubectl/"))
        })
        .collect();
    assert!(!kubectl.is_empty(), "no kubectl request among {audit:#?}");
    let list = audit
        .iter()
        .find(|a| {
            a.verb == "list"
                && a.resource.as_deref() == Some("pods")
                && a.namespace.as_deref() == Some(NS)
        })
        .unwrap_or_else(|| panic!("no pod list among {audit:#?}"));
    assert_eq!(list.code, 200);
    assert_eq!(list.api, "kubernetes");
    assert!(
        list.user_agent
            .as_deref()
            .unwrap_or("")
            .starts_with("kubectl/")
    );
    assert!(
        list.request_uri
            .starts_with(&format!("/api/v1/namespaces/{NS}/pods"))
    );
    let patch = audit
        .iter()
        .find(|a| a.verb == "patch" && a.resource.as_deref() == Some("services"))
        .unwrap_or_else(|| panic!("no service patch among {audit:#?}"));
    assert_eq!(
        (
            patch.namespace.as_deref(),
            patch.name.as_deref(),
            patch.code
        ),
        (Some(NS), Some("geo"), 200)
    );
    assert_eq!(patch.api_group.as_deref(), Some(""));
    let event: serde_json::Value = serde_json::from_str(&patch.event).unwrap();
    assert_eq!(event["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(event["auditID"], patch.audit_id.as_str());
    assert_eq!(event["objectRef"]["resource"], "services");
    assert_eq!(
        event["annotations"]["faultline.dev/kubectl-command"],
        "kubectl patch"
    );
    let scale = audit
        .iter()
        .find(|a| a.subresource.as_deref() == Some("scale"))
        .unwrap_or_else(|| panic!("no scale among {audit:#?}"));
    assert_eq!(
        (
            scale.verb.as_str(),
            scale.api_group.as_deref(),
            scale.name.as_deref()
        ),
        ("patch", Some("apps"), Some("geo"))
    );
    let promql = audit
        .iter()
        .find(|a| a.api == "prometheus" && a.request_uri.starts_with("/api/v1/query?"))
        .unwrap_or_else(|| panic!("no PromQL query among {audit:#?}"));
    assert_eq!((promql.verb.as_str(), promql.code), ("get", 200));
    assert!(
        promql
            .user_agent
            .as_deref()
            .unwrap_or("")
            .starts_with("curl/")
    );
    let event: serde_json::Value = serde_json::from_str(&promql.event).unwrap();
    assert_eq!(event["annotations"]["faultline.dev/query"], "up");
    assert!(
        audit
            .iter()
            .all(|a| a.source_ip.as_deref() == Some("127.0.0.1"))
    );
    // Requests are ordered as they came: the list before the patch, the patch before the scale.
    let position = |a: &AuditRow| audit.iter().position(|b| b.audit_id == a.audit_id);
    assert!(position(list) < position(patch) && position(patch) < position(scale));
    assert!(list.time_ns <= patch.time_ns && patch.time_ns <= scale.time_ns);

    let events: Vec<EventRow> = rows(&dataset, Table::Events);
    let scaling = |deployment: &str, text: &str| {
        events.iter().any(|e| {
            e.reason == "ScalingReplicaSet"
                && e.involved_kind == "Deployment"
                && e.involved_name == deployment
                && e.message.contains(text)
        })
    };
    assert!(
        scaling("geo", " to 2 from "),
        "kubectl scale's ScalingReplicaSet"
    );
    assert!(
        scaling("search", "Scaled up replica set search-"),
        "the template change's new ReplicaSet"
    );

    let validated = e2e::run(
        "collector",
        &["dataset", "validate", dataset.to_str().unwrap()],
    );
    assert!(validated.status.success(), "{}", text(&validated));
}
