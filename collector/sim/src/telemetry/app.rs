//! The application's RED metrics as its instrumentation exports them, from the workload's
//! per-pod, per-operation counters: go-grpc-prometheus and promhttp series per pod for
//! hotel-reservation; for the OpenTelemetry demo and social-network, the OTel collector's
//! spanmetrics connector, which aggregates per service and span.

use std::collections::BTreeMap;

use problems::app::{AppSpec, Protocol};
use schemas::tables::Labels;

use crate::objects::Pod;
use crate::programs;
use crate::workload::{OpCounters, Workload};
use crate::world::World;

use super::{Family, Out, labels};

pub(super) const FAMILIES: &[Family] = &[
    (
        "grpc_server_started_total",
        "counter",
        "Total number of RPCs started on the server.",
        "",
    ),
    (
        "grpc_server_handled_total",
        "counter",
        "Total number of RPCs completed on the server, regardless of success or failure.",
        "",
    ),
    (
        "grpc_server_handling_seconds",
        "histogram",
        "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
        "seconds",
    ),
    (
        "http_requests_total",
        "counter",
        "Total number of HTTP requests by status code, handler and method.",
        "",
    ),
    (
        "http_request_duration_seconds",
        "histogram",
        "HTTP request latencies in seconds.",
        "seconds",
    ),
    ("traces_span_metrics_calls_total", "counter", "", ""),
    (
        "traces_span_metrics_duration_milliseconds",
        "histogram",
        "",
        "milliseconds",
    ),
];

pub(super) fn scrape(o: &mut Out, w: &World, app: &AppSpec, wl: &Workload) {
    if wl.spanmetrics() {
        spanmetrics(o, app, wl, by_span(w, app, wl));
    } else {
        instrumented(o, w, app, wl);
    }
}

/// `up` of the application's scrape targets: the OTel collector, or each pod of a service that
/// exports its own metrics, which answers while its serving container runs.
pub(super) fn up(o: &mut Out, w: &World, app: &AppSpec, wl: &Workload) {
    if wl.spanmetrics() {
        o.up(&[("job", COLLECTOR.0), ("instance", COLLECTOR.1)], true);
        return;
    }
    for p in w.pods.values() {
        if p.meta.namespace.as_deref() != Some(app.namespace.as_str()) || p.pod_ip.is_none() {
            continue;
        }
        let Some((job, instance, _)) = target(p, app) else {
            continue;
        };
        let running = p.statuses.first().is_some_and(|s| s.state.is_running());
        o.up(
            &[
                ("job", job),
                ("instance", &instance),
                ("namespace", &app.namespace),
                ("pod", &p.meta.name),
            ],
            running,
        );
    }
}

/// The OTel collector's spanmetrics exporter: (job, instance).
const COLLECTOR: (&str, &str) = ("otel-collector", "otel-collector:8889");

/// A pod's own scrape target, when its service exports metrics over its first port's protocol:
/// (job, instance, protocol).
fn target<'a>(p: &Pod, app: &'a AppSpec) -> Option<(&'a str, String, Protocol)> {
    let prog = p
        .spec
        .containers
        .first()
        .and_then(|c| programs::identify(app, c))?;
    let port = prog.spec.ports.first()?;
    if !matches!(port.protocol, Protocol::Grpc | Protocol::Http) {
        return None;
    }
    let instance = format!(
        "{}:{}",
        p.pod_ip.as_deref().unwrap_or(""),
        port.target_port()
    );
    Some((prog.spec.name.as_str(), instance, port.protocol))
}

/// The workload's counters summed per (service, span name) over all pods, as the spanmetrics
/// connector sees them.
fn by_span(w: &World, app: &AppSpec, wl: &Workload) -> BTreeMap<(String, String), OpCounters> {
    let mut agg: BTreeMap<(String, String), OpCounters> = BTreeMap::new();
    for ((pk, op), c) in &wl.counters {
        let Some(p) = w.pods.get(pk) else { continue };
        let Some(svc) = p
            .spec
            .containers
            .first()
            .and_then(|c| programs::identify(app, c))
            .map(|pr| pr.spec.name.clone())
        else {
            continue;
        };
        let e = agg.entry((svc, op.clone())).or_insert_with(|| OpCounters {
            buckets: vec![0.0; c.buckets.len()],
            ..OpCounters::default()
        });
        e.requests += c.requests;
        e.errors += c.errors;
        e.duration_sum += c.duration_sum;
        for (i, v) in c.buckets.iter().enumerate() {
            e.buckets[i] += v;
        }
    }
    agg
}

