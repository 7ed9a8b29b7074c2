//! Sampled requests replayed hop by hop into OpenTelemetry spans: a server span per instrumented
//! service, a client span per outgoing call (stores are seen only through their clients' spans),
//! with the semantic-convention attributes (rpc.*, http.*, db.*, net.peer.*) and error status
//! where a hop failed, using this second's outcome probabilities from the workload model.
//!
//! The workload hands a [`Walk`] (this second's [`OpView`]s, routes and serving pods) and a
//! sampled request; [`Walk::trace`] recurses down the call graph, each hop drawing its pod, its
//! calls, their failures and its own latency from the world's RNG, and pushes span rows (and,
//! for the request's entry service, an access or request log line).

use std::collections::{BTreeMap, HashMap};

use problems::app::{AppSpec, CallSpec, Protocol, Role};
use rand::Rng;
use schemas::tables::{Labels, Row, SpanRow};

use super::calls::{OpKey, OpView, client_error, grpc_status};
use super::logs::{self, Level};
use super::network::{DialError, Route};
use super::objects::Key;
use super::programs::{self, LogStyle};
use super::util::{self, NS_PER_SEC};
use super::world::World;

/// The `telemetry.sdk.language` of a program, by how it logs.
fn sdk_language(style: LogStyle) -> &'static str {
    match style {
        LogStyle::Zerolog | LogStyle::SlogJson => "go",
        LogStyle::BoostLog => "cpp",
        LogStyle::Dotnet => "dotnet",
        LogStyle::Java => "java",
        LogStyle::Python => "python",
        LogStyle::Pino => "nodejs",
        LogStyle::Ruby => "ruby",
        LogStyle::Rust => "rust",
        LogStyle::Php => "php",
        _ => "go",
    }
}

/// The resource attributes of a service's spans from one pod.
fn resource(w: &World, app: &AppSpec, service: &str, pod: &Key) -> Labels {
    let mut r = Labels::new();
    r.insert("service.name".into(), service.to_string());
    r.insert("service.namespace".into(), app.name.clone());
    if let Some(p) = w.pods.get(pod) {
        r.insert("k8s.pod.name".into(), p.meta.name.clone());
        r.insert("k8s.pod.uid".into(), p.meta.uid.clone());
        r.insert("service.instance.id".into(), p.meta.uid.clone());
        r.insert("host.name".into(), p.meta.name.clone());
        if let Some(ip) = &p.pod_ip {
            r.insert("k8s.pod.ip".into(), ip.clone());
        }
        if let Some(n) = &p.spec.node_name {
            r.insert("k8s.node.name".into(), n.clone());
        }
    }
    r.insert("k8s.namespace.name".into(), app.namespace.clone());
    r.insert("k8s.deployment.name".into(), service.to_string());
    let style = app
        .service(service)
        .map(programs::log_style)
        .unwrap_or(LogStyle::SlogJson);
    r.insert("telemetry.sdk.language".into(), sdk_language(style).into());
    r.insert("telemetry.sdk.name".into(), "opentelemetry".into());
    r
}

