//! Rows ⇄ Arrow record batches, and the sort order of each table.
//!
//! Producers hand the writer plain [`Row`]s; this module is the one place that knows how each row type
//! maps onto its table's columns, in both directions.

use arrow_array::builder::{
    Float64Builder, Int32Builder, Int64Builder, MapBuilder, MapFieldNames, StringBuilder,
    TimestampNanosecondBuilder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type, TimestampNanosecondType};
use arrow_array::{Array, ArrayRef, MapArray, RecordBatch};
use arrow_schema::ArrowError;
use schemas::tables::{
    AlertRow, AuditRow, ChangeType, EventRow, Labels, LogRow, MetricMeta, MetricSample, ObjectRow,
    Row, SpanRow, Table, columns as col,
};
use std::cmp::Ordering;

/// Orders two rows of the same table by the table's sort key. Rows of different tables compare by
/// table, which never happens inside one table's buffer.
pub fn cmp_rows(a: &Row, b: &Row) -> Ordering {
    match (a, b) {
        (Row::Object(a), Row::Object(b)) => (&a.kind, &a.namespace, &a.name, a.observed_ns).cmp(&(
            &b.kind,
            &b.namespace,
            &b.name,
            b.observed_ns,
        )),
        (Row::Event(a), Row::Event(b)) => {
            (&a.namespace, a.time_ns, &a.name).cmp(&(&b.namespace, b.time_ns, &b.name))
        }
        (Row::Log(a), Row::Log(b)) => (&a.namespace, &a.pod, &a.container, a.restart, a.time_ns)
            .cmp(&(&b.namespace, &b.pod, &b.container, b.restart, b.time_ns)),
        (Row::Metric(a), Row::Metric(b)) => {
            (&a.metric, &a.labels, a.time_ns).cmp(&(&b.metric, &b.labels, b.time_ns))
        }
        (Row::MetricMeta(a), Row::MetricMeta(b)) => a.metric.cmp(&b.metric),
        (Row::Span(a), Row::Span(b)) => (&a.service, &a.name, a.start_ns, &a.span_id)
            .cmp(&(&b.service, &b.name, b.start_ns, &b.span_id)),
        (Row::Alert(a), Row::Alert(b)) => {
            (&a.alertname, &a.labels, a.time_ns).cmp(&(&b.alertname, &b.labels, b.time_ns))
        }
        (Row::Audit(a), Row::Audit(b)) => (a.time_ns, &a.audit_id).cmp(&(b.time_ns, &b.audit_id)),
        _ => a.table().cmp(&b.table()),
    }
}

fn map_builder() -> MapBuilder<StringBuilder, StringBuilder> {
    MapBuilder::new(
        Some(MapFieldNames {
            entry: "entries".into(),
            key: "key".into(),
            value: "value".into(),
        }),
        StringBuilder::new(),
        StringBuilder::new(),
    )
}

fn push_map(b: &mut MapBuilder<StringBuilder, StringBuilder>, labels: &Labels) {
    for (k, v) in labels {
        b.keys().append_value(k);
        b.values().append_value(v);
    }
    b.append(true).expect("keys and values have equal lengths");
}

fn ts() -> TimestampNanosecondBuilder {
    TimestampNanosecondBuilder::new().with_timezone("UTC")
}

/// Iterates the rows as the given variant, failing on a row that belongs to another table.
macro_rules! rows_of {
    ($rows:expr, $variant:ident, $table:expr) => {
        $rows.iter().map(|r| match r {
            Row::$variant(x) => Ok(x),
            other => Err(ArrowError::InvalidArgumentError(format!(
                "a {} row in the {} table",
                other.table(),
                $table
            ))),
        })
    };
}

