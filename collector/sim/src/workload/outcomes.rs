//! Bottom-up outcomes: callees before callers, each operation's success share, median latency,
//! slow tail and dominant error, from its own failures (feature flags, incompatible images, the
//! database's auth, disk and syscall faults, shed load), its CPU pressure and each call's route,
//! link, timeout, retries and callee outcome. The per-edge failure share of an attempt is kept
//! for next step's retry amplification.

use std::collections::HashMap;

use problems::app::{CallSpec, OperationSpec, Protocol, ServiceSpec};

use crate::calls::{OpKey, client_error, grpc_code, grpc_status};
use crate::programs;
use crate::runtime::{DbAuth, ServiceRuntime};
use crate::util;
use crate::world::World;

use super::cpu::Pressure;
use super::routes::{EdgeView, EdgeViews};
use super::{OpState, SIGMA, Tick, Workload};

/// A failure an operation causes itself: (share of requests, code, message).
type OwnError = (f64, String, String);

/// A failure of an operation: (share of requests, code, message, peer service).
type Failure = (f64, String, String, Option<String>);

const LOCK_WAIT: &str = "operation exceeded time limit: waiting for lock";

impl Workload {
    /// Every operation's outcome this step; remembers each edge's attempt failure share.
    pub(super) fn bottom_up(
        &mut self,
        w: &World,
        t: &Tick,
        rates: &HashMap<OpKey, f64>,
        views: &EdgeViews,
        pressure: &Pressure,
    ) -> HashMap<OpKey, OpState> {
        let mut out = Outcomes {
            w,
            t,
            views,
            pressure,
            states: HashMap::new(),
            new_edges: HashMap::new(),
        };
        for k in self.order.iter().rev() {
            let Some(spec) = t.app.service(&k.0) else {
                continue;
            };
            let Some(op) = spec.operation(&k.1) else {
                continue;
            };
            let rate = rates.get(k).copied().unwrap_or(0.0);
            let state = out.op(k, spec, op, rate);
            out.states.insert(k.clone(), state);
        }
        for (e, f) in out.new_edges {
            self.edges.entry(e).or_default().fail = f;
        }
        out.states
    }
}

/// The bottom-up pass: what it reads, and the outcomes so far.
struct Outcomes<'a> {
    w: &'a World,
    t: &'a Tick<'a>,
    views: &'a EdgeViews<'a>,
    pressure: &'a Pressure,
    /// Outcomes of the operations done (every callee of the next one).
    states: HashMap<OpKey, OpState>,
    /// Share of failed attempts per (caller service, callee service).
    new_edges: HashMap<(String, String), f64>,
}

/// An operation's outcome as its calls are folded in.
struct Acc {
    ok: f64,
    lat: f64,
    /// Longest of the parallel calls since the last sequential one.
    par_max: f64,
    tail: (f64, f64),
    dominant: Option<Failure>,
}

