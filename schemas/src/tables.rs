//! The six signal tables (plus metric metadata) of dataset format v1, and the optional `audit` table
//! of a live run: their Arrow schemas, file names, sort keys, and the plain row types that producers
//! fill.
//!
//! The `audit` table is evaluator data: every request an agent made to the APIs of a live environment
//! (`collector env up`), as Kubernetes audit events. Only live runs have it; the APIs never serve it.
//!
//! Conventions: every timestamp is `Timestamp(Nanosecond, "UTC")`; durations are `Int64` nanoseconds;
//! labels and attributes are `Map<Utf8, Utf8>` (Arrow's canonical `entries`/`key`/`value` names, so
//! pyarrow and polars read them natively), with hot keys promoted to their own columns. The unit of
//! each numeric time column is recorded in the field metadata under `unit`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Labels or attributes: sorted so equal sets compare and encode equally.
pub type Labels = BTreeMap<String, String>;

/// Parquet key-value metadata keys faultline writes into every table file.
pub const META_TABLE: &str = "faultline.table";
pub const META_SCHEMA_VERSION: &str = "faultline.schema_version";
pub const META_SORT_KEY: &str = "faultline.sort_key";
/// Field metadata key for a column's unit.
pub const FIELD_UNIT: &str = "unit";

/// Column names of each table, one module per table: what its schema, sort key and time column
/// spell, and what readers of its files look columns up by.
pub mod columns {
    /// Columns of the `objects` table, in schema order.
    pub mod objects {
        pub const OBSERVED: &str = "observed";
        pub const API_VERSION: &str = "api_version";
        pub const KIND: &str = "kind";
        pub const NAMESPACE: &str = "namespace";
        pub const NAME: &str = "name";
        pub const UID: &str = "uid";
        pub const RESOURCE_VERSION: &str = "resource_version";
        pub const CHANGE: &str = "change";
        pub const OBJECT: &str = "object";
    }
    /// Columns of the `events` table, in schema order.
    pub mod events {
        pub const TIME: &str = "time";
        pub const FIRST_TIME: &str = "first_time";
        pub const NAMESPACE: &str = "namespace";
        pub const NAME: &str = "name";
        pub const UID: &str = "uid";
        pub const TYPE: &str = "type";
        pub const REASON: &str = "reason";
        pub const MESSAGE: &str = "message";
        pub const COUNT: &str = "count";
        pub const INVOLVED_API_VERSION: &str = "involved_api_version";
        pub const INVOLVED_KIND: &str = "involved_kind";
        pub const INVOLVED_NAMESPACE: &str = "involved_namespace";
        pub const INVOLVED_NAME: &str = "involved_name";
        pub const INVOLVED_UID: &str = "involved_uid";
        pub const INVOLVED_FIELD_PATH: &str = "involved_field_path";
        pub const SOURCE_COMPONENT: &str = "source_component";
        pub const SOURCE_HOST: &str = "source_host";
        pub const REPORTING_CONTROLLER: &str = "reporting_controller";
        pub const REPORTING_INSTANCE: &str = "reporting_instance";
        pub const ACTION: &str = "action";
    }
    /// Columns of the `logs` table, in schema order.
    pub mod logs {
        pub const TIME: &str = "time";
        pub const NAMESPACE: &str = "namespace";
        pub const POD: &str = "pod";
        pub const CONTAINER: &str = "container";
        pub const RESTART: &str = "restart";
        pub const STREAM: &str = "stream";
        pub const LINE: &str = "line";
    }
    /// Columns of the `metrics` table, in schema order.
    pub mod metrics {
        pub const METRIC: &str = "metric";
        pub const NAMESPACE: &str = "namespace";
        pub const LABELS: &str = "labels";
        pub const TIME: &str = "time";
        pub const VALUE: &str = "value";
    }
    /// Columns of the `metric_metadata` table, in schema order.
    pub mod metric_metadata {
        pub const METRIC: &str = "metric";
        pub const TYPE: &str = "type";
        pub const HELP: &str = "help";
        pub const UNIT: &str = "unit";
    }
    /// Columns of the `spans` table, in schema order.
    pub mod spans {
        pub const TRACE_ID: &str = "trace_id";
        pub const SPAN_ID: &str = "span_id";
        pub const PARENT_SPAN_ID: &str = "parent_span_id";
        pub const SERVICE: &str = "service";
        pub const NAME: &str = "name";
        pub const KIND: &str = "kind";
        pub const START: &str = "start";
        pub const DURATION: &str = "duration";
        pub const STATUS_CODE: &str = "status_code";
        pub const STATUS_MESSAGE: &str = "status_message";
        pub const RESOURCE_ATTRIBUTES: &str = "resource_attributes";
        pub const ATTRIBUTES: &str = "attributes";
    }
    /// Columns of the `alerts` table, in schema order.
    pub mod alerts {
        pub const TIME: &str = "time";
        pub const ALERTNAME: &str = "alertname";
        pub const STATE: &str = "state";
        pub const LABELS: &str = "labels";
        pub const ANNOTATIONS: &str = "annotations";
        pub const ACTIVE_AT: &str = "active_at";
        pub const VALUE: &str = "value";
    }
    /// Columns of the `audit` table, in schema order.
    pub mod audit {
        pub const TIME: &str = "time";
        pub const AUDIT_ID: &str = "audit_id";
        pub const API: &str = "api";
        pub const VERB: &str = "verb";
        pub const REQUEST_URI: &str = "request_uri";
        pub const USER_AGENT: &str = "user_agent";
        pub const SOURCE_IP: &str = "source_ip";
        pub const API_GROUP: &str = "api_group";
        pub const API_VERSION: &str = "api_version";
        pub const RESOURCE: &str = "resource";
        pub const NAMESPACE: &str = "namespace";
        pub const NAME: &str = "name";
        pub const SUBRESOURCE: &str = "subresource";
        pub const CODE: &str = "code";
        pub const LATENCY: &str = "latency";
        pub const EVENT: &str = "event";
    }
}

