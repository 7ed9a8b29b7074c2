//! kube-rs, a second Kubernetes client beside kubectl, against `collector env up`: it reads the
//! kubeconfig the environment wrote, creates a ConfigMap, patches a Deployment (strategic merge,
//! then server-side apply with its own field manager), watches the ReplicaSet the template change
//! makes, and deletes what it created; it execs into a container and forwards a port over its own
//! WebSocket channels (`v5`/`v4.channel.k8s.io`, not kubectl's SPDY tunnel). Every step asserts
//! on the server's answer and on the cluster reacting.

use std::collections::BTreeSet;
use std::time::Duration;

use e2e::live::{self, NS};
use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, AttachParams, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Config};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SELECTOR: &str = "io.kompose.service=search";

async fn client(l: &live::Live) -> Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kubeconfig = Kubeconfig::read_from(&l.kubeconfig).expect("the kubeconfig env up wrote");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("a client configuration from the kubeconfig");
    Client::try_from(config).expect("a client")
}

fn rs_names(list: &[ReplicaSet]) -> BTreeSet<String> {
    list.iter()
        .filter_map(|r| r.metadata.name.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_creates_patches_applies_watches_and_deletes() {
    let l = live::up("hotel-geo-target-port", &[]);
    let client = client(&l).await;

    // Create a ConfigMap; the answer carries server-set identity.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "kube-rs-cm", "labels": {"made-by": "kube-rs"}},
        "data": {"mode": "safe"},
    }))
    .expect("a ConfigMap");
    let created = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    assert!(
        created
            .metadata
            .uid
            .as_deref()
            .is_some_and(|u| !u.is_empty())
    );
    assert!(created.metadata.resource_version.is_some());
    let read = cms.get("kube-rs-cm").await.expect("get");
    assert_eq!(
        read.data
            .unwrap_or_default()
            .get("mode")
            .map(String::as_str),
        Some("safe")
    );

    // The ReplicaSets of `search` before its template changes.
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), NS);
    let before = rs_names(
        &rss.list(&ListParams::default().labels(SELECTOR))
            .await
            .expect("list ReplicaSets")
            .items,
    );
    assert!(!before.is_empty(), "search has a ReplicaSet");
    // A watch started now sees the new ReplicaSet appear.
    let watched = {
        let rss = rss.clone();
        let before = before.clone();
        tokio::spawn(async move {
            let stream = watcher(rss, watcher::Config::default().labels(SELECTOR))
                .applied_objects()
                .try_filter(move |rs| {
                    let new = rs
                        .metadata
                        .name
                        .as_ref()
                        .is_some_and(|n| !before.contains(n));
                    std::future::ready(new)
                });
            futures_util::pin_mut!(stream);
            stream.next().await
        })
    };

    // Strategic merge: an env var on the first container, merged by container name.
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let search = deploys.get("search").await.expect("get search");
    let generation = search.metadata.generation.unwrap_or_default();
    let container = search
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.first())
        .map(|c| c.name.clone())
        .expect("search has a container");
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": container, "env": [{"name": "KUBE_RS", "value": "yes"}]}
    ]}}}});
    let patched = deploys
        .patch("search", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect("strategic merge patch");
    assert_eq!(patched.metadata.generation, Some(generation + 1));
    let containers = patched
        .spec
        .and_then(|s| s.template.spec)
        .map(|s| s.containers)
        .unwrap_or_default();
    assert_eq!(containers.len(), 1, "merged by name, not appended");
    assert!(
        containers[0]
            .env
            .iter()
            .flatten()
            .any(|e| e.name == "KUBE_RS" && e.value.as_deref() == Some("yes"))
    );

    // The watch sees the ReplicaSet the new template makes.
    let new_rs = tokio::time::timeout(Duration::from_secs(60), watched)
        .await
        .expect("a new ReplicaSet within a minute")
        .expect("the watch task")
        .expect("the watch stream ended")
        .expect("a watch event");
    let new_name = new_rs.metadata.name.clone().unwrap_or_default();
    assert!(new_name.starts_with("search-"), "{new_name}");
    assert!(
        new_rs
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "Deployment" && o.name == "search")
    );

    // Server-side apply with a field manager of our own: replicas, owned by that manager.
    // A partial configuration as JSON: the typed Deployment would send its required
    // `selector: {}`, which (an atomic struct) a real apiserver applies as an empty selector too.
    let applied = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "search", "namespace": NS},
        "spec": {"replicas": 2},
    });
    let after = deploys
        .patch(
            "search",
            &PatchParams::apply("kube-rs-e2e").force(),
            &Patch::Apply(&applied),
        )
        .await
        .expect("server-side apply");
    assert_eq!(after.spec.as_ref().and_then(|s| s.replicas), Some(2));
    // The manager owns replicas now: another manager's apply of a different count conflicts
    // unless forced, and names the owner. (Served objects carry no managedFields: the object
    // store drops them, as captured datasets have none.)
    let rival = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "search", "namespace": NS},
        "spec": {"replicas": 3},
    });
    match deploys
        .patch(
            "search",
            &PatchParams::apply("rival"),
            &Patch::Apply(&rival),
        )
        .await
    {
        Err(kube::Error::Api(e)) => {
            assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"), "{e:?}");
            assert!(
                e.message.contains(r#"conflict with "kube-rs-e2e""#)
                    && e.message.contains(".spec.replicas"),
                "{}",
                e.message
            );
        }
        other => panic!("a conflicting apply should be refused: {other:?}"),
    }
    // The cluster follows: two search pods become ready.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let d = deploys.get("search").await.expect("get search");
        let status = d.status.unwrap_or_default();
        if status.ready_replicas == Some(2) && status.updated_replicas == Some(2) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "search never had two updated ready pods: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Delete the ConfigMap: the answer, then a 404 on read.
    let deleted = cms
        .delete("kube-rs-cm", &DeleteParams::default())
        .await
        .expect("delete");
    // A ConfigMap's delete answers with a Status naming the deleted uid.
    let gone_uid = deleted.either(|cm| cm.metadata.uid, |status| status.details.map(|d| d.uid));
    assert_eq!(gone_uid, created.metadata.uid);
    match cms.get("kube-rs-cm").await {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 404);
            assert_eq!(e.reason, "NotFound");
            assert_eq!(e.message, r#"configmaps "kube-rs-cm" not found"#);
        }
        other => panic!("the ConfigMap should be gone: {other:?}"),
    }
}

