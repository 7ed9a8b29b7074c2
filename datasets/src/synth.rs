//! Synthetic rows of every table, shaped like real telemetry (label maps, pod names, log lines),
//! for tests and benchmarks of the dataset machinery. Deterministic for a given size.

use schemas::tables::{
    AlertRow, ChangeType, EventRow, Labels, LogRow, MetricMeta, MetricSample, ObjectRow, Row,
    SpanRow,
};

/// Start of the synthetic window: 2026-01-01T00:00:00Z in ns.
pub const START_NS: i64 = 1_767_225_600_000_000_000;
const SEC: i64 = 1_000_000_000;

const SERVICES: [&str; 8] = [
    "frontend",
    "search",
    "geo",
    "profile",
    "rate",
    "recommendation",
    "reservation",
    "user",
];

fn pod(service: &str, i: usize) -> String {
    format!("{service}-7d9f8b6c5-{:05x}", 0x1a2b3 + i * 7919 % 0xfffff)
}

/// Labels of one cAdvisor-style series.
fn series_labels(series: usize) -> Labels {
    let service = SERVICES[series % SERVICES.len()];
    let replica = series / SERVICES.len() % 3;
    let mut l = Labels::new();
    l.insert("namespace".into(), "hotel-reservation".into());
    l.insert("pod".into(), pod(service, replica));
    l.insert("container".into(), format!("hotel-reserv-{service}"));
    l.insert("node".into(), format!("worker-{}", series % 3));
    l.insert(
        "instance".into(),
        format!("10.0.{}.{}:8080", series % 3, 10 + series % 200),
    );
    l.insert("job".into(), "kubernetes-cadvisor".into());
    l.insert("cpu".into(), "total".into());
    l.insert("id".into(), format!("/kubepods/burstable/pod{series:08x}"));
    l
}

/// `n` metric samples: `series` series scraped every 15 s, emitted scrape by scrape (time order,
/// not sort order), as a scraper would produce them.
pub fn metric_samples(n: usize, series: usize) -> impl Iterator<Item = MetricSample> {
    let labels: Vec<Labels> = (0..series).map(series_labels).collect();
    let names = [
        "container_cpu_usage_seconds_total",
        "container_memory_working_set_bytes",
        "container_network_receive_bytes_total",
    ];
    (0..n).map(move |i| {
        let s = i % series;
        let scrape = (i / series) as i64;
        let base = (s as f64 + 1.0) * 1.5e6;
        MetricSample {
            metric: names[s % names.len()].to_string(),
            labels: labels[s].clone(),
            time_ns: START_NS + scrape * 15 * SEC,
            value: base + (scrape as f64) * (s % 7) as f64 * 0.25,
        }
    })
}

/// A small but complete mix of every table: pods with their logs, spans in traces, events, alerts.
pub fn mixed_rows(scale: usize) -> Vec<Row> {
    let mut rows = Vec::new();
    for (i, service) in SERVICES.iter().enumerate() {
        let name = pod(service, 0);
        let object = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "hotel-reservation", "uid": format!("uid-{i}"),
                         "resourceVersion": format!("{}", 100 + i), "labels": {"io.kompose.service": service}},
            "spec": {"containers": [{"name": format!("hotel-reserv-{service}"), "image": format!("deathstarbench/hotel-reservation:latest")}]},
            "status": {"phase": "Running"}
        });
        rows.push(Row::Object(ObjectRow {
            observed_ns: START_NS + i as i64 * SEC,
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: Some("hotel-reservation".into()),
            name: name.clone(),
            uid: format!("uid-{i}"),
            resource_version: format!("{}", 100 + i),
            change: ChangeType::Added,
            object: object.to_string(),
        }));
        for j in 0..scale {
            rows.push(Row::Log(LogRow {
                time_ns: START_NS + (j as i64 + 1) * SEC / 2,
                namespace: "hotel-reservation".into(),
                pod: name.clone(),
                container: format!("hotel-reserv-{service}"),
                restart: 0,
                stream: if j % 5 == 0 { "stderr" } else { "stdout" }.into(),
                line: format!(
                    "{{\"level\":\"info\",\"time\":\"2026-01-01T00:00:{:02}Z\",\"message\":\"handled request {j}\"}}",
                    j % 60
                ),
            }));
        }
        rows.push(Row::Event(EventRow {
            time_ns: START_NS + 30 * SEC + i as i64,
            first_time_ns: Some(START_NS + 30 * SEC),
            namespace: "hotel-reservation".into(),
            name: format!("{name}.17a2b3c4d5e6f{i}"),
            uid: format!("ev-{i}"),
            event_type: "Normal".into(),
            reason: "Pulled".into(),
            message: "Container image already present on machine".into(),
            count: 1,
            involved_api_version: Some("v1".into()),
            involved_kind: "Pod".into(),
            involved_namespace: Some("hotel-reservation".into()),
            involved_name: name.clone(),
            involved_uid: Some(format!("uid-{i}")),
            involved_field_path: Some(format!("spec.containers{{hotel-reserv-{service}}}")),
            source_component: Some("kubelet".into()),
            source_host: Some("worker-0".into()),
            ..EventRow::default()
        }));
    }
    for t in 0..scale {
        let trace_id = format!("{:032x}", 0xabc000 + t);
        for (depth, service) in SERVICES.iter().take(3).enumerate() {
            let mut resource = Labels::new();
            resource.insert("service.name".into(), service.to_string());
            let mut attributes = Labels::new();
            attributes.insert("rpc.system".into(), "grpc".into());
            rows.push(Row::Span(SpanRow {
                trace_id: trace_id.clone(),
                span_id: format!("{:016x}", t * 16 + depth + 1),
                parent_span_id: (depth > 0).then(|| format!("{:016x}", t * 16 + depth)),
                service: service.to_string(),
                name: format!("/{service}.{service}/Get"),
                kind: if depth == 0 { "server" } else { "client" }.into(),
                start_ns: START_NS + t as i64 * SEC + depth as i64 * 1000,
                duration_ns: 2_000_000 / (depth as i64 + 1),
                status_code: "unset".into(),
                status_message: None,
                resource_attributes: resource,
                attributes,
            }));
        }
    }
    rows.extend(metric_samples(scale * 8, 8).map(Row::Metric));
    for name in [
        "container_cpu_usage_seconds_total",
        "container_memory_working_set_bytes",
    ] {
        rows.push(Row::MetricMeta(MetricMeta {
            metric: name.into(),
            metric_type: if name.ends_with("_total") {
                "counter"
            } else {
                "gauge"
            }
            .into(),
            help: format!("Synthetic {name}"),
            unit: String::new(),
        }));
    }
    let mut labels = Labels::new();
    labels.insert("severity".into(), "warning".into());
    labels.insert("namespace".into(), "hotel-reservation".into());
    rows.push(Row::Alert(AlertRow {
        time_ns: START_NS + 60 * SEC,
        alertname: "KubePodNotReady".into(),
        state: "pending".into(),
        labels,
        annotations: Labels::new(),
        active_at_ns: Some(START_NS + 45 * SEC),
        value: Some(1.0),
    }));
    rows
}
