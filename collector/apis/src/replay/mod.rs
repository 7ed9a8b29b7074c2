//! A recorded dataset served (what `collector replay` runs): serve a recorded dataset through the APIs agents use at a virtual now, shifted
//! so that it looks live unless asked to stay frozen.
//!
//! Each API gets its own listener (the Kubernetes, Prometheus and Jaeger path spaces overlap under
//! `/api`): Kubernetes on the first port, then Prometheus, Jaeger and Loki on the next three. The
//! endpoints are printed and, on request, written as a kubeconfig and an env file.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::audit::Api;
use crate::audit::layer::{AuditLog, AuditSink, audited};
use crate::jaeger::{self, JaegerFacade};
use crate::kube::feed::ObjectFeed;
use crate::kube::{KubeFacade, router as kube_router};
use crate::loki::{self, LokiFacade};
use crate::prometheus;
use observations::load_dataset;

pub mod observations;
use schemas::time::Clock;

#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub dataset: PathBuf,
    /// Host and first port; port 0 picks free ports.
    pub listen: SocketAddr,
    /// Serve the cluster as of this time instead of the dataset's virtual now.
    pub at: Option<String>,
    /// Move served times so that the virtual now is the real now (what `collector replay` does
    /// unless `--frozen`).
    pub time_shift: bool,
    /// What one request to the APIs may cost.
    pub limits: crate::limits::Limits,
}

/// Where each API listens.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Endpoints {
    /// The Kubernetes API over plain HTTP.
    pub kubernetes: String,
    pub prometheus: String,
    pub jaeger: String,
    pub loki: String,
    /// The Kubernetes API over TLS, where it is served: what the kubeconfig points at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubernetes_https: Option<Https>,
}

/// An API served over TLS, the certificate authority (PEM) that signed its certificate, and the
/// bearer token its kubeconfig presents.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Https {
    pub url: String,
    #[serde(skip)]
    pub ca_pem: String,
    /// kubectl asks for a user name on a TLS connection with no credentials, as it would of a
    /// real apiserver; the API takes any token, so this one only has to be there.
    #[serde(skip)]
    pub token: String,
}

impl Endpoints {
    pub fn env_lines(&self) -> String {
        let mut lines = format!(
            "KUBERNETES_URL={}\nPROMETHEUS_URL={}\nJAEGER_URL={}\nLOKI_URL={}\n",
            self.kubernetes, self.prometheus, self.jaeger, self.loki
        );
        if let Some(https) = &self.kubernetes_https {
            lines.push_str(&format!("KUBERNETES_HTTPS_URL={}\n", https.url));
        }
        lines
    }

    /// A kubeconfig for the API: over TLS with its authority when it is served so (as a real
    /// apiserver is), else plain HTTP.
    pub fn kubeconfig(&self) -> String {
        use base64::Engine;
        let (cluster, user) = match &self.kubernetes_https {
            Some(https) => (
                format!(
                    "    server: {}\n    certificate-authority-data: {}\n",
                    https.url,
                    base64::engine::general_purpose::STANDARD.encode(&https.ca_pem)
                ),
                format!("\n    token: {}", https.token),
            ),
            None => (
                format!("    server: {}\n", self.kubernetes),
                " {}".to_string(),
            ),
        };
        format!(
            // Neutral names: an agent reading its kubeconfig learns nothing of the tool behind it.
            "apiVersion: v1\nkind: Config\nclusters:\n- name: default\n  cluster:\n{cluster}contexts:\n- name: default\n  context:\n    cluster: default\n    user: default\ncurrent-context: default\nusers:\n- name: default\n  user:{user}\n"
        )
    }
}

/// A running replay: its endpoints, and one server task per API.
pub struct Replay {
    pub endpoints: Endpoints,
    /// The served dataset's manifest.
    pub manifest: schemas::Manifest,
    /// The clock every API serves times by.
    pub clock: Clock,
    servers: Vec<Server>,
}