/// A table of the dataset. Every dataset holds the tables of [`Table::ALL`]; only live runs hold
/// `Audit` ([`Table::OPTIONAL`]).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Table {
    Objects,
    Events,
    Logs,
    Metrics,
    MetricMetadata,
    Spans,
    Alerts,
    Audit,
}

impl Table {
    /// The tables every dataset holds.
    pub const ALL: [Table; 7] = [
        Table::Objects,
        Table::Events,
        Table::Logs,
        Table::Metrics,
        Table::MetricMetadata,
        Table::Spans,
        Table::Alerts,
    ];

    /// Tables a dataset may hold or not: a reader finds them in the manifest or knows they were
    /// not recorded.
    pub const OPTIONAL: [Table; 1] = [Table::Audit];

    /// Every table a dataset can hold: the required ones, then the optional ones.
    pub fn every() -> impl Iterator<Item = Table> {
        Table::ALL.into_iter().chain(Table::OPTIONAL)
    }

    pub fn is_optional(self) -> bool {
        Table::OPTIONAL.contains(&self)
    }

    pub fn name(self) -> &'static str {
        match self {
            Table::Objects => "objects",
            Table::Events => "events",
            Table::Logs => "logs",
            Table::Metrics => "metrics",
            Table::MetricMetadata => "metric_metadata",
            Table::Spans => "spans",
            Table::Alerts => "alerts",
            Table::Audit => "audit",
        }
    }

    pub fn file_name(self) -> String {
        format!("{}.parquet", self.name())
    }

    /// Columns the rows are sorted by, in order: series first, then time, for compression and
    /// min/max pruning.
    pub fn sort_key(self) -> &'static [&'static str] {
        use columns::*;
        match self {
            Table::Objects => &[
                objects::KIND,
                objects::NAMESPACE,
                objects::NAME,
                objects::OBSERVED,
            ],
            Table::Events => &[events::NAMESPACE, events::TIME, events::NAME],
            Table::Logs => &[
                logs::NAMESPACE,
                logs::POD,
                logs::CONTAINER,
                logs::RESTART,
                logs::TIME,
            ],
            Table::Metrics => &[metrics::METRIC, metrics::LABELS, metrics::TIME],
            Table::MetricMetadata => &[metric_metadata::METRIC],
            Table::Spans => &[spans::SERVICE, spans::NAME, spans::START, spans::SPAN_ID],
            Table::Alerts => &[alerts::ALERTNAME, alerts::LABELS, alerts::TIME],
            // Audit ids are issued in arrival order, so they order the requests of one instant.
            Table::Audit => &[audit::TIME, audit::AUDIT_ID],
        }
    }

    /// The column that places a row in time, if the table has one.
    pub fn time_column(self) -> Option<&'static str> {
        match self {
            Table::Objects => Some(columns::objects::OBSERVED),
            Table::Events => Some(columns::events::TIME),
            Table::Logs => Some(columns::logs::TIME),
            Table::Metrics => Some(columns::metrics::TIME),
            Table::Alerts => Some(columns::alerts::TIME),
            Table::Audit => Some(columns::audit::TIME),
            Table::Spans => Some(columns::spans::START),
            Table::MetricMetadata => None,
        }
    }

    /// The table's Arrow schema, with units and format version in its metadata.
    pub fn schema(self) -> SchemaRef {
        use columns::*;
        let fields: Vec<Field> = match self {
            Table::Objects => vec![
                ts(objects::OBSERVED, false),
                utf8(objects::API_VERSION, false),
                utf8(objects::KIND, false),
                utf8(objects::NAMESPACE, true),
                utf8(objects::NAME, false),
                utf8(objects::UID, false),
                utf8(objects::RESOURCE_VERSION, false),
                utf8(objects::CHANGE, false),
                utf8(objects::OBJECT, false),
            ],
            Table::Events => vec![
                ts(events::TIME, false),
                ts(events::FIRST_TIME, true),
                utf8(events::NAMESPACE, false),
                utf8(events::NAME, false),
                utf8(events::UID, false),
                utf8(events::TYPE, false),
                utf8(events::REASON, false),
                utf8(events::MESSAGE, false),
                Field::new(events::COUNT, DataType::Int32, false),
                utf8(events::INVOLVED_API_VERSION, true),
                utf8(events::INVOLVED_KIND, false),
                utf8(events::INVOLVED_NAMESPACE, true),
                utf8(events::INVOLVED_NAME, false),
                utf8(events::INVOLVED_UID, true),
                utf8(events::INVOLVED_FIELD_PATH, true),
                utf8(events::SOURCE_COMPONENT, true),
                utf8(events::SOURCE_HOST, true),
                utf8(events::REPORTING_CONTROLLER, true),
                utf8(events::REPORTING_INSTANCE, true),
                utf8(events::ACTION, true),
            ],
            Table::Logs => vec![
                ts(logs::TIME, false),
                utf8(logs::NAMESPACE, false),
                utf8(logs::POD, false),
                utf8(logs::CONTAINER, false),
                Field::new(logs::RESTART, DataType::Int32, false),
                utf8(logs::STREAM, false),
                utf8(logs::LINE, false),
            ],
            Table::Metrics => vec![
                utf8(metrics::METRIC, false),
                utf8(metrics::NAMESPACE, true),
                map(metrics::LABELS),
                ts(metrics::TIME, false),
                Field::new(metrics::VALUE, DataType::Float64, false),
            ],
            Table::MetricMetadata => vec![
                utf8(metric_metadata::METRIC, false),
                utf8(metric_metadata::TYPE, false),
                utf8(metric_metadata::HELP, false),
                utf8(metric_metadata::UNIT, false),
            ],
            Table::Spans => vec![
                utf8(spans::TRACE_ID, false),
                utf8(spans::SPAN_ID, false),
                utf8(spans::PARENT_SPAN_ID, true),
                utf8(spans::SERVICE, false),
                utf8(spans::NAME, false),
                utf8(spans::KIND, false),
                ts(spans::START, false),
                Field::new(spans::DURATION, DataType::Int64, false)
                    .with_metadata([(FIELD_UNIT, "ns")]),
                utf8(spans::STATUS_CODE, false),
                utf8(spans::STATUS_MESSAGE, true),
                map(spans::RESOURCE_ATTRIBUTES),
                map(spans::ATTRIBUTES),
            ],
            Table::Alerts => vec![
                ts(alerts::TIME, false),
                utf8(alerts::ALERTNAME, false),
                utf8(alerts::STATE, false),
                map(alerts::LABELS),
                map(alerts::ANNOTATIONS),
                ts(alerts::ACTIVE_AT, true),
                Field::new(alerts::VALUE, DataType::Float64, true),
            ],
            Table::Audit => vec![
                ts(audit::TIME, false),
                utf8(audit::AUDIT_ID, false),
                utf8(audit::API, false),
                utf8(audit::VERB, false),
                utf8(audit::REQUEST_URI, false),
                utf8(audit::USER_AGENT, true),
                utf8(audit::SOURCE_IP, true),
                utf8(audit::API_GROUP, true),
                utf8(audit::API_VERSION, true),
                utf8(audit::RESOURCE, true),
                utf8(audit::NAMESPACE, true),
                utf8(audit::NAME, true),
                utf8(audit::SUBRESOURCE, true),
                Field::new(audit::CODE, DataType::Int32, false),
                Field::new(audit::LATENCY, DataType::Int64, false)
                    .with_metadata([(FIELD_UNIT, "ns")]),
                utf8(audit::EVENT, false),
            ],
        };
        let metadata = [
            (META_TABLE.to_string(), self.name().to_string()),
            (
                META_SCHEMA_VERSION.to_string(),
                crate::DATASET_FORMAT_VERSION.to_string(),
            ),
            (META_SORT_KEY.to_string(), self.sort_key().join(",")),
        ];
        Arc::new(Schema::new_with_metadata(fields, metadata))
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Table {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Table::every().find(|t| t.name() == s).ok_or_else(|| {
            let names: Vec<_> = Table::every().map(|t| t.name()).collect();
            format!("unknown table `{s}`: expected one of {}", names.join(", "))
        })
    }
}

