//! A running `collector serve openenv` on a free port, for the OpenEnv tests and benchmark.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

pub struct Server {
    pub child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Where its episodes' runs go.
    pub out: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts it (no judge model: diagnoses are judged deterministically) and waits for the line
    /// that names its address.
    pub fn start(extra: &[&str]) -> Server {
        let out = tempfile::tempdir().expect("a temporary directory");
        let mut child = Command::new(crate::binary("collector"))
            .args(["serve", "openenv", "--listen", "127.0.0.1:0", "--out"])
            .arg(out.path())
            .args(extra)
            .env_remove("JUDGE_BASE_URL")
            .env_remove("JUDGE_MODEL")
            .env_remove("JUDGE_API_KEY")
            .stderr(Stdio::piped())
            .spawn()
            .expect("collector runs");
        let mut stderr = BufReader::new(child.stderr.take().expect("piped stderr"));
        let mut line = String::new();
        let url = loop {
            line.clear();
            let n = stderr.read_line(&mut line).expect("the server's stderr");
            assert!(n > 0, "the server ended before serving");
            if let Some(rest) = line.split("serving ws://").nth(1) {
                let addr = rest.split('/').next().expect("an address");
                break format!("http://{addr}");
            }
        };
        // The rest of its log is drained so that it never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        Server { child, url, out }
    }

    pub fn health(&self) -> serde_json::Value {
        crate::http_get(format!("{}/health", self.url))
            .json()
            .expect("health JSON")
    }
}
