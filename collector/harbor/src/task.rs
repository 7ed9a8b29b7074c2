//! A Harbor task's files, rendered (IO-free): `task.toml`, `instruction.md`, the environment's
//! Dockerfile and the files it copies (`environment/rootfs/`), the verifier (`tests/test.sh`) and
//! the reference solution (`solution/solve.sh`). Harbor's task format: its
//! `harbor/models/task/config.py`; unknown keys are ignored by Harbor and flagged by `harbor lint`,
//! so only its keys are written.

use serde_json::{Value, json};
use session::prompt::{self, Pointers};
use session::submit::AppInfo;

use crate::episode::{AGENT_HOME, AGENT_UID, AGENT_USER, EPISODE_FILE, Episode};

/// The command that starts the session (once) and waits until it answers: the healthcheck.
pub const UP: &str = "collector harbor up";

/// One task, as the export makes it.
#[derive(Debug, Clone)]
pub struct Task<'a> {
    /// `faultline/<name>`: opaque, it names neither the problem nor the seed.
    pub name: &'a str,
    /// The image with `collector`, kubectl, curl and jq (`collector harbor image`).
    pub image: &'a str,
    pub app: &'a AppInfo,
    pub episode: &'a Episode,
    /// The reference solution's token, in clear (in `[solution].env` only).
    pub solution_token: &'a str,
    pub agent_timeout_secs: u64,
    pub verifier_timeout_secs: u64,
    /// Harbor's `network_mode` for the agent: `public` (its model's API) or `no-network`.
    pub network: &'a str,
    /// Whether the task offers the session's MCP server (Harbor runs only agents that declare
    /// MCP support on a task that offers one).
    pub mcp: bool,
}

/// A file of a task: its path in the task's folder, its text and its mode.
#[derive(Debug, Clone, PartialEq)]
pub struct File {
    pub path: String,
    pub text: String,
    pub mode: u32,
}

fn file(path: &str, text: String, mode: u32) -> File {
    File {
        path: path.to_string(),
        text,
        mode,
    }
}

/// Every file of the task.
pub fn render(task: &Task<'_>) -> anyhow::Result<Vec<File>> {
    let episode_json = serde_json::to_string_pretty(task.episode)? + "\n";
    Ok(vec![
        file("task.toml", task_toml(task)?, 0o644),
        file("instruction.md", instruction(task)?, 0o644),
        file("environment/Dockerfile", dockerfile(task.image), 0o644),
        file(
            &format!("environment/rootfs{EPISODE_FILE}"),
            episode_json,
            0o600,
        ),
        file("tests/test.sh", TEST_SH.to_string(), 0o755),
        file("solution/solve.sh", SOLVE_SH.to_string(), 0o755),
    ])
}

/// The agent's environment: where its tools point (SREGym's names too, so its agents run).
pub fn agent_env(episode: &Episode) -> Vec<(&'static str, String)> {
    let port = |name: &str| episode.port(name).to_string();
    vec![
        ("KUBECONFIG", format!("{AGENT_HOME}/.kube/config")),
        ("PROMETHEUS_URL", episode.url("prometheus")),
        ("JAEGER_URL", episode.url("jaeger")),
        ("LOKI_URL", episode.url("loki")),
        ("FAULTLINE_SUBMIT_URL", episode.url("submit")),
        ("FAULTLINE_MCP_URL", format!("{}/mcp", episode.url("mcp"))),
        ("API_HOSTNAME", "127.0.0.1".into()),
        ("API_PORT", port("submit")),
        ("MCP_SERVER_URL", episode.url("mcp")),
        ("MCP_SERVER_PORT", port("mcp")),
    ]
}