fn utf8(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Utf8, nullable)
}

/// The timestamp type of every time column.
pub fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

fn ts(name: &str, nullable: bool) -> Field {
    Field::new(name, timestamp_type(), nullable).with_metadata([(FIELD_UNIT, "ns")])
}

/// The entries struct of a `Map<Utf8, Utf8>` column, named as Arrow's spec and pyarrow name them.
pub fn map_entries_field() -> Field {
    Field::new(
        "entries",
        DataType::Struct(Fields::from(vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("value", DataType::Utf8, true),
        ])),
        false,
    )
}

fn map(name: &str) -> Field {
    Field::new(
        name,
        DataType::Map(Arc::new(map_entries_field()), false),
        false,
    )
}

/// How an object version came to be observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeType {
    Added,
    Modified,
    Deleted,
}

impl ChangeType {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Added => "added",
            ChangeType::Modified => "modified",
            ChangeType::Deleted => "deleted",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "added" => Some(ChangeType::Added),
            "modified" => Some(ChangeType::Modified),
            "deleted" => Some(ChangeType::Deleted),
            _ => None,
        }
    }
}

/// One observed version of a Kubernetes object.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectRow {
    pub observed_ns: i64,
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    pub change: ChangeType,
    /// The whole object as JSON (managedFields dropped, Secret values redacted).
    pub object: String,
}

