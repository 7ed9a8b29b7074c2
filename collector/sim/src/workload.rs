//! The request load flowing through the application's call graph, one second at a time.
//!
//! Rates flow top-down from the load generator through each operation's calls (amplified by
//! retries of failing calls), per-pod CPU demand against limits and node capacity gives
//! utilisation, queueing delay and a backlog; outcomes flow bottom-up: each call fails when the
//! route fails (no endpoints, refused, unresolvable, dropped), when the callee fails or when its
//! latency exceeds the caller's timeout. Counters per pod and operation feed the RED metrics; a
//! sampled share of requests is replayed hop by hop into spans and log lines.

use std::collections::{BTreeMap, HashMap};

use problems::app::{AppSpec, Protocol};
use rand::Rng;

use super::flags::Effects;
use super::logs::{self, Level};
use super::network::{self, DialError, Route};
use super::objects::*;
use super::programs::{self, LogStyle};
use super::runtime::DbAuth;
use super::util::{self, NS_PER_SEC};
use super::world::World;

/// A service operation: (service, operation).
pub type OpKey = (String, String);

/// Latency histogram buckets of an instrumentation, in seconds.
pub const GRPC_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
pub const SPANMETRICS_BUCKETS_MS: [f64; 16] = [
    2.0, 4.0, 6.0, 8.0, 10.0, 50.0, 100.0, 200.0, 400.0, 800.0, 1000.0, 1400.0, 2000.0, 5000.0,
    10000.0, 15000.0,
];
const SIGMA: f64 = 0.45;

/// Cumulative server-side counters of one operation on one pod.
#[derive(Debug, Clone, Default)]
pub struct OpCounters {
    pub requests: f64,
    pub errors: f64,
    /// Counts per error code label (grpc code name or HTTP status).
    pub by_code: BTreeMap<String, f64>,
    pub duration_sum: f64,
    /// Cumulative bucket counts over [`Workload::buckets`] (not yet cumulative across buckets).
    pub buckets: Vec<f64>,
}

/// What one operation looks like this second.
#[derive(Debug, Clone, Default)]
struct OpState {
    rate: f64,
    ok: f64,
    /// Share of requests the service fails itself (not because of a callee).
    own_ok: f64,
    own_error: Option<(String, String)>,
    /// Median latency in seconds, downstream included.
    latency: f64,
    /// A slow tail: share of requests and their extra seconds (TCP retransmissions).
    tail: (f64, f64),
    /// Dominant failure: (share of the op's failures, code, message, peer service).
    error: Option<(String, String, Option<String>)>,
}

/// Per-edge state remembered across ticks for retry amplification.
#[derive(Debug, Clone, Default)]
struct EdgeState {
    fail: f64,
}

/// Rolling state of the workload model.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Operations in topological order (callers before callees).
    order: Vec<OpKey>,
    edges: HashMap<(String, String), EdgeState>,
    /// CPU backlog per pod, in core-seconds.
    backlog: HashMap<Key, f64>,
    pub counters: BTreeMap<(Key, String), OpCounters>,
    /// Load generator totals: (requests, failures), cumulative.
    pub entry: (f64, f64),
    pub buckets: Vec<f64>,
    routes: HashMap<(Key, String), Route>,
    routes_epoch: i64,
    /// Latest per-service view, for alerts: (requests/s, error ratio, p99 seconds).
    pub service_health: BTreeMap<String, (f64, f64, f64)>,
    pub trace_sample: f64,
    spanmetrics: bool,
    /// Pods serving each service, as of an object epoch.
    serving: (i64, BTreeMap<String, Vec<Key>>),
}

impl Workload {
    pub fn new(app: &AppSpec, trace_sample: f64) -> Workload {
        let spanmetrics = !app.name.contains("hotel");
        let buckets = if spanmetrics {
            SPANMETRICS_BUCKETS_MS.iter().map(|b| b / 1000.0).collect()
        } else {
            GRPC_BUCKETS.to_vec()
        };
        Workload {
            order: topo_order(app),
            edges: HashMap::new(),
            backlog: HashMap::new(),
            counters: BTreeMap::new(),
            entry: (0.0, 0.0),
            buckets,
            routes: HashMap::new(),
            routes_epoch: -1,
            service_health: BTreeMap::new(),
            trace_sample,
            spanmetrics,
            serving: (-1, BTreeMap::new()),
        }
    }

    pub fn spanmetrics(&self) -> bool {
        self.spanmetrics
    }
}