impl Outcomes<'_> {
    fn op(&mut self, k: &OpKey, spec: &ServiceSpec, op: &OperationSpec, rate: f64) -> OpState {
        let rt = self.w.runtime.service(&k.0);
        let own_err = self.own_errors(k, spec, &rt);
        let p = self.pressure;
        let base = op.latency.as_secs_f64();
        let mut lat = base * p.slowdown.get(&k.0).copied().unwrap_or(1.0)
            + p.queue_wait.get(&k.0).copied().unwrap_or(0.0)
            + self.t.effects.op_latency_ms(&k.0, &k.1) / 1000.0;
        if rt.locked_table.is_some() {
            lat += 30.0;
        }
        let ok: f64 = own_err.iter().fold(1.0, |a, (r, _, _)| a * (1.0 - r));
        let own_ok = ok;
        let own_error = own_err
            .iter()
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, c, m)| (c.clone(), m.clone()));
        let dominant = own_err
            .iter()
            .cloned()
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(r, c, m)| (r, c, m, None));
        let mut acc = Acc {
            ok,
            lat,
            par_max: 0.0,
            tail: p.throttle_tail.get(&k.0).copied().unwrap_or((0.0, 0.0)),
            dominant,
        };
        for c in &op.calls {
            self.call(k, spec, c, &mut acc);
        }
        acc.lat += acc.par_max;
        let (mut own_ok, mut own_error) = (own_ok, own_error);
        if rt.locked_table.is_some() {
            acc.ok *= 0.05;
            own_ok *= 0.05;
            own_error = Some(("DeadlineExceeded".into(), LOCK_WAIT.into()));
            acc.dominant = Some((0.95, "DeadlineExceeded".into(), LOCK_WAIT.into(), None));
        }
        OpState {
            rate,
            ok: acc.ok.clamp(0.0, 1.0),
            own_ok,
            own_error,
            latency: acc.lat,
            tail: acc.tail,
            error: acc.dominant.map(|d| (d.1, d.2, d.3)),
        }
    }

    /// The failures the operation's service causes itself, whatever its callees do.
    fn own_errors(&self, k: &OpKey, spec: &ServiceSpec, rt: &ServiceRuntime) -> Vec<OwnError> {
        let w = self.w;
        let image_bad = self.t.serving[&k.0].iter().any(|pk| {
            w.pods[pk].spec.containers.first().is_some_and(|c| {
                w.runtime.images.get(&c.image)
                    == Some(&problems::primitive::ImageEffect::Incompatible)
            })
        });
        let mut own_err: Vec<OwnError> = vec![];
        let fe = self.t.effects.op_error(&k.0, &k.1);
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
        if let Some(m) = auth_error(k, protocol_of(spec), rt.db_auth) {
            own_err.push((1.0, "Unauthenticated".into(), m));
        }
        let disk = rt.disk_read_errors;
        if disk > 0.0 {
            own_err.push((disk, "IOError".into(), "WiredTiger error message: __posix_file_read: /data/db/collection-2--4139238539423957523.wt: handle-read: pread: failed to read 4096 bytes at offset 28672: Input/output error (I/O error)".into()));
        }
        if let Some((sc, ratio)) = &rt.syscall_failure {
            own_err.push((*ratio, "Internal".into(), sc.clone()));
        }
        if let Some(rj) = self.pressure.rejected.get(&k.0).filter(|r| **r > 0.0) {
            own_err.push((
                *rj,
                "ResourceExhausted".into(),
                "server overloaded: request queue full".into(),
            ));
        }
        own_err
    }
}

impl Outcomes<'_> {
    /// Folds one call of `k` into its outcome: the attempt's chance through route, link, timeout
    /// and callee, retries, the call's latency (parallel calls overlap) and its failure.
    fn call(&mut self, k: &OpKey, spec: &ServiceSpec, c: &CallSpec, acc: &mut Acc) {
        let callee = self
            .states
            .get(&(c.service.clone(), c.operation.clone()))
            .cloned()
            .unwrap_or_else(|| unknown_method(c));
        let EdgeView {
            retries,
            timeout,
            reach: reach_share,
            dial_err,
        } = self.views[&(k.0.as_str(), c.service.as_str())].clone();
        let wl = &self.t.app.workload;
        let timeout = timeout.unwrap_or(wl.timeout.as_secs_f64().min(10.0));
        let link = self.w.runtime.link(&k.0, &c.service);
        let callee_lat = callee.latency + link.delay_ms / 1000.0 + link.loss * 0.2;
        // A lost segment of the exchange waits for a retransmission timeout (>= 200 ms).
        let p_tail = 1.0 - (1.0 - callee.tail.0) * (1.0 - (link.loss * 3.0).min(1.0));
        if !c.is_async && p_tail > 0.0 {
            acc.tail = (
                1.0 - (1.0 - acc.tail.0) * (1.0 - p_tail * c.probability),
                acc.tail
                    .1
                    .max(callee.tail.1)
                    .max(if link.loss > 0.0 { 0.2 } else { 0.0 }),
            );
        }
        let p_timeout = 1.0 - util::lognormal_cdf(timeout, callee_lat.max(1e-4), SIGMA);
        let p_attempt = reach_share * (1.0 - link.loss.powi(2)) * callee.ok * (1.0 - p_timeout);
        let p_call = 1.0 - (1.0 - p_attempt).powi(retries as i32 + 1);
        self.new_edges
            .insert((k.0.clone(), c.service.clone()), 1.0 - p_attempt);
        // A call that mostly gets through takes the callee's time; one refused takes a moment;
        // one that mostly times out takes the whole timeout.
        let call_lat = if p_attempt > 0.5 {
            callee_lat.min(timeout)
        } else if reach_share < 0.5 {
            0.002
        } else {
            timeout
        };
        let call_lat = call_lat * c.probability;
        if c.parallel {
            acc.par_max = acc.par_max.max(call_lat);
        } else {
            acc.lat += acc.par_max + call_lat;
            acc.par_max = 0.0;
        }
        if c.is_async {
            return;
        }
        let fail = 1.0 - p_call;
        let fail = fail * c.probability;
        acc.ok *= 1.0 - fail;
        if fail > 0.0 && acc.dominant.as_ref().is_none_or(|d| fail > d.0) {
            let dial = dial_err.as_ref().filter(|_| reach_share < 0.999);
            let (code, msg) = call_failure(self.t, spec, c, dial, p_timeout, &callee);
            acc.dominant = Some((fail, code, msg, Some(c.service.clone())));
        }
    }
}

