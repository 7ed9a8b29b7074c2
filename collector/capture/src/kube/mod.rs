//! The Kubernetes source: discovery of every listable and watchable kind, then, per kind (and per
//! chosen namespace), an initial list followed by a watch until the window ends, recorded as the
//! object timeline; Events go to the events table; container logs are read at the end.
//!
//! Versions are neither lost nor repeated across watch restarts: the watcher resumes a closed
//! watch from the last resource version it saw, and relists after `410 Gone`. A relist re-reports
//! every object; only versions not recorded yet become rows, and objects the relist no longer
//! shows become deletions (carrying the last version seen, as the deletion itself was missed).

pub mod logs;
pub mod normalise;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use futures_util::StreamExt;
use indicatif::ProgressBar;
use kube::api::{Api, DynamicObject};
use kube::discovery::{ApiResource, Discovery, Scope as KubeScope, verbs};
use kube::runtime::watcher;
use schemas::tables::{ChangeType, ObjectRow, Row};
use serde_json::Value;

use super::redact::Redactor;
use super::scope::Scope;
use super::sink::Sink;
use super::{Window, now_ns};
use normalise::{KindInfo, clean, event_row, object_row};

/// How to reach the cluster.
#[derive(Debug, Clone)]
pub enum Connection {
    /// This kubeconfig file (its current context).
    Kubeconfig(PathBuf),
    /// The pod's service account (a capture running as a Kubernetes Job).
    InCluster,
    /// `KUBECONFIG`, `~/.kube/config`, else in-cluster: as kubectl finds it.
    Infer,
    /// An API served without credentials at this URL: a proxy that holds them (the view an agent
    /// on a real cluster has).
    Url(String),
}

pub async fn client(connection: &Connection) -> anyhow::Result<kube::Client> {
    let config = match connection {
        Connection::Kubeconfig(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("kubernetes: reading the kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .with_context(|| format!("kubernetes: using the kubeconfig {}", path.display()))?
        }
        Connection::InCluster => kube::Config::incluster()
            .context("kubernetes: in-cluster configuration (service account token and KUBERNETES_SERVICE_HOST)")?,
        Connection::Infer => kube::Config::infer()
            .await
            .context("kubernetes: no kubeconfig found (KUBECONFIG, ~/.kube/config) and not in a cluster")?,
        Connection::Url(url) => kube::Config::new(
            url.parse()
                .with_context(|| format!("kubernetes: `{url}` is not a URL"))?,
        ),
    };
    kube::Client::try_from(config).context("kubernetes: building the client")
}

/// One list+watch: a kind, in one namespace or in all of them.
#[derive(Debug, Clone)]
pub struct Target {
    pub resource: ApiResource,
    pub namespace: Option<String>,
}

impl Target {
    fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} in namespace {ns}", self.resource.plural),
            None => self.resource.plural.clone(),
        }
    }

    fn is_event(&self) -> bool {
        self.resource.kind == "Event"
    }
}

/// Groups whose kinds are not captured as objects: events.k8s.io serves the same Events as core/v1
/// (captured once, into the events table); metrics.k8s.io is a live view, not state.
const SKIPPED_GROUPS: &[&str] = &["events.k8s.io", "metrics.k8s.io"];

/// Every listable and watchable kind, per chosen namespace for namespaced kinds.
pub async fn discover(client: &kube::Client, scope: &Scope) -> anyhow::Result<Vec<Target>> {
    // Aggregated discovery (two requests) where the server has it, else one request per group.
    let discovery = match Discovery::new(client.clone()).run_aggregated().await {
        Ok(d) if d.groups().next().is_some() => d,
        other => {
            if let Err(e) = other {
                tracing::debug!("kubernetes: no aggregated discovery ({e}); asking each group");
            }
            Discovery::new(client.clone())
                .run()
                .await
                .context("kubernetes: discovery (GET /api, /apis and each group version)")?
        }
    };
    let mut targets = Vec::new();
    for group in discovery.groups() {
        if SKIPPED_GROUPS.contains(&group.name()) {
            continue;
        }
        for (resource, caps) in group.recommended_resources() {
            if !(caps.supports_operation(verbs::LIST) && caps.supports_operation(verbs::WATCH)) {
                continue;
            }
            match caps.scope {
                KubeScope::Namespaced if !scope.namespaces.is_empty() => {
                    for ns in &scope.namespaces {
                        if scope.namespace_ok(ns) {
                            targets.push(Target {
                                resource: resource.clone(),
                                namespace: Some(ns.clone()),
                            });
                        }
                    }
                }
                _ => targets.push(Target {
                    resource,
                    namespace: None,
                }),
            }
        }
    }
    targets.sort_by(|a, b| {
        (&a.resource.plural, &a.namespace).cmp(&(&b.resource.plural, &b.namespace))
    });
    Ok(targets)
}

