//! `otel_logs_raw.tsv` (application logs) and the OTel logs table layout the events and objects
//! files share: 17 columns, resource and log attributes as Python dict reprs.
//!
//! A log record becomes a container log line: namespace, pod and container from the resource
//! attributes (`k8s.namespace.name`, `k8s.pod.name`, `k8s.container.name`, else the service
//! name), the container's restart count, the stream from `log.iostream`, the Body as the line.
//! A record's severity, trace and span ids have no column in a container log: they are counted
//! in the report; back, the severity is read from the line.

use std::path::Path;

use schemas::tables::{Labels, LogRow, Row};

use crate::tsv::{Reader, Writer, nanos_text, parse_time, seconds_text};
use crate::{Error, Report, at, pydict};

/// ClickHouse's OTel logs table, in column order.
pub const COLUMNS: [&str; 17] = [
    "Timestamp",
    "TimestampTime",
    "TraceId",
    "SpanId",
    "TraceFlags",
    "SeverityText",
    "SeverityNumber",
    "ServiceName",
    "Body",
    "ResourceSchemaUrl",
    "ResourceAttributes",
    "ScopeSchemaUrl",
    "ScopeName",
    "ScopeVersion",
    "ScopeAttributes",
    "LogAttributes",
    "EventName",
];

/// The scope the k8sobjects receiver stamps on events and objects.
pub const K8S_SCOPE: &str =
    "github.com/open-telemetry/opentelemetry-collector-contrib/receiver/k8sobjectsreceiver";

/// One OTel log record as a TSV row.
pub struct Record<'a> {
    pub time: i64,
    pub severity: (&'a str, u8),
    pub service: &'a str,
    pub body: &'a str,
    pub resource: &'a Labels,
    pub scope: (&'a str, &'a str),
    pub attributes: &'a Labels,
}

impl<'a> Record<'a> {
    /// A record as the k8sobjects receiver writes one (events, objects): no severity, no
    /// service, its scope.
    pub fn k8s(time: i64, body: &'a str, resource: &'a Labels, attributes: &'a Labels) -> Self {
        Record {
            time,
            severity: ("", 0),
            service: "",
            body,
            resource,
            scope: (K8S_SCOPE, "1.0.0"),
            attributes,
        }
    }

    pub fn fields(&self) -> [String; 17] {
        [
            nanos_text(self.time),
            seconds_text(self.time),
            String::new(),
            String::new(),
            "0".into(),
            self.severity.0.to_string(),
            self.severity.1.to_string(),
            self.service.to_string(),
            self.body.to_string(),
            String::new(),
            pydict::write(self.resource),
            String::new(),
            self.scope.0.to_string(),
            self.scope.1.to_string(),
            "{}".into(),
            pydict::write(self.attributes),
            String::new(),
        ]
    }
}

/// A dict column, or the report's note when it does not parse.
pub fn dict(text: &str, column: &str, path: &Path, line: u64, report: &mut Report) -> Labels {
    pydict::parse(text).unwrap_or_else(|e| {
        report.skip(
            &format!("{column} that does not parse as a dict (read as empty)"),
            format!("{}: {e}", at(path, line)),
        );
        Labels::new()
    })
}

/// Reads an application logs file (raw OTel layout, or ITBench's processed one).
pub fn read(path: &Path, rows: &mut Vec<Row>, report: &mut Report) -> Result<(), Error> {
    let reader = Reader::open(path)?;
    let raw = reader.has("Body");
    report.file("logs");
    reader.for_each(|r| {
        let here = at(path, r.line);
        let time = parse_time(r.text(if raw { "Timestamp" } else { "timestamp" }));
        let Some(time) = time else {
            report.skip("log record without a readable Timestamp", here);
            return Ok(());
        };
        let (res, attrs) = if raw {
            (
                dict(
                    r.text("ResourceAttributes"),
                    "ResourceAttributes",
                    path,
                    r.line,
                    report,
                ),
                dict(
                    r.text("LogAttributes"),
                    "LogAttributes",
                    path,
                    r.line,
                    report,
                ),
            )
        } else {
            (Labels::new(), Labels::new())
        };
        let pick = |keys: &[&str], columns: &[&str]| -> String {
            keys.iter()
                .find_map(|k| res.get(*k).filter(|v| !v.is_empty()).cloned())
                .or_else(|| {
                    columns
                        .iter()
                        .map(|c| r.text(c))
                        .find(|v| !v.is_empty())
                        .map(str::to_string)
                })
                .unwrap_or_default()
        };
        let namespace = pick(&["k8s.namespace.name"], &["k8s_namespace", "namespace"]);
        let pod = pick(&["k8s.pod.name"], &["k8s_pod_name", "pod"]);
        if pod.is_empty() || namespace.is_empty() {
            report.skip(
                "log record without k8s.pod.name / k8s.namespace.name (a log line needs its pod)",
                here,
            );
            return Ok(());
        }
        let container = pick(
            &["k8s.container.name", "service.name"],
            &["ServiceName", "service_name"],
        );
        let container = if container.is_empty() {
            pod.clone()
        } else {
            container
        };
        if !r.text("SeverityText").is_empty() || !r.text("TraceId").is_empty() {
            report.skip(
                "log record severity and trace/span ids (a container log line has no such columns)",
                &here,
            );
        }
        rows.push(Row::Log(LogRow {
            time_ns: time,
            namespace,
            pod,
            container,
            restart: res
                .get("k8s.container.restart_count")
                .and_then(|c| c.parse().ok())
                .unwrap_or(0),
            stream: attrs
                .get("log.iostream")
                .cloned()
                .unwrap_or_else(|| "stdout".into()),
            line: r.text(if raw { "Body" } else { "body" }).to_string(),
        }));
        Ok(())
    })
}

/// OTel's severity of a level read from a line.
fn severity(level: &str) -> (&'static str, u8) {
    match level {
        "FATAL" => ("Fatal", 21),
        "ERROR" => ("Error", 17),
        "WARNING" => ("Warning", 13),
        "INFO" => ("Information", 9),
        "DEBUG" => ("Debug", 5),
        _ => ("", 0),
    }
}

/// Writes the logs table as `otel_logs_raw.tsv`.
pub fn write(path: &Path, logs: impl Iterator<Item = LogRow>) -> Result<u64, Error> {
    let mut w = Writer::create(path, &COLUMNS)?;
    for l in logs {
        let resource: Labels = [
            ("k8s.namespace.name", l.namespace.clone()),
            ("k8s.pod.name", l.pod.clone()),
            ("k8s.container.name", l.container.clone()),
            ("k8s.container.restart_count", l.restart.to_string()),
            ("service.name", l.container.clone()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let attributes: Labels = [("log.iostream".to_string(), l.stream.clone())].into();
        let rec = Record {
            time: l.time_ns,
            severity: severity(analysis::log_level(&l.line)),
            service: &l.container,
            body: &l.line,
            resource: &resource,
            scope: ("", ""),
            attributes: &attributes,
        };
        w.row(rec.fields())?;
    }
    w.finish()
}