/// A callee the caller names but no service implements.
fn unknown_method(c: &CallSpec) -> OpState {
    OpState {
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
    }
}

/// The code and message a caller reports for a failed call: the dial error when the route
/// fails, a deadline when the callee is too slow, else the callee's own error as the caller's
/// client library renders it.
fn call_failure(
    t: &Tick,
    spec: &ServiceSpec,
    c: &CallSpec,
    dial: Option<&super::routes::Dial>,
    p_timeout: f64,
    callee: &OpState,
) -> (String, String) {
    let style = programs::log_style(spec);
    let proto = t.app.service(&c.service).map_or(Protocol::Tcp, protocol_of);
    if let Some((e, host, port)) = dial {
        return (
            grpc_code(e).to_string(),
            client_error(style, proto, host, *port, e),
        );
    }
    if p_timeout > 1.0 - callee.ok.max(1e-9) || p_timeout > 0.3 {
        let msg = match proto {
            Protocol::Grpc => grpc_status(style, "DeadlineExceeded", "context deadline exceeded"),
            Protocol::Mongodb => "context deadline exceeded: operation was interrupted".to_string(),
            _ => format!(
                "Get \"http://{}/\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
                c.service
            ),
        };
        return ("DeadlineExceeded".to_string(), msg);
    }
    let (code, msg) = callee
        .error
        .clone()
        .map(|(c, m, _)| (c, m))
        .unwrap_or(("Unknown".into(), "upstream error".into()));
    match proto {
        Protocol::Grpc => {
            let msg = grpc_status(style, &code, &msg);
            (code, msg)
        }
        Protocol::Http => (
            "Unknown".into(),
            format!("request to {} failed with status 500: {msg}", c.service),
        ),
        _ => ("Unknown".into(), msg),
    }
}

/// The protocol a service serves on its first port.
fn protocol_of(spec: &ServiceSpec) -> Protocol {
    spec.ports
        .first()
        .map(|p| p.protocol)
        .unwrap_or(Protocol::Tcp)
}

/// What the store's clients are told when the database's auth is broken.
fn auth_error(k: &OpKey, proto: Protocol, auth: DbAuth) -> Option<String> {
    let db =
        k.0.trim_start_matches("mongodb-")
            .trim_end_matches("-mongodb");
    match (auth, proto) {
        (DbAuth::Ok, _) => None,
        (DbAuth::RolesRevoked, Protocol::Mongodb) => Some(format!("(Unauthorized) not authorized on {db}-db to execute command {{ {}: \"{db}\", $db: \"{db}-db\" }}", k.1)),
        (DbAuth::UserRemoved | DbAuth::PasswordChanged, Protocol::Mongodb) => Some("server returned error on SASL authentication step: Authentication failed.".to_string()),
        (DbAuth::TlsRequired, _) => Some("connection closed by server: the server is configured to only allow SSL connections (SSLHandshakeFailed)".to_string()),
        (_, Protocol::Redis) => Some("NOAUTH Authentication required.".to_string()),
        (_, Protocol::Postgres) => Some(format!("FATAL: password authentication failed for user \"{db}\"")),
        _ => Some("authentication failed".to_string()),
    }
}
