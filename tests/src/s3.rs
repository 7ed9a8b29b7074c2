//! A real S3 API on loopback for the results-store tests: `moto_server` (PyPI `moto[server]`),
//! started on a port the kernel picks (it prints the one it got) and killed when dropped.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

pub struct Moto {
    child: Child,
    /// `http://127.0.0.1:PORT`
    pub endpoint: String,
}

impl Moto {
    /// Starts moto_server; fails saying how to install it when it is missing.
    pub fn start() -> Moto {
        let mut child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("moto_server is needed (a local S3 API): pip install 'moto[server]' (or bash tests/install): {e}")
            });
        let stderr = child.stderr.take().expect("piped stderr");
        let mut lines = BufReader::new(stderr).lines();
        let endpoint = loop {
            let line = lines
                .next()
                .expect("moto_server ended before it listened")
                .expect("moto_server's output");
            if let Some(at) = line.find("Running on http://") {
                break line[at + "Running on ".len()..].trim().to_string();
            }
        };
        // Keep draining its log so that it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Moto { child, endpoint }
    }

    /// Creates a bucket (moto takes unsigned requests).
    pub fn bucket(&self, name: &str) {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let r = reqwest::blocking::Client::new()
            .put(format!("{}/{name}", self.endpoint))
            .send()
            .expect("PUT bucket");
        assert!(
            r.status().is_success(),
            "creating bucket {name}: {}",
            r.status()
        );
    }

    /// The environment that points object_store's S3 client here.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "faultline-test".into()),
            ("AWS_SECRET_ACCESS_KEY", "faultline-test".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }

    /// Every key under `prefix` in `bucket`.
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        self.list(bucket, prefix)
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    }

    /// The bytes stored under `prefix` in `bucket`.
    pub fn bytes(&self, bucket: &str, prefix: &str) -> u64 {
        self.list(bucket, prefix).into_iter().map(|(_, n)| n).sum()
    }

    /// (key, size) of every object under `prefix` (ListObjectsV2, following continuation tokens).
    fn list(&self, bucket: &str, prefix: &str) -> Vec<(String, u64)> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::blocking::Client::new();
        let mut keys = vec![];
        let mut token: Option<String> = None;
        loop {
            let mut query = vec![
                ("list-type", "2".to_string()),
                ("prefix", prefix.to_string()),
            ];
            if let Some(t) = &token {
                query.push(("continuation-token", t.clone()));
            }
            let body = client
                .get(format!("{}/{bucket}", self.endpoint))
                .query(&query)
                .send()
                .and_then(|r| r.error_for_status())
                .and_then(|r| r.text())
                .expect("ListObjectsV2");
            let sizes = between(&body, "<Size>", "</Size>");
            let names = between(&body, "<Key>", "</Key>");
            assert_eq!(sizes.len(), names.len(), "a key without a size: {body}");
            keys.extend(
                names
                    .into_iter()
                    .zip(sizes.iter().map(|s| s.parse().unwrap_or(0))),
            );
            token = between(&body, "<NextContinuationToken>", "</NextContinuationToken>")
                .into_iter()
                .next();
            if token.is_none() {
                return keys;
            }
        }
    }

    /// Writes an object (unsigned), as a writer killed before its marker leaves them.
    pub fn put(&self, bucket: &str, key: &str, body: &str) {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::blocking::Client::new()
            .put(format!("{}/{bucket}/{key}", self.endpoint))
            .body(body.to_string())
            .send()
            .and_then(|r| r.error_for_status())
            .expect("PUT object");
    }
}

/// The texts between each `open` and the next `close`.
fn between(text: &str, open: &str, close: &str) -> Vec<String> {
    text.split(open)
        .skip(1)
        .filter_map(|s| s.split(close).next())
        .map(str::to_string)
        .collect()
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
