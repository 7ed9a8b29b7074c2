//! Requests to the HTTP APIs, built from the input and answered by the real routers in process:
//! the Prometheus API's query parameters, LogQL through the Loki API, and the Kubernetes API's
//! selectors and query parameters. Any status is an answer; a panic or a stall is a finding.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt;

use apis::kube::KubeFacade;
use apis::limits::Limits;
use apis::loki::LokiFacade;
use apis::prometheus::RecordedAlerts;

use super::world::World;
use super::{Target, text};

/// A router and the runtime that drives it, one request at a time.
struct Http {
    runtime: tokio::runtime::Runtime,
    router: Router,
}

impl Http {
    fn new(router: Router) -> Self {
        Http {
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime"),
            router,
        }
    }

    /// GETs `path?query`; reads the whole answer, as a client would.
    fn get(&self, path: &str, query: &str) {
        let Ok(request) = Request::get(format!("{path}?{query}")).body(Body::empty()) else {
            return;
        };
        self.runtime.block_on(async {
            let Ok(response) = self.router.clone().oneshot(request).await;
            let _ = axum::body::to_bytes(response.into_body(), 64 << 20).await;
        });
    }
}

/// `text` percent-encoded as one query parameter value.
fn encoded(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The input's first line (encoded as the main parameter) and the rest (raw, more parameters).
fn split(input: &[u8]) -> (String, String) {
    let t = text(input);
    let (first, rest) = t.split_once('\n').unwrap_or((&t, ""));
    (encoded(first), raw_params(rest))
}

/// Raw query parameters, one a line; `#` would start the URL's fragment and cut off what
/// follows (the parameters the target appends last), so it is sent encoded.
fn raw_params(lines: &str) -> String {
    lines.replace('\n', "&").replace('#', "%23")
}

pub struct PrometheusApi(Http);

impl PrometheusApi {
    pub fn new() -> Self {
        let world = World::new();
        let limits = Limits {
            promql: promql::Engine {
                timeout: Duration::from_millis(300),
                max_samples: 2_000_000,
                max_steps: 200_000,
                ..promql::Engine::default()
            },
            max_concurrency: 2,
            ..Limits::default()
        };
        let router = apis::prometheus::router(
            world.metrics.clone(),
            Arc::new(RwLock::new(RecordedAlerts::default())),
            world.clock,
            &limits,
        );
        PrometheusApi(Http::new(router))
    }
}

impl Target for PrometheusApi {
    fn name(&self) -> &'static str {
        "prometheus_api"
    }

    fn dictionary(&self) -> &'static [&'static str] {
        &[
            "\nstart=",
            "\nend=",
            "\nstep=",
            "\ntime=",
            "\ntimeout=",
            "\nlimit=",
            "\nlookback_delta=",
            "\nmatch[]=",
            "1767225600",
            "1e300",
            "-1e300",
            "1e-3",
            "0",
            "15s",
            "1ms",
            "2026-01-01T00:00:00Z",
            "9999-12-31T23:59:59Z",
            "rate(x[5m])",
            "sum(",
            ")",
            "[1d:1ms]",
            "up",
            "http_requests_total{code=\"500\"}",
            "&",
            "=",
            "%",
        ]
    }

    fn run(&self, input: &[u8]) {
        let (query, rest) = split(input);
        let q = format!("query={query}&{rest}");
        self.0.get("/api/v1/query", &q);
        self.0.get("/api/v1/query_range", &q);
        self.0.get("/api/v1/format_query", &q);
        let m = format!("match[]={query}&{rest}");
        self.0.get("/api/v1/series", &m);
        self.0.get("/api/v1/labels", &m);
    }
}

pub struct Logql(Http);

impl Logql {
    pub fn new() -> Self {
        let world = World::new();
        let facade = LokiFacade::new(world.logs.clone(), world.objects.clone(), world.clock);
        Logql(Http::new(apis::loki::router(Arc::new(facade))))
    }
}

