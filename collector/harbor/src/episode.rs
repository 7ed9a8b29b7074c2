//! What a task's environment holds for its episode, and where. The episode file names the problem
//! and holds the grading token; it is root's alone (mode 0600 in a root-only directory), so the
//! agent, an unprivileged user, can read neither. The solution token is kept as its SHA-256 only:
//! the token itself is in `task.toml`'s `[solution].env`, which Harbor hands to the reference
//! solution's step and to nothing else.

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sha2::Digest;

/// The episode file, inside the environment.
pub const EPISODE_FILE: &str = "/etc/faultline/episode.json";
/// Where the running session keeps its pid and log (root's).
pub const STATE_DIR: &str = "/run/faultline";
/// Where the session's run is written (root's): `run/` once finished.
pub const RUN_DIR: &str = "/var/lib/faultline";
/// The agent's user, as Harbor's `[agent].user` names it, and its uid.
pub const AGENT_USER: &str = "agent";
pub const AGENT_UID: u32 = 1000;
pub const AGENT_HOME: &str = "/home/agent";
/// The first of the session's consecutive loopback ports (see `session::PORTS`).
pub const BASE_PORT: u16 = 7070;
/// The control API's port offset: readiness, grading and the guarded reference solution.
pub const CONTROL_OFFSET: u16 = 8;

/// One task's episode: the problem and how it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Episode {
    pub problem: String,
    pub seed: u64,
    /// Whether the problem's background noise plays.
    pub noise: bool,
    /// How long the failure has been going on when the environment is ready.
    pub since_onset_secs: u64,
    /// The session's own time limit (past Harbor's agent timeout: the verifier ends it).
    pub time_limit_secs: u64,
    pub base_port: u16,
    /// Presented by the verifier to grade.
    pub grade_token: String,
    /// The SHA-256 (hex) of the token the reference solution presents.
    pub solution_token_sha256: String,
}

impl Episode {
    pub fn load(path: &Path) -> anyhow::Result<Episode> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the episode file {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{}: not an episode file", path.display()))
    }

    /// The port of one of the session's servers (a `session::PORTS` name).
    pub fn port(&self, name: &str) -> u16 {
        self.base_port + session::port_offset(name)
    }

    /// The base URL of one of the session's servers.
    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}", self.port(name))
    }
}

/// The control API's base URL for a base port.
pub fn control_url(base_port: u16) -> String {
    format!("http://127.0.0.1:{}", base_port + CONTROL_OFFSET)
}

/// A fresh secret: 256 random bits as hex.
pub fn token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

pub fn sha256_hex(text: &str) -> String {
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// Whether a presented bearer token is the one whose digest is `sha256`.
pub fn matches(presented: &str, sha256: &str) -> bool {
    !presented.is_empty() && sha256_hex(presented) == sha256
}