/// A Kubernetes Event in core/v1 terms (events.k8s.io/v1 ones are mapped onto these fields).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EventRow {
    /// When the event last happened (lastTimestamp, or eventTime/series.lastObservedTime).
    pub time_ns: i64,
    pub first_time_ns: Option<i64>,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `Normal` or `Warning`.
    pub event_type: String,
    pub reason: String,
    pub message: String,
    pub count: i32,
    pub involved_api_version: Option<String>,
    pub involved_kind: String,
    pub involved_namespace: Option<String>,
    pub involved_name: String,
    pub involved_uid: Option<String>,
    pub involved_field_path: Option<String>,
    pub source_component: Option<String>,
    pub source_host: Option<String>,
    pub reporting_controller: Option<String>,
    pub reporting_instance: Option<String>,
    pub action: Option<String>,
}

/// One container log line.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRow {
    pub time_ns: i64,
    pub namespace: String,
    pub pod: String,
    pub container: String,
    /// Which instance of the container wrote the line: 0 for the first, counting restarts.
    pub restart: i32,
    /// `stdout` or `stderr`.
    pub stream: String,
    pub line: String,
}

/// One metric sample. `labels` excludes `__name__` (that is `metric`).
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSample {
    pub metric: String,
    pub labels: Labels,
    pub time_ns: i64,
    pub value: f64,
}

/// Prometheus metadata of one metric family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricMeta {
    pub metric: String,
    /// `counter`, `gauge`, `histogram`, `summary` or `unknown`.
    pub metric_type: String,
    pub help: String,
    pub unit: String,
}

/// One span. Ids are lower-case hex (32 digits for traces, 16 for spans), as Jaeger and OTLP JSON show
/// them.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRow {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub service: String,
    pub name: String,
    /// `server`, `client`, `internal`, `producer` or `consumer`.
    pub kind: String,
    pub start_ns: i64,
    pub duration_ns: i64,
    /// `unset`, `ok` or `error`.
    pub status_code: String,
    pub status_message: Option<String>,
    pub resource_attributes: Labels,
    pub attributes: Labels,
}

/// The state of one alert at one observation.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertRow {
    pub time_ns: i64,
    pub alertname: String,
    /// `pending` or `firing` (an alert that is absent is inactive).
    pub state: String,
    pub labels: Labels,
    pub annotations: Labels,
    pub active_at_ns: Option<i64>,
    pub value: Option<f64>,
}

