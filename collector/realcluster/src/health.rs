//! A cluster's health as its Prometheus tells it, for grading a mitigation on a real cluster: the
//! load generator's error ratio at the entry service, each service's p99 latency against what it
//! was before the fault, and the app's firing alerts. The queries cover the three ways the
//! catalog's apps export request metrics (the OpenTelemetry collector's spanmetrics,
//! go-grpc-prometheus and promhttp), joined with `or`, so one query answers whichever the cluster
//! has. Building the queries and reading their answers is IO-free; [`PromHealth`] asks.

use std::collections::BTreeMap;

use capture::http::HttpSource;
use problems::HealthCondition;
use serde_json::Value;

use live::mitigation;

/// Health is judged over the last minute of traffic: four scrapes at Prometheus' default
/// interval, so that a rate always has samples to work with (over two scrapes' worth, a window
/// now and then holds one sample and the rate is empty).
pub const WINDOW_SECS: u64 = 60;

/// The PromQL of an app's health: its namespace and its entry service.
#[derive(Debug, Clone)]
pub struct Queries {
    ns: String,
    entry: String,
}

/// One request-metric family: its error and total series and its latency histogram.
struct Family {
    errors: String,
    total: String,
    bucket: String,
    /// The label naming the service.
    service: &'static str,
    /// What turns the histogram's unit into seconds.
    to_seconds: &'static str,
}

impl Family {
    /// The p99 latency per service (as label `service`), in seconds.
    fn p99(&self, window: u64) -> String {
        format!(
            "histogram_quantile(0.99, sum by (le, service) (label_replace(rate({}[{window}s]), \"service\", \"$1\", \"{}\", \"(.*)\"))){}",
            self.bucket, self.service, self.to_seconds
        )
    }
}

impl Queries {
    pub fn new(ns: &str, entry: &str) -> Queries {
        Queries {
            ns: ns.to_string(),
            entry: entry.to_string(),
        }
    }

    fn families(&self, service: Option<&str>) -> [Family; 3] {
        let ns = promql_string(&self.ns);
        let only = |label: &str| {
            service.map_or(String::new(), |s| format!(",{label}={}", promql_string(s)))
        };
        let span = format!(
            "namespace={ns},span_kind=\"SPAN_KIND_SERVER\"{}",
            only("service_name")
        );
        let http = format!("namespace={ns}{}", only("job"));
        [
            Family {
                errors: format!(
                    "traces_span_metrics_calls_total{{{span},status_code=\"STATUS_CODE_ERROR\"}}"
                ),
                total: format!("traces_span_metrics_calls_total{{{span}}}"),
                bucket: format!("traces_span_metrics_duration_milliseconds_bucket{{{span}}}"),
                service: "service_name",
                to_seconds: " / 1000",
            },
            Family {
                errors: format!("grpc_server_handled_total{{{http},grpc_code!=\"OK\"}}"),
                total: format!("grpc_server_handled_total{{{http}}}"),
                bucket: format!("grpc_server_handling_seconds_bucket{{{http}}}"),
                service: "job",
                to_seconds: "",
            },
            Family {
                errors: format!("http_requests_total{{{http},code=~\"5..\"}}"),
                total: format!("http_requests_total{{{http}}}"),
                bucket: format!("http_request_duration_seconds_bucket{{{http}}}"),
                service: "job",
                to_seconds: "",
            },
        ]
    }

    /// The entry service's error ratio over the last `window` seconds: one sample, or none
    /// when no request reached it.
    pub fn entry_error_ratio(&self, window: u64) -> String {
        let fams = self.families(Some(&self.entry));
        let sum = |sel: &String| format!("sum(rate({sel}[{window}s]))");
        let errors: Vec<String> = fams.iter().map(|f| sum(&f.errors)).collect();
        let totals: Vec<String> = fams.iter().map(|f| sum(&f.total)).collect();
        format!(
            "({} or vector(0)) / ({})",
            errors.join(" or "),
            totals.join(" or ")
        )
    }