/// Builds one record batch of `table` from rows that all belong to it, in the order given.
pub fn encode(table: Table, rows: &[Row]) -> Result<RecordBatch, ArrowError> {
    let columns: Vec<ArrayRef> = match table {
        Table::Objects => {
            let (
                mut observed,
                mut api,
                mut kind,
                mut ns,
                mut name,
                mut uid,
                mut rv,
                mut change,
                mut obj,
            ) = (ts(), sb(), sb(), sb(), sb(), sb(), sb(), sb(), sb());
            for r in rows_of!(rows, Object, table) {
                let r: &ObjectRow = r?;
                observed.append_value(r.observed_ns);
                api.append_value(&r.api_version);
                kind.append_value(&r.kind);
                ns.append_option(r.namespace.as_deref());
                name.append_value(&r.name);
                uid.append_value(&r.uid);
                rv.append_value(&r.resource_version);
                change.append_value(r.change.as_str());
                obj.append_value(&r.object);
            }
            vec![
                fin(observed),
                fin(api),
                fin(kind),
                fin(ns),
                fin(name),
                fin(uid),
                fin(rv),
                fin(change),
                fin(obj),
            ]
        }
        Table::Events => {
            let mut time = ts();
            let mut first = ts();
            let mut s: Vec<StringBuilder> = (0..17).map(|_| sb()).collect();
            let mut count = Int32Builder::new();
            for r in rows_of!(rows, Event, table) {
                let r: &EventRow = r?;
                time.append_value(r.time_ns);
                first.append_option(r.first_time_ns);
                count.append_value(r.count);
                let strings: [Option<&str>; 17] = [
                    Some(&r.namespace),
                    Some(&r.name),
                    Some(&r.uid),
                    Some(&r.event_type),
                    Some(&r.reason),
                    Some(&r.message),
                    r.involved_api_version.as_deref(),
                    Some(&r.involved_kind),
                    r.involved_namespace.as_deref(),
                    Some(&r.involved_name),
                    r.involved_uid.as_deref(),
                    r.involved_field_path.as_deref(),
                    r.source_component.as_deref(),
                    r.source_host.as_deref(),
                    r.reporting_controller.as_deref(),
                    r.reporting_instance.as_deref(),
                    r.action.as_deref(),
                ];
                for (b, v) in s.iter_mut().zip(strings) {
                    b.append_option(v);
                }
            }
            let mut s = s.into_iter().map(fin);
            let mut cols = vec![fin(time), fin(first)];
            cols.extend(s.by_ref().take(6));
            cols.push(fin(count));
            cols.extend(s);
            cols
        }
        Table::Logs => {
            let (mut time, mut ns, mut pod, mut container, mut stream, mut line) =
                (ts(), sb(), sb(), sb(), sb(), sb());
            let mut restart = Int32Builder::new();
            for r in rows_of!(rows, Log, table) {
                let r: &LogRow = r?;
                time.append_value(r.time_ns);
                ns.append_value(&r.namespace);
                pod.append_value(&r.pod);
                container.append_value(&r.container);
                restart.append_value(r.restart);
                stream.append_value(&r.stream);
                line.append_value(&r.line);
            }
            vec![
                fin(time),
                fin(ns),
                fin(pod),
                fin(container),
                fin(restart),
                fin(stream),
                fin(line),
            ]
        }
        Table::Metrics => {
            let (mut metric, mut ns, mut labels, mut time) = (sb(), sb(), map_builder(), ts());
            let mut value = Float64Builder::new();
            for r in rows_of!(rows, Metric, table) {
                let r: &MetricSample = r?;
                metric.append_value(&r.metric);
                ns.append_option(r.labels.get("namespace"));
                push_map(&mut labels, &r.labels);
                time.append_value(r.time_ns);
                value.append_value(r.value);
            }
            vec![fin(metric), fin(ns), fin(labels), fin(time), fin(value)]
        }
        Table::MetricMetadata => {
            let (mut metric, mut ty, mut help, mut unit) = (sb(), sb(), sb(), sb());
            for r in rows_of!(rows, MetricMeta, table) {
                let r: &MetricMeta = r?;
                metric.append_value(&r.metric);
                ty.append_value(&r.metric_type);
                help.append_value(&r.help);
                unit.append_value(&r.unit);
            }
            vec![fin(metric), fin(ty), fin(help), fin(unit)]
        }
        Table::Spans => {
            let (mut trace, mut span, mut parent, mut service, mut name, mut kind) =
                (sb(), sb(), sb(), sb(), sb(), sb());
            let (mut start, mut status, mut message) = (ts(), sb(), sb());
            let mut duration = Int64Builder::new();
            let (mut res, mut attrs) = (map_builder(), map_builder());
            for r in rows_of!(rows, Span, table) {
                let r: &SpanRow = r?;
                trace.append_value(&r.trace_id);
                span.append_value(&r.span_id);
                parent.append_option(r.parent_span_id.as_deref());
                service.append_value(&r.service);
                name.append_value(&r.name);
                kind.append_value(&r.kind);
                start.append_value(r.start_ns);
                duration.append_value(r.duration_ns);
                status.append_value(&r.status_code);
                message.append_option(r.status_message.as_deref());
                push_map(&mut res, &r.resource_attributes);
                push_map(&mut attrs, &r.attributes);
            }
            vec![
                fin(trace),
                fin(span),
                fin(parent),
                fin(service),
                fin(name),
                fin(kind),
                fin(start),
                fin(duration),
                fin(status),
                fin(message),
                fin(res),
                fin(attrs),
            ]
        }
        Table::Alerts => {
            let (mut time, mut name, mut state) = (ts(), sb(), sb());
            let (mut labels, mut annotations, mut active) = (map_builder(), map_builder(), ts());
            let mut value = Float64Builder::new();
            for r in rows_of!(rows, Alert, table) {
                let r: &AlertRow = r?;
                time.append_value(r.time_ns);
                name.append_value(&r.alertname);
                state.append_value(&r.state);
                push_map(&mut labels, &r.labels);
                push_map(&mut annotations, &r.annotations);
                active.append_option(r.active_at_ns);
                value.append_option(r.value);
            }
            vec![
                fin(time),
                fin(name),
                fin(state),
                fin(labels),
                fin(annotations),
                fin(active),
                fin(value),
            ]
        }
        Table::Audit => encode_audit(rows)?,
    };
    RecordBatch::try_new(table.schema(), columns)
}

