//! A kubectl-style read load on a Kubernetes API: the requests kubectl sends for `get` (Tables,
//! `-A`), `describe` (the object, then its events by field selector), `logs --tail` and
//! discovery, driven as an open loop. Latency counts from each request's scheduled time, so a
//! server that falls behind is charged for the queue it builds (no coordinated omission).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
const DISCOVERY: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

/// The request mix: (path, Accept), in the proportions a few agents running kubectl produce.
pub async fn request_mix(client: &reqwest::Client, base: &str) -> Vec<(String, &'static str)> {
    let pods: Value = client
        .get(format!("{base}/api/v1/pods"))
        .send()
        .await
        .expect("list pods")
        .json()
        .await
        .expect("pods JSON");
    let items = pods["items"].as_array().expect("items");
    // The application's namespace: the one with the most pods.
    let mut per_ns: std::collections::BTreeMap<&str, Vec<&Value>> = Default::default();
    for p in items {
        per_ns
            .entry(p["metadata"]["namespace"].as_str().unwrap_or(""))
            .or_default()
            .push(p);
    }
    let (ns, ns_pods) = per_ns
        .into_iter()
        .max_by_key(|(_, v)| v.len())
        .expect("a namespace with pods");
    let mut mix = vec![
        (format!("/api/v1/namespaces/{ns}/pods?limit=500"), TABLE),
        (format!("/api/v1/namespaces/{ns}/pods?limit=500"), TABLE),
        (
            format!("/apis/apps/v1/namespaces/{ns}/deployments?limit=500"),
            TABLE,
        ),
        (format!("/api/v1/namespaces/{ns}/events?limit=500"), TABLE),
        (format!("/api/v1/namespaces/{ns}/services?limit=500"), TABLE),
        ("/api/v1/pods?limit=500".to_string(), TABLE),
        ("/api".to_string(), DISCOVERY),
        ("/apis".to_string(), DISCOVERY),
    ];
    for p in ns_pods.iter().take(4) {
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        let uid = p["metadata"]["uid"].as_str().unwrap_or_default();
        mix.push((
            format!("/api/v1/namespaces/{ns}/pods/{name}"),
            "application/json",
        ));
        mix.push((
            format!(
                "/api/v1/namespaces/{ns}/events?fieldSelector=involvedObject.name%3D{name},involvedObject.namespace%3D{ns},involvedObject.uid%3D{uid}"
            ),
            "application/json",
        ));
        mix.push((
            format!("/api/v1/namespaces/{ns}/pods/{name}/log?tailLines=100"),
            "*/*",
        ));
    }
    mix
}

/// What an open loop measured.
pub struct Measured {
    /// Latencies, sorted.
    pub latencies: Vec<Duration>,
    pub errors: usize,
    pub wall: Duration,
}

/// Sends the mix round-robin at `rate` requests/s for `secs` s.
pub async fn open_loop(
    client: &reqwest::Client,
    base: &str,
    mix: Arc<Vec<(String, &'static str)>>,
    rate: u64,
    secs: u64,
) -> Measured {
    let total = rate * secs;
    let period = Duration::from_secs_f64(1.0 / rate as f64);
    let started = tokio::time::Instant::now();
    let mut tasks = Vec::with_capacity(total as usize);
    for i in 0..total {
        let due = started + period * i as u32;
        tokio::time::sleep_until(due).await;
        let (client, mix, base) = (client.clone(), mix.clone(), base.to_string());
        tasks.push(tokio::spawn(async move {
            let (path, accept) = &mix[i as usize % mix.len()];
            let ok = match client
                .get(format!("{base}{path}"))
                .header("Accept", *accept)
                .send()
                .await
            {
                Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                Err(_) => false,
            };
            (due.elapsed(), ok)
        }));
    }
    let mut latencies = Vec::with_capacity(tasks.len());
    let mut errors = 0usize;
    for t in tasks {
        let (d, ok) = t.await.expect("request task");
        latencies.push(d);
        errors += usize::from(!ok);
    }
    latencies.sort();
    Measured {
        latencies,
        errors,
        wall: started.elapsed(),
    }
}