/// Operations reachable from the load generator's mix, callers first.
fn topo_order(app: &AppSpec) -> Vec<OpKey> {
    fn visit(
        app: &AppSpec,
        k: &OpKey,
        seen: &mut Vec<OpKey>,
        stack: &mut Vec<OpKey>,
        out: &mut Vec<OpKey>,
    ) {
        if seen.contains(k) || stack.contains(k) {
            return;
        }
        stack.push(k.clone());
        if let Some(op) = app.service(&k.0).and_then(|s| s.operation(&k.1)) {
            for c in &op.calls {
                visit(
                    app,
                    &(c.service.clone(), c.operation.clone()),
                    seen,
                    stack,
                    out,
                );
            }
        }
        stack.pop();
        seen.push(k.clone());
        out.push(k.clone());
    }
    let mut out = vec![];
    let mut seen = vec![];
    for m in &app.workload.mix {
        visit(
            app,
            &(app.workload.target.clone(), m.operation.clone()),
            &mut seen,
            &mut vec![],
            &mut out,
        );
    }
    // Operations not reached by the mix still get served (background callers).
    for s in &app.services {
        for o in &s.operations {
            visit(
                app,
                &(s.name.clone(), o.name.clone()),
                &mut seen,
                &mut vec![],
                &mut out,
            );
        }
    }
    out.reverse();
    out
}

/// Pods running each service's program and up (Running, not terminating), in one pass.
fn instances(w: &World, app: &AppSpec) -> BTreeMap<String, Vec<Key>> {
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

/// gRPC status name of a dial error or timeout.
fn grpc_code(e: &DialError) -> &'static str {
    match e {
        DialError::Timeout { .. } => "DeadlineExceeded",
        _ => "Unavailable",
    }
}

/// How a gRPC client library renders a failed call's status, in the caller's language.
pub fn grpc_status(style: LogStyle, code: &str, msg: &str) -> String {
    let upper = || {
        let mut out = String::new();
        for (i, ch) in code.chars().enumerate() {
            if ch.is_ascii_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(ch.to_ascii_uppercase());
        }
        out
    };
    let number = match code {
        "OK" => 0,
        "Canceled" => 1,
        "InvalidArgument" => 3,
        "DeadlineExceeded" => 4,
        "NotFound" => 5,
        "PermissionDenied" => 7,
        "ResourceExhausted" => 8,
        "Unimplemented" => 12,
        "Internal" => 13,
        "Unavailable" => 14,
        "Unauthenticated" => 16,
        _ => 2,
    };
    match style {
        LogStyle::Pino => format!("{number} {}: {msg}", upper()),
        LogStyle::Python => format!("StatusCode.{}: {msg}", upper()),
        LogStyle::Java => format!("io.grpc.StatusRuntimeException: {}: {msg}", upper()),
        LogStyle::Dotnet => format!("Status(StatusCode=\"{code}\", Detail=\"{msg}\")"),
        _ => format!("rpc error: code = {code} desc = {msg}"),
    }
}

