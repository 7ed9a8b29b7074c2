//! ITBench's "works like SQL" flow over one table (alerts, events): exact-match filters, then
//! group by one or more columns with one aggregation, then sort and page; or, without a group,
//! the filtered rows sorted and paged. Run by polars over the frame a tool built.

use polars::prelude::*;
use schemas::time::Reading;
use serde_json::{Map, Value};

use schemars::JsonSchema;
use serde::Deserialize;

use crate::frame::{collect, records};
use crate::params::{Window, de_filters, de_names, de_usize, limit, page};
use crate::{Error, Result};

/// What an agent asks of a "works like SQL" tool: the parameters alert_analysis and
/// event_analysis share (flattened into each tool's own).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SqlParams {
    /// Exact-match column filters, e.g. {"state": "firing"} or {"event_kind": "Warning"}.
    #[serde(default, deserialize_with = "de_filters")]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub filters: Map<String, Value>,
    /// Column or columns to group by.
    #[serde(default, deserialize_with = "de_names")]
    #[schemars(with = "Option<Vec<String>>")]
    pub group_by: Vec<String>,
    /// The aggregation (default count): the tool's description lists what it offers.
    #[serde(default)]
    pub agg: Option<String>,
    /// Column to sort by.
    #[serde(default)]
    pub sort_by: Option<String>,
    /// Most rows returned (0 or absent = all).
    #[serde(default, deserialize_with = "de_usize")]
    #[schemars(with = "Option<u64>")]
    pub limit: Option<usize>,
    /// Rows skipped (paging).
    #[serde(default, deserialize_with = "de_usize")]
    #[schemars(with = "Option<u64>")]
    pub offset: Option<usize>,
    /// ISO 8601 start of the window.
    #[serde(default)]
    pub start_time: Option<String>,
    /// ISO 8601 end of the window.
    #[serde(default)]
    pub end_time: Option<String>,
}

impl SqlParams {
    /// The window the parameters name.
    pub fn window(&self, reading: &Reading) -> Result<Window> {
        Window::parse(
            self.start_time.as_deref(),
            self.end_time.as_deref(),
            reading,
        )
    }
}

/// One query: what was asked, and what the table offers.
pub struct Query<'a> {
    pub asked: &'a SqlParams,
    /// What `first`/`last` order by, and what ungrouped rows are sorted by.
    pub time_column: &'a str,
    /// The aggregations this table offers, and the numeric columns `sum`/`mean`/`max`/`min` fold.
    pub aggs: &'a [&'a str],
    pub numeric: &'a [&'a str],
    /// Columns named in the frame's time columns are answered as served times.
    pub time_columns: &'a [&'a str],
    /// Columns `list` collects (up to ten distinct values each).
    pub listed: &'a [&'a str],
    /// Maps a column name an agent gives (a shortcut) to the frame's.
    pub resolve: &'a dyn Fn(&str) -> String,
}

impl Query<'_> {
    fn agg(&self) -> &str {
        self.asked.agg.as_deref().unwrap_or("count")
    }

    fn offset(&self) -> usize {
        self.asked.offset.unwrap_or(0)
    }

    fn limit(&self) -> Option<usize> {
        limit(self.asked.limit)
    }
}

