//! Sampled requests replayed hop by hop into OpenTelemetry spans: a server span per instrumented
//! service, a client span per outgoing call (stores are seen only through their clients' spans),
//! with the semantic-convention attributes (rpc.*, http.*, db.*, net.peer.*) and error status
//! where a hop failed, using this second's outcome probabilities from the workload model.

use std::collections::{BTreeMap, HashMap};

use problems::app::{AppSpec, Protocol, Role};
use rand::Rng;
use schemas::tables::{Labels, Row, SpanRow};

use super::logs::{self, Level};
use super::network::Route;
use super::objects::Key;
use super::programs::{self, LogStyle};
use super::util::{self, NS_PER_SEC};
use super::workload::{OpKey, OpView};
use super::world::World;

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

fn protocol_of(app: &AppSpec, service: &str) -> Protocol {
    app.service(service)
        .and_then(|s| s.ports.first())
        .map(|p| p.protocol)
        .unwrap_or(Protocol::Tcp)
}

fn instrumented(app: &AppSpec, service: &str) -> bool {
    app.service(service).is_some_and(|s| {
        !matches!(
            s.role,
            Role::Database | Role::Cache | Role::Queue | Role::Infra
        )
    })
}

#[allow(clippy::too_many_arguments)]
fn push(
    w: &mut World,
    trace: &str,
    span: &str,
    parent: Option<&str>,
    service: &str,
    name: String,
    kind: &str,
    start: i64,
    dur: i64,
    err: Option<&str>,
    res: Labels,
    attrs: Labels,
) {
    w.out.push(Row::Span(SpanRow {
        trace_id: trace.to_string(),
        span_id: span.to_string(),
        parent_span_id: parent.map(str::to_string),
        service: service.to_string(),
        name,
        kind: kind.to_string(),
        start_ns: start,
        duration_ns: dur.max(1000),
        status_code: if err.is_some() { "error" } else { "unset" }.to_string(),
        status_message: err.map(str::to_string),
        resource_attributes: res,
        attributes: attrs,
    }));
}