/// What a client library prints for a failed call, in the caller's language and protocol.
pub fn client_error(
    style: LogStyle,
    proto: Protocol,
    host: &str,
    port: u16,
    e: &DialError,
) -> String {
    let addr = match e {
        DialError::Refused { addr } | DialError::Timeout { addr } => addr.clone(),
        DialError::NoSuchHost { .. } => format!("{host}:{port}"),
    };
    match style {
        LogStyle::Pino => {
            // grpc-js reports a failed lookup by its resolver, not by the socket error.
            if proto == Protocol::Grpc && matches!(e, DialError::NoSuchHost { .. }) {
                return format!(
                    "14 UNAVAILABLE: Name resolution failed for target dns:{host}:{port}"
                );
            }
            let last = match e {
                DialError::NoSuchHost { .. } => format!("Error: getaddrinfo ENOTFOUND {host}"),
                DialError::Refused { .. } => format!("Error: connect ECONNREFUSED {addr}"),
                DialError::Timeout { .. } => format!("Error: connect ETIMEDOUT {addr}"),
            };
            return if proto == Protocol::Grpc {
                format!("14 UNAVAILABLE: No connection established. Last error: {last}")
            } else {
                last
            };
        }
        LogStyle::Python | LogStyle::Dotnet | LogStyle::Java if proto == Protocol::Grpc => {
            let last = match e {
                DialError::NoSuchHost { .. } => format!(
                    "DNS resolution failed for {host}:{port}: C-ares status is not ARES_SUCCESS qtype=A name={host} is_balancer=0: Domain name not found"
                ),
                DialError::Refused { .. } => {
                    format!("ipv4:{addr}: Failed to connect to remote host: Connection refused")
                }
                DialError::Timeout { .. } => {
                    format!("ipv4:{addr}: Failed to connect to remote host: Timeout occurred")
                }
            };
            return format!(
                "StatusCode.UNAVAILABLE: failed to connect to all addresses; last error: UNKNOWN: {last}"
            );
        }
        LogStyle::Rust if proto == Protocol::Http => {
            let cause = match e {
                DialError::NoSuchHost { .. } => {
                    "dns error: failed to lookup address information: Name or service not known"
                        .to_string()
                }
                DialError::Refused { .. } => {
                    "tcp connect error: Connection refused (os error 111)".to_string()
                }
                DialError::Timeout { .. } => "operation timed out".to_string(),
            };
            return format!(
                "error sending request for url (http://{host}:{port}/): error trying to connect: {cause}"
            );
        }
        LogStyle::Dotnet if proto == Protocol::Postgres => {
            return match e {
                DialError::NoSuchHost { .. } => format!(
                    "Npgsql.NpgsqlException (0x80004005): Failed to connect to {host}:{port}\n ---> System.Net.Sockets.SocketException (0xFFFDFFFF): Name or service not known"
                ),
                DialError::Refused { addr } => format!(
                    "Npgsql.NpgsqlException (0x80004005): Failed to connect to {addr}\n ---> System.Net.Sockets.SocketException (111): Connection refused"
                ),
                DialError::Timeout { addr } => format!(
                    "Npgsql.NpgsqlException (0x80004005): Failed to connect to {addr}\n ---> System.TimeoutException: The operation has timed out."
                ),
            };
        }
        LogStyle::Dotnet if proto == Protocol::Redis => {
            return format!(
                "It was not possible to connect to the redis server(s). Error connecting right now. To allow this multiplexer to continue retrying until it's able to connect, use abortConnect=false in your connection string or AbortOnConnectFail=false; in your code. ({})",
                match e {
                    DialError::NoSuchHost { .. } => format!("{host}:{port}/Unknown host"),
                    DialError::Refused { .. } => format!(
                        "{addr}/Interactive, Disconnected, last: NONE, origin: BeginConnectAsync, outstanding: 0, last-read: 0s ago, last-write: 0s ago, connection refused"
                    ),
                    DialError::Timeout { .. } =>
                        format!("{addr}/Interactive, Connecting, last: NONE, connect timeout"),
                }
            );
        }
        _ => {}
    }
    match proto {
        Protocol::Grpc => format!(
            "rpc error: code = Unavailable desc = connection error: desc = \"transport: Error while dialing: {}\"",
            e.text()
        ),
        Protocol::Http => format!("Get \"http://{host}:{port}/\": {}", e.text()),
        Protocol::Thrift => match e {
            DialError::NoSuchHost { .. } => {
                format!("Could not resolve host for client socket: {host}: no such host")
            }
            DialError::Timeout { .. } => format!(
                "TSocket::open() connect() <Host: {host} Port: {port}>: Connection timed out"
            ),
            DialError::Refused { .. } => {
                format!("TSocket::open() connect() <Host: {host} Port: {port}>: Connection refused")
            }
        },
        Protocol::Mongodb => match e {
            DialError::NoSuchHost { .. } => format!("no reachable servers: {}", e.text()),
            other => format!(
                "server selection error: context deadline exceeded, current topology: {{ Type: Unknown, Servers: [{{ Addr: {host}:{port}, Type: Unknown, Last error: {} }}, ] }}",
                other.text()
            ),
        },
        Protocol::Memcached => {
            format!("memcache: no servers configured or available: {}", e.text())
        }
        Protocol::Redis => format!("Error {}", e.text()),
        _ => e.text(),
    }
}

