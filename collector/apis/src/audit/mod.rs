//! Every request an agent makes to an API, as a Kubernetes audit event (`audit.k8s.io/v1` `Event`,
//! level `Metadata`): the trajectory an evaluator reads after a live session.
//!
//! What flows through: the transport ([`layer`]) notes what it saw of a request and its response in
//! an [`Exchange`] (method, path, query, a few headers, peer, status, times); [`AuditEvent::new`]
//! resolves what the request was about and the event renders as audit JSON ([`AuditEvent::to_json`])
//! or as a row of the dataset's `audit` table ([`AuditEvent::to_row`]). Nothing here does IO.
//!
//! Requests to the Kubernetes API are audited as an apiserver audits them: the verb and `objectRef`
//! come from [`apiserver::request_info`]. The other APIs (Prometheus, Jaeger, Loki) have no
//! resources: their requests are audited as the apiserver audits a non-resource request (verb = the
//! lowercased HTTP method, no `objectRef`). Every event names its API in the `faultline.dev/api`
//! annotation, so one table holds the whole trajectory; a PromQL or LogQL `query` parameter is also
//! copied, decoded, into `faultline.dev/query`.
//!
//! Times: an event carries virtual times (the simulation's clock, as every dataset table), served
//! in the event JSON as the agent saw them (shifted by the environment's clock); the row keeps the
//! virtual receipt time, and the wall-clock latency besides.
//!
//! Level `Metadata` records no bodies: a dry run sent in a DELETE's body (kubectl's
//! `delete --dry-run=server`) or a query sent as a form body is not seen.

pub mod layer;

use apiserver::request_info::RequestInfo;
use schemas::tables::AuditRow;
use schemas::time::rfc3339_micros;
use serde_json::{Map, Value, json};

/// The annotation naming the API a request went to.
pub const ANNOTATION_API: &str = "faultline.dev/api";
/// The annotation holding a Prometheus or Loki request's `query` parameter, decoded.
pub const ANNOTATION_QUERY: &str = "faultline.dev/query";
/// kubectl's `Kubectl-Command` header (`kubectl scale`).
pub const ANNOTATION_KUBECTL_COMMAND: &str = "faultline.dev/kubectl-command";
/// kubectl's `Kubectl-Session` header: one id per kubectl invocation.
pub const ANNOTATION_KUBECTL_SESSION: &str = "faultline.dev/kubectl-session";
/// A write's `dryRun` query parameter.
pub const ANNOTATION_DRY_RUN: &str = "faultline.dev/dry-run";

/// The most of a failure's message an event keeps.
const MAX_MESSAGE_BYTES: usize = 1024;

/// The API a request went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Api {
    Kubernetes,
    Prometheus,
    Jaeger,
    Loki,
}

impl Api {
    pub const ALL: [Api; 4] = [Api::Kubernetes, Api::Prometheus, Api::Jaeger, Api::Loki];

    pub fn name(self) -> &'static str {
        match self {
            Api::Kubernetes => "kubernetes",
            Api::Prometheus => "prometheus",
            Api::Jaeger => "jaeger",
            Api::Loki => "loki",
        }
    }
}

/// What the transport saw of one request and its response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exchange {
    /// The HTTP method, as sent (`GET`).
    pub method: String,
    pub path: String,
    /// The raw query string, without `?`.
    pub query: String,
    pub user_agent: Option<String>,
    /// The addresses the request came through: `X-Forwarded-For` entries, then the peer.
    pub source_ips: Vec<String>,
    /// Whether the request carried credentials (they are not verified, nor recorded).
    pub authenticated: bool,
    pub kubectl_command: Option<String>,
    pub kubectl_session: Option<String>,
    /// The HTTP status answered.
    pub code: u16,
    /// Why a request failed, read from the error body (when it could be read).
    pub failure: Option<Failure>,
    /// Whether the whole response was ready with its head; a watch or a followed log is still
    /// streaming, and is recorded when it starts.
    pub complete: bool,
    /// Virtual time the request was received, ns.
    pub received_ns: i64,
    /// Virtual time the response's head was ready, ns.
    pub responded_ns: i64,
    /// Added to virtual times to serve them (the clock's shift when the request was received).
    pub shift_ns: i64,
    /// Wall-clock time from receipt to the response's head, ns.
    pub latency_ns: i64,
}