/// rpc/http/db attributes for an operation name on a protocol.
fn op_attributes(op: &str, proto: Protocol, peer: Option<(&str, u16)>, callee: &str) -> Labels {
    let mut a = Labels::new();
    match proto {
        Protocol::Grpc => {
            let trimmed = op.trim_start_matches('/');
            let (svc, method) = trimmed.split_once('/').unwrap_or((trimmed, trimmed));
            a.insert("rpc.system".into(), "grpc".into());
            a.insert("rpc.service".into(), svc.into());
            a.insert("rpc.method".into(), method.into());
        }
        Protocol::Http => {
            let mut parts = op.split_whitespace();
            let first = parts.next().unwrap_or("GET");
            let (method, route) = if first == "HTTP" {
                (parts.next().unwrap_or("GET"), parts.next().unwrap_or("/"))
            } else if first.starts_with('/') {
                ("GET", first)
            } else {
                (first, parts.next().unwrap_or("/"))
            };
            a.insert("http.method".into(), method.into());
            a.insert("http.route".into(), route.into());
            a.insert("http.target".into(), route.into());
        }
        Protocol::Thrift => {
            a.insert("rpc.system".into(), "thrift".into());
            a.insert("rpc.service".into(), callee.into());
            a.insert("rpc.method".into(), op.into());
        }
        Protocol::Mongodb | Protocol::Memcached | Protocol::Redis | Protocol::Postgres => {
            let system = match proto {
                Protocol::Mongodb => "mongodb",
                Protocol::Memcached => "memcached",
                Protocol::Redis => "redis",
                _ => "postgresql",
            };
            a.insert("db.system".into(), system.into());
            a.insert("db.operation".into(), op.into());
            let db = callee
                .trim_start_matches("mongodb-")
                .trim_start_matches("memcached-");
            a.insert("db.name".into(), db.into());
        }
        Protocol::Kafka => {
            a.insert("messaging.system".into(), "kafka".into());
            a.insert("messaging.operation".into(), op.into());
        }
        Protocol::Tcp => {}
    }
    if let Some((host, port)) = peer {
        a.insert("net.peer.name".into(), host.into());
        a.insert("net.peer.port".into(), port.to_string());
    }
    a
}

/// Span name per convention: HTTP spans are `METHOD /route`, the rest keep the operation name.
fn span_name(op: &str) -> String {
    op.strip_prefix("HTTP ").unwrap_or(op).to_string()
}

/// The protocol a service serves on its first port.
fn protocol_of(app: &AppSpec, service: &str) -> Protocol {
    app.service(service)
        .and_then(|s| s.ports.first())
        .map(|p| p.protocol)
        .unwrap_or(Protocol::Tcp)
}

/// Stores, caches, brokers and infrastructure run no OpenTelemetry SDK.
fn instrumented(app: &AppSpec, service: &str) -> bool {
    app.service(service).is_some_and(|s| {
        !matches!(
            s.role,
            Role::Database | Role::Cache | Role::Queue | Role::Infra
        )
    })
}

/// A hop's error: (code, message).
type HopError = (String, String);

/// What every hop of this second's traces walks: the outcomes, routes and serving pods of the
/// step, and the load generator's timeout in seconds (no hop waits longer).
pub struct Walk<'a> {
    pub app: &'a AppSpec,
    pub states: &'a HashMap<OpKey, OpView>,
    pub routes: &'a HashMap<(Key, String), Route>,
    pub serving: &'a BTreeMap<String, Vec<Key>>,
    pub timeout: f64,
}

/// One operation served by one pod within a trace.
struct Hop<'a> {
    op: &'a OpKey,
    trace_id: &'a str,
    pod: Key,
    /// Whether the service records spans itself (else its calls' spans are not recorded).
    server: bool,
    span_id: String,
    /// The span the request came from.
    parent: Option<&'a str>,
    res: Labels,
}

/// One span's own fields; the trace, service and resource come from its hop.
struct Span<'a> {
    id: &'a str,
    parent: Option<&'a str>,
    name: String,
    kind: &'a str,
    start: i64,
    dur: i64,
    err: Option<&'a str>,
    attrs: Labels,
}

/// A call a hop makes: its spec, the callee's protocol, the client span's attributes so far,
/// and when it starts.
struct Outgoing<'a> {
    c: &'a CallSpec,
    proto: Protocol,
    attrs: Labels,
    start: i64,
}