fn task_toml(task: &Task<'_>) -> anyhow::Result<String> {
    let env: serde_json::Map<String, Value> = agent_env(task.episode)
        .into_iter()
        .map(|(k, v)| (k.to_string(), Value::String(v)))
        .collect();
    let judge: serde_json::Map<String, Value> = ["JUDGE_BASE_URL", "JUDGE_MODEL", "JUDGE_API_KEY"]
        .into_iter()
        .map(|k| (k.to_string(), Value::String(format!("${{{k}:-}}"))))
        .collect();
    let mut doc = json!({
        "schema_version": "1.4",
        "task": {
            "name": format!("faultline/{}", task.name),
            "version": "1.0.0",
            "description": format!("An SRE incident on a live {} (Kubernetes): diagnose it, then fix it.", task.app.app_name),
            "keywords": ["sre", "kubernetes", "incident", "faultline"],
        },
        "metadata": {
            "faultline_version": env!("CARGO_PKG_VERSION"),
            "application": task.app.app_name,
        },
        "agent": {
            "user": AGENT_USER,
            "timeout_sec": task.agent_timeout_secs as f64,
            "network_mode": task.network,
        },
        "verifier": {
            "user": "root",
            "timeout_sec": task.verifier_timeout_secs as f64,
            // The verifier grades the agent's own system: the same environment.
            "environment_mode": "shared",
            // An LLM judges the diagnosis when the host gives these; deterministic otherwise.
            "env": judge,
        },
        "environment": {
            "build_timeout_sec": 600.0,
            "cpus": 1,
            "memory_mb": 1024,
            "storage_mb": 2048,
            "workdir": AGENT_HOME,
            "env": env,
            "healthcheck": {
                "command": UP,
                "interval_sec": 2.0,
                "timeout_sec": 120.0,
                "start_period_sec": 0.0,
                "start_interval_sec": 1.0,
                "retries": 3,
            },
        },
        "solution": {
            "env": { "FAULTLINE_SOLUTION_TOKEN": task.solution_token },
        },
    });
    if task.mcp {
        doc["environment"]["mcp_servers"] = json!([{
            "name": "faultline",
            "transport": "streamable-http",
            "url": format!("{}/mcp", task.episode.url("mcp")),
        }]);
    }
    let mut text = String::from(
        "# A faultline problem as a Harbor task (`collector harbor export`). The environment runs a live\n\
         # simulated cluster of the application; the verifier grades the diagnosis and the mitigation.\n",
    );
    text.push_str(&toml::to_string(&doc)?);
    Ok(text)
}

/// The session's task, pointing at the environment's fixed ports and the agent's kubeconfig.
fn instruction(task: &Task<'_>) -> anyhow::Result<String> {
    let e = task.episode;
    let kubeconfig = format!("{AGENT_HOME}/.kube/config");
    let (kubernetes, prometheus, jaeger, loki, submit) = (
        e.url("kubernetes"),
        e.url("prometheus"),
        e.url("jaeger"),
        e.url("loki"),
        e.url("submit"),
    );
    let mcp = format!("{}/mcp", e.url("mcp"));
    let values = prompt::values(
        task.app,
        &Pointers {
            kubeconfig: &kubeconfig,
            kubernetes: &kubernetes,
            prometheus: &prometheus,
            jaeger: &jaeger,
            loki: &loki,
            submit: &submit,
            mcp: &mcp,
        },
    );
    prompt::render(prompt::builtin(true), &values)
}

/// The task's image: the faultline image, the episode file (root's alone) and the agent's user.
fn dockerfile(image: &str) -> String {
    format!(
        "# The environment of a faultline task: `collector` runs the live system inside it (started by\n\
         # the healthcheck); the agent works as the unprivileged user `{AGENT_USER}`.\n\
         FROM {image}\n\
         COPY rootfs/ /\n\
         # Git and archives keep no mode but the executable bit: the episode is root's alone.\n\
         RUN chmod 0700 /etc/faultline && chmod 0600 {EPISODE_FILE} \\\n\
         \x20   && (id -u {AGENT_USER} >/dev/null 2>&1 || useradd --create-home --uid {AGENT_UID} --shell /bin/bash {AGENT_USER}) \\\n\
         \x20   && mkdir -p {AGENT_HOME}/.kube && chown -R {AGENT_USER}: {AGENT_HOME}\n\
         WORKDIR {AGENT_HOME}\n"
    )
}