/// `step` finished, or a panic naming it: a stream the server never ends fails the test instead
/// of hanging it.
async fn within<T>(step: &str, step_future: impl std::future::IntoFuture<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), step_future.into_future())
        .await
        .unwrap_or_else(|_| panic!("{step}: no answer in 60 s"))
}

/// The first pod of a workload, by its Service label.
async fn first_pod(pods: &Api<Pod>, service: &str) -> String {
    let list = pods
        .list(&ListParams::default().labels(&format!("io.kompose.service={service}")))
        .await
        .expect("list pods");
    list.items
        .into_iter()
        .find_map(|p| p.metadata.name)
        .unwrap_or_else(|| panic!("no pod of {service}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_execs_and_forwards_a_port() {
    // Without noise: a noise pod kill would replace a pod between listing it and exec or
    // port-forward to it by name.
    let l = live::up("hotel-geo-target-port", &["--no-noise"]);
    let client = client(&l).await;
    let pods: Api<Pod> = Api::namespaced(client, NS);

    // Exec: stdout and stderr on their channels, the exit status on the error channel.
    let mongo = first_pod(&pods, "mongodb-geo").await;
    let argv = ["sh", "-c", "echo out; echo err >&2; exit 3"];
    let params = AttachParams::default().stderr(true);
    let mut process = within("exec", pods.exec(&mongo, argv, &params))
        .await
        .expect("exec");
    let (mut out, mut err) = (String::new(), String::new());
    let mut stdout = process.stdout().expect("stdout");
    let mut stderr = process.stderr().expect("stderr");
    let status = process.take_status().expect("status");
    within("stdout", stdout.read_to_string(&mut out))
        .await
        .expect("stdout");
    within("stderr", stderr.read_to_string(&mut err))
        .await
        .expect("stderr");
    let status = within("the exit status", status)
        .await
        .expect("an exit status");
    assert_eq!((out.as_str(), err.as_str()), ("out\n", "err\n"));
    assert_eq!(status.status.as_deref(), Some("Failure"), "{status:?}");
    let code = status
        .details
        .and_then(|d| d.causes)
        .into_iter()
        .flatten()
        .find(|c| c.reason.as_deref() == Some("ExitCode"))
        .and_then(|c| c.message);
    assert_eq!(code.as_deref(), Some("3"));
    within("the exec's end", process.join())
        .await
        .expect("the exec ends");

    // Port-forward: an HTTP request to the frontend's port answers as the program does.
    let frontend = first_pod(&pods, "frontend").await;
    let mut forward = within("port-forward", pods.portforward(&frontend, &[5000]))
        .await
        .expect("port-forward");
    let mut stream = forward.take_stream(5000).expect("the port's stream");
    let request = b"GET /no-such-route HTTP/1.1\r\nHost: frontend\r\nConnection: close\r\n\r\n";
    within("request", stream.write_all(request))
        .await
        .expect("request");
    let mut answer = Vec::new();
    within("answer", stream.read_to_end(&mut answer))
        .await
        .expect("answer");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    // The program closed the connection, so the server ended the WebSocket, as the kubelet
    // does once every forwarded connection has ended (kube-rs then reports its own close as
    // sent after closing, as it does against a cluster): what matters is that it ends.
    drop(stream);
    let _ = within("the forward's end", forward.join()).await;

    // A port nothing listens on: the connection is refused inside the pod, so the stream ends
    // with nothing read and the error channel says why.
    let mut forward = within("port-forward", pods.portforward(&frontend, &[5999]))
        .await
        .expect("port-forward");
    let errors = forward.take_error(5999).expect("the port's error channel");
    let mut stream = forward.take_stream(5999).expect("the port's stream");
    let _ = within("request", stream.write_all(b"GET / HTTP/1.1\r\n\r\n")).await;
    let mut answer = Vec::new();
    let _ = within("answer", stream.read_to_end(&mut answer)).await;
    assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    let why = within("the error", errors)
        .await
        .expect("an error for the refused port");
    assert!(why.contains("5999"), "{why}");
    drop(stream);
    let _ = within("the forward's end", forward.join()).await;
}