/// The columns of an `audit` batch.
fn encode_audit(rows: &[Row]) -> Result<Vec<ArrayRef>, ArrowError> {
    let (mut time, mut id, mut api, mut verb, mut uri) = (ts(), sb(), sb(), sb(), sb());
    let (mut agent, mut ip, mut group, mut version) = (sb(), sb(), sb(), sb());
    let (mut resource, mut ns, mut name, mut sub) = (sb(), sb(), sb(), sb());
    let (mut code, mut latency, mut event) = (Int32Builder::new(), Int64Builder::new(), sb());
    for r in rows_of!(rows, Audit, Table::Audit) {
        let r: &AuditRow = r?;
        time.append_value(r.time_ns);
        id.append_value(&r.audit_id);
        api.append_value(&r.api);
        verb.append_value(&r.verb);
        uri.append_value(&r.request_uri);
        agent.append_option(r.user_agent.as_deref());
        ip.append_option(r.source_ip.as_deref());
        group.append_option(r.api_group.as_deref());
        version.append_option(r.api_version.as_deref());
        resource.append_option(r.resource.as_deref());
        ns.append_option(r.namespace.as_deref());
        name.append_option(r.name.as_deref());
        sub.append_option(r.subresource.as_deref());
        code.append_value(r.code);
        latency.append_value(r.latency_ns);
        event.append_value(&r.event);
    }
    Ok(vec![
        fin(time),
        fin(id),
        fin(api),
        fin(verb),
        fin(uri),
        fin(agent),
        fin(ip),
        fin(group),
        fin(version),
        fin(resource),
        fin(ns),
        fin(name),
        fin(sub),
        fin(code),
        fin(latency),
        fin(event),
    ])
}