fn available(df: &DataFrame) -> String {
    df.get_column_names()
        .iter()
        .filter(|c| !c.starts_with('_'))
        .map(|c| c.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn find(df: &DataFrame, q: &Query<'_>, wanted: &str, what: &str) -> Result<String> {
    let name = (q.resolve)(wanted);
    if df.get_column_names().iter().any(|c| c.as_str() == name) {
        Ok(name)
    } else {
        Err(Error::param(format!(
            "{what} column `{wanted}` not found; available: {}",
            available(df)
        )))
    }
}

/// The predicate `column == value` for a JSON value, typed by the column.
fn equals(df: &DataFrame, column: &str, value: &Value) -> Result<Expr> {
    let dtype = df.column(column)?.dtype().clone();
    let c = col(column);
    Ok(match value {
        Value::Null => c.is_null(),
        Value::Bool(b) => c.eq(lit(*b)),
        Value::Number(n) => c
            .cast(DataType::Float64)
            .eq(lit(n.as_f64().unwrap_or(f64::NAN))),
        Value::String(s) if dtype.is_primitive_numeric() => match s.trim().parse::<f64>() {
            Ok(f) => c.cast(DataType::Float64).eq(lit(f)),
            Err(_) => lit(false),
        },
        Value::String(s) => c.cast(DataType::String).eq(lit(s.clone())),
        other => c.cast(DataType::String).eq(lit(other.to_string())),
    })
}

/// Runs the query; the answer is ITBench's paged object.
pub fn run(df: DataFrame, q: &Query<'_>, reading: &Reading) -> Result<Value> {
    let mut lf = df.clone().lazy();
    for (wanted, value) in &q.asked.filters {
        let column = find(&df, q, wanted, "filter")?;
        lf = lf.filter(equals(&df, &column, value)?);
    }
    if q.asked.group_by.is_empty() {
        return ungrouped(lf, &df, q, reading);
    }
    let groups: Vec<String> = q
        .asked
        .group_by
        .iter()
        .map(|g| find(&df, q, g, "group"))
        .collect::<Result<_>>()?;
    let keys: Vec<Expr> = groups.iter().map(|g| col(g.as_str())).collect();
    let others: Vec<String> = df
        .get_column_names()
        .iter()
        .map(|c| c.to_string())
        .filter(|c| !groups.contains(c) && !c.starts_with('_'))
        .collect();
    if !q.aggs.contains(&q.agg()) {
        return Err(Error::param(format!(
            "agg `{}`: expected one of {}",
            q.agg(),
            q.aggs.join(", ")
        )));
    }
    let time = col(q.time_column);
    let (grouped, default_sort) = match q.agg() {
        "count" => (
            lf.group_by(keys.clone()).agg([len().alias("count")]),
            Some("count".to_string()),
        ),
        "first" | "last" => {
            let aggs: Vec<Expr> = others
                .iter()
                .map(|c| {
                    let e = col(c.as_str()).sort_by(
                        [time.clone()],
                        SortMultipleOptions::default().with_maintain_order(true),
                    );
                    if q.agg() == "first" {
                        e.first()
                    } else {
                        e.last()
                    }
                })
                .collect();
            (lf.group_by(keys.clone()).agg(aggs), None)
        }
        "nunique" => {
            let aggs: Vec<Expr> = others
                .iter()
                .map(|c| col(c.as_str()).n_unique().alias(format!("{c}_unique")))
                .collect();
            (lf.group_by(keys.clone()).agg(aggs), None)
        }
        "list" => {
            let mut aggs: Vec<Expr> = q
                .listed
                .iter()
                .filter(|c| others.iter().any(|o| o == *c))
                .map(|c| col(*c).unique_stable().head(Some(10)))
                .collect();
            aggs.push(len().alias("count"));
            (lf.group_by(keys.clone()).agg(aggs), None)
        }
        numeric => {
            let cols: Vec<&str> = q
                .numeric
                .iter()
                .copied()
                .filter(|c| others.iter().any(|o| o == c))
                .collect();
            if cols.is_empty() {
                return Err(Error::param(format!(
                    "agg `{numeric}`: no numeric column to aggregate"
                )));
            }
            let aggs: Vec<Expr> = cols
                .iter()
                .map(|c| {
                    let e = col(*c);
                    match numeric {
                        "sum" => e.sum(),
                        "mean" => e.mean(),
                        "max" => e.max(),
                        _ => e.min(),
                    }
                })
                .collect();
            (
                lf.group_by(keys.clone()).agg(aggs),
                cols.first().map(|c| c.to_string()),
            )
        }
    };
    let sort_col = q
        .asked
        .sort_by
        .as_deref()
        .map(|s| (q.resolve)(s))
        .or(default_sort);
    let mut grouped = grouped;
    let schema = grouped.collect_schema()?;
    let mut by: Vec<Expr> = Vec::new();
    let mut descending = Vec::new();
    if let Some(s) = sort_col.filter(|s| schema.contains(s)) {
        by.push(col(s.as_str()));
        descending.push(true);
    }
    for g in &groups {
        by.push(col(g.as_str()));
        descending.push(false);
    }
    let sorted = collect(
        grouped.sort_by_exprs(
            by,
            SortMultipleOptions::default()
                .with_order_descending_multi(descending)
                .with_nulls_last(true)
                .with_maintain_order(true),
        ),
    )?;
    let rows = records(&sorted, q.time_columns, reading);
    Ok(page(rows, q.offset(), q.limit()))
}

/// The filtered rows, sorted by `sort_by` (counts and durations largest first) or by time.
fn ungrouped(lf: LazyFrame, df: &DataFrame, q: &Query<'_>, reading: &Reading) -> Result<Value> {
    let (column, descending) = match q.asked.sort_by.as_deref() {
        Some(s) => {
            let c = find(df, q, s, "sort")?;
            let numeric = df.column(&c)?.dtype().is_primitive_numeric();
            (c, numeric && !q.time_columns.contains(&s))
        }
        None => (q.time_column.to_string(), false),
    };
    let sorted = collect(
        lf.sort(
            [column.as_str()],
            SortMultipleOptions::default()
                .with_order_descending(descending)
                .with_nulls_last(true)
                .with_maintain_order(true),
        ),
    )?;
    let rows = records(&sorted, q.time_columns, reading);
    Ok(page(rows, q.offset(), q.limit()))
}