/// What the object capture leaves for the log capture and the manifest.
#[derive(Debug, Default)]
pub struct ObjectsOutcome {
    /// Pods present at the end, as cleaned JSON.
    pub pods: Vec<Value>,
    /// Namespaces seen (Namespace objects in scope).
    pub namespaces: BTreeSet<String>,
    pub kinds: usize,
    /// Watch errors recovered from (restarts, relists).
    pub recovered_errors: u64,
}

/// The last recorded version of each object, to skip versions already recorded and to infer the
/// deletions a relist reveals.
#[derive(Default)]
struct Tracker {
    live: HashMap<String, ObjectRow>,
    /// Objects seen by the relist in progress, if one is.
    relisted: Option<HashSet<String>>,
}

fn identity(object: &Value) -> String {
    match object.pointer("/metadata/uid").and_then(Value::as_str) {
        Some(uid) if !uid.is_empty() => uid.to_string(),
        _ => format!(
            "{}/{}",
            object["metadata"]["namespace"].as_str().unwrap_or(""),
            object["metadata"]["name"].as_str().unwrap_or("")
        ),
    }
}

/// Follows one target until the window ends; returns the objects alive at the end.
struct Follower<'a> {
    target: &'a Target,
    kind: KindInfo,
    scope: &'a Scope,
    window: Window,
    redactor: &'a Redactor,
    sink: &'a Sink,
    tracker: Tracker,
    events_seen: HashMap<String, String>,
}

impl Follower<'_> {
    async fn apply(&mut self, object: DynamicObject, deleted: bool) -> anyhow::Result<()> {
        let raw = serde_json::to_value(&object).context("re-encoding an object")?;
        if !self.scope.object_ok(&self.kind.kind, &raw) {
            return Ok(());
        }
        let observed = self.window.clamp(now_ns());
        let object = clean(&self.kind, raw, self.redactor);
        let id = identity(&object);
        if self.target.is_event() {
            // Events are records, not state: their deletion (expiry) is not an observation.
            let rv = object["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("")
                .to_string();
            if deleted || self.events_seen.get(&id) == Some(&rv) {
                return Ok(());
            }
            self.events_seen.insert(id, rv);
            if let Some(row) = event_row(&object) {
                self.sink.push(Row::Event(row)).await?;
            }
            return Ok(());
        }
        if let Some(seen) = self.tracker.relisted.as_mut() {
            seen.insert(id.clone());
        }
        let previous = self.tracker.live.get(&id);
        let change = match (deleted, previous) {
            (true, _) => ChangeType::Deleted,
            (false, Some(p))
                if p.resource_version
                    == object["metadata"]["resourceVersion"].as_str().unwrap_or("") =>
            {
                return Ok(());
            }
            (false, Some(_)) => ChangeType::Modified,
            (false, None) => ChangeType::Added,
        };
        let row = object_row(&self.kind, &object, change, observed);
        if deleted {
            self.tracker.live.remove(&id);
        } else {
            self.tracker.live.insert(id, row.clone());
        }
        self.sink.push(Row::Object(row)).await
    }

    /// After a relist: whatever it no longer shows was deleted while the watch was down.
    async fn relist_done(&mut self) -> anyhow::Result<()> {
        let Some(seen) = self.tracker.relisted.take() else {
            return Ok(());
        };
        let gone: Vec<String> = self
            .tracker
            .live
            .keys()
            .filter(|id| !seen.contains(*id))
            .cloned()
            .collect();
        for id in gone {
            if let Some(mut row) = self.tracker.live.remove(&id) {
                row.change = ChangeType::Deleted;
                row.observed_ns = self.window.clamp(now_ns());
                self.sink.push(Row::Object(row)).await?;
            }
        }
        Ok(())
    }
}

/// Whether a watcher error means the resource version is gone and only a relist helps. The
/// watcher relists by itself after a `410` watch event; a `410` answer to the watch request itself
/// is left to the caller.
fn gone_at_watch_start(e: &watcher::Error) -> bool {
    matches!(e, watcher::Error::WatchStartFailed(kube::Error::Api(s)) if s.code == 410)
}

