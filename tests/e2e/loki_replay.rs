//! The Loki API of `collector replay`, over HTTP: LogQL log and metric queries, label and series
//! discovery, with Loki's envelopes and error bodies.

use e2e::fixture::{CHECKOUT_POD, NOW, ReplayProcess, SEC, T0, write_observed_cluster};
use serde_json::{Value, json};

const HEALTHY: &str = "cart-5d8f7c9b4-q7k2m";
const CRASHING: &str = "cart-5d8f7c9b4-x2x9z";

struct Loki {
    base: String,
    _replay: ReplayProcess,
    _tmp: tempfile::TempDir,
}

fn start(extra: &[&str]) -> Loki {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    write_observed_cluster(&dir);
    let replay = ReplayProcess::start(&dir, extra);
    Loki {
        base: replay.url("loki"),
        _replay: replay,
        _tmp: tmp,
    }
}

impl Loki {
    /// GET with query parameters; the status and the body text.
    fn get(&self, path: &str, params: &[(&str, &str)]) -> (u16, String) {
        let url = reqwest::Url::parse_with_params(&format!("{}{path}", self.base), params).unwrap();
        let resp = e2e::http_get(url);
        (resp.status().as_u16(), resp.text().unwrap())
    }

    fn ok(&self, path: &str, params: &[(&str, &str)]) -> Value {
        let (status, text) = self.get(path, params);
        assert_eq!(status, 200, "{path} {params:?}: {text}");
        let body: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["status"], "success", "{body}");
        body
    }

    /// A failing request's plain-text error.
    fn fails(&self, path: &str, params: &[(&str, &str)]) -> String {
        let (status, text) = self.get(path, params);
        assert_eq!(status, 400, "{path} {params:?} should be refused: {text}");
        text
    }

    fn query_range(&self, params: &[(&str, &str)]) -> Value {
        self.ok("/loki/api/v1/query_range", params)["data"].clone()
    }
}

fn ns(t: i64) -> String {
    t.to_string()
}

fn checkout_labels(stream: &str) -> Value {
    json!({"container": "checkout", "job": "shop/checkout", "namespace": "shop",
           "pod": CHECKOUT_POD, "service_name": "checkout", "stream": stream})
}

/// Every line of a streams result, newest first.
fn lines(data: &Value) -> Vec<String> {
    let mut all: Vec<(i64, String)> = data["result"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["values"].as_array().unwrap().iter())
        .map(|v| {
            (
                v[0].as_str().unwrap().parse().unwrap(),
                v[1].as_str().unwrap().to_string(),
            )
        })
        .collect();
    all.sort_by_key(|a| std::cmp::Reverse(a.0));
    all.into_iter().map(|(_, l)| l).collect()
}

