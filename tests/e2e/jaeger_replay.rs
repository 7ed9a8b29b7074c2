//! The Jaeger query API (v1 and api_v3) of `collector replay`, over HTTP, against the shapes the
//! real query service answers with.

use e2e::fixture::{
    NOW, ReplayProcess, SEC, T0, TRACE_A, TRACE_B, TRACE_C, TRACE_E, TRACE_LATER,
    write_observed_cluster,
};
use serde_json::{Value, json};

struct Jaeger {
    base: String,
    _replay: ReplayProcess,
    _tmp: tempfile::TempDir,
}

fn start() -> Jaeger {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    write_observed_cluster(&dir);
    let replay = ReplayProcess::start(&dir, &["--frozen"]);
    Jaeger {
        base: replay.url("jaeger"),
        _replay: replay,
        _tmp: tmp,
    }
}

impl Jaeger {
    /// GET a path; the status and the body as JSON.
    fn get(&self, path_and_query: &str) -> (u16, Value) {
        let resp = e2e::http_get(format!("{}{path_and_query}", self.base));
        let status = resp.status().as_u16();
        let text = resp.text().unwrap();
        let body = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{path_and_query}: not JSON ({e}): {text}"));
        (status, body)
    }

    fn ok(&self, path_and_query: &str) -> Value {
        let (status, body) = self.get(path_and_query);
        assert_eq!(status, 200, "{path_and_query}: {body}");
        body
    }

    /// Trace ids of a v1 search, in the order served.
    fn search(&self, query: &str) -> Vec<String> {
        let body = self.ok(&format!("/api/traces?{query}"));
        assert_eq!(body["errors"], Value::Null, "{body}");
        body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["traceID"].as_str().unwrap().to_string())
            .collect()
    }
}

fn us(ns: i64) -> i64 {
    ns / 1000
}

fn rfc3339(ns: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_nanos(ns)
        .format("%Y-%m-%dT%H:%M:%S%.9fZ")
        .to_string()
}

#[test]
fn v1_services_operations_and_envelope() {
    let j = start();
    assert_eq!(
        j.ok("/api/services"),
        json!({"data": ["cart", "checkout", "frontend"], "total": 3, "limit": 0, "offset": 0, "errors": null}),
        "frontend's later operation is not there yet, nor anything else after the virtual now"
    );
    let ops = j.ok("/api/services/frontend/operations");
    assert_eq!(
        ops["data"],
        json!([
            "GET /",
            "GET /api/cart",
            "POST /api/checkout",
            "cart.CartService/GetCart"
        ])
    );
    assert_eq!(ops["total"], 4);
    let server = j.ok("/api/operations?service=cart&spanKind=server");
    assert_eq!(
        server["data"],
        json!([{"name": "cart.CartService/GetCart", "spanKind": "server"}])
    );
    let all = j.ok("/api/operations?service=cart");
    assert_eq!(all["total"], 2);
    let (status, body) = j.get("/api/operations");
    assert_eq!(status, 400);
    assert_eq!(
        body,
        json!({"data": null, "total": 0, "limit": 0, "offset": 0,
               "errors": [{"code": 400, "msg": "parameter 'service' is required"}]})
    );
}

#[test]
fn v1_search_by_service_operation_tags_duration_and_time() {
    let j = start();
    let (from, to) = (us(T0), us(NOW));
    assert_eq!(
        j.search(&format!("service=frontend&start={from}&end={to}&limit=10")),
        [TRACE_C, TRACE_B, TRACE_A, TRACE_E],
        "newest first"
    );
    // Defaults: start two days before now, end now, limit 100.
    assert_eq!(j.search("service=frontend").len(), 4);
    assert_eq!(j.search("service=frontend&limit=1"), [TRACE_C]);
    assert_eq!(j.search("service=cart"), [TRACE_C, TRACE_A]);
    assert_eq!(
        j.search("service=frontend&operation=POST%20/api/checkout"),
        [TRACE_C]
    );
    assert_eq!(j.search("service=frontend&tag=error:true"), [TRACE_B]);
    assert_eq!(
        j.search("service=frontend&tag=http.status_code:200&tag=http.route:/"),
        [TRACE_E]
    );
    assert_eq!(
        j.search("service=frontend&tags=%7B%22http.status_code%22%3A%22500%22%7D"),
        [TRACE_B]
    );
    assert_eq!(
        j.search("service=frontend&minDuration=1s"),
        [TRACE_C, TRACE_B]
    );
    assert_eq!(
        j.search("service=frontend&minDuration=1s&maxDuration=2000ms"),
        [TRACE_C]
    );
    assert_eq!(
        j.search(&format!(
            "service=frontend&start={}&end={}",
            us(T0 + 200 * SEC),
            us(T0 + 3200 * SEC)
        )),
        [TRACE_A]
    );
    assert_eq!(j.search("service=nobody"), Vec::<String>::new());

    let body = j.ok(&format!(
        "/api/traces?traceID={TRACE_A}&traceID=00000000000000000000000000000bad"
    ));
    assert_eq!(body["data"].as_array().unwrap().len(), 1);
    assert_eq!(
        body["errors"],
        json!([{"msg": "trace not found", "traceID": "00000000000000000000000000000bad"}])
    );

    for (query, msg) in [
        ("", "parameter 'service' is required"),
        (
            "service=frontend&minDuration=abc",
            "unable to parse param 'minDuration'",
        ),
        (
            "service=frontend&start=yesterday",
            "unable to parse param 'start'",
        ),
        ("service=frontend&tag=novalue", "malformed 'tag' parameter"),
        (
            "service=frontend&minDuration=2s&maxDuration=1s",
            "'maxDuration' should be greater than 'minDuration'",
        ),
    ] {
        let (status, body) = j.get(&format!("/api/traces?{query}"));
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["errors"][0]["code"], 400);
        let got = body["errors"][0]["msg"].as_str().unwrap();
        assert!(got.contains(msg), "{query}: {got}");
    }
}