/// The verifier: ends whatever the agent left running, then grades. It writes
/// /logs/verifier/reward.json only when grading succeeded (Harbor then reports an error, not a 0).
const TEST_SH: &str = "#!/bin/sh\n\
# Ends the agent's processes, grades the session (the diagnosis and the mitigation) and writes\n\
# /logs/verifier/reward.json, with the run beside it. Nothing is written if grading fails.\n\
pkill -KILL -u agent 2>/dev/null || true\n\
exec collector harbor grade --logs /logs/verifier\n";

/// The reference solution: the problem's reference fix and a correct diagnosis, applied by the
/// session itself on presenting the token only this step is given.
const SOLVE_SH: &str = "#!/bin/sh\n\
# The reference solution (Harbor's oracle agent): only this step has FAULTLINE_SOLUTION_TOKEN.\n\
exec collector harbor solve\n";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::episode::sha256_hex;

    fn episode() -> Episode {
        Episode {
            problem: "hotel-geo-target-port".into(),
            seed: 3,
            noise: true,
            since_onset_secs: 300,
            time_limit_secs: 3600,
            base_port: 7070,
            grade_token: "g".repeat(64),
            solution_token_sha256: sha256_hex("s"),
        }
    }

    fn app_info() -> AppInfo {
        AppInfo {
            app_name: "hotel-reservation".into(),
            namespace: "hotel-reservation".into(),
            namespaces: vec!["hotel-reservation".into()],
            descriptions: "Hotel search.".into(),
        }
    }

    fn task<'a>(e: &'a Episode, app: &'a AppInfo) -> Task<'a> {
        Task {
            name: "fl-0123456789ab",
            image: "faultline-harbor:0.1.0",
            app,
            episode: e,
            solution_token: "s",
            agent_timeout_secs: 1200,
            verifier_timeout_secs: 600,
            network: "public",
            mcp: true,
        }
    }

    #[test]
    fn only_the_root_only_episode_file_names_the_problem() {
        let (e, app) = (episode(), app_info());
        let files = render(&task(&e, &app)).unwrap();
        for f in &files {
            let names = f.text.contains("geo-target-port") || f.path.contains("geo");
            let episode = f.path.ends_with("episode.json");
            assert_eq!(names, episode, "{}", f.path);
            if episode {
                assert_eq!(f.mode, 0o600);
            }
            assert!(!f.text.contains(&e.grade_token) || episode, "{}", f.path);
        }
    }

    #[test]
    fn task_toml_is_harbors_shape() {
        let (e, app) = (episode(), app_info());
        let files = render(&task(&e, &app)).unwrap();
        let toml_text = &files.iter().find(|f| f.path == "task.toml").unwrap().text;
        let doc: toml::Table = toml::from_str(toml_text).unwrap();
        assert_eq!(
            doc["task"]["name"].as_str(),
            Some("faultline/fl-0123456789ab")
        );
        assert_eq!(doc["agent"]["user"].as_str(), Some("agent"));
        assert_eq!(
            doc["environment"]["healthcheck"]["command"].as_str(),
            Some(UP)
        );
        assert_eq!(
            doc["environment"]["mcp_servers"][0]["url"].as_str(),
            Some("http://127.0.0.1:7076/mcp")
        );
        let (e2, app2) = (episode(), app_info());
        let without = Task {
            mcp: false,
            ..task(&e2, &app2)
        };
        let plain: toml::Table = toml::from_str(&task_toml(&without).unwrap()).unwrap();
        assert!(plain["environment"].get("mcp_servers").is_none());
        assert_eq!(
            doc["solution"]["env"]["FAULTLINE_SOLUTION_TOKEN"].as_str(),
            Some("s")
        );
        assert_eq!(
            doc["verifier"]["env"]["JUDGE_MODEL"].as_str(),
            Some("${JUDGE_MODEL:-}")
        );
        assert_eq!(
            doc["environment"]["env"]["KUBECONFIG"].as_str(),
            Some("/home/agent/.kube/config")
        );
    }

    #[test]
    fn the_instruction_points_at_the_fixed_ports() {
        let (e, app) = (episode(), app_info());
        let text = instruction(&task(&e, &app)).unwrap();
        assert!(text.contains("http://127.0.0.1:7071"), "{text}");
        assert!(text.contains("/home/agent/.kube/config"), "{text}");
        assert!(text.contains("hotel-reservation"));
    }
}
