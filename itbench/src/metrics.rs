//! `metrics/*.tsv`: Prometheus samples, one file per pod (`pod_<pod>_raw.tsv`: metric_name,
//! timestamp, value, pod_name, namespace, tags) or per service (`service_<svc>_raw.tsv`, which
//! adds service_name, bucket_le, metric_type and status_code). A sample's series is its metric
//! and its full label set (`tags`); the extra columns are derived from the query ITBench ran and
//! are not labels. The service files are unions of queries, so one sample can appear more than
//! once: it is kept once. Back, a series goes to its pod's file, a span-metrics or mesh series
//! to its service's file, anything else to its node's or to `cluster_all_raw.tsv`; metric
//! metadata (which ITBench has no file for) to `metric_metadata.json`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use schemas::tables::{Labels, MetricMeta, MetricSample, Row};
use serde::{Deserialize, Serialize};

use crate::logs::dict;
use crate::tsv::{Reader, Writer, millis_text, parse_time};
use crate::{Error, Report, at};

pub const POD_COLUMNS: [&str; 6] = [
    "metric_name",
    "timestamp",
    "value",
    "pod_name",
    "namespace",
    "tags",
];
pub const SERVICE_COLUMNS: [&str; 9] = [
    "metric_name",
    "timestamp",
    "value",
    "service_name",
    "namespace",
    "bucket_le",
    "tags",
    "metric_type",
    "status_code",
];

/// Samples already read, to keep a sample that several files repeat once.
#[derive(Default)]
pub struct Seen(HashMap<(String, Labels, i64), f64>);

fn value(text: &str) -> Option<f64> {
    let t = text.trim();
    match t {
        "+Inf" | "Inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        _ => t.parse().ok(),
    }
}

/// Reads one metrics file.
pub fn read(
    path: &Path,
    rows: &mut Vec<Row>,
    seen: &mut Seen,
    report: &mut Report,
) -> Result<(), Error> {
    let reader = Reader::open(path)?;
    if !reader.has("metric_name") || !reader.has("value") {
        report.skip(
            "metrics file without metric_name and value columns",
            path.display(),
        );
        return Ok(());
    }
    report.file("metrics");
    reader.for_each(|r| {
        let here = at(path, r.line);
        let metric = r.text("metric_name").to_string();
        let (Some(time), Some(v)) = (parse_time(r.text("timestamp")), value(r.text("value")))
        else {
            report.skip("sample without a readable timestamp or value", here);
            return Ok(());
        };
        if metric.is_empty() {
            report.skip("sample without a metric name", here);
            return Ok(());
        }
        let mut labels = dict(r.text("tags"), "tags", path, r.line, report);
        labels.remove("__name__");
        if labels.is_empty() {
            // No tags: the columns are all the series says.
            for (column, label) in [
                ("pod_name", "pod"),
                ("namespace", "namespace"),
                ("service_name", "service_name"),
                ("bucket_le", "le"),
                ("status_code", "status_code"),
            ] {
                let v = r.text(column).trim();
                if !v.is_empty() {
                    labels.insert(label.into(), v.into());
                }
            }
        }
        match seen.0.get(&(metric.clone(), labels.clone(), time)) {
            Some(prev) if prev.to_bits() == v.to_bits() => {
                report.skip("sample repeated by another query or file (kept once)", here);
                return Ok(());
            }
            Some(_) => {
                report.skip(
                    "sample of the same series and time with another value (the first kept)",
                    here,
                );
                return Ok(());
            }
            None => {
                seen.0.insert((metric.clone(), labels.clone(), time), v);
            }
        }
        rows.push(Row::Metric(MetricSample {
            metric,
            labels,
            time_ns: time,
            value: v,
        }));
        Ok(())
    })
}

/// `metric_metadata.json` as export writes it.
#[derive(Debug, Serialize, Deserialize)]
pub struct Meta {
    pub metric: String,
    #[serde(rename = "type")]
    pub metric_type: String,
    #[serde(default)]
    pub help: String,
    #[serde(default)]
    pub unit: String,
}

pub fn read_metadata(path: &Path, rows: &mut Vec<Row>, report: &mut Report) -> Result<(), Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let metas: Vec<Meta> = serde_json::from_str(&text)
        .map_err(|e| Error::format(path, e.line() as u64, e.to_string()))?;
    report.file("metric metadata");
    rows.extend(metas.into_iter().map(|m| {
        Row::MetricMeta(MetricMeta {
            metric: m.metric,
            metric_type: m.metric_type,
            help: m.help,
            unit: m.unit,
        })
    }));
    Ok(())
}