/// Generates the spans of one request to `op` starting at `start`; returns (duration ns, error).
#[allow(clippy::too_many_arguments)]
pub fn trace(
    w: &mut World,
    app: &AppSpec,
    states: &HashMap<OpKey, OpView>,
    routes: &HashMap<(Key, String), Route>,
    serving: &BTreeMap<String, Vec<Key>>,
    op: &OpKey,
    trace_id: &str,
    parent: Option<&str>,
    start: i64,
    timeout: f64,
    depth: usize,
) -> (i64, Option<(String, String)>) {
    let Some(view) = states.get(op).cloned() else {
        return (
            1_000_000,
            Some(("Unimplemented".into(), format!("unknown method {}", op.1))),
        );
    };
    let pods = serving.get(&op.0).cloned().unwrap_or_default();
    if pods.is_empty() || depth > 12 {
        return (
            1_000_000,
            Some(("Unavailable".into(), "no ready instance".into())),
        );
    }
    let pod = pods[w.rng.random_range(0..pods.len())].clone();
    let spec_op = app.service(&op.0).and_then(|s| s.operation(&op.1)).cloned();
    let server = instrumented(app, &op.0);
    let span_id = util::hex_id(&mut w.rng, 8);
    let my_parent = if server {
        Some(span_id.as_str())
    } else {
        parent
    };
    let res = resource(w, app, &op.0, &pod);
    let mut t = start + w.rng.random_range(20_000..200_000);
    let mut err: Option<(String, String)> = None;
    let mut own_ms = spec_op
        .as_ref()
        .map(|o| o.latency.as_secs_f64())
        .unwrap_or(0.001);
    let mut child_median = 0.0;
    if let Some(o) = &spec_op {
        for c in &o.calls {
            child_median += states
                .get(&(c.service.clone(), c.operation.clone()))
                .map(|v| v.latency * c.probability)
                .unwrap_or(0.0);
        }
    }
    own_ms = own_ms.max(view.latency - child_median);
    for c in spec_op.iter().flat_map(|o| o.calls.clone()) {
        if w.rng.random::<f64>() > c.probability {
            continue;
        }
        let client_id = util::hex_id(&mut w.rng, 8);
        let route = routes.get(&(pod.clone(), c.service.clone())).cloned();
        let proto = protocol_of(app, &c.service);
        let peer = route.as_ref().map(|r| (r.host.clone(), r.port));
        let mut attrs = op_attributes(
            &c.operation,
            proto,
            peer.as_ref().map(|(h, p)| (h.as_str(), *p)),
            &c.service,
        );
        let link = w.runtime.link(&op.0, &c.service);
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
            let d = match e {
                super::network::DialError::Timeout { .. } => (timeout * NS_PER_SEC as f64) as i64,
                _ => w.rng.random_range(300_000..3_000_000),
            };
            let (h, p) = peer.clone().unwrap_or_default();
            let caller_style = app
                .service(&op.0)
                .map(programs::log_style)
                .unwrap_or(LogStyle::SlogJson);
            let msg = super::workload::client_error(caller_style, proto, &h, p, &e);
            if proto == Protocol::Grpc {
                attrs.insert(
                    "rpc.grpc.status_code".into(),
                    if matches!(e, super::network::DialError::Timeout { .. }) {
                        "4"
                    } else {
                        "14"
                    }
                    .into(),
                );
            }
            (d, Some(("Unavailable".to_string(), msg)))
        } else {
            let delay = (link.delay_ms * 1e6) as i64;
            let (d, e) = trace(
                w,
                app,
                states,
                routes,
                serving,
                &(c.service.clone(), c.operation.clone()),
                trace_id,
                if server { Some(&client_id) } else { parent },
                t + delay + 50_000,
                timeout,
                depth + 1,
            );
            let mut d = d + 2 * delay + 100_000;
            if link.loss > 0.0 && w.rng.random::<f64>() < (link.loss * 3.0).min(1.0) {
                d += w.rng.random_range(200_000_000..600_000_000);
            }
            let lost = link.loss > 0.0 && w.rng.random::<f64>() < link.loss * link.loss;
            if d as f64 > timeout * NS_PER_SEC as f64 || lost {
                if proto == Protocol::Grpc {
                    attrs.insert("rpc.grpc.status_code".into(), "4".into());
                }
                (
                    (timeout * NS_PER_SEC as f64) as i64,
                    Some((
                        "DeadlineExceeded".to_string(),
                        super::workload::grpc_status(
                            app.service(&op.0)
                                .map(programs::log_style)
                                .unwrap_or(LogStyle::SlogJson),
                            "DeadlineExceeded",
                            "context deadline exceeded",
                        ),
                    )),
                )
            } else {
                if proto == Protocol::Grpc {
                    attrs.insert(
                        "rpc.grpc.status_code".into(),
                        if e.is_some() { "2" } else { "0" }.into(),
                    );
                }
                if proto == Protocol::Http {
                    attrs.insert(
                        "http.status_code".into(),
                        if e.is_some() { "500" } else { "200" }.into(),
                    );
                }
                (d, e)
            }
        };
        // An uninstrumented hop (a broker, a database) records nothing of its own calls.
        if server {
            let kind = if proto == Protocol::Kafka {
                "producer"
            } else {
                "client"
            };
            push(
                w,
                trace_id,
                &client_id,
                my_parent,
                &op.0,
                span_name(&c.operation),
                kind,
                t,
                dur,
                call_err.as_ref().map(|e| e.1.as_str()),
                res.clone(),
                attrs,
            );
        }
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
        let proto = protocol_of(app, &op.0);
        let mut attrs = op_attributes(&op.1, proto, None, &op.0);
        if let Some(p) = app.service(&op.0).and_then(|s| s.ports.first()) {
            attrs.insert("net.host.port".into(), p.target_port().to_string());
        }
        match proto {
            Protocol::Grpc => {
                let code = match err.as_ref().map(|e| e.0.as_str()) {
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
        push(
            w,
            trace_id,
            &span_id,
            parent,
            &op.0,
            span_name(&op.1),
            // A worker without ports takes its work from a queue.
            if app.service(&op.0).is_some_and(|s| s.ports.is_empty()) {
                "consumer"
            } else {
                "server"
            },
            start,
            dur,
            err.as_ref().map(|e| e.1.as_str()),
            res,
            attrs,
        );
        if depth == 0 {
            let spec = app.service(&op.0).expect("op of a service");
            let style = programs::log_style(spec);
            let restart = w
                .pods
                .get(&pod)
                .and_then(|p| p.statuses.first())
                .map(|s| s.restart_count)
                .unwrap_or(0);
            let (lvl, msg) = match &err {
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
            let upstream_failed = err.as_ref().is_some_and(|(c, _)| c == "Unavailable");
            let authority = app
                .service(&op.0)
                .and_then(|s| s.ports.first())
                .map(|p| format!("{}:{}", op.0, p.port))
                .unwrap_or_else(|| op.0.clone());
            let status = match &err {
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
            w.log(&pod, spec.container_name(), restart, "stdout", line);
            w.now = saved;
        }
    }
    (dur, err)
}