impl Workload {
    /// Advances the load by `dt` seconds, updating CPU demand in the world, counters, and emitting
    /// sampled spans and logs.
    pub fn step(&mut self, w: &mut World, app: &AppSpec, effects: &Effects, epoch: i64) {
        let dt = 1.0;
        let now = w.now;
        // Who serves each service, and the routes of their calls.
        // Who serves changes only with objects (pod states), so it is kept per epoch.
        if self.serving.0 != w.epoch || self.serving.1.is_empty() {
            self.serving = (w.epoch, instances(w, app));
        }
        let serving = std::mem::take(&mut self.serving.1);
        if epoch != self.routes_epoch || (now / NS_PER_SEC) % 5 == 0 {
            let previous = std::mem::take(&mut self.routes);
            self.routes_epoch = epoch;
            for s in &app.services {
                let deps: Vec<String> = app
                    .dependencies(&s.name)
                    .into_iter()
                    .map(str::to_string)
                    .collect();
                for pk in serving[&s.name].clone() {
                    let pod = &w.pods[&pk];
                    let mut deps_all = deps.clone();
                    if s.name == app.workload.generator && !deps_all.contains(&app.workload.target)
                    {
                        deps_all.push(app.workload.target.clone());
                    }
                    // Consumers pull from the broker: nothing dials them.
                    deps_all.retain(|d| app.service(d).is_some_and(|c| !c.ports.is_empty()));
                    for d in deps_all {
                        let last_ip = previous
                            .get(&(pk.clone(), d.clone()))
                            .and_then(|r| r.cluster_ip.as_deref());
                        let r = network::route(
                            w,
                            app,
                            pod,
                            s,
                            &d,
                            effects.unreachable(&s.name, &d),
                            last_ip,
                        );
                        self.routes.insert((pk.clone(), d), r);
                    }
                }
            }
        }
        // Service-level reach of each (caller service -> callee): share of connections accepted.
        let reach = |routes: &HashMap<(Key, String), Route>,
                     caller_pods: &[Key],
                     callee: &str|
         -> (f64, Option<(DialError, String, u16)>) {
            if caller_pods.is_empty() {
                return (0.0, None);
            }
            if app.service(callee).is_some_and(|c| c.ports.is_empty()) {
                // A consumer group: messages reach it while any consumer runs.
                let up = serving.get(callee).is_some_and(|v| !v.is_empty());
                return (if up { 1.0 } else { 0.0 }, None);
            }
            let mut ok = 0.0;
            let mut err = None;
            for pk in caller_pods {
                if let Some(r) = routes.get(&(pk.clone(), callee.to_string())) {
                    let f = r.failure.as_ref().map(|f| f.0).unwrap_or(0.0);
                    ok += 1.0 - f;
                    if let Some((_, e)) = &r.failure {
                        err.get_or_insert((e.clone(), r.host.clone(), r.port));
                    }
                }
            }
            (ok / caller_pods.len() as f64, err)
        };
        // Top-down rates.
        let mut rates: HashMap<OpKey, f64> = HashMap::new();
        let wl = &app.workload;
        let diurnal = 1.0 + 0.08 * (std::f64::consts::TAU * w.secs() / 1800.0).sin();
        let total_rate = wl.rate * w.runtime.load_multiplier * effects.load_multiplier() * diurnal;
        let gen_pods = serving.get(&wl.generator).cloned().unwrap_or_default();
        let (entry_reach, entry_err) = if app.service(&wl.generator).is_some() {
            reach(&self.routes, &gen_pods, &wl.target)
        } else {
            (1.0, None)
        };
        let entry_reach = entry_reach * (1.0 - w.runtime.entry_drop);
        let mix_total: f64 = wl.mix.iter().map(|m| m.weight).sum::<f64>().max(1e-9);
        for m in &wl.mix {
            *rates
                .entry((wl.target.clone(), m.operation.clone()))
                .or_default() += total_rate * m.weight / mix_total * entry_reach;
        }
        let retries_of = |w: &World, caller: &str, callee: &str| -> (u32, Option<f64>) {
            // RPC client settings live in the caller's env: `<CALLEE>_RETRIES`/`_TIMEOUT` or the
            // global GRPC_CLIENT_* variables.
            let ns = app.namespace.as_str();
            let Some(pk) = serving.get(caller).and_then(|v| v.first()) else {
                return (0, None);
            };
            let Some(c) = w.pods.get(pk).and_then(|p| p.spec.containers.first()) else {
                return (0, None);
            };
            let prefix = callee.to_ascii_uppercase().replace('-', "_");
            let get =
                |names: [String; 2]| names.iter().find_map(|n| programs::env_value(w, ns, c, n));
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
        };
        // Client settings and reach of every (caller, callee) pair, once per tick.
        type EdgeView = (u32, Option<f64>, f64, Option<(DialError, String, u16)>);
        let mut edge_view: HashMap<(&str, &str), EdgeView> = HashMap::new();
        for s in &app.services {
            for c in s.operations.iter().flat_map(|o| &o.calls) {
                edge_view
                    .entry((s.name.as_str(), c.service.as_str()))
                    .or_insert_with(|| {
                        let (retries, timeout) = retries_of(w, &s.name, &c.service);
                        let (share, err) = reach(&self.routes, &serving[&s.name], &c.service);
                        (retries, timeout, share, err)
                    });
            }
        }
        for k in &self.order {
            let r = rates.get(k).copied().unwrap_or(0.0);
            if r <= 0.0 {
                continue;
            }
            let Some(op) = app.service(&k.0).and_then(|s| s.operation(&k.1)) else {
                continue;
            };
            for c in &op.calls {
                let f = self
                    .edges
                    .get(&(k.0.clone(), c.service.clone()))
                    .map(|e| e.fail)
                    .unwrap_or(0.0);
                let (retries, _, reach_share, _) = edge_view[&(k.0.as_str(), c.service.as_str())];
                let attempts = (0..=retries).map(|i| f.powi(i as i32)).sum::<f64>();
                *rates
                    .entry((c.service.clone(), c.operation.clone()))
                    .or_default() += r * c.probability * attempts * reach_share;
            }
        }
        // Per-pod CPU demand, utilisation and backlog.
        w.demand.clear();
        let mut slowdown: BTreeMap<String, f64> = BTreeMap::new();
        let mut queue_wait: BTreeMap<String, f64> = BTreeMap::new();
        let mut rejected: BTreeMap<String, f64> = BTreeMap::new();
        // Node contention: requested demand vs node CPU minus stressors.
        let mut node_demand: BTreeMap<String, f64> = BTreeMap::new();
        let mut pod_demand: Vec<(Key, String, f64, f64, Option<f64>)> = vec![];
        for s in &app.services {
            let pods = &serving[&s.name];
            if pods.is_empty() {
                continue;
            }
            let gogc = pods
                .first()
                .and_then(|pk| w.pods.get(pk))
                .and_then(|p| {
                    p.spec
                        .containers
                        .first()
                        .and_then(|c| programs::env_value(w, &app.namespace, c, "GOGC"))
                })
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(100.0);
            let gc_factor = 1.0 + (100.0 / gogc.max(1.0) - 1.0).clamp(0.0, 99.0) * 0.03;
            // Requests per second and CPU seconds per second over the service's operations.
            let (req_per_s, cpu_per_s) = s.operations.iter().fold((0.0, 0.0), |(req, cpu), o| {
                let rate = rates
                    .get(&(s.name.clone(), o.name.clone()))
                    .copied()
                    .unwrap_or(0.0);
                (req + rate, cpu + rate * o.cpu_ms / 1000.0)
            });
            let cpu_per_s = cpu_per_s * gc_factor;
            let per_pod = cpu_per_s / pods.len() as f64;
            let req_per_pod = req_per_s / pods.len() as f64;
            for pk in pods {
                let p = &w.pods[pk];
                let limit = p
                    .spec
                    .containers
                    .first()
                    .and_then(|c| c.resources.limits.cpu_milli)
                    .map(|m| m as f64 / 1000.0);
                let node = p.spec.node_name.clone().unwrap_or_default();
                *node_demand.entry(node.clone()).or_default() += per_pod + s.usage.idle_cpu.cores();
                pod_demand.push((pk.clone(), s.name.clone(), per_pod, req_per_pod, limit));
            }
        }
        for (node, nr) in &w.runtime.nodes {
            *node_demand.entry(node.clone()).or_default() += nr.cpu_stress_milli as f64 / 1000.0;
        }
        w.requests.clear();
        let mut throttle_tail: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for (pk, svc, demand, req_rate, limit) in pod_demand {
            let node = w.pods[&pk].spec.node_name.clone().unwrap_or_default();
            let node_cores = w
                .nodes
                .get(&node)
                .map(|n| n.cpu_milli as f64 / 1000.0)
                .unwrap_or(4.0);
            let nd = node_demand.get(&node).copied().unwrap_or(0.0);
            let share = if nd > node_cores {
                node_cores / nd
            } else {
                1.0
            };
            let extra =
                w.runtime.service(&svc).extra_cpu_milli as f64 / 1000.0 + effects.extra_cpu(&svc);
            // A service without a limit can burst to a couple of cores.
            let capacity = (limit.unwrap_or(2.0) - extra * 0.5).max(0.02) * share;
            w.demand.insert(pk.clone(), demand);
            w.requests.insert(pk.clone(), req_rate);
            // A request landing in a throttled CFS period waits for the next one.
            if let Some(l) = limit {
                let base = app.service(&svc).map_or(0.0, |s| s.usage.idle_cpu.cores()) + extra;
                let cost = if req_rate > 0.0 {
                    demand / req_rate
                } else {
                    0.0
                };
                let share = util::cfs_throttled_share(l, base, req_rate, cost);
                // Once the quota is spent the container waits out the rest of the period.
                let wait = 0.1 * (1.0 - l.min(0.9));
                let t = throttle_tail.entry(svc.clone()).or_insert((0.0, 0.0));
                if share > t.0 {
                    *t = (share, wait);
                }
            }
            let backlog = self.backlog.entry(pk.clone()).or_default();
            *backlog = (*backlog + (demand - capacity) * dt).max(0.0);
            // A server holds a bounded queue; beyond ~20 s of work it sheds load.
            let cap = capacity * 20.0;
            let shed = if *backlog > cap {
                let x = (*backlog - cap) / (*backlog).max(1e-9);
                *backlog = cap;
                x
            } else {
                0.0
            };
            let rho = (demand / capacity).min(0.97);
            // A saturated node makes every thread wait for a CPU: run-queue delay on each hop.
            let contention = if nd > node_cores * 0.7 {
                1.0 + 2.0 * nd / node_cores
            } else {
                1.0
            };
            let sd = (1.0 / (1.0 - rho)).min(30.0) * contention;
            let sched = 0.004 * (contention - 1.0);
            let e = slowdown.entry(svc.clone()).or_insert(0.0);
            *e = e.max(sd);
            let q = queue_wait.entry(svc.clone()).or_insert(0.0);
            *q = q.max(*backlog / capacity + sched);
            let rj = rejected.entry(svc.clone()).or_insert(0.0);
            *rj = rj.max(shed);
        }
        // Bottom-up outcomes.
        let mut states: HashMap<OpKey, OpState> = HashMap::new();
        let mut new_edges: HashMap<(String, String), f64> = HashMap::new();
        for k in self.order.iter().rev() {
            let Some(spec) = app.service(&k.0) else {
                continue;
            };
            let Some(op) = spec.operation(&k.1) else {
                continue;
            };
            let rt = w.runtime.service(&k.0);
            let image_bad = serving[&k.0].iter().any(|pk| {
                w.pods[pk].spec.containers.first().is_some_and(|c| {
                    w.runtime.images.get(&c.image)
                        == Some(&problems::primitive::ImageEffect::Incompatible)
                })
            });
            let mut own_err: Vec<(f64, String, String)> = vec![];
            let fe = effects.op_error(&k.0, &k.1);
            if fe > 0.0 {
                own_err.push((
                    fe,
                    "Internal".into(),
                    format!("{} failed: feature flag error", k.1),
                ));
            }
            if image_bad {
                own_err.push((
                    1.0,
                    "Internal".into(),
                    "unexpected error: incompatible server version".into(),
                ));
            }
            let proto = spec
                .ports
                .first()
                .map(|p| p.protocol)
                .unwrap_or(Protocol::Tcp);
            let db =
                k.0.trim_start_matches("mongodb-")
                    .trim_end_matches("-mongodb");
            let auth_msg = match (rt.db_auth, proto) {
                (DbAuth::Ok, _) => None,
                (DbAuth::RolesRevoked, Protocol::Mongodb) => Some(format!("(Unauthorized) not authorized on {db}-db to execute command {{ {}: \"{db}\", $db: \"{db}-db\" }}", k.1)),
                (DbAuth::UserRemoved, Protocol::Mongodb) => Some("server returned error on SASL authentication step: Authentication failed.".to_string()),
                (DbAuth::TlsRequired, _) => Some("connection closed by server: the server is configured to only allow SSL connections (SSLHandshakeFailed)".to_string()),
                (_, Protocol::Redis) => Some("NOAUTH Authentication required.".to_string()),
                (_, Protocol::Postgres) => Some(format!("FATAL: password authentication failed for user \"{db}\"")),
                _ => Some("authentication failed".to_string()),
            };
            if let Some(m) = auth_msg {
                own_err.push((1.0, "Unauthenticated".into(), m));
            }
            let disk = rt.disk_read_errors;
            if disk > 0.0 {
                own_err.push((disk, "IOError".into(), "WiredTiger error message: __posix_file_read: /data/db/collection-2--4139238539423957523.wt: handle-read: pread: failed to read 4096 bytes at offset 28672: Input/output error (I/O error)".into()));
            }
            if let Some((sc, ratio)) = &rt.syscall_failure {
                own_err.push((*ratio, "Internal".into(), sc.clone()));
            }
            if let Some(rj) = rejected.get(&k.0).filter(|r| **r > 0.0) {
                own_err.push((
                    *rj,
                    "ResourceExhausted".into(),
                    "server overloaded: request queue full".into(),
                ));
            }
            let base = op.latency.as_secs_f64();
            let mut lat = base * slowdown.get(&k.0).copied().unwrap_or(1.0)
                + queue_wait.get(&k.0).copied().unwrap_or(0.0)
                + effects.op_latency_ms(&k.0, &k.1) / 1000.0;
            if rt.locked_table.is_some() {
                lat += 30.0;
            }
            let mut ok: f64 = own_err.iter().fold(1.0, |a, (r, _, _)| a * (1.0 - r));
            let own_ok = ok;
            let own_error = own_err
                .iter()
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, c, m)| (c.clone(), m.clone()));
            let mut dominant: Option<(f64, String, String, Option<String>)> = own_err
                .iter()
                .cloned()
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(r, c, m)| (r, c, m, None));
            let mut par_max: f64 = 0.0;
            let mut tail: (f64, f64) = throttle_tail.get(&k.0).copied().unwrap_or((0.0, 0.0));
            for c in &op.calls {
                let callee = states
                    .get(&(c.service.clone(), c.operation.clone()))
                    .cloned()
                    .unwrap_or(OpState {
                        rate: 0.0,
                        ok: 0.0,
                        own_ok: 0.0,
                        own_error: None,
                        latency: 0.0,
                        tail: (0.0, 0.0),
                        error: Some((
                            "Unimplemented".into(),
                            format!("unknown method {}", c.operation),
                            None,
                        )),
                    });
                let (retries, timeout, reach_share, dial_err) =
                    edge_view[&(k.0.as_str(), c.service.as_str())].clone();
                let timeout = timeout.unwrap_or(wl.timeout.as_secs_f64().min(10.0));
                let link = w.runtime.link(&k.0, &c.service);
                let callee_lat = callee.latency + link.delay_ms / 1000.0 + link.loss * 0.2;
                // A lost segment of the exchange waits for a retransmission timeout (>= 200 ms).
                let p_tail = 1.0 - (1.0 - callee.tail.0) * (1.0 - (link.loss * 3.0).min(1.0));
                if !c.is_async && p_tail > 0.0 {
                    tail = (
                        1.0 - (1.0 - tail.0) * (1.0 - p_tail * c.probability),
                        tail.1
                            .max(callee.tail.1)
                            .max(if link.loss > 0.0 { 0.2 } else { 0.0 }),
                    );
                }
                let p_timeout = 1.0 - util::lognormal_cdf(timeout, callee_lat.max(1e-4), SIGMA);
                let p_attempt =
                    reach_share * (1.0 - link.loss.powi(2)) * callee.ok * (1.0 - p_timeout);
                let p_call = 1.0 - (1.0 - p_attempt).powi(retries as i32 + 1);
                new_edges.insert((k.0.clone(), c.service.clone()), 1.0 - p_attempt);
                let call_lat = if p_attempt > 0.5 {
                    callee_lat.min(timeout)
                } else if reach_share < 0.5 {
                    0.002
                } else {
                    timeout
                };
                let call_lat = call_lat * c.probability;
                if c.parallel {
                    par_max = par_max.max(call_lat);
                } else {
                    lat += par_max + call_lat;
                    par_max = 0.0;
                }
                if c.is_async {
                    continue;
                }
                let fail = 1.0 - p_call;
                let fail = fail * c.probability;
                ok *= 1.0 - fail;
                if fail > 0.0 && dominant.as_ref().is_none_or(|d| fail > d.0) {
                    let proto = app
                        .service(&c.service)
                        .and_then(|s| s.ports.first())
                        .map(|p| p.protocol)
                        .unwrap_or(Protocol::Tcp);
                    let (code, msg) = if reach_share < 0.999
                        && let Some((e, host, port)) = &dial_err
                    {
                        (
                            grpc_code(e).to_string(),
                            client_error(programs::log_style(spec), proto, host, *port, e),
                        )
                    } else if p_timeout > 1.0 - callee.ok.max(1e-9) || p_timeout > 0.3 {
                        (
                            "DeadlineExceeded".to_string(),
                            match proto {
                                Protocol::Grpc => grpc_status(
                                    programs::log_style(spec),
                                    "DeadlineExceeded",
                                    "context deadline exceeded",
                                ),
                                Protocol::Mongodb => {
                                    "context deadline exceeded: operation was interrupted"
                                        .to_string()
                                }
                                _ => format!(
                                    "Get \"http://{}/\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
                                    c.service
                                ),
                            },
                        )
                    } else {
                        let (code, msg) = callee
                            .error
                            .clone()
                            .map(|(c, m, _)| (c, m))
                            .unwrap_or(("Unknown".into(), "upstream error".into()));
                        (
                            if proto == Protocol::Grpc {
                                code.clone()
                            } else {
                                "Unknown".into()
                            },
                            match proto {
                                Protocol::Grpc => {
                                    grpc_status(programs::log_style(spec), &code, &msg)
                                }
                                Protocol::Http => format!(
                                    "request to {} failed with status 500: {msg}",
                                    c.service
                                ),
                                _ => msg,
                            },
                        )
                    };
                    dominant = Some((fail, code, msg, Some(c.service.clone())));
                }
            }
            lat += par_max;
            let (mut own_ok, mut own_error) = (own_ok, own_error);
            if rt.locked_table.is_some() {
                ok *= 0.05;
                own_ok *= 0.05;
                own_error = Some((
                    "DeadlineExceeded".into(),
                    "operation exceeded time limit: waiting for lock".into(),
                ));
                dominant = Some((
                    0.95,
                    "DeadlineExceeded".into(),
                    "operation exceeded time limit: waiting for lock".into(),
                    None,
                ));
            }
            states.insert(
                k.clone(),
                OpState {
                    rate: rates.get(k).copied().unwrap_or(0.0),
                    ok: ok.clamp(0.0, 1.0),
                    own_ok,
                    own_error,
                    latency: lat,
                    tail,
                    error: dominant.map(|d| (d.1, d.2, d.3)),
                },
            );
        }
        for (e, f) in new_edges {
            self.edges.entry(e).or_default().fail = f;
        }
        // Entry outcome.
        let entry_ok: f64 = {
            let mut acc = 0.0;
            for m in &wl.mix {
                let st = states.get(&(wl.target.clone(), m.operation.clone()));
                let p_to = st
                    .map(|s| {
                        1.0 - util::lognormal_cdf(
                            wl.timeout.as_secs_f64(),
                            s.latency.max(1e-4),
                            SIGMA,
                        )
                    })
                    .unwrap_or(0.0);
                acc += m.weight / mix_total * st.map(|s| s.ok * (1.0 - p_to)).unwrap_or(0.0);
            }
            acc * entry_reach
        };
        let entry_n = total_rate * dt;
        self.entry.0 += entry_n;
        self.entry.1 += entry_n * (1.0 - entry_ok);
        // Counters per pod and op.
        self.service_health.clear();
        for k in &self.order {
            let st = match states.get(k) {
                Some(s) => s.clone(),
                None => continue,
            };
            let pods = &serving[&k.0];
            if pods.is_empty() || st.rate <= 0.0 {
                continue;
            }
            let per_pod = st.rate / pods.len() as f64;
            let h = self
                .service_health
                .entry(k.0.clone())
                .or_insert((0.0, 0.0, 0.0));
            let err_ratio = 1.0 - st.ok;
            let tot = h.0 + st.rate;
            h.1 = (h.1 * h.0 + err_ratio * st.rate) / tot.max(1e-9);
            let p99 = if st.tail.0 > 0.01 {
                (st.latency + st.tail.1) * (2.326 * SIGMA).exp()
            } else {
                st.latency * (2.326 * SIGMA).exp()
            };
            h.2 = h.2.max(p99);
            h.0 = tot;
            for pk in pods {
                let n = util::poisson(&mut w.rng, per_pod * dt) as f64;
                if n == 0.0 {
                    continue;
                }
                let errs = if st.ok >= 1.0 {
                    0.0
                } else {
                    (0..n as u64)
                        .filter(|_| w.rng.random::<f64>() > st.ok)
                        .count() as f64
                };
                let c = self
                    .counters
                    .entry((pk.clone(), k.1.clone()))
                    .or_insert_with(|| OpCounters {
                        buckets: vec![0.0; self.buckets.len()],
                        ..Default::default()
                    });
                c.requests += n;
                c.errors += errs;
                let code = st
                    .error
                    .as_ref()
                    .map(|e| e.0.clone())
                    .unwrap_or_else(|| "Unknown".into());
                *c.by_code.entry("OK".into()).or_default() += n - errs;
                if errs > 0.0 {
                    *c.by_code.entry(code).or_default() += errs;
                }
                c.duration_sum +=
                    n * (st.latency + st.tail.0 * st.tail.1) * (SIGMA * SIGMA / 2.0).exp();
                let mut prev = 0.0;
                for (i, b) in self.buckets.iter().enumerate() {
                    let cdf = (1.0 - st.tail.0)
                        * util::lognormal_cdf(*b, st.latency.max(1e-5), SIGMA)
                        + st.tail.0
                            * util::lognormal_cdf(*b, (st.latency + st.tail.1).max(1e-5), SIGMA);
                    c.buckets[i] += ((cdf - prev) * n).round();
                    prev = cdf;
                }
                // Error logs, a few per pod per second as real services print them.
                if errs > 0.0
                    && let Some((_, msg, peer)) = &st.error
                {
                    let spec = app.service(&k.0).expect("op of a service");
                    let style = programs::log_style(spec);
                    let lines = (errs as usize).min(3);
                    for _ in 0..lines {
                        let text = match peer {
                            Some(p) => logs::call_error(style, p, &k.1, msg),
                            None => msg.clone(),
                        };
                        let container = spec.container_name().to_string();
                        let restart = w
                            .pods
                            .get(pk)
                            .and_then(|p| p.statuses.first())
                            .map(|s| s.restart_count)
                            .unwrap_or(0);
                        let jitter: i64 = w.rng.random_range(0..NS_PER_SEC);
                        let line = logs::line(style, &k.0, Level::Error, now + jitter, &text);
                        let stream = if matches!(style, LogStyle::Zerolog | LogStyle::BoostLog) {
                            "stdout"
                        } else {
                            "stderr"
                        };
                        w.now += jitter;
                        w.log(pk, &container, restart, stream, line);
                        w.now -= jitter;
                    }
                }
            }
        }
        // Sampled traces.
        let view = states_view(&states);
        // At least ~2 traces a second, so low-rate apps still show every path.
        let sample = self.trace_sample.max(2.0 / wl.rate.max(1.0)).min(1.0);
        // Requests the load generator could not deliver leave no trace (it is not instrumented).
        let n_traces = util::poisson(&mut w.rng, total_rate * sample * dt * entry_reach);
        for _ in 0..n_traces {
            let pick: f64 = w.rng.random::<f64>() * mix_total;
            let mut acc = 0.0;
            let mut op = wl.mix[0].operation.clone();
            for m in &wl.mix {
                acc += m.weight;
                if pick <= acc {
                    op = m.operation.clone();
                    break;
                }
            }
            let start = now + w.rng.random_range(0..NS_PER_SEC);
            let trace_id = util::hex_id(&mut w.rng, 16);
            let _ = entry_err;
            super::spans::trace(
                w,
                app,
                &view,
                &self.routes,
                &serving,
                &(wl.target.clone(), op),
                &trace_id,
                None,
                start,
                wl.timeout.as_secs_f64(),
                0,
            );
        }
        self.serving.1 = serving;
    }
}

/// Outcome view the span generator walks.
#[derive(Debug, Clone)]
pub struct OpView {
    pub ok: f64,
    pub own_ok: f64,
    pub own_error: Option<(String, String)>,
    pub latency: f64,
    pub error: Option<(String, String, Option<String>)>,
}

fn states_view(states: &HashMap<OpKey, OpState>) -> HashMap<OpKey, OpView> {
    states
        .iter()
        .map(|(k, s)| {
            (
                k.clone(),
                OpView {
                    ok: s.ok,
                    own_ok: s.own_ok,
                    own_error: s.own_error.clone(),
                    latency: s.latency,
                    error: s.error.clone(),
                },
            )
        })
        .collect()
}