#[test]
fn labels_values_and_series() {
    let l = start(&["--frozen"]);
    assert_eq!(
        l.ok("/loki/api/v1/labels", &[])["data"],
        json!([
            "container",
            "job",
            "namespace",
            "pod",
            "service_name",
            "stream"
        ])
    );
    assert_eq!(
        l.ok("/loki/api/v1/label/pod/values", &[])["data"],
        json!([HEALTHY, CRASHING, CHECKOUT_POD])
    );
    assert_eq!(
        l.ok("/loki/api/v1/label/service_name/values", &[])["data"],
        json!(["cart", "checkout"]),
        "the cart pods' app label; the checkout pod has no object, so its container"
    );
    assert_eq!(
        l.ok(
            "/loki/api/v1/label/stream/values",
            &[("query", r#"{container="checkout"}"#)]
        )["data"],
        json!(["stderr", "stdout"])
    );
    let series = l.ok(
        "/loki/api/v1/series",
        &[("match[]", r#"{container="checkout"}"#)],
    );
    assert_eq!(
        series["data"],
        json!([checkout_labels("stderr"), checkout_labels("stdout")])
    );
    let both = l.ok(
        "/loki/api/v1/series",
        &[
            ("match[]", r#"{container="checkout", stream="stderr"}"#),
            ("match[]", &format!(r#"{{pod="{HEALTHY}"}}"#)),
        ],
    );
    assert_eq!(both["data"].as_array().unwrap().len(), 2);
    // A window before any line: nothing.
    let early = l.ok(
        "/loki/api/v1/labels",
        &[("start", &ns(T0)), ("end", &ns(T0 + 5 * SEC))],
    );
    assert_eq!(early["data"], json!([]));
}

#[test]
fn log_queries_filter_parse_and_page() {
    let l = start(&["--frozen"]);
    let start = ns(T0);
    let data = l.query_range(&[
        (
            "query",
            r#"{namespace="shop", container="checkout"} |= "error""#,
        ),
        ("start", &start),
    ]);
    assert_eq!(data["resultType"], "streams");
    assert!(data["stats"].is_object());
    assert_eq!(
        data["result"],
        json!([{
            "stream": checkout_labels("stdout"),
            "values": [
                [ns(T0 + 3400 * SEC), r#"{"level":"error","msg":"cart unavailable","order_id":"o-3","duration_ms":3000,"error":"rpc error: code = Unavailable"}"#],
                [ns(T0 + 3100 * SEC), r#"{"level":"error","msg":"payment failed","order_id":"o-2","duration_ms":2300,"error":"card declined"}"#],
            ],
        }]),
        "newest first; the line written after the virtual now is not there"
    );
    let oldest = l.query_range(&[
        ("query", r#"{container="checkout"} |= "error""#),
        ("start", &start),
        ("direction", "forward"),
        ("limit", "1"),
    ]);
    assert_eq!(oldest["result"][0]["values"][0][0], ns(T0 + 3100 * SEC));
    assert_eq!(oldest["result"][0]["values"].as_array().unwrap().len(), 1);

    // Chained filters, regex and negation; the default window is the last hour.
    let data = l.query_range(&[(
        "query",
        r#"{service_name="checkout"} |~ "order_id\":\"o-[0-9]" != "payment""#,
    )]);
    assert_eq!(lines(&data).len(), 3);
    let data = l.query_range(&[("query", r#"{namespace="shop"} !~ "^(info|warn|\\{)""#)]);
    assert_eq!(lines(&data), ["panic: assignment to entry in nil map"]);

    // json parses into labels; numeric and string label filters.
    let data = l.query_range(&[
        (
            "query",
            r#"{container="checkout"} | json | duration_ms > 1000 and level="error""#,
        ),
        ("start", &start),
    ]);
    let streams = data["result"].as_array().unwrap();
    assert_eq!(
        streams.len(),
        2,
        "each order is its own stream once parsed: {data}"
    );
    let mut labels = checkout_labels("stdout");
    for (k, v) in [
        ("level", "error"),
        ("msg", "payment failed"),
        ("order_id", "o-2"),
        ("duration_ms", "2300"),
        ("error", "card declined"),
    ] {
        labels[k] = json!(v);
    }
    assert!(streams.iter().any(|s| s["stream"] == labels), "{data}");
    let data = l.query_range(&[
        (
            "query",
            r#"{container="checkout"} | json | level=~"warn|error" | line_format "{{.msg}}""#,
        ),
        ("start", &start),
    ]);
    assert_eq!(
        lines(&data),
        ["cart unavailable", "slow cart response", "payment failed"]
    );

    // logfmt and limit.
    let data = l.query_range(&[
        ("query", &format!(r#"{{pod="{HEALTHY}"}} | logfmt | items >= 3 | took="2ms" | line_format "user {{{{.user_id}}}}""#)),
        ("start", &start),
        ("limit", "3"),
    ]);
    assert_eq!(lines(&data), ["user 49", "user 48", "user 47"]);

    // pattern and regexp extract labels too.
    let data = l.query_range(&[
        ("query", &format!(r#"{{pod="{CRASHING}"}} | pattern "<level>: cart service starting, instance <n>" | n > 3 | line_format "{{{{.level}}}} {{{{.n}}}}""#)),
        ("start", &start),
    ]);
    assert_eq!(lines(&data), ["info 5", "info 4"]);
    let data = l.query_range(&[
        ("query", r#"{container="checkout"} | regexp `"duration_ms":(?P<ms>[0-9]+)` | ms < 200 | label_format took=ms | line_format "{{.took}}""#),
        ("start", &start),
    ]);
    assert_eq!(lines(&data), ["180", "120"]);
}

#[test]
fn metric_queries_over_ranges_and_instants() {
    let l = start(&["--frozen"]);
    let data = l.query_range(&[
        (
            "query",
            r#"sum by (pod) (count_over_time({namespace="shop"} |= "error" [5m]))"#,
        ),
        ("start", &ns(NOW - 600 * SEC)),
        ("end", &ns(NOW)),
        ("step", "300"),
    ]);
    let t = |s: i64| json!((T0 + s * SEC) / SEC);
    assert_eq!(data["resultType"], "matrix");
    assert_eq!(
        data["result"],
        json!([{"metric": {"pod": CHECKOUT_POD}, "values": [[t(3300), "1"], [t(3600), "1"]]}])
    );

    let now_s = (NOW / SEC).to_string();
    let v = l.ok(
        "/loki/api/v1/query",
        &[
            (
                "query",
                r#"sum by (pod) (count_over_time({namespace="shop"}[1h]))"#,
            ),
            ("time", &now_s),
        ],
    );
    assert_eq!(v["data"]["resultType"], "vector");
    assert_eq!(
        v["data"]["result"],
        json!([
            {"metric": {"pod": HEALTHY}, "value": [t(3600), "50"]},
            {"metric": {"pod": CRASHING}, "value": [t(3600), "11"]},
            {"metric": {"pod": CHECKOUT_POD}, "value": [t(3600), "6"]},
        ])
    );
    // `time` defaults to the virtual now.
    let rate = l.ok(
        "/loki/api/v1/query",
        &[(
            "query",
            r#"rate({container="checkout", stream="stdout"}[10m])"#,
        )],
    );
    assert_eq!(
        rate["data"]["result"],
        json!([{"metric": checkout_labels("stdout"), "value": [t(3600), "0.006666666666666667"]}])
    );
    let top = l.ok(
        "/loki/api/v1/query",
        &[(
            "query",
            r#"topk(1, sum by (pod) (count_over_time({namespace="shop"}[1h])))"#,
        )],
    );
    assert_eq!(
        top["data"]["result"],
        json!([{"metric": {"pod": HEALTHY}, "value": [t(3600), "50"]}])
    );
    let busy = l.ok(
        "/loki/api/v1/query",
        &[(
            "query",
            r#"sum by (pod) (count_over_time({namespace="shop"}[1h])) > 10"#,
        )],
    );
    assert_eq!(
        busy["data"]["result"],
        json!([
            {"metric": {"pod": HEALTHY}, "value": [t(3600), "50"]},
            {"metric": {"pod": CRASHING}, "value": [t(3600), "11"]},
        ])
    );
    let per_minute = l.ok(
        "/loki/api/v1/query",
        &[(
            "query",
            r#"60 * rate({container="checkout", stream="stdout"}[10m])"#,
        )],
    );
    assert_eq!(per_minute["data"]["result"][0]["value"][1], "0.4");
    let bytes = l.ok(
        "/loki/api/v1/query",
        &[(
            "query",
            r#"sum(bytes_over_time({container="checkout", stream="stderr"}[1h]))"#,
        )],
    );
    assert_eq!(bytes["data"]["result"][0]["value"][1], "37");
    let parsed = l.ok(
        "/loki/api/v1/query",
        &[(
            "query",
            r#"count(count_over_time({container="checkout"} | json | __error__="" [1h]))"#,
        )],
    );
    assert_eq!(
        parsed["data"]["result"][0]["value"][1], "5",
        "five distinct parsed label sets"
    );
}

#[test]
fn refusals_read_like_loki() {
    let l = start(&["--frozen"]);
    let e = l.fails("/loki/api/v1/query", &[("query", r#"{namespace="shop"}"#)]);
    assert_eq!(
        e,
        "log queries are not supported as an instant query type, please change your query to a range query type\n"
    );
    let e = l.fails(
        "/loki/api/v1/query_range",
        &[("query", r#"{namespace="shop"} | unpack"#)],
    );
    assert!(
        e.contains("unsupported LogQL") && e.contains("`unpack`"),
        "{e}"
    );
    let e = l.fails(
        "/loki/api/v1/query_range",
        &[("query", r#"{namespace="shop"}"#), ("interval", "1m")],
    );
    assert!(e.contains("interval"), "{e}");
    let e = l.fails(
        "/loki/api/v1/query_range",
        &[(
            "query",
            r#"sum(rate({namespace="shop"}[1m])) / sum(rate({namespace="shop"}[5m]))"#,
        )],
    );
    assert!(e.contains("binary operation between two vectors"), "{e}");
    let e = l.fails(
        "/loki/api/v1/query_range",
        &[("query", r#"{namespace="shop""#)],
    );
    assert!(e.starts_with("parse error at line 1, col 18"), "{e}");
    let e = l.fails(
        "/loki/api/v1/query",
        &[(
            "query",
            r#"count_over_time({container="checkout"} | json [1h])"#,
        )],
    );
    assert!(
        e.starts_with("pipeline error: 'JSONParserErr'"),
        "the stderr line is not JSON: {e}"
    );
    let e = l.fails(
        "/loki/api/v1/query_range",
        &[("query", r#"{namespace="shop"}"#), ("limit", "10000")],
    );
    assert!(e.contains("max entries limit per query exceeded"), "{e}");
    let e = l.fails(
        "/loki/api/v1/query_range",
        &[
            ("query", r#"{namespace="shop"}"#),
            ("direction", "sideways"),
        ],
    );
    assert!(e.contains("invalid direction"), "{e}");
    let e = l.fails(
        "/loki/api/v1/query_range",
        &[
            ("query", r#"{namespace="shop"}"#),
            ("start", &ns(NOW)),
            ("end", &ns(T0)),
        ],
    );
    assert!(e.contains("end timestamp must not be before"), "{e}");
}

#[test]
fn by_default_line_times_are_served_from_the_real_now() {
    let l = start(&[]);
    let data = l.query_range(&[
        ("query", r#"{container="checkout", stream="stdout"}"#),
        ("limit", "1"),
    ]);
    let newest: i64 = data["result"][0]["values"][0][0]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let real_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let age_s = (real_now - newest) / SEC;
    assert!(
        (9..=600).contains(&age_s),
        "the newest line was written 10 s before now, served {age_s} s ago"
    );
}

#[test]
fn index_stats_and_patterns_answer_as_loki_does() {
    let l = start(&["--frozen"]);
    let (from, to) = (ns(T0), ns(NOW));
    // index/stats: Loki's bare object, the lines up to the virtual now (not the one after it).
    let (status, text) = l.get(
        "/loki/api/v1/index/stats",
        &[
            ("query", r#"{container="checkout"}"#),
            ("start", &from),
            ("end", &to),
        ],
    );
    assert_eq!(status, 200, "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    let lines = app_log_rows_before_now();
    let bytes: usize = lines.iter().map(String::len).sum();
    assert_eq!(
        body,
        json!({"streams": 2, "chunks": 2, "entries": lines.len(), "bytes": bytes})
    );

    // patterns: the two orders placed share one pattern; each pattern has its level.
    let body = l.ok(
        "/loki/api/v1/patterns",
        &[
            ("query", r#"{container="checkout", stream="stdout"}"#),
            ("start", &from),
            ("end", &to),
        ],
    );
    let data = body["data"].as_array().unwrap();
    assert_eq!(data[0]["pattern"], r#"{"level":"info","msg":"order <_>"#);
    assert_eq!(data[0]["level"], "info");
    let count = |d: &Value| -> i64 {
        d["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                assert!(
                    s[0].as_i64()
                        .is_some_and(|t| t * SEC >= T0 && t * SEC <= NOW),
                    "{s}"
                );
                s[1].as_i64().unwrap()
            })
            .sum()
    };
    assert_eq!(count(&data[0]), 2);
    assert_eq!(data.iter().map(count).sum::<i64>(), 5, "{body}");
    assert!(data.iter().any(|d| d["level"] == "error"), "{body}");
    assert!(data.iter().any(|d| d["level"] == "warn"), "{body}");

    // A query that is not a selector is refused as Loki refuses it.
    l.fails("/loki/api/v1/patterns", &[("query", "nope")]);
}

/// The checkout lines written up to the virtual now.
fn app_log_rows_before_now() -> Vec<String> {
    e2e::fixture::app_log_rows()
        .into_iter()
        .filter_map(|r| match r {
            schemas::tables::Row::Log(l) if l.time_ns <= NOW => Some(l.line),
            _ => None,
        })
        .collect()
}
