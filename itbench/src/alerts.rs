//! `alerts/*.json`: one file per observation of the firing alerts, either a JSON list
//! (`alerts_at_2025-12-15T17-30-49.329092.json`, the observation time in the name) or
//! Prometheus' API envelope (`{"data": {"alerts": [...]}, "timestamp": ...}`). Each alert becomes
//! a row of the alerts table at the observation time; back, each observation time becomes one
//! file in the list form (the envelope when the time is finer than the name can say).

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, NaiveDate, NaiveTime, Utc};
use schemas::tables::{AlertRow, Labels, Row};
use serde_json::{Map, Value, json};

use crate::{Error, Report};

/// The observation time ITBench's tools give a file: the envelope's `timestamp`, else the name.
pub fn snapshot_time(path: &Path, data: &Value) -> Option<i64> {
    if let Some(ts) = data.get("timestamp").and_then(Value::as_str)
        && let Some(t) = crate::tsv::parse_time(ts)
    {
        return Some(t);
    }
    let stem = path.file_stem()?.to_string_lossy();
    let (date, rest) = stem.split_once('T').map(|(d, r)| {
        (
            d.rsplit('_').next().unwrap_or(d).to_string(),
            r.trim_end_matches('Z').to_string(),
        )
    })?;
    let date = NaiveDate::parse_from_str(&date, "%Y-%m-%d").ok()?;
    let (clock, frac) = rest.split_once('.').unwrap_or((&rest, ""));
    let digits: String = clock.chars().filter(char::is_ascii_digit).collect();
    if digits.len() != 6 {
        return None;
    }
    let h: u32 = digits[0..2].parse().ok()?;
    let m: u32 = digits[2..4].parse().ok()?;
    let s: u32 = digits[4..6].parse().ok()?;
    let nanos: u32 = if frac.is_empty() {
        0
    } else {
        format!("{:0<9}", &frac[..frac.len().min(9)]).parse().ok()?
    };
    let t = date
        .and_time(NaiveTime::from_hms_nano_opt(h, m, s, nanos)?)
        .and_utc();
    t.timestamp_nanos_opt()
}

fn text_map(v: &Value) -> Labels {
    v.as_object()
        .map(|m| {
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str().map_or_else(|| v.to_string(), str::to_string),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().trim_start_matches('+').parse().ok(),
        _ => None,
    }
}

/// Reads one alerts file into rows.
pub fn read(path: &Path, rows: &mut Vec<Row>, report: &mut Report) -> Result<(), Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let data: Value = serde_json::from_str(&text)
        .map_err(|e| Error::format(path, e.line() as u64, e.to_string()))?;
    let Some(time) = snapshot_time(path, &data) else {
        report.skip(
            "alerts file without an observation time (no `timestamp`, no time in its name)",
            path.display(),
        );
        return Ok(());
    };
    let alerts: Vec<Value> = match &data {
        Value::Array(a) => a.clone(),
        Value::Object(o) => match o
            .get("data")
            .and_then(|d| d.get("alerts"))
            .or_else(|| o.get("alerts"))
        {
            Some(Value::Array(a)) => a.clone(),
            _ => vec![data.clone()],
        },
        _ => Vec::new(),
    };
    report.file("alerts");
    for (i, a) in alerts.iter().enumerate() {
        let labels = text_map(&a["labels"]);
        let Some(alertname) = labels
            .get("alertname")
            .cloned()
            .or_else(|| a["alertname"].as_str().map(str::to_string))
        else {
            report.skip(
                "alert without an alertname",
                format!("{}[{i}]", path.display()),
            );
            continue;
        };
        let active_at = a["activeAt"]
            .as_str()
            .or_else(|| a["startsAt"].as_str())
            .and_then(crate::tsv::parse_time);
        rows.push(Row::Alert(AlertRow {
            time_ns: time,
            alertname,
            state: a["state"].as_str().unwrap_or("firing").to_string(),
            labels,
            annotations: text_map(&a["annotations"]),
            active_at_ns: active_at,
            value: number(&a["value"]),
        }));
    }
    Ok(())
}

/// A value as Prometheus' API writes it: `2.222222222222222e-02`.
pub fn prometheus_float(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let s = format!("{v:e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    format!(
        "{mantissa}e{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.abs()
    )
}

fn alert_json(a: &AlertRow) -> Value {
    let mut o = Map::new();
    if !a.labels.contains_key("alertname") {
        o.insert("alertname".into(), a.alertname.clone().into());
    }
    o.insert("labels".into(), json!(a.labels));
    o.insert("annotations".into(), json!(a.annotations));
    o.insert("state".into(), a.state.clone().into());
    if let Some(t) = a.active_at_ns {
        o.insert("activeAt".into(), schemas::time::rfc3339_nanos(t).into());
    }
    if let Some(v) = a.value {
        o.insert("value".into(), prometheus_float(v).into());
    }
    Value::Object(o)
}

/// Writes one file per observation time into `dir`.
pub fn write(dir: &Path, alerts: Vec<AlertRow>) -> Result<u64, Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut by_time: BTreeMap<i64, Vec<Value>> = BTreeMap::new();
    for a in &alerts {
        by_time.entry(a.time_ns).or_default().push(alert_json(a));
    }
    let mut files = 0;
    for (t, list) in by_time {
        let when = DateTime::<Utc>::from_timestamp_nanos(t);
        let name = format!("alerts_at_{}.json", when.format("%Y-%m-%dT%H-%M-%S%.6f"));
        let body = if t.rem_euclid(1000) == 0 {
            Value::Array(list)
        } else {
            json!({"data": {"alerts": list}, "status": "success", "timestamp": schemas::time::rfc3339_nanos(t)})
        };
        crate::write_json(&dir.join(name), &body)?;
        files += 1;
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observation_times_come_from_names_or_the_envelope() {
        let t = |name: &str, v: Value| snapshot_time(Path::new(name), &v);
        let a = t(
            "alerts/alerts_at_2025-12-15T17-30-49.329092.json",
            json!([]),
        );
        assert_eq!(a, crate::tsv::parse_time("2025-12-15 17:30:49.329092"));
        let b = t(
            "alerts_in_alerting_state_2025-12-15T175223.904312Z.json",
            json!({}),
        );
        assert_eq!(b, crate::tsv::parse_time("2025-12-15 17:52:23.904312"));
        let c = t("x.json", json!({"timestamp": "2025-12-15T17:52:23Z"}));
        assert_eq!(c, crate::tsv::parse_time("2025-12-15 17:52:23"));
        assert_eq!(t("alerts.json", json!([])), None);
    }

    #[test]
    fn values_are_written_as_prometheus_writes_them() {
        assert_eq!(
            prometheus_float(0.022222222222222223),
            "2.2222222222222223e-02"
        );
        assert_eq!(prometheus_float(1.0), "1e+00");
        assert_eq!(prometheus_float(44037.17260273972), "4.403717260273972e+04");
        for v in [0.1, 1e-300, 123456.789, -2.5] {
            assert_eq!(prometheus_float(v).parse::<f64>().unwrap(), v);
        }
    }
}
