//! The request load flowing through the application's call graph, one second at a time.
//!
//! Rates flow top-down from the load generator through each operation's calls (amplified by
//! retries of failing calls), per-pod CPU demand against limits and node capacity gives
//! utilisation, queueing delay and a backlog; outcomes flow bottom-up: each call fails when the
//! route fails (no endpoints, refused, unresolvable, dropped), when the callee fails or when its
//! latency exceeds the caller's timeout. Counters per pod and operation feed the RED metrics; a
//! sampled share of requests is replayed hop by hop into spans and log lines.
//!
//! [`Workload::step`] runs the stages in order, one file each:
//! - [`routes`]: who serves each service, the routes of their calls, each (caller, callee)
//!   pair's reach and client settings ([`routes::EdgeView`]);
//! - [`rates`]: requests per second of every operation, top-down ([`rates::Load`]);
//! - [`cpu`]: per-pod CPU demand against limits and node capacity, giving slowdown, queueing
//!   and shed load per service ([`cpu::Pressure`]);
//! - [`outcomes`]: success share, latency and dominant error of every operation, bottom-up
//!   ([`OpState`]);
//! - [`counters`]: the load generator's totals, per-pod counters and error logs;
//! - [`traces`]: sampled requests handed to the span generator.

mod counters;
mod cpu;
mod outcomes;
mod rates;
mod routes;
mod traces;

use std::collections::{BTreeMap, HashMap};

use problems::app::AppSpec;

use super::calls::OpKey;
use super::flags::Effects;
use super::network::Route;
use super::objects::Key;
use super::world::World;

/// Latency histogram buckets of an instrumentation, in seconds.
pub const GRPC_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
pub const SPANMETRICS_BUCKETS_MS: [f64; 16] = [
    2.0, 4.0, 6.0, 8.0, 10.0, 50.0, 100.0, 200.0, 400.0, 800.0, 1000.0, 1400.0, 2000.0, 5000.0,
    10000.0, 15000.0,
];
/// Spread (log-normal sigma) of request latencies around an operation's median.
const SIGMA: f64 = 0.45;
/// Length of one step, in seconds.
const DT: f64 = 1.0;

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
    /// Requests per second.
    rate: f64,
    /// Share of requests that succeed.
    ok: f64,
    /// Share of requests the service does not fail itself (its callees aside).
    own_ok: f64,
    own_error: Option<(String, String)>,
    /// Median latency in seconds, downstream included.
    latency: f64,
    /// A slow tail: share of requests and their extra seconds (TCP retransmissions).
    tail: (f64, f64),
    /// Dominant failure: (code, message, peer service when a callee failed).
    error: Option<(String, String, Option<String>)>,
}

/// Per-edge state remembered across ticks for retry amplification.
#[derive(Debug, Clone, Default)]
struct EdgeState {
    /// Share of attempts that failed last step.
    fail: f64,
}

/// Rolling state of the workload model.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Operations in topological order (callers before callees).
    order: Vec<OpKey>,
    /// Per (caller service, callee service).
    edges: HashMap<(String, String), EdgeState>,
    /// CPU backlog per pod, in core-seconds.
    backlog: HashMap<Key, f64>,
    pub counters: BTreeMap<(Key, String), OpCounters>,
    /// Load generator totals: (requests, failures), cumulative.
    pub entry: (f64, f64),
    pub buckets: Vec<f64>,
    /// Route of each serving pod to each of its dependencies.
    routes: HashMap<(Key, String), Route>,
    /// Object epoch the routes were resolved at.
    routes_epoch: i64,
    /// Latest per-service view, for alerts: (requests/s, error ratio, p99 seconds).
    pub service_health: BTreeMap<String, (f64, f64, f64)>,
    pub trace_sample: f64,
    spanmetrics: bool,
    /// Pods serving each service, as of an object epoch.
    serving: (i64, BTreeMap<String, Vec<Key>>),
    /// Every operation's outcome in the last step (what a request made now would meet).
    last: HashMap<OpKey, OpState>,
}

/// How an operation fares now, for a single request made from outside the load (a `curl` in
/// a container, a port-forwarded probe).
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Share of requests that succeed.
    pub ok: f64,
    /// Median latency in seconds, downstream included.
    pub latency: f64,
    /// The dominant failure: (code, message).
    pub error: Option<(String, String)>,
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
            last: HashMap::new(),
        }
    }

    pub fn spanmetrics(&self) -> bool {
        self.spanmetrics
    }

    /// The last step's outcome of `operation` on `service`; `None` before the first step or
    /// for an operation nobody calls.
    pub fn outcome(&self, service: &str, operation: &str) -> Option<Outcome> {
        let s = self
            .last
            .get(&(service.to_string(), operation.to_string()))?;
        Some(Outcome {
            ok: s.ok,
            latency: s.latency,
            error: s.error.as_ref().map(|(c, m, _)| (c.clone(), m.clone())),
        })
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

/// What every stage of one step reads: the app, this second's fault effects, who serves each
/// service, and the step's start time.
struct Tick<'a> {
    app: &'a AppSpec,
    effects: &'a Effects,
    serving: &'a BTreeMap<String, Vec<Key>>,
    now: i64,
}

impl Workload {
    /// Advances the load by one second, updating CPU demand in the world, counters, and emitting
    /// sampled spans and logs.
    pub fn step(&mut self, w: &mut World, app: &AppSpec, effects: &Effects, epoch: i64) {
        let serving = self.take_serving(w, app);
        let t = Tick {
            app,
            effects,
            serving: &serving,
            now: w.now,
        };
        self.refresh_routes(w, &t, epoch);
        let reach = routes::Reach {
            t: &t,
            routes: &self.routes,
        };
        let views = routes::edge_views(w, &t, &reach);
        let load = rates::Load::top_down(w, &t, &reach, &self.order, &self.edges, &views);
        let pressure = cpu::Pressure::of(w, &t, &load.rates, &mut self.backlog);
        let states = self.bottom_up(w, &t, &load.rates, &views, &pressure);
        self.count_entry(&t, &states, &load);
        self.count_ops(w, &t, &states);
        traces::sample(w, &t, &states, &self.routes, self.trace_sample, &load);
        self.serving.1 = serving;
        self.last = states;
    }
}