/// One request an agent made to an API of a live environment, as a Kubernetes audit event
/// (`audit.k8s.io/v1` `Event`, level `Metadata`) with its most asked-for fields promoted to columns.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRow {
    /// When the request was received, on the simulation's clock (as every other table's times).
    pub time_ns: i64,
    /// The event's `auditID`.
    pub audit_id: String,
    /// The API the request went to: `kubernetes`, `prometheus`, `jaeger` or `loki`.
    pub api: String,
    /// The Kubernetes verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`), or the lowercased HTTP method of a request that names no resource.
    pub verb: String,
    /// Path and query, as sent.
    pub request_uri: String,
    pub user_agent: Option<String>,
    pub source_ip: Option<String>,
    /// `objectRef` of a Kubernetes resource request (the core group is `""`).
    pub api_group: Option<String>,
    pub api_version: Option<String>,
    pub resource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// The HTTP status code answered.
    pub code: i32,
    /// Wall-clock time from receiving the request to the response's head being ready.
    pub latency_ns: i64,
    /// The whole audit event as JSON.
    pub event: String,
}

/// A row of any table, for producers that emit a mix of signals into one sink.
#[derive(Debug, Clone, PartialEq)]
pub enum Row {
    Object(ObjectRow),
    Event(EventRow),
    Log(LogRow),
    Metric(MetricSample),
    MetricMeta(MetricMeta),
    Span(SpanRow),
    Alert(AlertRow),
    Audit(AuditRow),
}

impl Row {
    pub fn table(&self) -> Table {
        match self {
            Row::Object(_) => Table::Objects,
            Row::Event(_) => Table::Events,
            Row::Log(_) => Table::Logs,
            Row::Metric(_) => Table::Metrics,
            Row::MetricMeta(_) => Table::MetricMetadata,
            Row::Span(_) => Table::Spans,
            Row::Alert(_) => Table::Alerts,
            Row::Audit(_) => Table::Audit,
        }
    }

    /// The row's time in ns (its table's time column); none for metric metadata.
    pub fn time_ns(&self) -> Option<i64> {
        match self {
            Row::Object(r) => Some(r.observed_ns),
            Row::Event(r) => Some(r.time_ns),
            Row::Log(r) => Some(r.time_ns),
            Row::Metric(r) => Some(r.time_ns),
            Row::Span(r) => Some(r.start_ns),
            Row::Alert(r) => Some(r.time_ns),
            Row::Audit(r) => Some(r.time_ns),
            Row::MetricMeta(_) => None,
        }
    }
}

/// `row.try_into()` takes a typed row back out of a [`Row`]; the error gives the row back.
macro_rules! row_conversions {
    ($($variant:ident => $ty:ty),* $(,)?) => {$(
        impl TryFrom<Row> for $ty {
            type Error = Row;
            fn try_from(row: Row) -> Result<Self, Row> {
                match row {
                    Row::$variant(x) => Ok(x),
                    other => Err(other),
                }
            }
        }
        impl From<$ty> for Row {
            fn from(x: $ty) -> Row {
                Row::$variant(x)
            }
        }
    )*};
}

row_conversions!(
    Object => ObjectRow,
    Event => EventRow,
    Log => LogRow,
    Metric => MetricSample,
    MetricMeta => MetricMeta,
    Span => SpanRow,
    Alert => AlertRow,
    Audit => AuditRow,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_names_its_sort_columns() {
        for t in Table::every() {
            let schema = t.schema();
            for col in t.sort_key() {
                assert!(
                    schema.field_with_name(col).is_ok(),
                    "{t}: sort column {col} missing"
                );
            }
            assert_eq!(t.name().parse::<Table>().unwrap(), t);
        }
        assert!("nope".parse::<Table>().unwrap_err().contains("objects"));
        assert_eq!("audit".parse::<Table>(), Ok(Table::Audit));
    }

    #[test]
    fn only_the_audit_table_is_optional() {
        assert!(Table::Audit.is_optional());
        assert!(Table::ALL.iter().all(|t| !t.is_optional()));
        assert!(!Table::ALL.contains(&Table::Audit));
        assert_eq!(Table::every().count(), Table::ALL.len() + 1);
    }

    #[test]
    fn time_columns_carry_units() {
        for t in Table::every() {
            for f in t.schema().fields() {
                if matches!(f.data_type(), DataType::Timestamp(..)) {
                    assert_eq!(f.metadata().get(FIELD_UNIT).map(String::as_str), Some("ns"));
                }
            }
        }
    }
}