    /// Each service's p99 latency over the last `window` seconds, in seconds, by its `service`
    /// label.
    pub fn p99_by_service(&self, window: u64) -> String {
        let fams = self.families(None);
        let all: Vec<String> = fams
            .iter()
            .map(|f| format!("({})", f.p99(window)))
            .collect();
        all.join(" or ")
    }
}

/// A PromQL string literal.
fn promql_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// The samples of an instant query's answer, by the value of `label` (`""` when absent).
pub fn samples(answer: &Value, label: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for series in answer["data"]["result"].as_array().into_iter().flatten() {
        let key = series["metric"][label].as_str().unwrap_or_default();
        let value = series["value"][1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok());
        if let Some(v) = value.filter(|v| v.is_finite()) {
            out.insert(key.to_string(), v);
        }
    }
    out
}

/// What Prometheus showed at one instant, over the last `window` seconds.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    pub window: u64,
    /// The entry's error ratio; `None` when no request reached it.
    pub error_ratio: Option<f64>,
    pub p99: BTreeMap<String, f64>,
    /// Firing alerts of the app's namespace (or of none): (name, namespace).
    pub firing: Vec<String>,
}

/// Why a reading is unhealthy, judged as the simulator's grader judges
/// ([`live::mitigation`]): the error ratio over the limit, a service's p99 too far above
/// its baseline or the entry's above the problem's limit, an alert firing that the problem does
/// not excuse. No traffic at all is not health.
pub fn reasons(
    now: &Reading,
    baseline_p99: &BTreeMap<String, f64>,
    health: &HealthCondition,
    entry: &str,
) -> Vec<String> {
    let mut out = vec![];
    match now.error_ratio {
        None => out.push(format!(
            "no request reached {entry} in the last {}s (the load generator's traffic is gone)",
            now.window
        )),
        Some(r) => out.extend(mitigation::error_ratio_reason(
            &format!("the error ratio at {entry}"),
            r,
            now.window,
            health,
        )),
    }
    out.extend(mitigation::latency_reasons(
        &now.p99,
        baseline_p99,
        health,
        entry,
    ));
    out.extend(mitigation::firing_reasons(
        now.firing.iter().map(String::as_str),
        health,
    ));
    out
}