impl Hop<'_> {
    fn push(&self, w: &mut World, s: Span) {
        w.out.push(Row::Span(SpanRow {
            trace_id: self.trace_id.to_string(),
            span_id: s.id.to_string(),
            parent_span_id: s.parent.map(str::to_string),
            service: self.op.0.clone(),
            name: s.name,
            kind: s.kind.to_string(),
            start_ns: s.start,
            duration_ns: s.dur.max(1000),
            status_code: if s.err.is_some() { "error" } else { "unset" }.to_string(),
            status_message: s.err.map(str::to_string),
            resource_attributes: self.res.clone(),
            attributes: s.attrs,
        }));
    }

    /// The parent of spans this hop's calls cause: its own span, or (uninstrumented) its
    /// caller's.
    fn child_parent(&self) -> Option<&str> {
        if self.server {
            Some(self.span_id.as_str())
        } else {
            self.parent
        }
    }

    fn caller_style(&self, app: &AppSpec) -> LogStyle {
        app.service(&self.op.0)
            .map(programs::log_style)
            .unwrap_or(LogStyle::SlogJson)
    }
}

impl Walk<'_> {
    /// Generates the spans of one request to `op` starting at `start`; returns (duration ns,
    /// error).
    pub fn trace(
        &self,
        w: &mut World,
        trace_id: &str,
        op: &OpKey,
        parent: Option<&str>,
        start: i64,
        depth: usize,
    ) -> (i64, Option<HopError>) {
        let Some(view) = self.states.get(op).cloned() else {
            return (
                1_000_000,
                Some(("Unimplemented".into(), format!("unknown method {}", op.1))),
            );
        };
        let pods = self.serving.get(&op.0).cloned().unwrap_or_default();
        if pods.is_empty() || depth > 12 {
            return (
                1_000_000,
                Some(("Unavailable".into(), "no ready instance".into())),
            );
        }
        let pod = pods[w.rng.random_range(0..pods.len())].clone();
        let spec_op = self
            .app
            .service(&op.0)
            .and_then(|s| s.operation(&op.1))
            .cloned();
        let server = instrumented(self.app, &op.0);
        let span_id = util::hex_id(&mut w.rng, 8);
        let res = resource(w, self.app, &op.0, &pod);
        let hop = Hop {
            op,
            trace_id,
            pod,
            server,
            span_id,
            parent,
            res,
        };
        let mut t = start + w.rng.random_range(20_000..200_000);
        let mut err: Option<HopError> = None;
        // The hop's own time is its median less its callees' (weighted by how often it calls).
        let mut own_ms = spec_op
            .as_ref()
            .map(|o| o.latency.as_secs_f64())
            .unwrap_or(0.001);
        let mut child_median = 0.0;
        for c in spec_op.iter().flat_map(|o| &o.calls) {
            child_median += self
                .states
                .get(&(c.service.clone(), c.operation.clone()))
                .map(|v| v.latency * c.probability)
                .unwrap_or(0.0);
        }
        own_ms = own_ms.max(view.latency - child_median);
        for c in spec_op.iter().flat_map(|o| o.calls.clone()) {
            if w.rng.random::<f64>() > c.probability {
                continue;
            }
            let (dur, call_err) = self.call(w, &hop, &c, t, depth);
            if !c.parallel {
                t += dur;
            }
            if let Some(e) = call_err
                && !c.is_async
                && err.is_none()
            {
                err = Some(e);
            }
        }
        if err.is_none() && w.rng.random::<f64>() > view.own_ok {
            err = view
                .own_error
                .clone()
                .or(Some(("Internal".into(), "internal error".into())));
        }
        let own = util::lognormal(&mut w.rng, own_ms.max(1e-5), 0.35);
        t += (own * NS_PER_SEC as f64) as i64;
        let dur = t - start;
        if server {
            self.server_span(w, &hop, start, dur, err.as_ref());
            if depth == 0 {
                self.entry_log(w, &hop, start, dur, err.as_ref());
            }
        }
        (dur, err)
    }

    /// One call of a hop starting at `t`: fails at the dial, or recurses into the callee; the
    /// client (or producer) span is recorded when the caller is instrumented. Returns (duration
    /// ns, error).
    fn call(
        &self,
        w: &mut World,
        hop: &Hop,
        c: &CallSpec,
        t: i64,
        depth: usize,
    ) -> (i64, Option<HopError>) {
        let client_id = util::hex_id(&mut w.rng, 8);
        let route = self
            .routes
            .get(&(hop.pod.clone(), c.service.clone()))
            .cloned();
        let proto = protocol_of(self.app, &c.service);
        let peer = route.as_ref().map(|r| (r.host.clone(), r.port));
        let attrs = op_attributes(
            &c.operation,
            proto,
            peer.as_ref().map(|(h, p)| (h.as_str(), *p)),
            &c.service,
        );
        let mut out = Outgoing {
            c,
            proto,
            attrs,
            start: t,
        };
        let fail_share = route
            .as_ref()
            .and_then(|r| r.failure.as_ref().map(|f| f.0))
            .unwrap_or(0.0);
        let (dur, call_err) = if route.is_some() && w.rng.random::<f64>() < fail_share {
            let e = route
                .as_ref()
                .and_then(|r| r.failure.clone())
                .map(|f| f.1)
                .expect("failure present");
            let (h, p) = peer.unwrap_or_default();
            self.dial_failure(w, hop, &mut out, (&h, p), &e)
        } else {
            let parent = if hop.server {
                Some(client_id.as_str())
            } else {
                hop.parent
            };
            self.downstream(w, hop, &mut out, parent, depth)
        };
        // An uninstrumented hop (a broker, a database) records nothing of its own calls.
        if hop.server {
            let kind = if proto == Protocol::Kafka {
                "producer"
            } else {
                "client"
            };
            hop.push(
                w,
                Span {
                    id: &client_id,
                    parent: hop.child_parent(),
                    name: span_name(&c.operation),
                    kind,
                    start: t,
                    dur,
                    err: call_err.as_ref().map(|e| e.1.as_str()),
                    attrs: out.attrs,
                },
            );
        }
        (dur, call_err)
    }

    /// A call whose connection fails: a timeout waits the whole timeout, a refusal or failed
    /// lookup returns at once.
    fn dial_failure(
        &self,
        w: &mut World,
        hop: &Hop,
        out: &mut Outgoing,
        (host, port): (&str, u16),
        e: &DialError,
    ) -> (i64, Option<HopError>) {
        let d = match e {
            DialError::Timeout { .. } => (self.timeout * NS_PER_SEC as f64) as i64,
            _ => w.rng.random_range(300_000..3_000_000),
        };
        let msg = client_error(hop.caller_style(self.app), out.proto, host, port, e);
        if out.proto == Protocol::Grpc {
            let code = if matches!(e, DialError::Timeout { .. }) {
                "4"
            } else {
                "14"
            };
            out.attrs.insert("rpc.grpc.status_code".into(), code.into());
        }
        (d, Some(("Unavailable".to_string(), msg)))
    }

    /// A call that connects: the callee's trace (its spans parented on `parent`) plus the link's
    /// delay both ways, a retransmitted segment on a lossy link, and the caller's deadline.
    fn downstream(
        &self,
        w: &mut World,
        hop: &Hop,
        out: &mut Outgoing,
        parent: Option<&str>,
        depth: usize,
    ) -> (i64, Option<HopError>) {
        let c = out.c;
        let link = w.runtime.link(&hop.op.0, &c.service);
        let delay = (link.delay_ms * 1e6) as i64;
        let callee = (c.service.clone(), c.operation.clone());
        let (d, e) = self.trace(
            w,
            hop.trace_id,
            &callee,
            parent,
            out.start + delay + 50_000,
            depth + 1,
        );
        let mut d = d + 2 * delay + 100_000;
        if link.loss > 0.0 && w.rng.random::<f64>() < (link.loss * 3.0).min(1.0) {
            d += w.rng.random_range(200_000_000..600_000_000);
        }
        let lost = link.loss > 0.0 && w.rng.random::<f64>() < link.loss * link.loss;
        let attrs = &mut out.attrs;
        if d as f64 > self.timeout * NS_PER_SEC as f64 || lost {
            if out.proto == Protocol::Grpc {
                attrs.insert("rpc.grpc.status_code".into(), "4".into());
            }
            let msg = grpc_status(
                hop.caller_style(self.app),
                "DeadlineExceeded",
                "context deadline exceeded",
            );
            return (
                (self.timeout * NS_PER_SEC as f64) as i64,
                Some(("DeadlineExceeded".to_string(), msg)),
            );
        }
        if out.proto == Protocol::Grpc {
            attrs.insert(
                "rpc.grpc.status_code".into(),
                if e.is_some() { "2" } else { "0" }.into(),
            );
        }
        if out.proto == Protocol::Http {
            attrs.insert(
                "http.status_code".into(),
                if e.is_some() { "500" } else { "200" }.into(),
            );
        }
        (d, e)
    }

    /// The hop's server (or consumer) span, with the status its protocol reports.
    fn server_span(&self, w: &mut World, hop: &Hop, start: i64, dur: i64, err: Option<&HopError>) {
        let op = hop.op;
        let proto = protocol_of(self.app, &op.0);
        let mut attrs = op_attributes(&op.1, proto, None, &op.0);
        let port = self.app.service(&op.0).and_then(|s| s.ports.first());
        if let Some(p) = port {
            attrs.insert("net.host.port".into(), p.target_port().to_string());
        }
        match proto {
            Protocol::Grpc => {
                let code = match err.map(|e| e.0.as_str()) {
                    None => "0",
                    Some("DeadlineExceeded") => "4",
                    Some("Unavailable") => "14",
                    Some("Unimplemented") => "12",
                    Some("ResourceExhausted") => "8",
                    Some("Unauthorized") => "16",
                    _ => "2",
                };
                attrs.insert("rpc.grpc.status_code".into(), code.into());
            }
            Protocol::Http => {
                attrs.insert(
                    "http.status_code".into(),
                    if err.is_some() { "500" } else { "200" }.into(),
                );
            }
            _ => {}
        }
        // A worker without ports takes its work from a queue.
        let kind = if port.is_none() { "consumer" } else { "server" };
        hop.push(
            w,
            Span {
                id: &hop.span_id,
                parent: hop.parent,
                name: span_name(&op.1),
                kind,
                start,
                dur,
                err: err.map(|e| e.1.as_str()),
                attrs,
            },
        );
    }

    /// The entry service's line for the request: an access line from an edge server, else a
    /// request log line; written at the request's end.
    fn entry_log(&self, w: &mut World, hop: &Hop, start: i64, dur: i64, err: Option<&HopError>) {
        let (op, trace_id) = (hop.op, hop.trace_id);
        let spec = self.app.service(&op.0).expect("op of a service");
        let style = programs::log_style(spec);
        let restart = w
            .pods
            .get(&hop.pod)
            .and_then(|p| p.statuses.first())
            .map(|s| s.restart_count)
            .unwrap_or(0);
        let (lvl, msg) = match err {
            None => (
                Level::Info,
                format!(
                    "{} handled in {:.1}ms trace_id={trace_id}",
                    span_name(&op.1),
                    dur as f64 / 1e6
                ),
            ),
            Some((_, m)) => (
                Level::Error,
                format!("{} failed: {m} trace_id={trace_id}", span_name(&op.1)),
            ),
        };
        let saved = w.now;
        w.now = start + dur;
        let upstream_failed = err.is_some_and(|(c, _)| c == "Unavailable");
        let authority = spec
            .ports
            .first()
            .map(|p| format!("{}:{}", op.0, p.port))
            .unwrap_or_else(|| op.0.clone());
        let status = match err {
            None => 200,
            Some(_) if upstream_failed => 503,
            Some(_) => 500,
        };
        let line = logs::access(
            style,
            w.now,
            &op.1,
            status,
            upstream_failed,
            dur as f64 / 1e6,
            &authority,
            &util::uuid(&mut w.rng),
        )
        .unwrap_or_else(|| logs::line(style, &op.0, lvl, w.now, &msg));
        w.log(&hop.pod, spec.container_name(), restart, "stdout", line);
        w.now = saved;
    }
}