/// Which file a series belongs in, and whether it is a service file.
fn file_of(s: &MetricSample) -> (String, bool) {
    let clean = |n: &str| n.replace(['/', '\\'], "_");
    let service = s
        .labels
        .get("service_name")
        .or_else(|| s.labels.get("destination_canonical_service"));
    if (s.metric.starts_with("traces_span_metrics") || s.metric.starts_with("istio_"))
        && let Some(svc) = service
    {
        return (format!("service_{}_raw.tsv", clean(svc)), true);
    }
    if let Some(pod) = s.labels.get("pod") {
        return (format!("pod_{}_raw.tsv", clean(pod)), false);
    }
    if let Some(node) = s
        .labels
        .get("node")
        .or_else(|| s.labels.get("kubernetes_io_hostname"))
    {
        return (format!("node_{}_raw.tsv", clean(node)), false);
    }
    ("cluster_all_raw.tsv".into(), false)
}

/// ITBench's label for the query a service sample came from.
fn metric_type(metric: &str) -> &'static str {
    if metric.ends_with("_bucket") {
        "duration_p95"
    } else if metric.ends_with("calls_total") || metric == "istio_requests_total" {
        "error_rate"
    } else {
        ""
    }
}

/// Writes the samples into per-object files under `dir`; returns (files, samples).
pub fn write(dir: &Path, samples: impl Iterator<Item = MetricSample>) -> Result<(u64, u64), Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut writers: BTreeMap<String, Writer> = BTreeMap::new();
    let mut n = 0;
    for s in samples {
        let (name, service) = file_of(&s);
        if !writers.contains_key(&name) {
            let path: PathBuf = dir.join(&name);
            let header: &[&str] = if service {
                &SERVICE_COLUMNS
            } else {
                &POD_COLUMNS
            };
            writers.insert(name.clone(), Writer::create(&path, header)?);
        }
        let w = writers.get_mut(&name).expect("writer just made");
        let label = |k: &str| s.labels.get(k).cloned().unwrap_or_default();
        let tags = crate::pydict::write(&s.labels);
        let value = s.value.to_string();
        if service {
            w.row([
                s.metric.clone(),
                millis_text(s.time_ns),
                value,
                s.labels
                    .get("service_name")
                    .cloned()
                    .unwrap_or_else(|| label("destination_canonical_service")),
                label("namespace"),
                label("le"),
                tags,
                metric_type(&s.metric).to_string(),
                s.labels
                    .get("status_code")
                    .cloned()
                    .unwrap_or_else(|| label("response_code")),
            ])?;
        } else {
            w.row([
                s.metric.clone(),
                millis_text(s.time_ns),
                value,
                label("pod"),
                label("namespace"),
                tags,
            ])?;
        }
        n += 1;
    }
    let files = writers.len() as u64;
    for (_, w) in writers {
        w.finish()?;
    }
    Ok((files, n))
}

/// Writes `metric_metadata.json`.
pub fn write_metadata(path: &Path, metas: Vec<MetricMeta>) -> Result<(), Error> {
    let list: Vec<Meta> = metas
        .into_iter()
        .map(|m| Meta {
            metric: m.metric,
            metric_type: m.metric_type,
            help: m.help,
            unit: m.unit,
        })
        .collect();
    crate::write_json(path, &list)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(metric: &str, labels: &[(&str, &str)]) -> MetricSample {
        MetricSample {
            metric: metric.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            time_ns: 0,
            value: 1.0,
        }
    }

    #[test]
    fn series_go_to_the_file_of_their_object() {
        assert_eq!(
            file_of(&sample("container_cpu", &[("pod", "cart-1")])).0,
            "pod_cart-1_raw.tsv"
        );
        let span = sample(
            "traces_span_metrics_calls_total",
            &[("service_name", "cart"), ("pod", "otel-collector-1")],
        );
        assert_eq!(file_of(&span), ("service_cart_raw.tsv".into(), true));
        assert_eq!(
            file_of(&sample("node_load1", &[("node", "n1")])).0,
            "node_n1_raw.tsv"
        );
        assert_eq!(file_of(&sample("up", &[])).0, "cluster_all_raw.tsv");
        assert_eq!(metric_type("x_bucket"), "duration_p95");
        assert_eq!(value("+Inf"), Some(f64::INFINITY));
    }
}