/// The firing alerts of `ns` (or of no namespace) in an `/api/v1/alerts` answer.
pub fn firing(answer: &Value, ns: &str) -> Vec<String> {
    let mut out: Vec<String> = answer["data"]["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["state"] == "firing")
        .filter(|a| a["labels"]["namespace"].as_str().is_none_or(|n| n == ns))
        .filter_map(|a| a["labels"]["alertname"].as_str().map(str::to_string))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A cluster's Prometheus, asked for an app's health.
#[derive(Clone)]
pub struct PromHealth {
    source: HttpSource,
    queries: Queries,
}

impl PromHealth {
    pub fn new(base: &str, ns: &str, entry: &str) -> anyhow::Result<PromHealth> {
        Ok(PromHealth {
            source: HttpSource::new("prometheus", base)?,
            queries: Queries::new(ns, entry),
        })
    }

    async fn instant(&self, query: String) -> anyhow::Result<Value> {
        self.source
            .get_json("api/v1/query", &[("query", query)])
            .await
    }

    /// Each service's p99 latency over the last `window` seconds (before a fault: the
    /// baseline).
    pub async fn p99(&self, window: u64) -> anyhow::Result<BTreeMap<String, f64>> {
        let answer = self.instant(self.queries.p99_by_service(window)).await?;
        Ok(samples(&answer, "service"))
    }

    /// Health over the last `window` seconds.
    pub async fn read(&self, window: u64) -> anyhow::Result<Reading> {
        let ratio = self.instant(self.queries.entry_error_ratio(window)).await?;
        let alerts = self.source.get_json("api/v1/alerts", &[]).await?;
        Ok(Reading {
            window,
            error_ratio: samples(&ratio, "").values().next().copied(),
            p99: self.p99(window).await?,
            firing: firing(&alerts, &self.queries.ns),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vector(samples: &[(&str, &str)]) -> Value {
        let result: Vec<Value> = samples
            .iter()
            .map(|(svc, v)| json!({"metric": {"service": svc}, "value": [1.0, v]}))
            .collect();
        json!({"status": "success", "data": {"resultType": "vector", "result": result}})
    }

    #[test]
    fn names_are_quoted_and_every_family_is_asked() {
        let q = Queries::new("hotel\"x", "front");
        let ratio = q.entry_error_ratio(45);
        assert!(ratio.contains("[45s]"), "{ratio}");
        assert!(ratio.contains(r#"namespace="hotel\"x""#), "{ratio}");
        for family in [
            "traces_span_metrics_calls_total",
            "grpc_server_handled_total",
            "http_requests_total",
        ] {
            assert_eq!(ratio.matches(family).count(), 2, "{ratio}");
        }
        assert!(ratio.contains(r#"service_name="front""#));
        assert!(ratio.contains(r#"job="front""#));
        assert!(ratio.starts_with('(') && ratio.contains("or vector(0)) / ("));
        let p99 = q.p99_by_service(30);
        assert!(!p99.contains("front"), "{p99}");
        assert_eq!(p99.matches("histogram_quantile").count(), 3, "{p99}");
        assert!(
            p99.contains("_milliseconds_bucket") && p99.contains(" / 1000"),
            "{p99}"
        );
    }

    #[test]
    fn samples_skip_what_is_not_a_number() {
        let v = vector(&[("a", "0.25"), ("b", "NaN"), ("c", "x")]);
        let s = samples(&v, "service");
        assert_eq!(s.into_iter().collect::<Vec<_>>(), vec![("a".into(), 0.25)]);
    }

    #[test]
    fn reasons_follow_the_problems_limits() {
        let health = HealthCondition {
            no_firing_alerts: true,
            exclude_alerts: vec!["Watchdog".into()],
            ..HealthCondition::default()
        };
        let base: BTreeMap<String, f64> =
            [("geo".into(), 0.010), ("frontend".into(), 0.200)].into();
        let healthy = Reading {
            window: 30,
            error_ratio: Some(0.005),
            p99: [("geo".into(), 0.055), ("frontend".into(), 0.290)].into(),
            firing: vec!["Watchdog".into()],
        };
        assert_eq!(
            reasons(&healthy, &base, &health, "frontend"),
            Vec::<String>::new()
        );
        let sick = Reading {
            window: 30,
            error_ratio: Some(0.2),
            p99: [("geo".into(), 0.070), ("frontend".into(), 0.290)].into(),
            firing: vec!["HighRequestErrorRate".into()],
        };
        let r = reasons(&sick, &base, &health, "frontend");
        assert_eq!(r.len(), 3, "{r:?}");
        assert!(r[0].contains("20.0%"), "{r:?}");
        assert!(
            r[1].contains("geo's p99 latency is 70 ms (baseline 10 ms)"),
            "{r:?}"
        );
        assert_eq!(r[2], "alert HighRequestErrorRate is firing");
        let silent = Reading::default();
        let r = reasons(&silent, &base, &health, "frontend");
        assert!(r[0].contains("no request reached frontend"), "{r:?}");
    }

    #[test]
    fn firing_alerts_of_other_namespaces_are_not_ours() {
        let answer = json!({"data": {"alerts": [
            {"state": "firing", "labels": {"alertname": "A", "namespace": "app"}},
            {"state": "pending", "labels": {"alertname": "B", "namespace": "app"}},
            {"state": "firing", "labels": {"alertname": "C", "namespace": "other"}},
            {"state": "firing", "labels": {"alertname": "D"}},
        ]}});
        assert_eq!(
            firing(&answer, "app"),
            vec!["A".to_string(), "D".to_string()]
        );
    }
}
