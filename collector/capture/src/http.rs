//! A JSON-over-HTTP source (Prometheus, Jaeger, Loki): every failure names the source and the
//! request it was making.

use std::time::Duration;

use anyhow::Context;
use serde_json::Value;

#[derive(Clone)]
pub struct HttpSource {
    pub name: &'static str,
    base: reqwest::Url,
    client: reqwest::Client,
}

/// How long one request may take; chunked requests stay far below it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

impl HttpSource {
    pub fn new(name: &'static str, base: &str) -> anyhow::Result<Self> {
        let mut base = reqwest::Url::parse(base).with_context(|| {
            format!("{name}: `{base}` is not a URL (e.g. http://localhost:9090)")
        })?;
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .with_context(|| format!("{name}: building the HTTP client"))?;
        Ok(HttpSource { name, base, client })
    }

    fn url(&self, path: &str, params: &[(&str, String)]) -> anyhow::Result<reqwest::Url> {
        let mut url = self
            .base
            .join(path.trim_start_matches('/'))
            .with_context(|| format!("{}: bad path {path}", self.name))?;
        url.query_pairs_mut()
            .extend_pairs(params.iter().map(|(k, v)| (*k, v.as_str())));
        Ok(url)
    }

    /// GET a JSON document decoded straight into `T` (no intermediate `Value` tree when `T` is
    /// a typed answer); `None` for a 404 (what Jaeger answers when nothing matched).
    pub async fn get_typed_or_404<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        params: &[(&str, String)],
    ) -> anyhow::Result<Option<T>> {
        let url = self.url(path, params)?;
        let request = || format!("{}: GET {url}", self.name);
        let resp = self
            .client
            .get(url.clone())
            .send()
            .await
            .with_context(request)?;
        let status = resp.status();
        let body = resp.bytes().await.with_context(request)?;
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            let snippet: String = String::from_utf8_lossy(&body).chars().take(500).collect();
            anyhow::bail!("{}: {status}: {snippet}", request());
        }
        serde_json::from_slice(&body)
            .with_context(|| format!("{}: the answer is not the expected JSON", request()))
            .map(Some)
    }

    /// GET a JSON document; `None` for a 404.
    pub async fn get_json_or_404(
        &self,
        path: &str,
        params: &[(&str, String)],
    ) -> anyhow::Result<Option<Value>> {
        self.get_typed_or_404(path, params).await
    }

    pub async fn get_json(&self, path: &str, params: &[(&str, String)]) -> anyhow::Result<Value> {
        self.get_json_or_404(path, params).await?.with_context(|| {
            format!(
                "{}: GET {}: 404 Not Found",
                self.name,
                self.url(path, params)
                    .map(|u| u.to_string())
                    .unwrap_or_default()
            )
        })
    }
}
