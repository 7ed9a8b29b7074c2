//! Who serves each service and where their calls go: the pods up for each service (kept per
//! object epoch), the route of every (pod, dependency) pair (refreshed on a new epoch and every
//! five seconds), and from them each (caller service, callee) pair's share of accepted
//! connections and the caller's client settings, once per step.

use std::collections::{BTreeMap, HashMap};

use super::{Tick, Workload};
use crate::network::{self, DialError, Route};
use crate::objects::Key;
use crate::programs;
use crate::util::NS_PER_SEC;
use crate::world::World;

/// The first failing dial of a caller: the error, and the host and port it dialled.
pub(super) type Dial = (DialError, String, u16);

/// Pods running each service's program and up (Running, not terminating), in one pass.
fn instances(w: &World, app: &problems::app::AppSpec) -> BTreeMap<String, Vec<Key>> {
    let mut out: BTreeMap<String, Vec<Key>> = app
        .services
        .iter()
        .map(|s| (s.name.clone(), vec![]))
        .collect();
    for (k, p) in &w.pods {
        if p.meta.deleted_at.is_some() {
            continue;
        }
        for (c, s) in p.spec.containers.iter().zip(&p.statuses) {
            if !s.state.is_running() {
                continue;
            }
            if let Some(pr) = programs::identify(app, c) {
                let v = out.entry(pr.spec.name.clone()).or_default();
                if v.last() != Some(k) {
                    v.push(k.clone());
                }
            }
        }
    }
    out
}

impl Workload {
    /// Who serves each service this step; the caller hands it back at the end of the step.
    pub(super) fn take_serving(
        &mut self,
        w: &World,
        app: &problems::app::AppSpec,
    ) -> BTreeMap<String, Vec<Key>> {
        // Who serves changes only with objects (pod states), so it is kept per epoch.
        if self.serving.0 != w.epoch || self.serving.1.is_empty() {
            self.serving = (w.epoch, instances(w, app));
        }
        std::mem::take(&mut self.serving.1)
    }

    /// Re-resolves the route of every serving pod to each of its dependencies when objects
    /// changed, and every five seconds besides (DNS and endpoints drift without an epoch).
    pub(super) fn refresh_routes(&mut self, w: &World, t: &Tick, epoch: i64) {
        if epoch == self.routes_epoch && (t.now / NS_PER_SEC) % 5 != 0 {
            return;
        }
        let app = t.app;
        let previous = std::mem::take(&mut self.routes);
        self.routes_epoch = epoch;
        for s in &app.services {
            let deps: Vec<String> = app
                .dependencies(&s.name)
                .into_iter()
                .map(str::to_string)
                .collect();
            for pk in t.serving[&s.name].clone() {
                let pod = &w.pods[&pk];
                let mut deps_all = deps.clone();
                if s.name == app.workload.generator && !deps_all.contains(&app.workload.target) {
                    deps_all.push(app.workload.target.clone());
                }
                // Consumers pull from the broker: nothing dials them.
                deps_all.retain(|d| app.service(d).is_some_and(|c| !c.ports.is_empty()));
                for d in deps_all {
                    let last_ip = previous
                        .get(&(pk.clone(), d.clone()))
                        .and_then(|r| r.cluster_ip.as_deref());
                    let unreachable = t.effects.unreachable(&s.name, &d);
                    let r = network::route(w, app, pod, s, &d, unreachable, last_ip);
                    self.routes.insert((pk.clone(), d), r);
                }
            }
        }
    }
}

/// Service-level reach over this step's routes.
pub(super) struct Reach<'a> {
    pub t: &'a Tick<'a>,
    pub routes: &'a HashMap<(Key, String), Route>,
}

impl Reach<'_> {
    /// Share of the callers' connections to `callee` accepted, and the first failing dial.
    pub fn of(&self, caller_pods: &[Key], callee: &str) -> (f64, Option<Dial>) {
        if caller_pods.is_empty() {
            return (0.0, None);
        }
        if self
            .t
            .app
            .service(callee)
            .is_some_and(|c| c.ports.is_empty())
        {
            // A consumer group: messages reach it while any consumer runs.
            let up = self.t.serving.get(callee).is_some_and(|v| !v.is_empty());
            return (if up { 1.0 } else { 0.0 }, None);
        }
        let mut ok = 0.0;
        let mut err = None;
        for pk in caller_pods {
            if let Some(r) = self.routes.get(&(pk.clone(), callee.to_string())) {
                let f = r.failure.as_ref().map(|f| f.0).unwrap_or(0.0);
                ok += 1.0 - f;
                if let Some((_, e)) = &r.failure {
                    err.get_or_insert((e.clone(), r.host.clone(), r.port));
                }
            }
        }
        (ok / caller_pods.len() as f64, err)
    }
}

/// How one caller service reaches one callee this step.
#[derive(Debug, Clone)]
pub(super) struct EdgeView {
    /// Retries of a failed call, from the caller's client settings.
    pub retries: u32,
    /// The caller's timeout for the call in seconds, when it sets one.
    pub timeout: Option<f64>,
    /// Share of connections accepted.
    pub reach: f64,
    pub dial_err: Option<Dial>,
}

/// Edges keyed by (caller service, callee service).
pub(super) type EdgeViews<'a> = HashMap<(&'a str, &'a str), EdgeView>;

/// Client settings and reach of every (caller, callee) pair, once per step.
pub(super) fn edge_views<'a>(w: &World, t: &Tick<'a>, reach: &Reach) -> EdgeViews<'a> {
    let mut out = EdgeViews::new();
    for s in &t.app.services {
        for c in s.operations.iter().flat_map(|o| &o.calls) {
            out.entry((s.name.as_str(), c.service.as_str()))
                .or_insert_with(|| {
                    let (retries, timeout) = client_settings(w, t, &s.name, &c.service);
                    let (share, dial_err) = reach.of(&t.serving[&s.name], &c.service);
                    EdgeView {
                        retries,
                        timeout,
                        reach: share,
                        dial_err,
                    }
                });
        }
    }
    out
}

/// The caller's retries and timeout (seconds) for calls to `callee`.
fn client_settings(w: &World, t: &Tick, caller: &str, callee: &str) -> (u32, Option<f64>) {
    // RPC client settings live in the caller's env: `<CALLEE>_RETRIES`/`_TIMEOUT` or the
    // global GRPC_CLIENT_* variables.
    let ns = t.app.namespace.as_str();
    let Some(pk) = t.serving.get(caller).and_then(|v| v.first()) else {
        return (0, None);
    };
    let Some(c) = w.pods.get(pk).and_then(|p| p.spec.containers.first()) else {
        return (0, None);
    };
    let prefix = callee.to_ascii_uppercase().replace('-', "_");
    let get = |names: [String; 2]| names.iter().find_map(|n| programs::env_value(w, ns, c, n));
    let retries = get([
        format!("{prefix}_RETRIES"),
        "GRPC_CLIENT_RETRIES_ON_ERROR".into(),
    ])
    .and_then(|v| v.parse().ok())
    .unwrap_or(0);
    let timeout = get([format!("{prefix}_TIMEOUT"), "GRPC_CLIENT_TIMEOUT".into()])
        .and_then(|v| v.parse::<problems::Dur>().ok())
        .map(|d| d.as_secs_f64());
    (retries, timeout)
}