/// Lists then watches one target until `deadline` (or, for a window already over, until the first
/// list is complete).
async fn follow(
    client: kube::Client,
    target: &Target,
    scope: &Scope,
    window: Window,
    deadline: Option<tokio::time::Instant>,
    redactor: &Redactor,
    sink: &Sink,
) -> anyhow::Result<(Vec<Value>, u64)> {
    let api: Api<DynamicObject> = match &target.namespace {
        Some(ns) => Api::namespaced_with(client, ns, &target.resource),
        None => Api::all_with(client, &target.resource),
    };
    let new_stream = || watcher(api.clone(), watcher::Config::default()).boxed();
    let mut stream = new_stream();
    let mut f = Follower {
        target,
        kind: KindInfo {
            api_version: target.resource.api_version.clone(),
            kind: target.resource.kind.clone(),
        },
        scope,
        window,
        redactor,
        sink,
        tracker: Tracker::default(),
        events_seen: HashMap::new(),
    };
    let (mut listed, mut errors, mut backoff) = (false, 0u64, Duration::from_millis(200));
    loop {
        let next = match deadline {
            Some(d) => tokio::select! {
                next = stream.next() => next,
                _ = tokio::time::sleep_until(d) => break,
            },
            None if listed => break,
            None => stream.next().await,
        };
        let Some(next) = next else { break };
        match next {
            Ok(event) => {
                backoff = Duration::from_millis(200);
                match event {
                    watcher::Event::Init => f.tracker.relisted = Some(HashSet::new()),
                    watcher::Event::InitApply(o) | watcher::Event::Apply(o) => {
                        f.apply(o, false).await?
                    }
                    watcher::Event::Delete(o) => f.apply(o, true).await?,
                    watcher::Event::InitDone => {
                        f.relist_done().await?;
                        listed = true;
                    }
                }
            }
            Err(e) if !listed => {
                return Err(anyhow::anyhow!(e)).with_context(|| {
                    format!(
                        "kubernetes: list and watch {} ({})",
                        target.describe(),
                        target.resource.api_version
                    )
                });
            }
            Err(e) => {
                errors += 1;
                tracing::warn!(target = %target.describe(), "kubernetes watch: {e}; resuming");
                if gone_at_watch_start(&e) {
                    stream = new_stream();
                }
                let pause = tokio::time::sleep(backoff);
                match deadline {
                    Some(d) => {
                        tokio::select! { _ = pause => {}, _ = tokio::time::sleep_until(d) => break }
                    }
                    None => pause.await,
                }
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
    }
    // Pods feed the log capture, Namespaces the manifest.
    let kept = matches!(target.resource.kind.as_str(), "Pod" | "Namespace")
        && target.resource.group.is_empty();
    let alive = if kept {
        f.tracker
            .live
            .values()
            .filter_map(|r| serde_json::from_str(&r.object).ok())
            .collect()
    } else {
        Vec::new()
    };
    Ok((alive, errors))
}

/// Captures every target concurrently; returns the pods alive at the end and what was seen.
#[allow(clippy::too_many_arguments)]
pub async fn capture_objects(
    client: &kube::Client,
    targets: &[Target],
    scope: &Scope,
    window: Window,
    redactor: &Redactor,
    sink: &Sink,
    bar: &ProgressBar,
) -> anyhow::Result<ObjectsOutcome> {
    let now = now_ns();
    let deadline = (window.until_ns > now).then(|| {
        tokio::time::Instant::now() + Duration::from_nanos((window.until_ns - now) as u64)
    });
    bar.set_length(targets.len() as u64);
    let mut outcome = ObjectsOutcome {
        kinds: targets.len(),
        ..Default::default()
    };
    let results = futures_util::stream::iter(targets)
        .map(|t| async move {
            let r = follow(client.clone(), t, scope, window, deadline, redactor, sink).await;
            bar.inc(1);
            r.map(|r| (t, r))
        })
        // A live window needs every watch open at once; a past one only lists.
        .buffer_unordered(if deadline.is_some() {
            targets.len().max(1)
        } else {
            16
        });
    futures_util::pin_mut!(results);
    while let Some(result) = results.next().await {
        let (target, (alive, errors)) = result?;
        outcome.recovered_errors += errors;
        match target.resource.kind.as_str() {
            "Pod" => outcome.pods.extend(alive),
            _ => outcome.namespaces.extend(
                alive
                    .iter()
                    .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string)),
            ),
        }
    }
    Ok(outcome)
}