impl Replay {
    /// Loads the dataset and starts listening.
    pub async fn start(opts: &ReplayOptions) -> anyhow::Result<Replay> {
        Replay::start_audited(opts, None).await
    }

    /// Stops serving.
    pub fn stop(self) {
        for s in &self.servers {
            s.abort();
        }
    }

    /// Like [`Replay::start`], every request recorded in `audit` (sessions record what an agent
    /// asked).
    pub async fn start_audited(
        opts: &ReplayOptions,
        audit: Option<AuditSink>,
    ) -> anyhow::Result<Replay> {
        let dir = opts.dataset.clone();
        let obs = tokio::task::spawn_blocking(move || load_dataset(&dir))
            .await
            .context("loading the dataset")??;
        let manifest = obs.manifest.clone();
        let window = manifest.window;
        let virtual_now = match &opts.at {
            None => obs.manifest.virtual_now,
            Some(at) => {
                // Parsed over chrono's whole range: a valid time far from the data (year 9999)
                // is "outside the window", not "not a time".
                let t = chrono::DateTime::parse_from_rfc3339(at)
                    .with_context(|| {
                        format!("--at: `{at}` is not an RFC 3339 time (e.g. 2026-01-01T00:10:00Z)")
                    })?
                    .to_utc();
                anyhow::ensure!(
                    window.contains(t),
                    "--at: {at} is outside the dataset's window {} .. {}",
                    window.start.to_rfc3339(),
                    window.end.to_rfc3339()
                );
                t
            }
        };
        let now_ns = virtual_now
            .timestamp_nanos_opt()
            .context("virtual now is out of range")?;
        let clock = if opts.time_shift {
            Clock::shifted(now_ns)
        } else {
            Clock::frozen(now_ns)
        };
        let audit = audit.map(|sink| AuditLog::on_clock(clock, sink));
        let audit_as = |router: axum::Router, api: Api| match &audit {
            Some(log) => audited(router, api, log.clone()),
            None => router,
        };
        let objects = Arc::new(ObjectFeed::fixed(
            Arc::unwrap_or_clone(obs.timeline),
            clock.read().virtual_now_ns,
        ));
        let mut kube = KubeFacade::new(objects.clone(), obs.logs.clone(), clock, &[]);
        let metrics = {
            let (ds, metadata) = (obs.dataset, obs.metric_metadata);
            tokio::task::spawn_blocking(move || prometheus::disk_storage(&ds, &metadata, now_ns))
        };
        // Spans and logs stay in their files: their facades hold only the open files.
        let traces = Arc::new(JaegerFacade {
            spans: obs.spans,
            clock,
            max_traces: opts.limits.max_traces,
        });
        let logs = Arc::new(LokiFacade::new(obs.logs.clone(), objects, clock));
        let (metrics, alerts) = metrics
            .await?
            .context("loading the alerts and metric metadata")?;
        let metrics = Arc::new(metrics);
        kube.metrics = Some(metrics.clone());
        let kube = Arc::new(kube);
        // Read while the listeners already serve, side by side (the log streams must not wait
        // for the spans' trace index); a request that comes first reads what it needs itself.
        let spans = traces.spans.clone();
        in_background("indexing spans", move || spans.warm());
        let log_index = logs.clone();
        in_background("indexing logs", move || log_index.warm());
        let metric_directory = metrics.clone();
        in_background("reading the metric directory", move || {
            metric_directory.open()
        });
        let routers = [
            audit_as(kube_router(kube), Api::Kubernetes),
            audit_as(
                prometheus::router(
                    metrics,
                    Arc::new(std::sync::RwLock::new(alerts)),
                    clock,
                    &opts.limits,
                ),
                Api::Prometheus,
            ),
            audit_as(jaeger::router(traces), Api::Jaeger),
            audit_as(loki::router(logs), Api::Loki),
        ];
        let (endpoints, servers) = listen(opts.listen, routers).await?;
        Ok(Replay {
            endpoints,
            manifest,
            clock,
            servers,
        })
    }