/// The reason and message of a failed response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// A machine-readable reason (`NotFound`, `bad_data`), when the body had one.
    pub reason: Option<String>,
    pub message: String,
}

impl Failure {
    /// Reads the reason and message from an error body of any of the four APIs: a Kubernetes
    /// `Status` (`reason`, `message`), a Prometheus error (`errorType`, `error`), Jaeger's v1
    /// (`errors[0].msg`) or api_v3 (`error.message`) envelope, or plain text (Loki). `None` for an
    /// empty body.
    pub fn from_body(body: &[u8]) -> Option<Failure> {
        let text = String::from_utf8_lossy(body);
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        let str_at = |v: &Value, path: &[&str]| -> Option<String> {
            let mut cur = v;
            for key in path {
                cur = match key.parse::<usize>() {
                    Ok(i) => cur.get(i)?,
                    Err(_) => cur.get(key)?,
                };
            }
            cur.as_str().map(str::to_string)
        };
        let (reason, message) = match serde_json::from_str::<Value>(text) {
            Ok(v) if v.is_object() => {
                let reason = str_at(&v, &["reason"]).or_else(|| str_at(&v, &["errorType"]));
                let message = [
                    &["message"][..],
                    &["error"][..],
                    &["error", "message"][..],
                    &["errors", "0", "msg"][..],
                ]
                .iter()
                .find_map(|path| str_at(&v, path))
                .unwrap_or_else(|| text.to_string());
                (reason, message)
            }
            _ => (None, text.to_string()),
        };
        Some(Failure {
            reason: reason.filter(|r| !r.is_empty()),
            message: truncate(message, MAX_MESSAGE_BYTES),
        })
    }
}

/// At most `max` bytes of `s`, cut at a character boundary.
fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// One audited request.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent {
    pub api: Api,
    pub audit_id: String,
    pub exchange: Exchange,
    /// What the request was about; for APIs other than Kubernetes, a non-resource request.
    pub info: RequestInfo,
}

impl AuditEvent {
    pub fn new(api: Api, audit_id: String, exchange: Exchange) -> AuditEvent {
        let info = match api {
            Api::Kubernetes => {
                RequestInfo::parse(&exchange.method, &exchange.path, &exchange.query)
            }
            _ => RequestInfo {
                verb: exchange.method.to_ascii_lowercase(),
                ..RequestInfo::default()
            },
        };
        AuditEvent {
            api,
            audit_id,
            exchange,
            info,
        }
    }

    /// Path and query, as sent.
    pub fn request_uri(&self) -> String {
        let e = &self.exchange;
        if e.query.is_empty() {
            e.path.clone()
        } else {
            format!("{}?{}", e.path, e.query)
        }
    }