impl Target for Logql {
    fn name(&self) -> &'static str {
        "logql"
    }

    fn dictionary(&self) -> &'static [&'static str] {
        &[
            "{",
            "}",
            "namespace=\"hotel\"",
            "pod=~\"geo.*\"",
            "container!=\"x\"",
            "|=",
            "!=",
            "|~",
            "!~",
            "\"error\"",
            "| json",
            "| logfmt",
            "| regexp \"(?P<x>\\\\d+)\"",
            "| pattern \"<_> <level> <_>\"",
            "| line_format \"{{.msg}}\"",
            "| label_format a=b",
            "| level=\"error\"",
            "| latency_ms > 10",
            "| unwrap latency_ms",
            "| drop a",
            "| keep pod",
            "| decolorize",
            "rate(",
            "count_over_time(",
            "bytes_rate(",
            "sum_over_time(",
            "quantile_over_time(0.9,",
            "sum by (pod) (",
            "topk(2,",
            ")",
            "[5m]",
            "[1d]",
            "[100y]",
            " offset 1h",
            " or ",
            " and ",
            " + ",
            " / ",
            "(",
            "\nlimit=",
            "\nstart=",
            "\nend=",
            "\nstep=",
            "\ndirection=backward",
            "\nsince=",
            "1e300",
        ]
    }

    fn run(&self, input: &[u8]) {
        let (query, rest) = split(input);
        let q = format!("query={query}&{rest}");
        self.0.get("/loki/api/v1/query_range", &q);
        self.0.get("/loki/api/v1/query", &q);
        let m = format!("match[]={query}&{rest}");
        self.0.get("/loki/api/v1/series", &m);
        self.0.get("/loki/api/v1/labels", &q);
    }
}

pub struct KubeParams(Http);

impl KubeParams {
    pub fn new() -> Self {
        let world = World::new();
        let facade = KubeFacade::new(world.objects.clone(), world.logs.clone(), world.clock, &[]);
        KubeParams(Http::new(apis::kube::router(Arc::new(facade))))
    }
}

impl Target for KubeParams {
    fn name(&self) -> &'static str {
        "kube_params"
    }

    fn dictionary(&self) -> &'static [&'static str] {
        &[
            "app=geo",
            "app!=geo",
            "app==geo",
            "tier in (backend,frontend)",
            "app notin (x)",
            "!app",
            "app",
            ",",
            "a/b=c",
            "-x=y",
            "a!=b!=c",
            "example.com/app=geo",
            "metadata.name=geo-1",
            "metadata.namespace!=hotel",
            "status.phase=Running",
            "spec.nodeName=node-1",
            "\nlimit=",
            "\ncontinue=",
            "\nresourceVersion=",
            "\nresourceVersionMatch=",
            "\nwatch=1",
            "\nallowWatchBookmarks=true",
            "\ntimeoutSeconds=",
            "\nsinceSeconds=",
            "\ntailLines=",
            "\nlimitBytes=",
            "\ncontainer=",
            "\ntimestamps=true",
            "\nprevious=true",
            "Exact",
            "NotOlderThan",
            "-1",
            "abc",
            "0",
            "9223372036854775807",
        ]
    }

    fn run(&self, input: &[u8]) {
        let t = text(input);
        let mut lines = t.splitn(3, '\n');
        let labels = encoded(lines.next().unwrap_or(""));
        let fields = encoded(lines.next().unwrap_or(""));
        let rest = raw_params(lines.next().unwrap_or(""));
        // A watch stays open until its timeout, as the apiserver's does: the last parameter
        // (the one that counts) ends it after its first lines.
        let q = format!("labelSelector={labels}&fieldSelector={fields}&{rest}&timeoutSeconds=0");
        for path in [
            "/api/v1/pods",
            "/api/v1/namespaces/hotel/pods",
            "/api/v1/namespaces/hotel/services",
            "/apis/apps/v1/deployments",
            "/api/v1/nodes",
            "/api/v1/namespaces/hotel/pods/geo-1/log",
            "/api/v1/events",
        ] {
            self.0.get(path, &q);
        }
        self.0
            .get("/api/v1/pods", &format!("watch=1&{q}&timeoutSeconds=0"));
    }
}