/// The spanmetrics connector's calls and duration series (milliseconds).
fn spanmetrics(
    o: &mut Out,
    app: &AppSpec,
    wl: &Workload,
    agg: BTreeMap<(String, String), OpCounters>,
) {
    let ns = app.namespace.as_str();
    for ((svc, op), c) in agg {
        let (req, err) = (c.requests, c.errors);
        let name = op.strip_prefix("HTTP ").unwrap_or(&op).to_string();
        let kind = if app.service(&svc).is_some_and(|s| s.ports.is_empty()) {
            "SPAN_KIND_CONSUMER"
        } else {
            "SPAN_KIND_SERVER"
        };
        let base = |status: &str| {
            labels(&[
                ("job", COLLECTOR.0),
                ("instance", COLLECTOR.1),
                ("namespace", ns),
                ("service_name", &svc),
                ("span_name", &name),
                ("span_kind", kind),
                ("status_code", status),
            ])
        };
        o.push(
            "traces_span_metrics_calls_total",
            base("STATUS_CODE_UNSET"),
            req - err,
        );
        if err > 0.0 {
            o.push(
                "traces_span_metrics_calls_total",
                base("STATUS_CODE_ERROR"),
                err,
            );
        }
        // The connector reports milliseconds, its sum to the microsecond.
        histogram(
            o,
            "traces_span_metrics_duration_milliseconds",
            &base("STATUS_CODE_UNSET"),
            &c,
            &wl.buckets,
            1000.0,
            (c.duration_sum * 1000.0 * 1000.0).round() / 1000.0,
        );
    }
}

/// Per pod and operation, the series the service's own instrumentation exports for its first
/// port's protocol (none for a service without ports).
fn instrumented(o: &mut Out, w: &World, app: &AppSpec, wl: &Workload) {
    let ns = app.namespace.as_str();
    for ((pk, op), c) in &wl.counters {
        let Some(p) = w.pods.get(pk) else { continue };
        let Some((job, inst, protocol)) = target(p, app) else {
            continue;
        };
        let base = [
            ("job", job),
            ("instance", inst.as_str()),
            ("namespace", ns),
            ("pod", p.meta.name.as_str()),
        ];
        match protocol {
            Protocol::Grpc => grpc(o, &base, op, c, &wl.buckets),
            _ => http(o, &base, op, c, &wl.buckets),
        }
    }
}

/// go-grpc-prometheus: started and handled (per code) RPCs and the handling-time histogram.
fn grpc(o: &mut Out, base: &[(&str, &str)], op: &str, c: &OpCounters, bounds: &[f64]) {
    let trimmed = op.trim_start_matches('/');
    let (gs, gm) = trimmed.split_once('/').unwrap_or((trimmed, trimmed));
    let mut l = base.to_vec();
    l.extend([
        ("grpc_service", gs),
        ("grpc_method", gm),
        ("grpc_type", "unary"),
    ]);
    o.push("grpc_server_started_total", labels(&l), c.requests);
    for (code, n) in &c.by_code {
        let mut lc = l.clone();
        lc.push(("grpc_code", code.as_str()));
        o.push("grpc_server_handled_total", labels(&lc), *n);
    }
    let sum = c.duration_sum;
    histogram(
        o,
        "grpc_server_handling_seconds",
        &labels(&l),
        c,
        bounds,
        1.0,
        sum,
    );
}

/// promhttp: requests per status code and the request-duration histogram, per handler.
fn http(o: &mut Out, base: &[(&str, &str)], op: &str, c: &OpCounters, bounds: &[f64]) {
    let mut parts = op.split_whitespace();
    let (method, handler) = match (parts.next(), parts.next(), parts.next()) {
        (Some("HTTP"), Some(m), Some(h)) => (m, h),
        (Some(m), Some(h), _) => (m, h),
        (Some(h), None, _) => ("GET", h),
        _ => ("GET", "/"),
    };
    let mut l = base.to_vec();
    l.extend([("handler", handler), ("method", method)]);
    for (code, n) in &c.by_code {
        let status = if code == "OK" { "200" } else { "500" };
        let mut lc = l.clone();
        lc.push(("code", status));
        o.push("http_requests_total", labels(&lc), *n);
    }
    let sum = c.duration_sum;
    histogram(
        o,
        "http_request_duration_seconds",
        &labels(&l),
        c,
        bounds,
        1.0,
        sum,
    );
}

/// A Prometheus histogram: cumulative `_bucket` series (the workload's bounds are seconds;
/// `scale` converts them to the family's unit), then `_sum` and `_count`.
fn histogram(
    o: &mut Out,
    name: &str,
    l: &Labels,
    c: &OpCounters,
    bounds: &[f64],
    scale: f64,
    sum: f64,
) {
    let mut cum = 0.0;
    for (i, bnd) in bounds.iter().enumerate() {
        cum += c.buckets[i];
        let mut lb = l.clone();
        lb.insert("le".into(), format_le(bnd * scale));
        o.push(&format!("{name}_bucket"), lb, cum.min(c.requests));
    }
    let mut lb = l.clone();
    lb.insert("le".into(), "+Inf".into());
    o.push(&format!("{name}_bucket"), lb, c.requests);
    o.push(&format!("{name}_sum"), l.clone(), sum);
    o.push(&format!("{name}_count"), l.clone(), c.requests);
}

/// A bucket bound as Prometheus client libraries print it (`1.0`, `0.25`).
fn format_le(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}