/// The rows of an `audit` batch.
fn decode_audit(c: &Cols<'_>, n: usize) -> Result<Vec<Row>, ArrowError> {
    use col::audit as a;
    let names = [
        a::AUDIT_ID,
        a::API,
        a::VERB,
        a::REQUEST_URI,
        a::USER_AGENT,
        a::SOURCE_IP,
        a::API_GROUP,
        a::API_VERSION,
        a::RESOURCE,
        a::NAMESPACE,
        a::NAME,
        a::SUBRESOURCE,
        a::EVENT,
    ];
    let s: Vec<StrCol> = names.iter().map(|n| c.str(n)).collect::<Result<_, _>>()?;
    let (time, code, latency) = (c.ts(a::TIME)?, c.i32(a::CODE)?, c.i64(a::LATENCY)?);
    Ok((0..n)
        .map(|i| {
            Row::Audit(AuditRow {
                time_ns: time.value(i),
                audit_id: s[0].get(i),
                api: s[1].get(i),
                verb: s[2].get(i),
                request_uri: s[3].get(i),
                user_agent: s[4].opt(i),
                source_ip: s[5].opt(i),
                api_group: s[6].opt(i),
                api_version: s[7].opt(i),
                resource: s[8].opt(i),
                namespace: s[9].opt(i),
                name: s[10].opt(i),
                subresource: s[11].opt(i),
                code: code.value(i),
                latency_ns: latency.value(i),
                event: s[12].get(i),
            })
        })
        .collect())
}

fn sb() -> StringBuilder {
    StringBuilder::new()
}

fn fin<B: arrow_array::builder::ArrayBuilder>(mut b: B) -> ArrayRef {
    b.finish()
}

/// Reads typed columns of a batch by name; the batch's schema has been checked against the table's.
struct Cols<'a>(&'a RecordBatch);

impl<'a> Cols<'a> {
    fn col(&self, name: &str) -> Result<&'a ArrayRef, ArrowError> {
        self.0
            .column_by_name(name)
            .ok_or_else(|| ArrowError::SchemaError(format!("column `{name}` is missing")))
    }
    fn str(&self, name: &str) -> Result<StrCol<'a>, ArrowError> {
        let a = self.col(name)?;
        match a.data_type() {
            arrow_schema::DataType::Utf8 => Ok(StrCol::Utf8(a.as_string::<i32>())),
            arrow_schema::DataType::LargeUtf8 => Ok(StrCol::Large(a.as_string::<i64>())),
            arrow_schema::DataType::Utf8View => Ok(StrCol::View(a.as_string_view())),
            other => Err(ArrowError::SchemaError(format!(
                "column `{name}` is {other}, expected Utf8"
            ))),
        }
    }
    fn ts(&self, name: &str) -> Result<&'a arrow_array::TimestampNanosecondArray, ArrowError> {
        self.col(name)?
            .as_primitive_opt::<TimestampNanosecondType>()
            .ok_or_else(|| type_error(name, "Timestamp(ns)"))
    }
    fn i32(&self, name: &str) -> Result<&'a arrow_array::Int32Array, ArrowError> {
        self.col(name)?
            .as_primitive_opt::<Int32Type>()
            .ok_or_else(|| type_error(name, "Int32"))
    }
    fn i64(&self, name: &str) -> Result<&'a arrow_array::Int64Array, ArrowError> {
        self.col(name)?
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| type_error(name, "Int64"))
    }
    fn f64(&self, name: &str) -> Result<&'a arrow_array::Float64Array, ArrowError> {
        self.col(name)?
            .as_primitive_opt::<Float64Type>()
            .ok_or_else(|| type_error(name, "Float64"))
    }
    fn map(&self, name: &str) -> Result<MapCol<'a>, ArrowError> {
        let map = self
            .col(name)?
            .as_map_opt()
            .ok_or_else(|| type_error(name, "Map<Utf8, Utf8>"))?;
        let keys = StrCol::of(map.keys(), name)?;
        let values = StrCol::of(map.values(), name)?;
        Ok(MapCol { map, keys, values })
    }
}

fn type_error(name: &str, expected: &str) -> ArrowError {
    ArrowError::SchemaError(format!("column `{name}` is not {expected}"))
}