#[test]
fn v1_trace_by_id_in_the_ui_model() {
    let j = start();
    let body = j.ok(&format!("/api/traces/{TRACE_A}"));
    assert_eq!(
        (body["total"].clone(), body["errors"].clone()),
        (json!(0), Value::Null)
    );
    let trace = &body["data"][0];
    assert_eq!(trace["traceID"], TRACE_A);
    assert_eq!(trace["warnings"], Value::Null);
    let spans = trace["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 4);
    let root = &spans[0];
    assert_eq!(root["spanID"], "a000000000000001");
    assert_eq!(root["operationName"], "GET /api/cart");
    assert_eq!(root["references"], json!([]));
    assert_eq!(root["startTime"], us(T0 + 3000 * SEC));
    assert_eq!(root["duration"], 30_000);
    assert_eq!(root["processID"], "p1");
    assert_eq!(root["logs"], json!([]));
    assert_eq!(
        root["tags"],
        json!([
            {"key": "http.method", "type": "string", "value": "GET"},
            {"key": "http.route", "type": "string", "value": "/api/cart"},
            {"key": "http.status_code", "type": "int64", "value": 200},
            {"key": "span.kind", "type": "string", "value": "server"},
        ])
    );
    let cart = &spans[2];
    assert_eq!(
        cart["references"],
        json!([{"refType": "CHILD_OF", "traceID": TRACE_A, "spanID": "a000000000000002"}])
    );
    assert_eq!(cart["processID"], "p2");
    assert_eq!(trace["processes"]["p1"]["serviceName"], "frontend");
    assert_eq!(trace["processes"]["p2"]["serviceName"], "cart");
    assert!(
        trace["processes"]["p2"]["tags"]
            .as_array()
            .unwrap()
            .contains(&json!({"key": "k8s.namespace.name", "type": "string", "value": "shop"}))
    );

    let failed = j.ok(&format!("/api/traces/{TRACE_B}"));
    let tags = &failed["data"][0]["spans"][0]["tags"];
    for tag in [
        json!({"key": "error", "type": "bool", "value": true}),
        json!({"key": "otel.status_code", "type": "string", "value": "ERROR"}),
        json!({"key": "otel.status_description", "type": "string", "value": "upstream connect error"}),
    ] {
        assert!(tags.as_array().unwrap().contains(&tag), "{tag} in {tags}");
    }

    let not_found = json!({"data": null, "total": 0, "limit": 0, "offset": 0,
                           "errors": [{"code": 404, "msg": "trace not found"}]});
    assert_eq!(
        j.get(&format!("/api/traces/{TRACE_LATER}")),
        (404, not_found.clone()),
        "starts after now"
    );
    assert_eq!(
        j.get("/api/traces/0123456789abcdef0123456789abcdef"),
        (404, not_found)
    );
    let (status, body) = j.get("/api/traces/not-hex");
    assert_eq!(status, 400);
    assert_eq!(body["errors"][0]["code"], 400);
}

#[test]
fn v1_dependencies_count_calls_between_services() {
    let j = start();
    let body = j.ok(&format!(
        "/api/dependencies?endTs={}&lookback=3600000",
        NOW / 1_000_000
    ));
    assert_eq!(
        body["data"],
        json!([
            {"parent": "checkout", "child": "cart", "callCount": 1},
            {"parent": "frontend", "child": "cart", "callCount": 1},
            {"parent": "frontend", "child": "checkout", "callCount": 1},
        ])
    );
    // The last 200 s hold trace C alone.
    let recent = j.ok(&format!(
        "/api/dependencies?endTs={}&lookback=200000",
        NOW / 1_000_000
    ));
    assert_eq!(recent["data"].as_array().unwrap().len(), 2, "{recent}");
    // Defaults: end now, one day back.
    assert_eq!(j.ok("/api/dependencies")["data"], body["data"]);
}

/// Trace ids of an api_v3 answer, in order of first appearance.
fn otlp_trace_ids(body: &Value) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for rs in body["result"]["resourceSpans"].as_array().unwrap() {
        for ss in rs["scopeSpans"].as_array().unwrap() {
            for s in ss["spans"].as_array().unwrap() {
                let id = s["traceId"].as_str().unwrap().to_string();
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
    }
    ids.sort();
    ids
}

#[test]
fn api_v3_answers_in_otlp_json() {
    let j = start();
    assert_eq!(
        j.ok("/api/v3/services"),
        json!({"services": ["cart", "checkout", "frontend"]})
    );
    assert_eq!(
        j.ok("/api/v3/operations?service=cart"),
        json!({"operations": [
            {"name": "HGET", "spanKind": "client"},
            {"name": "cart.CartService/GetCart", "spanKind": "server"},
        ]})
    );
    let (min, max) = (rfc3339(T0), rfc3339(NOW));
    let slow = j.ok(&format!(
        "/api/v3/traces?query.service_name=frontend&query.start_time_min={min}&query.start_time_max={max}&query.duration_min=1s"
    ));
    assert_eq!(otlp_trace_ids(&slow), [TRACE_B, TRACE_C]);
    assert_eq!(
        slow["result"]["resourceSpans"].as_array().unwrap().len(),
        4,
        "trace after trace, one resource per service: C (frontend, checkout, cart) then B (frontend)"
    );
    let camel = j.ok(&format!(
        "/api/v3/traces?query.serviceName=checkout&query.startTimeMin={min}&query.startTimeMax={max}"
    ));
    assert_eq!(otlp_trace_ids(&camel), [TRACE_C]);
    let by_attr = j.ok(&format!(
        "/api/v3/traces?query.service_name=frontend&query.start_time_min={min}&query.start_time_max={max}&query.attributes%5Bhttp.status_code%5D=500"
    ));
    assert_eq!(otlp_trace_ids(&by_attr), [TRACE_B]);

    let trace = j.ok(&format!("/api/v3/traces/{TRACE_A}"));
    let resources = trace["result"]["resourceSpans"].as_array().unwrap();
    assert_eq!(resources.len(), 2, "one resource per service");
    let frontend = &resources[0];
    assert!(
        frontend["resource"]["attributes"]
            .as_array()
            .unwrap()
            .contains(&json!({"key": "service.name", "value": {"stringValue": "frontend"}}))
    );
    let root = &frontend["scopeSpans"][0]["spans"][0];
    let start = (T0 + 3000 * SEC).to_string();
    let end = (T0 + 3000 * SEC + 30_000_000).to_string();
    assert_eq!(
        *root,
        json!({
            "traceId": TRACE_A, "spanId": "a000000000000001", "parentSpanId": "", "name": "GET /api/cart",
            "kind": 2, "startTimeUnixNano": start, "endTimeUnixNano": end, "status": {},
            "attributes": [
                {"key": "http.method", "value": {"stringValue": "GET"}},
                {"key": "http.route", "value": {"stringValue": "/api/cart"}},
                {"key": "http.status_code", "value": {"intValue": "200"}},
            ],
        })
    );
    let failed = j.ok(&format!("/api/v3/traces/{TRACE_B}"));
    let client = &failed["result"]["resourceSpans"][0]["scopeSpans"][0]["spans"][1];
    assert_eq!(client["kind"], 3);
    assert_eq!(
        client["status"],
        json!({"code": 2, "message": "connection refused"})
    );

    let not_found = json!({"error": {"httpCode": 404, "message": "No traces found"}});
    assert_eq!(
        j.get(&format!("/api/v3/traces/{TRACE_LATER}")),
        (404, not_found.clone())
    );
    assert_eq!(
        j.get(&format!("/api/v3/traces?query.service_name=nobody&query.start_time_min={min}&query.start_time_max={max}")),
        (404, not_found)
    );
    assert_eq!(
        j.get("/api/v3/traces?query.service_name=frontend"),
        (
            400,
            json!({"error": {"httpCode": 400, "message": "query.start_time_min and query.start_time_max are required"}})
        )
    );
    let (status, body) = j.get(&format!(
        "/api/v3/traces?query.service_name=frontend&query.start_time_min=yesterday&query.start_time_max={max}"
    ));
    assert_eq!(status, 400);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("malformed parameter query.start_time_min")
    );
}

#[test]
fn by_default_served_times_move_and_client_times_are_read_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    write_observed_cluster(&dir);
    let replay = ReplayProcess::start(&dir, &[]);
    let j = Jaeger {
        base: replay.url("jaeger"),
        _replay: replay,
        _tmp: tmp,
    };
    // Default window (two days back from the served now) still finds everything.
    assert_eq!(j.search("service=frontend").len(), 4);
    let body = j.ok(&format!("/api/traces/{TRACE_C}"));
    let start_us = body["data"][0]["spans"][0]["startTime"].as_i64().unwrap();
    let real_now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64;
    let age_s = (real_now_us - start_us) / 1_000_000;
    assert!(
        (99..=1000).contains(&age_s),
        "trace C started 100 s before now, served {age_s} s ago"
    );
}
