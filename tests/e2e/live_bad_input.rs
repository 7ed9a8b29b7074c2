//! Bad input against `collector env up`'s writable Kubernetes API, over plain HTTP: malformed
//! bodies, bad patches, wrong media types, oversized and deeply nested bodies, stale versions,
//! mismatched names and namespaces, invalid names, missing namespaces and objects, bad query
//! options. Each answer must be the apiserver's `Status` (code, reason, wording), the objects the
//! request aimed at must keep their resourceVersion, and the server must go on answering.

use std::time::Duration;

use e2e::live::{self, Live, NS};
use serde_json::{Value, json};

const CM: &str = "/api/v1/namespaces/hotel-reservation/configmaps/service-config";
const CMS: &str = "/api/v1/namespaces/hotel-reservation/configmaps";
const DEPLOY: &str = "/apis/apps/v1/namespaces/hotel-reservation/deployments/geo";

const JSON: &str = "application/json";
const SMP: &str = "application/strategic-merge-patch+json";
const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";

struct Http {
    client: reqwest::blocking::Client,
    base: String,
}

impl Http {
    fn new(l: &Live) -> Http {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Http {
            client: reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("an HTTP client"),
            base: l.url(),
        }
    }

    /// Sends one request; the status code and the body as JSON (Null when it is not JSON).
    fn send(&self, method: &str, path: &str, ct: Option<&str>, body: Vec<u8>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .body(body);
        if let Some(ct) = ct {
            req = req.header("Content-Type", ct);
        }
        let resp = req
            .send()
            .unwrap_or_else(|e| panic!("{path}: no answer: {e}"));
        let code = resp.status().as_u16();
        let text = resp.text().unwrap_or_default();
        (code, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    fn get(&self, path: &str) -> Value {
        let (code, v) = self.send("GET", path, None, vec![]);
        assert_eq!(code, 200, "GET {path}: {v}");
        v
    }

    fn rv(&self, path: &str) -> String {
        self.get(path)["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_else(|| panic!("{path} has no resourceVersion"))
            .to_string()
    }
}

/// One bad request and what the apiserver answers it with.
struct Case {
    what: &'static str,
    method: &'static str,
    path: String,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    code: u16,
    reason: &'static str,
    /// A part of the message, as a real apiserver words it.
    message: String,
}

fn case(
    what: &'static str,
    method: &'static str,
    path: &str,
    content_type: Option<&'static str>,
    body: impl Into<Vec<u8>>,
    (code, reason, message): (u16, &'static str, &str),
) -> Case {
    Case {
        what,
        method,
        path: path.to_string(),
        content_type,
        body: body.into(),
        code,
        reason,
        message: message.to_string(),
    }
}

fn cm(name: &str, extra: Value) -> Vec<u8> {
    let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name}, "data": {"k": "v"}});
    if let (Some(dst), Value::Object(src)) = (v.as_object_mut(), extra) {
        dst.extend(src);
    }
    v.to_string().into_bytes()
}

/// `{"a":{"a":...}}` nested `depth` deep.
fn nested(depth: usize) -> Vec<u8> {
    let mut s = "{\"a\":".repeat(depth);
    s.push('1');
    s.push_str(&"}".repeat(depth));
    s.into_bytes()
}

/// Bodies and patches the apiserver cannot read or apply, and media types and sizes it refuses.
fn body_cases() -> Vec<Case> {
    vec![
        case(
            "truncated JSON",
            "POST",
            CMS,
            Some(JSON),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x""#,
            (
                400,
                "BadRequest",
                "couldn't get version/kind; json parse error",
            ),
        ),
        case(
            "malformed YAML",
            "POST",
            CMS,
            Some("application/yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [x\n",
            (400, "BadRequest", "error converting YAML to JSON"),
        ),
        case(
            "a JSON patch with an unknown op",
            "PATCH",
            DEPLOY,
            Some(JSON_PATCH),
            r#"[{"op":"frobnicate","path":"/spec/replicas","value":1}]"#,
            (
                422,
                "Invalid",
                "the server rejected our request due to an error in our request",
            ),
        ),
        case(
            "a JSON patch on a path that does not exist",
            "PATCH",
            DEPLOY,
            Some(JSON_PATCH),
            r#"[{"op":"replace","path":"/spec/nope/deeper","value":1}]"#,
            (
                422,
                "Invalid",
                "the server rejected our request due to an error in our request",
            ),
        ),
        case(
            "a JSON patch that is not a list",
            "PATCH",
            DEPLOY,
            Some(JSON_PATCH),
            r#"{"op":"replace"}"#,
            (400, "BadRequest", "cannot unmarshal object"),
        ),
        case(
            "a strategic merge patch with a list where a map belongs",
            "PATCH",
            DEPLOY,
            Some(SMP),
            r#"{"metadata":{"labels":["a","b"]}}"#,
            (422, "Invalid", "is invalid"),
        ),
        case(
            "a merge patch that is not an object",
            "PATCH",
            DEPLOY,
            Some(MERGE),
            "[1,2]",
            (400, "BadRequest", "cannot unmarshal array"),
        ),
        case(
            "unknown fields under fieldValidation=Strict",
            "POST",
            &format!("{CMS}?fieldValidation=Strict"),
            Some(JSON),
            cm("strict-x", json!({"bogus": 1})),
            (
                400,
                "BadRequest",
                r#"strict decoding error: unknown field "bogus""#,
            ),
        ),
        case(
            "an unknown metadata field in a strict patch",
            "PATCH",
            &format!("{CM}?fieldValidation=Strict"),
            Some(MERGE),
            r#"{"metadata":{"labelz":{"a":"b"}}}"#,
            (400, "BadRequest", r#"unknown field "metadata.labelz""#),
        ),
        case(
            "a create in a media type the apiserver does not read",
            "POST",
            CMS,
            Some("text/plain"),
            cm("plain", json!({})),
            (
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format",
            ),
        ),
        case(
            "a patch in a media type that is not a patch type",
            "PATCH",
            CM,
            Some(JSON),
            r#"{"data":{"k":"v"}}"#,
            (
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format",
            ),
        ),
        case(
            "a body over the 3 MiB limit",
            "POST",
            CMS,
            Some(JSON),
            vec![b' '; 3 * 1024 * 1024 + 1],
            (
                413,
                "RequestEntityTooLarge",
                "Request entity too large: limit is 3145728",
            ),
        ),
    ]
}

/// Writes that read fine but name the wrong version, object, namespace or options.
fn identity_cases(current_cm: &Value) -> Vec<Case> {
    let mut stale = current_cm.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    stale["data"] = json!({"stale": "write"});
    let mut renamed = current_cm.clone();
    renamed["metadata"]["name"] = json!("other");
    if let Some(m) = renamed["metadata"].as_object_mut() {
        m.remove("resourceVersion");
    }
    let other_ns = json!({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "elsewhere", "namespace": "default"}});
    let invalid_name = "Bad_Name";
    vec![
        case(
            "a PUT with a stale resourceVersion",
            "PUT",
            CM,
            Some(JSON),
            stale.to_string(),
            (
                409,
                "Conflict",
                r#"Operation cannot be fulfilled on configmaps "service-config": the object has been modified; please apply your changes to the latest version and try again"#,
            ),
        ),
        case(
            "a PUT whose body names another object",
            "PUT",
            CM,
            Some(JSON),
            renamed.to_string(),
            (
                400,
                "BadRequest",
                "the name of the object (other) does not match the name on the URL (service-config)",
            ),
        ),
        case(
            "a create whose body names another namespace",
            "POST",
            CMS,
            Some(JSON),
            other_ns.to_string(),
            (
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the request",
            ),
        ),
        case(
            "an invalid name",
            "POST",
            CMS,
            Some(JSON),
            cm(invalid_name, json!({})),
            (
                422,
                "Invalid",
                r#"ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain"#,
            ),
        ),
        case(
            "a create in a namespace that does not exist",
            "POST",
            "/api/v1/namespaces/no-such-ns/configmaps",
            Some(JSON),
            cm("lost", json!({})),
            (404, "NotFound", r#"namespaces "no-such-ns" not found"#),
        ),
        case(
            "a patch of a missing object",
            "PATCH",
            "/apis/apps/v1/namespaces/hotel-reservation/deployments/no-such-deploy",
            Some(MERGE),
            r#"{"spec":{"replicas":2}}"#,
            (
                404,
                "NotFound",
                r#"deployments.apps "no-such-deploy" not found"#,
            ),
        ),
        case(
            "an unknown dryRun value",
            "PATCH",
            &format!("{CM}?dryRun=Bogus"),
            Some(MERGE),
            r#"{"data":{"k":"v"}}"#,
            (400, "BadRequest", r#"Invalid dry run value: "Bogus""#),
        ),
        case(
            "an unknown fieldValidation value",
            "POST",
            &format!("{CMS}?fieldValidation=Loose"),
            Some(JSON),
            cm("loose", json!({})),
            (
                400,
                "BadRequest",
                r#"fieldValidation: Unsupported value: "Loose""#,
            ),
        ),
        case(
            "JSON nested far deeper than any object",
            "POST",
            CMS,
            Some(JSON),
            nested(100_000),
            (400, "BadRequest", "recursion limit exceeded"),
        ),
        case(
            "a deeply nested patch",
            "PATCH",
            CM,
            Some(MERGE),
            nested(100_000),
            (400, "BadRequest", "recursion limit exceeded"),
        ),
        case(
            "a body that is a JSON array",
            "POST",
            CMS,
            Some(JSON),
            "[1,2,3]",
            (400, "BadRequest", "must be an object"),
        ),
    ]
}

fn cases(current_cm: &Value) -> Vec<Case> {
    let mut all = body_cases();
    all.extend(identity_cases(current_cm));
    all
}

/// What is wrong with one answer, if anything.
fn check(c: &Case, code: u16, body: &Value) -> Option<String> {
    let message = body["message"].as_str().unwrap_or_default();
    let ok = code == c.code
        && body["kind"] == "Status"
        && body["apiVersion"] == "v1"
        && body["status"] == "Failure"
        && body["code"] == c.code
        && body["reason"] == c.reason
        && message.contains(&c.message);
    (!ok).then(|| {
        format!(
            "{}: want {} {} {:?}, got {code} {body}",
            c.what, c.code, c.reason, c.message
        )
    })
}

#[test]
fn bad_writes_get_the_apiservers_status_and_change_nothing() {
    let l = live::up("hotel-geo-target-port", &[]);
    let http = Http::new(&l);
    let current_cm = http.get(CM);
    let (cm_rv, deploy_rv) = (http.rv(CM), http.rv(DEPLOY));
    let failures: Vec<String> = cases(&current_cm)
        .iter()
        .filter_map(|c| {
            let (code, body) = http.send(c.method, &c.path, c.content_type, c.body.clone());
            let wrong = check(c, code, &body);
            // After every request the server still answers.
            let (version, _) = http.send("GET", "/version", None, vec![]);
            wrong.or_else(|| {
                (version != 200).then(|| format!("{}: /version then {version}", c.what))
            })
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Nothing any of them aimed at changed, and nothing they named was created.
    assert_eq!(http.rv(CM), cm_rv, "the ConfigMap was written");
    assert_eq!(http.rv(DEPLOY), deploy_rv, "the Deployment was written");
    assert_eq!(http.get(CM)["data"], current_cm["data"]);
    for name in ["x", "strict-x", "plain", "other", "Bad_Name", "loose"] {
        let (code, body) = http.send("GET", &format!("{CMS}/{name}"), None, vec![]);
        assert_eq!(code, 404, "{name} exists: {body}");
    }
    let (code, body) = http.send(
        "GET",
        "/api/v1/namespaces/default/configmaps/elsewhere",
        None,
        vec![],
    );
    assert_eq!(code, 404, "{body}");
    // The invalid name's causes, as kubectl prints them.
    let (code, body) = http.send("POST", CMS, Some(JSON), cm("Bad_Name", json!({})));
    assert_eq!(code, 422);
    assert_eq!(body["details"]["kind"], "ConfigMap");
    assert_eq!(body["details"]["name"], "Bad_Name");
    let cause = &body["details"]["causes"][0];
    assert_eq!(
        (&cause["reason"], &cause["field"]),
        (&json!("FieldValueInvalid"), &json!("metadata.name"))
    );
}

#[test]
fn lenient_writes_keep_working_where_a_real_apiserver_accepts_them() {
    let l = live::up("hotel-geo-target-port", &[]);
    let http = Http::new(&l);
    // A PUT without resourceVersion is an unconditional update.
    let mut v = http.get(CM);
    let before = v["metadata"]["resourceVersion"].clone();
    if let Some(m) = v["metadata"].as_object_mut() {
        m.remove("resourceVersion");
    }
    v["data"]["added"] = json!("by a PUT without a version");
    let (code, body) = http.send("PUT", CM, Some(JSON), v.to_string().into_bytes());
    assert_eq!(code, 200, "{body}");
    assert_ne!(body["metadata"]["resourceVersion"], before);
    assert_eq!(http.get(CM)["data"]["added"], "by a PUT without a version");
    // The same PUT with the current version also works; a second one with the old version not.
    let mut again = http.get(CM);
    again["data"]["added"] = json!("second");
    let (code, body) = http.send("PUT", CM, Some(JSON), again.to_string().into_bytes());
    assert_eq!(code, 200, "{body}");
    let (code, body) = http.send("PUT", CM, Some(JSON), again.to_string().into_bytes());
    assert_eq!((code, &body["reason"]), (409, &json!("Conflict")), "{body}");
    // Without Strict, a body with a field the type lacks is accepted.
    let (code, body) = http.send(
        "POST",
        &format!("{CMS}?fieldValidation=Ignore"),
        Some(JSON),
        cm("lenient", json!({"bogus": 1})),
    );
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["data"]["k"], "v");
    // kubectl still works against the server after all that.
    let out = l.ok(&["-n", NS, "get", "cm", "lenient", "-o", "jsonpath={.data.k}"]);
    assert_eq!(out, "v");
}
