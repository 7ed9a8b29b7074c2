//! `event_analysis` over the events table, under the flat column names ITBench's tool gives its
//! rows (object_kind, object_name, namespace, reason, message, event_time, event_kind, count,
//! source_component, deployment). The table is already flat, so nothing is lost to a Body that
//! fails to parse, and `deployment` comes from the objects' owners rather than from cutting names.

use polars::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::cache::Derived;
use crate::frame::{collect, ints, nanos, strings, strings_or_empty, within};
use crate::owners::Owners;
use crate::query::{self, Query, SqlParams};
use crate::{Result, Source};
use schemas::tables::Table;
use schemas::tables::columns::events as c;

pub const DESCRIPTION: &str = "Analyzes Kubernetes events like SQL: filters -> group_by -> agg. Columns: object_kind, object_name, namespace, reason, message, event_time, first_time, event_kind (Normal/Warning), count, source_component, deployment (the workload a Pod or ReplicaSet belongs to), event_name. Aggregations: count (default), first, last, nunique, list. Example: group_by='reason'. Example: filters={'event_kind': 'Warning'}, group_by='deployment'. Example: group_by=['namespace', 'reason'].";

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Params {
    /// Ignored: the events are the session's (accepted so ITBench prompts work).
    #[serde(default, rename = "events_file")]
    pub _events_file: Option<Value>,
    /// The query; `deployment` groups pods by their workload, the window is on event_time.
    #[serde(flatten)]
    pub asked: SqlParams,
}

/// Every event as ITBench's flat frame (kept until the events or the objects change).
struct Flat(DataFrame);

impl Derived for Flat {
    const TABLES: &'static [Table] = &[Table::Events, Table::Objects];

    fn derive(source: &Source) -> Result<Flat> {
        Ok(Flat(frame(source, &*Owners::load(source)?)?))
    }
}

/// The events as ITBench's flat frame.
fn frame(source: &Source, owners: &Owners) -> Result<DataFrame> {
    let df = collect(source.scan(Table::Events)?.select([
        nanos(c::TIME).alias("event_time"),
        nanos(c::FIRST_TIME).alias("first_time"),
        col(c::NAMESPACE),
        col(c::NAME),
        col(c::TYPE),
        col(c::REASON),
        col(c::MESSAGE),
        col(c::COUNT),
        col(c::INVOLVED_KIND),
        col(c::INVOLVED_NAMESPACE),
        col(c::INVOLVED_NAME),
        col(c::SOURCE_COMPONENT),
        col(c::REPORTING_CONTROLLER),
    ]))?;
    let kinds = strings_or_empty(&df, c::INVOLVED_KIND)?;
    let names = strings_or_empty(&df, c::INVOLVED_NAME)?;
    let event_ns = strings_or_empty(&df, c::NAMESPACE)?;
    let namespaces: Vec<String> = strings(&df, c::INVOLVED_NAMESPACE)?
        .into_iter()
        .zip(&event_ns)
        .map(|(n, e)| n.filter(|n| !n.is_empty()).unwrap_or_else(|| e.clone()))
        .collect();
    let deployments: Vec<String> = (0..df.height())
        .map(|i| owners.workload(&namespaces[i], &kinds[i], &names[i]))
        .collect();
    let sources: Vec<Option<String>> = strings(&df, c::SOURCE_COMPONENT)?
        .into_iter()
        .zip(strings(&df, c::REPORTING_CONTROLLER)?)
        .map(|(s, r)| s.filter(|s| !s.is_empty()).or(r))
        .collect();
    let counts: Vec<Option<i64>> = ints(&df, c::COUNT)?;
    Ok(DataFrame::new_infer_height(vec![
        Column::new("object_kind".into(), kinds),
        Column::new("object_name".into(), names),
        Column::new("namespace".into(), namespaces),
        df.column(c::REASON)?.clone(),
        df.column(c::MESSAGE)?.clone(),
        df.column("event_time")?.clone(),
        df.column("first_time")?.clone(),
        df.column(c::TYPE)?.clone().with_name("event_kind".into()),
        Column::new("count".into(), counts),
        Column::new("source_component".into(), sources),
        Column::new("deployment".into(), deployments),
        df.column(c::NAME)?.clone().with_name("event_name".into()),
    ])?)
}

pub fn analysis(source: &Source, p: Params) -> Result<Value> {
    let reading = source.reading();
    let window = p.asked.window(&reading)?;
    let df = within(&source.derived::<Flat>()?.0, "event_time", &window)?;
    let resolve = |wanted: &str| -> String {
        match wanted {
            "timestamp" | "time" | "last_timestamp" => "event_time".into(),
            "type" => "event_kind".into(),
            "kind" => "object_kind".into(),
            other => other.to_string(),
        }
    };
    let q = Query {
        asked: &p.asked,
        time_column: "event_time",
        aggs: &["count", "first", "last", "nunique", "list"],
        numeric: &[],
        time_columns: &["event_time", "first_time"],
        listed: &["reason", "message", "event_kind"],
        resolve: &resolve,
    };
    query::run(df, &q, &reading)
}
