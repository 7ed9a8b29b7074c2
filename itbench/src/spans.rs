//! `otel_traces_raw.tsv`: ClickHouse's OTel traces table (22 columns; durations in
//! nanoseconds; a StatusMessage may span lines). Each row is a span; the scope and trace state
//! become the attributes Jaeger shows them as (`otel.scope.name`, `otel.scope.version`,
//! `w3c.tracestate`), span events and links have no column and are counted in the report.
//! ITBench's processed layout (snake_case columns) is read too.

use std::path::Path;

use schemas::tables::{Labels, Row, SpanRow};

use crate::logs::dict;
use crate::tsv::{Reader, Writer, nanos_text, parse_time};
use crate::{Error, Report, at, pydict};

/// ClickHouse's OTel traces table, in column order.
pub const COLUMNS: [&str; 22] = [
    "Timestamp",
    "TraceId",
    "SpanId",
    "ParentSpanId",
    "TraceState",
    "SpanName",
    "SpanKind",
    "ServiceName",
    "ResourceAttributes",
    "ScopeName",
    "ScopeVersion",
    "SpanAttributes",
    "Duration",
    "StatusCode",
    "StatusMessage",
    "Events.Timestamp",
    "Events.Name",
    "Events.Attributes",
    "Links.TraceId",
    "Links.SpanId",
    "Links.TraceState",
    "Links.Attributes",
];

const SCOPE_NAME: &str = "otel.scope.name";
const SCOPE_VERSION: &str = "otel.scope.version";
const TRACE_STATE: &str = "w3c.tracestate";

/// `Client`, `SPAN_KIND_CLIENT`, `client` → `client`.
fn kind(text: &str) -> String {
    let k = text.trim().to_ascii_lowercase();
    k.strip_prefix("span_kind_").unwrap_or(&k).to_string()
}

/// `Error`, `STATUS_CODE_ERROR` → `error`; empty is `unset`.
fn status(text: &str) -> String {
    let s = text.trim().to_ascii_lowercase();
    let s = s.strip_prefix("status_code_").unwrap_or(&s);
    if s.is_empty() {
        "unset".into()
    } else {
        s.to_string()
    }
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    c.next().map_or_else(String::new, |f| {
        f.to_uppercase().collect::<String>() + c.as_str()
    })
}

fn empty_list(text: &str) -> bool {
    matches!(text.trim(), "" | "[]" | "()")
}

/// Reads a traces file. A record cut short (the file ends inside it) is kept when its ids,
/// service, time and duration are there.
pub fn read(path: &Path, rows: &mut Vec<Row>, report: &mut Report) -> Result<(), Error> {
    let reader = Reader::open(path)?;
    let raw = reader.has("TraceId");
    report.file("traces");
    let c = |raw_name: &'static str, flat: &'static str| if raw { raw_name } else { flat };
    reader.for_each(|r| {
        let here = at(path, r.line);
        let trace = r.text(c("TraceId", "trace_id")).trim().to_ascii_lowercase();
        let span = r.text(c("SpanId", "span_id")).trim().to_ascii_lowercase();
        let start = parse_time(r.text(c("Timestamp", "timestamp")));
        let duration = r
            .get(c("Duration", "duration"))
            .and_then(|d| d.trim().parse::<f64>().ok());
        let (Some(start), Some(duration)) = (start, duration) else {
            report.skip("span without a readable Timestamp or Duration", here);
            return Ok(());
        };
        if trace.is_empty() || span.is_empty() {
            report.skip("span without TraceId or SpanId", here);
            return Ok(());
        }
        if !r.complete {
            report.skip(
                "span record cut short by the end of the file (kept: the fields up to the cut)",
                &here,
            );
        }
        let mut attributes = dict(
            r.text(c("SpanAttributes", "span_attributes")),
            "SpanAttributes",
            path,
            r.line,
            report,
        );
        for (column, key) in [
            (c("ScopeName", "scope_name"), SCOPE_NAME),
            (c("ScopeVersion", "scope_version"), SCOPE_VERSION),
            (c("TraceState", "trace_state"), TRACE_STATE),
        ] {
            let v = r.text(column);
            if !v.is_empty() {
                attributes.insert(key.to_string(), v.to_string());
            }
        }
        if !empty_list(r.text("Events.Name")) || !empty_list(r.text("Links.TraceId")) {
            report.skip(
                "span events and links (the spans table has no such columns)",
                &here,
            );
        }
        let parent = r
            .text(c("ParentSpanId", "parent_span_id"))
            .trim()
            .to_ascii_lowercase();
        let message = r.text(c("StatusMessage", "status_message"));
        rows.push(Row::Span(SpanRow {
            trace_id: trace,
            span_id: span,
            parent_span_id: Some(parent).filter(|p| !p.is_empty()),
            service: r.text(c("ServiceName", "service_name")).to_string(),
            name: r.text(c("SpanName", "span_name")).to_string(),
            kind: kind(r.text(c("SpanKind", "span_kind"))),
            start_ns: start,
            duration_ns: duration as i64,
            status_code: status(r.text(c("StatusCode", "status_code"))),
            status_message: Some(message.to_string()).filter(|m| !m.is_empty()),
            resource_attributes: dict(
                r.text(c("ResourceAttributes", "resource_attributes")),
                "ResourceAttributes",
                path,
                r.line,
                report,
            ),
            attributes,
        }));
        Ok(())
    })
}