    /// `ResponseStarted` for a response still streaming when recorded (a watch), else
    /// `ResponseComplete`.
    pub fn stage(&self) -> &'static str {
        if self.exchange.complete {
            "ResponseComplete"
        } else {
            "ResponseStarted"
        }
    }

    /// The event as an apiserver writes it to its audit log (one JSON object).
    pub fn to_json(&self) -> Value {
        let e = &self.exchange;
        let (username, group) = if e.authenticated {
            ("agent", "system:authenticated")
        } else {
            ("system:anonymous", "system:unauthenticated")
        };
        let mut event = json!({
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "auditID": self.audit_id,
            "stage": self.stage(),
            "requestURI": self.request_uri(),
            "verb": self.info.verb,
            "user": {"username": username, "groups": [group]},
            "sourceIPs": e.source_ips,
        });
        if let Some(agent) = &e.user_agent {
            event["userAgent"] = agent.as_str().into();
        }
        if self.info.is_resource_request {
            event["objectRef"] = self.object_ref();
        }
        event["responseStatus"] = self.response_status();
        event["requestReceivedTimestamp"] = rfc3339_micros(e.received_ns + e.shift_ns).into();
        event["stageTimestamp"] = rfc3339_micros(e.responded_ns + e.shift_ns).into();
        event["annotations"] = Value::Object(self.annotations());
        event
    }

    /// `objectRef`, with the apiserver's omitted-when-empty fields left out.
    fn object_ref(&self) -> Value {
        let i = &self.info;
        let mut r = Map::new();
        let mut put = |k: &str, v: &str| {
            if !v.is_empty() {
                r.insert(k.to_string(), v.into());
            }
        };
        put("resource", &i.resource);
        put("namespace", i.namespace.as_deref().unwrap_or(""));
        put("name", i.name.as_deref().unwrap_or(""));
        put("apiGroup", &i.api_group);
        put("apiVersion", &i.api_version);
        put("subresource", i.subresource.as_deref().unwrap_or(""));
        Value::Object(r)
    }

    /// `responseStatus`: the code, and for a failure the `Status` fields an apiserver keeps.
    fn response_status(&self) -> Value {
        let e = &self.exchange;
        let mut status = json!({"metadata": {}, "code": e.code});
        if e.code >= 400 {
            status["status"] = "Failure".into();
            if let Some(f) = &e.failure {
                status["message"] = f.message.as_str().into();
                if let Some(reason) = &f.reason {
                    status["reason"] = reason.as_str().into();
                }
            }
        }
        status
    }

    fn annotations(&self) -> Map<String, Value> {
        let e = &self.exchange;
        let mut a = Map::new();
        a.insert(ANNOTATION_API.into(), self.api.name().into());
        if let Some(c) = &e.kubectl_command {
            a.insert(ANNOTATION_KUBECTL_COMMAND.into(), c.as_str().into());
        }
        if let Some(s) = &e.kubectl_session {
            a.insert(ANNOTATION_KUBECTL_SESSION.into(), s.as_str().into());
        }
        let param = |name: &str| {
            form_urlencoded::parse(e.query.as_bytes())
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
        };
        match self.api {
            Api::Kubernetes => {
                if let Some(d) = param("dryRun") {
                    a.insert(ANNOTATION_DRY_RUN.into(), d.into());
                }
            }
            Api::Prometheus | Api::Loki => {
                if let Some(q) = param("query") {
                    a.insert(ANNOTATION_QUERY.into(), q.into());
                }
            }
            Api::Jaeger => {}
        }
        a
    }

    /// The event as a row of the `audit` table.
    pub fn to_row(&self) -> AuditRow {
        let e = &self.exchange;
        let i = &self.info;
        let resource = |s: &str| i.is_resource_request.then(|| s.to_string());
        AuditRow {
            time_ns: e.received_ns,
            audit_id: self.audit_id.clone(),
            api: self.api.name().to_string(),
            verb: i.verb.clone(),
            request_uri: self.request_uri(),
            user_agent: e.user_agent.clone(),
            source_ip: e.source_ips.first().cloned(),
            api_group: resource(&i.api_group),
            api_version: resource(&i.api_version),
            resource: resource(&i.resource),
            namespace: i.namespace.clone(),
            name: i.name.clone(),
            subresource: i.subresource.clone(),
            code: i32::from(e.code),
            latency_ns: e.latency_ns,
            event: self.to_json().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(method: &str, path: &str, query: &str, code: u16) -> Exchange {
        Exchange {
            method: method.into(),
            path: path.into(),
            query: query.into(),
            user_agent: Some("kubectl/v1.32.4 (linux/amd64) kubernetes/4cb5f07".into()),
            source_ips: vec!["127.0.0.1".into()],
            code,
            complete: true,
            received_ns: 1_700_000_000_123_456_789,
            responded_ns: 1_700_000_000_223_456_789,
            shift_ns: 1_000_000_000,
            latency_ns: 1_500_000,
            ..Exchange::default()
        }
    }

    #[test]
    fn a_kubectl_scale_is_a_patch_of_the_scale_subresource() {
        let mut x = exchange(
            "PATCH",
            "/apis/apps/v1/namespaces/hotel/deployments/geo/scale",
            "",
            200,
        );
        x.kubectl_command = Some("kubectl scale".into());
        x.kubectl_session = Some("5d0c".into());
        let e = AuditEvent::new(Api::Kubernetes, "id-1".into(), x);
        let j = e.to_json();
        assert_eq!(j["kind"], "Event");
        assert_eq!(j["apiVersion"], "audit.k8s.io/v1");
        assert_eq!(j["level"], "Metadata");
        assert_eq!(j["auditID"], "id-1");
        assert_eq!(j["stage"], "ResponseComplete");
        assert_eq!(j["verb"], "patch");
        assert_eq!(
            j["objectRef"],
            json!({"resource": "deployments", "namespace": "hotel", "name": "geo",
                   "apiGroup": "apps", "apiVersion": "v1", "subresource": "scale"})
        );
        assert_eq!(j["responseStatus"], json!({"metadata": {}, "code": 200}));
        assert_eq!(j["user"]["username"], "system:anonymous");
        assert_eq!(j["sourceIPs"], json!(["127.0.0.1"]));
        // Served times: virtual + shift, with microseconds.
        assert_eq!(j["requestReceivedTimestamp"], "2023-11-14T22:13:21.123456Z");
        assert_eq!(j["stageTimestamp"], "2023-11-14T22:13:21.223456Z");
        assert_eq!(j["annotations"][ANNOTATION_API], "kubernetes");
        assert_eq!(
            j["annotations"][ANNOTATION_KUBECTL_COMMAND],
            "kubectl scale"
        );
        assert_eq!(j["annotations"][ANNOTATION_KUBECTL_SESSION], "5d0c");
        let row = e.to_row();
        assert_eq!(row.verb, "patch");
        assert_eq!(row.api, "kubernetes");
        assert_eq!(row.api_group.as_deref(), Some("apps"));
        assert_eq!(row.resource.as_deref(), Some("deployments"));
        assert_eq!(row.namespace.as_deref(), Some("hotel"));
        assert_eq!(row.name.as_deref(), Some("geo"));
        assert_eq!(row.subresource.as_deref(), Some("scale"));
        assert_eq!(row.time_ns, 1_700_000_000_123_456_789);
        assert_eq!(row.latency_ns, 1_500_000);
        assert_eq!(row.source_ip.as_deref(), Some("127.0.0.1"));
        let back: Value = serde_json::from_str(&row.event).unwrap();
        assert_eq!(back, j);
    }

    #[test]
    fn the_core_group_is_left_out_of_object_ref_but_kept_in_the_row() {
        let e = AuditEvent::new(
            Api::Kubernetes,
            "id".into(),
            exchange("GET", "/api/v1/namespaces/x/pods", "limit=500", 200),
        );
        let j = e.to_json();
        assert_eq!(j["verb"], "list");
        assert_eq!(j["requestURI"], "/api/v1/namespaces/x/pods?limit=500");
        assert_eq!(
            j["objectRef"],
            json!({"resource": "pods", "namespace": "x", "apiVersion": "v1"})
        );
        assert_eq!(e.to_row().api_group.as_deref(), Some(""));
    }

    #[test]
    fn a_watch_still_streaming_is_recorded_as_started() {
        let mut x = exchange("GET", "/api/v1/pods", "watch=true", 200);
        x.complete = false;
        let e = AuditEvent::new(Api::Kubernetes, "id".into(), x);
        assert_eq!(e.stage(), "ResponseStarted");
        assert_eq!(e.to_json()["verb"], "watch");
    }

    #[test]
    fn discovery_and_version_are_non_resource_requests() {
        let e = AuditEvent::new(
            Api::Kubernetes,
            "id".into(),
            exchange("GET", "/version", "timeout=5s", 200),
        );
        let j = e.to_json();
        assert_eq!(j["verb"], "get");
        assert!(j.get("objectRef").is_none(), "{j}");
        let row = e.to_row();
        assert_eq!((row.resource, row.api_group), (None, None));
    }

    #[test]
    fn failures_keep_the_status_reason_and_message() {
        let mut x = exchange("DELETE", "/api/v1/namespaces/x/configmaps/nope", "", 404);
        x.failure = Failure::from_body(
            br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                "message":"configmaps \"nope\" not found","reason":"NotFound","code":404}"#,
        );
        let j = AuditEvent::new(Api::Kubernetes, "id".into(), x).to_json();
        assert_eq!(
            j["responseStatus"],
            json!({"metadata": {}, "code": 404, "status": "Failure",
                   "message": "configmaps \"nope\" not found", "reason": "NotFound"})
        );
    }

    #[test]
    fn error_bodies_of_every_api_give_a_message() {
        let prom = Failure::from_body(
            br#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#,
        )
        .unwrap();
        assert_eq!(prom.reason.as_deref(), Some("bad_data"));
        assert_eq!(prom.message, "parse error at char 3");
        let v1 = Failure::from_body(
            br#"{"data":null,"total":0,"limit":0,"offset":0,"errors":[{"code":400,"msg":"bad service"}]}"#,
        )
        .unwrap();
        assert_eq!((v1.reason, v1.message.as_str()), (None, "bad service"));
        let v3 =
            Failure::from_body(br#"{"error":{"httpCode":400,"message":"malformed"}}"#).unwrap();
        assert_eq!(v3.message, "malformed");
        let loki = Failure::from_body(b"parse error : unexpected IDENTIFIER\n").unwrap();
        assert_eq!(loki.message, "parse error : unexpected IDENTIFIER");
        assert_eq!(Failure::from_body(b"  \n"), None);
        let long = Failure::from_body("é".repeat(2000).as_bytes()).unwrap();
        assert!(long.message.len() <= MAX_MESSAGE_BYTES && long.message.starts_with('é'));
    }

    #[test]
    fn other_apis_are_non_resource_requests_named_by_annotation() {
        let mut x = exchange(
            "GET",
            "/api/v1/query",
            "query=sum%28rate%28http_requests_total%5B5m%5D%29%29&time=1700000000",
            200,
        );
        x.user_agent = Some("curl/8.5.0".into());
        let e = AuditEvent::new(Api::Prometheus, "id".into(), x);
        let j = e.to_json();
        assert_eq!(j["verb"], "get");
        assert!(j.get("objectRef").is_none());
        assert_eq!(j["annotations"][ANNOTATION_API], "prometheus");
        assert_eq!(
            j["annotations"][ANNOTATION_QUERY],
            "sum(rate(http_requests_total[5m]))"
        );
        let row = e.to_row();
        assert_eq!((row.api.as_str(), row.verb.as_str()), ("prometheus", "get"));
        assert_eq!(row.resource, None);
        // `/api/v1/...` is not read as a Kubernetes path outside the Kubernetes API.
        let loki = AuditEvent::new(
            Api::Loki,
            "id".into(),
            exchange("POST", "/loki/api/v1/query_range", "", 400),
        );
        assert_eq!(loki.to_json()["verb"], "post");
        assert_eq!(loki.to_json()["responseStatus"]["status"], "Failure");
    }

    #[test]
    fn credentials_make_the_user_authenticated_and_dry_runs_are_marked() {
        let mut x = exchange(
            "PATCH",
            "/api/v1/namespaces/x/services/geo",
            "dryRun=All",
            200,
        );
        x.authenticated = true;
        let j = AuditEvent::new(Api::Kubernetes, "id".into(), x).to_json();
        assert_eq!(
            j["user"],
            json!({"username": "agent", "groups": ["system:authenticated"]})
        );
        assert_eq!(j["annotations"][ANNOTATION_DRY_RUN], "All");
    }
}