    /// Serves until a server fails or the process is interrupted.
    pub async fn wait(self) -> anyhow::Result<()> {
        let failed = futures_util::future::select_all(self.servers);
        tokio::select! {
            (r, _, _) = failed => { r??; }
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok(())
    }
}

/// Runs `work` on the blocking pool; a failure is logged (requests then meet it themselves).
fn in_background<E: std::fmt::Display>(
    what: &'static str,
    work: impl FnOnce() -> Result<(), E> + Send + 'static,
) {
    tokio::task::spawn_blocking(move || {
        if let Err(e) = work() {
            tracing::warn!("{what}: {e:#}");
        }
    });
}

/// Starts serving `app` on the base address's port moved by `offset`; returns its URL.
async fn serve(
    base: SocketAddr,
    offset: u16,
    app: axum::Router,
    servers: &mut Vec<Server>,
) -> anyhow::Result<String> {
    let listener = bind(base, offset).await?;
    let addr = listener.local_addr()?;
    // With the peer's address, which an audit log records.
    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    servers.push(tokio::spawn(
        async move { axum::serve(listener, service).await },
    ));
    Ok(format!("http://{addr}"))
}

/// A server task.
pub type Server = tokio::task::JoinHandle<std::io::Result<()>>;

/// Serves the Kubernetes, Prometheus, Jaeger and Loki routers one listener each (their path
/// spaces overlap) on consecutive ports from `base`, and the Kubernetes API over TLS after them.
pub async fn listen(
    base: SocketAddr,
    routers: [axum::Router; 4],
) -> anyhow::Result<(Endpoints, Vec<Server>)> {
    let mut servers = Vec::new();
    let mut urls = Vec::new();
    let kube_api = routers[0].clone();
    for (offset, router) in (0u16..).zip(routers) {
        urls.push(serve(base, offset, router, &mut servers).await?);
    }
    let (https, server) = serve_https(base, kube_api).await?;
    servers.push(server);
    let [kubernetes, prometheus, jaeger, loki] =
        <[String; 4]>::try_from(urls).map_err(|_| anyhow::anyhow!("four listeners expected"))?;
    let endpoints = Endpoints {
        kubernetes,
        prometheus,
        jaeger,
        loki,
        kubernetes_https: Some(https),
    };
    Ok((endpoints, servers))
}

/// Serves `app` over TLS, on the port after the four plain ones, with a certificate authority
/// of its own.
pub async fn serve_https(base: SocketAddr, app: axum::Router) -> anyhow::Result<(Https, Server)> {
    let tls = crate::tls::ServerTls::generate()?;
    let listener = bind(base, 4).await?;
    let url = format!("https://{}", listener.local_addr()?);
    let server = tls.serve(listener, app)?;
    let https = Https {
        url,
        ca_pem: tls.ca_pem,
        token: uuid::Uuid::new_v4().simple().to_string(),
    };
    Ok((https, server))
}

/// Binds `base` with its port moved by `offset` (or a free port when the base port is 0). The
/// APIs take five consecutive ports (the Kubernetes API's TLS port last): a base too close to
/// 65535 is refused rather than wrapped around to ports 0, 1, 2.
pub async fn bind(base: SocketAddr, offset: u16) -> anyhow::Result<TcpListener> {
    let mut addr = base;
    if base.port() != 0 {
        let port = base.port().checked_add(offset).with_context(|| {
            format!(
                "--listen {base}: the APIs take five consecutive ports from {}, beyond 65535; \
                 choose a port of at most 65531 (or 0 for free ports)",
                base.port()
            )
        })?;
        addr.set_port(port);
    }
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))
}

/// Writes a small text file atomically.
pub fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    datasets::write_atomically(path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}