/// Spans whose parent is not among the spans read become roots of their traces: a dataset's
/// spans name only parents it holds (snapshots often miss the caller's span).
pub fn orphans_to_roots(rows: &mut [Row], report: &mut Report) {
    let ids: std::collections::HashSet<(String, String)> = rows
        .iter()
        .filter_map(|r| match r {
            Row::Span(s) => Some((s.trace_id.clone(), s.span_id.clone())),
            _ => None,
        })
        .collect();
    for row in rows.iter_mut() {
        if let Row::Span(s) = row
            && let Some(p) = &s.parent_span_id
            && !ids.contains(&(s.trace_id.clone(), p.clone()))
        {
            report.skip(
                "parent span not in the snapshot (the span became a root)",
                format!("trace {} span {}", s.trace_id, s.span_id),
            );
            s.parent_span_id = None;
        }
    }
}

/// Writes the spans table as `otel_traces_raw.tsv`.
pub fn write(path: &Path, spans: impl Iterator<Item = SpanRow>) -> Result<u64, Error> {
    let mut w = Writer::create(path, &COLUMNS)?;
    for s in spans {
        let mut attributes: Labels = s.attributes.clone();
        let scope_name = attributes.remove(SCOPE_NAME).unwrap_or_default();
        let scope_version = attributes.remove(SCOPE_VERSION).unwrap_or_default();
        let trace_state = attributes.remove(TRACE_STATE).unwrap_or_default();
        w.row([
            nanos_text(s.start_ns),
            s.trace_id,
            s.span_id,
            s.parent_span_id.unwrap_or_default(),
            trace_state,
            s.name,
            capital(&s.kind),
            s.service,
            pydict::write(&s.resource_attributes),
            scope_name,
            scope_version,
            pydict::write(&attributes),
            s.duration_ns.to_string(),
            capital(&s.status_code),
            s.status_message.unwrap_or_default(),
            "[]".into(),
            "[]".into(),
            "[]".into(),
            "[]".into(),
            "[]".into(),
            "[]".into(),
            "[]".into(),
        ])?;
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_statuses_in_any_spelling() {
        assert_eq!(kind("Client"), "client");
        assert_eq!(kind("SPAN_KIND_SERVER"), "server");
        assert_eq!(status("Error"), "error");
        assert_eq!(status("STATUS_CODE_OK"), "ok");
        assert_eq!(status(""), "unset");
        assert_eq!(capital("server"), "Server");
    }
}