/// A string column in any of Arrow's three string layouts (polars and pyarrow may write any).
enum StrCol<'a> {
    Utf8(&'a arrow_array::StringArray),
    Large(&'a arrow_array::LargeStringArray),
    View(&'a arrow_array::StringViewArray),
}

impl<'a> StrCol<'a> {
    fn of(a: &'a ArrayRef, name: &str) -> Result<Self, ArrowError> {
        match a.data_type() {
            arrow_schema::DataType::Utf8 => Ok(StrCol::Utf8(a.as_string::<i32>())),
            arrow_schema::DataType::LargeUtf8 => Ok(StrCol::Large(a.as_string::<i64>())),
            arrow_schema::DataType::Utf8View => Ok(StrCol::View(a.as_string_view())),
            _ => Err(type_error(name, "a map of strings")),
        }
    }
    fn is_null(&self, i: usize) -> bool {
        match self {
            StrCol::Utf8(a) => a.is_null(i),
            StrCol::Large(a) => a.is_null(i),
            StrCol::View(a) => a.is_null(i),
        }
    }
    fn opt(&self, i: usize) -> Option<String> {
        (!self.is_null(i)).then(|| self.get(i))
    }
    fn get(&self, i: usize) -> String {
        self.str(i).to_string()
    }
    fn str(&self, i: usize) -> &'a str {
        match self {
            StrCol::Utf8(a) => a.value(i),
            StrCol::Large(a) => a.value(i),
            StrCol::View(a) => a.value(i),
        }
    }
}

struct MapCol<'a> {
    map: &'a MapArray,
    keys: StrCol<'a>,
    values: StrCol<'a>,
}

impl<'a> MapCol<'a> {
    /// The entries of row `i`, borrowed, into `out` (cleared first); a null value reads as "".
    fn borrow_into(&self, i: usize, out: &mut Vec<(&'a str, &'a str)>) {
        let offsets = self.map.value_offsets();
        out.clear();
        for j in offsets[i] as usize..offsets[i + 1] as usize {
            let v = if self.values.is_null(j) {
                ""
            } else {
                self.values.str(j)
            };
            out.push((self.keys.str(j), v));
        }
    }

    fn get(&self, i: usize) -> Labels {
        let offsets = self.map.value_offsets();
        let (start, end) = (offsets[i] as usize, offsets[i + 1] as usize);
        (start..end)
            .map(|j| (self.keys.get(j), self.values.opt(j).unwrap_or_default()))
            .collect()
    }
}

/// One metric sample borrowed from a record batch: no per-sample allocation.
pub struct MetricRef<'a> {
    pub metric: &'a str,
    /// (name, value) pairs in the stored (sorted) order.
    pub labels: Vec<(&'a str, &'a str)>,
    pub time_ns: i64,
    pub value: f64,
}

/// Calls `f` with every sample of a `metrics` batch, in row order. Consecutive samples of one
/// series share their label slice, so a caller can recognise a series change by comparing labels.
pub fn for_each_metric(
    batch: &RecordBatch,
    mut f: impl FnMut(&MetricRef<'_>),
) -> Result<(), ArrowError> {
    let c = Cols(batch);
    let (metric, labels, time, value) = (
        c.str(col::metrics::METRIC)?,
        c.map(col::metrics::LABELS)?,
        c.ts(col::metrics::TIME)?,
        c.f64(col::metrics::VALUE)?,
    );
    let mut sample = MetricRef {
        metric: "",
        labels: Vec::new(),
        time_ns: 0,
        value: 0.0,
    };
    for i in 0..batch.num_rows() {
        sample.metric = metric.str(i);
        labels.borrow_into(i, &mut sample.labels);
        sample.time_ns = time.value(i);
        sample.value = value.value(i);
        f(&sample);
    }
    Ok(())
}

/// One alert observation borrowed from a record batch (annotations and value left out).
pub struct AlertRef<'a> {
    pub alertname: &'a str,
    pub state: &'a str,
    /// (name, value) pairs in the stored (sorted) order.
    pub labels: Vec<(&'a str, &'a str)>,
    pub time_ns: i64,
    /// The row's index in the batch, to decode the whole row when it is needed.
    pub row: usize,
}

/// Calls `f` with every row of an `alerts` batch, in row order, without building rows.
pub fn for_each_alert(
    batch: &RecordBatch,
    mut f: impl FnMut(&AlertRef<'_>),
) -> Result<(), ArrowError> {
    let c = Cols(batch);
    let (name, state, labels, time) = (
        c.str(col::alerts::ALERTNAME)?,
        c.str(col::alerts::STATE)?,
        c.map(col::alerts::LABELS)?,
        c.ts(col::alerts::TIME)?,
    );
    let mut alert = AlertRef {
        alertname: "",
        state: "",
        labels: Vec::new(),
        time_ns: 0,
        row: 0,
    };
    for i in 0..batch.num_rows() {
        alert.alertname = name.str(i);
        alert.state = state.str(i);
        labels.borrow_into(i, &mut alert.labels);
        alert.time_ns = time.value(i);
        alert.row = i;
        f(&alert);
    }
    Ok(())
}

fn opt_ts(a: &arrow_array::TimestampNanosecondArray, i: usize) -> Option<i64> {
    (!a.is_null(i)).then(|| a.value(i))
}

/// Turns a record batch of `table` back into rows.
pub fn decode(table: Table, batch: &RecordBatch) -> Result<Vec<Row>, ArrowError> {
    let c = Cols(batch);
    let n = batch.num_rows();
    let rows = match table {
        Table::Objects => {
            let (observed, api, kind, ns, name, uid, rv, change, obj) = (
                c.ts(col::objects::OBSERVED)?,
                c.str(col::objects::API_VERSION)?,
                c.str(col::objects::KIND)?,
                c.str(col::objects::NAMESPACE)?,
                c.str(col::objects::NAME)?,
                c.str(col::objects::UID)?,
                c.str(col::objects::RESOURCE_VERSION)?,
                c.str(col::objects::CHANGE)?,
                c.str(col::objects::OBJECT)?,
            );
            (0..n)
                .map(|i| {
                    let ch = change.get(i);
                    Ok(Row::Object(ObjectRow {
                        observed_ns: observed.value(i),
                        api_version: api.get(i),
                        kind: kind.get(i),
                        namespace: ns.opt(i),
                        name: name.get(i),
                        uid: uid.get(i),
                        resource_version: rv.get(i),
                        change: ChangeType::parse(&ch).ok_or_else(|| {
                            ArrowError::InvalidArgumentError(format!(
                                "column `change` row {i}: `{ch}` is not added, modified or deleted"
                            ))
                        })?,
                        object: obj.get(i),
                    }))
                })
                .collect::<Result<Vec<_>, ArrowError>>()?
        }
        Table::Events => {
            let names = [
                col::events::NAMESPACE,
                col::events::NAME,
                col::events::UID,
                col::events::TYPE,
                col::events::REASON,
                col::events::MESSAGE,
                col::events::INVOLVED_API_VERSION,
                col::events::INVOLVED_KIND,
                col::events::INVOLVED_NAMESPACE,
                col::events::INVOLVED_NAME,
                col::events::INVOLVED_UID,
                col::events::INVOLVED_FIELD_PATH,
                col::events::SOURCE_COMPONENT,
                col::events::SOURCE_HOST,
                col::events::REPORTING_CONTROLLER,
                col::events::REPORTING_INSTANCE,
                col::events::ACTION,
            ];
            let s: Vec<StrCol> = names.iter().map(|n| c.str(n)).collect::<Result<_, _>>()?;
            let (time, first, count) = (
                c.ts(col::events::TIME)?,
                c.ts(col::events::FIRST_TIME)?,
                c.i32(col::events::COUNT)?,
            );
            (0..n)
                .map(|i| {
                    Row::Event(EventRow {
                        time_ns: time.value(i),
                        first_time_ns: opt_ts(first, i),
                        namespace: s[0].get(i),
                        name: s[1].get(i),
                        uid: s[2].get(i),
                        event_type: s[3].get(i),
                        reason: s[4].get(i),
                        message: s[5].get(i),
                        count: count.value(i),
                        involved_api_version: s[6].opt(i),
                        involved_kind: s[7].get(i),
                        involved_namespace: s[8].opt(i),
                        involved_name: s[9].get(i),
                        involved_uid: s[10].opt(i),
                        involved_field_path: s[11].opt(i),
                        source_component: s[12].opt(i),
                        source_host: s[13].opt(i),
                        reporting_controller: s[14].opt(i),
                        reporting_instance: s[15].opt(i),
                        action: s[16].opt(i),
                    })
                })
                .collect()
        }
        Table::Logs => {
            let (time, ns, pod, container, restart, stream, line) = (
                c.ts(col::logs::TIME)?,
                c.str(col::logs::NAMESPACE)?,
                c.str(col::logs::POD)?,
                c.str(col::logs::CONTAINER)?,
                c.i32(col::logs::RESTART)?,
                c.str(col::logs::STREAM)?,
                c.str(col::logs::LINE)?,
            );
            (0..n)
                .map(|i| {
                    Row::Log(LogRow {
                        time_ns: time.value(i),
                        namespace: ns.get(i),
                        pod: pod.get(i),
                        container: container.get(i),
                        restart: restart.value(i),
                        stream: stream.get(i),
                        line: line.get(i),
                    })
                })
                .collect()
        }
        Table::Metrics => {
            let (metric, labels, time, value) = (
                c.str(col::metrics::METRIC)?,
                c.map(col::metrics::LABELS)?,
                c.ts(col::metrics::TIME)?,
                c.f64(col::metrics::VALUE)?,
            );
            (0..n)
                .map(|i| {
                    Row::Metric(MetricSample {
                        metric: metric.get(i),
                        labels: labels.get(i),
                        time_ns: time.value(i),
                        value: value.value(i),
                    })
                })
                .collect()
        }
        Table::MetricMetadata => {
            let (metric, ty, help, unit) = (
                c.str(col::metric_metadata::METRIC)?,
                c.str(col::metric_metadata::TYPE)?,
                c.str(col::metric_metadata::HELP)?,
                c.str(col::metric_metadata::UNIT)?,
            );
            (0..n)
                .map(|i| {
                    Row::MetricMeta(MetricMeta {
                        metric: metric.get(i),
                        metric_type: ty.get(i),
                        help: help.get(i),
                        unit: unit.get(i),
                    })
                })
                .collect()
        }
        Table::Spans => {
            let (trace, span, parent, service, name, kind) = (
                c.str(col::spans::TRACE_ID)?,
                c.str(col::spans::SPAN_ID)?,
                c.str(col::spans::PARENT_SPAN_ID)?,
                c.str(col::spans::SERVICE)?,
                c.str(col::spans::NAME)?,
                c.str(col::spans::KIND)?,
            );
            let (start, duration, status, message) = (
                c.ts(col::spans::START)?,
                c.i64(col::spans::DURATION)?,
                c.str(col::spans::STATUS_CODE)?,
                c.str(col::spans::STATUS_MESSAGE)?,
            );
            let (res, attrs) = (
                c.map(col::spans::RESOURCE_ATTRIBUTES)?,
                c.map(col::spans::ATTRIBUTES)?,
            );
            (0..n)
                .map(|i| {
                    Row::Span(SpanRow {
                        trace_id: trace.get(i),
                        span_id: span.get(i),
                        parent_span_id: parent.opt(i),
                        service: service.get(i),
                        name: name.get(i),
                        kind: kind.get(i),
                        start_ns: start.value(i),
                        duration_ns: duration.value(i),
                        status_code: status.get(i),
                        status_message: message.opt(i),
                        resource_attributes: res.get(i),
                        attributes: attrs.get(i),
                    })
                })
                .collect()
        }
        Table::Alerts => {
            let (time, name, state, labels, annotations, active, value) = (
                c.ts(col::alerts::TIME)?,
                c.str(col::alerts::ALERTNAME)?,
                c.str(col::alerts::STATE)?,
                c.map(col::alerts::LABELS)?,
                c.map(col::alerts::ANNOTATIONS)?,
                c.ts(col::alerts::ACTIVE_AT)?,
                c.f64(col::alerts::VALUE)?,
            );
            (0..n)
                .map(|i| {
                    Row::Alert(AlertRow {
                        time_ns: time.value(i),
                        alertname: name.get(i),
                        state: state.get(i),
                        labels: labels.get(i),
                        annotations: annotations.get(i),
                        active_at_ns: opt_ts(active, i),
                        value: (!value.is_null(i)).then(|| value.value(i)),
                    })
                })
                .collect()
        }
        Table::Audit => decode_audit(&c, n)?,
    };
    Ok(rows)
}

/// The same batch with its schema replaced by the table's canonical one (field metadata included),
/// when the column types agree. Lets data read back from Parquet be compared and re-written as is.
pub fn with_table_schema(table: Table, batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    RecordBatch::try_new(table.schema(), batch.columns().to_vec())
}
