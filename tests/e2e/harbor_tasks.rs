//! `collector harbor export` tasks run by the real Harbor (`harbor` 0.25 in /opt/harbor-venv,
//! made by integrations/harbor/install.sh, which tests/install runs) on faultline's namespace
//! provider (integrations/harbor): `harbor lint`, the oracle agent (the tasks' reference
//! solutions), the nop agent, a scripted kubectl agent, and a hostile agent looking for the answers.
//! Needs root (the provider builds namespaces and mounts).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const HARBOR: &str = "/opt/harbor-venv/bin/harbor";
const PROVIDER: &str = "faultline_harbor.namespace:NamespaceEnvironment";

fn harbor() -> Command {
    assert!(
        Path::new(HARBOR).exists(),
        "harbor is missing: bash integrations/harbor/install.sh (or bash tests/install)"
    );
    let mut cmd = Command::new(HARBOR);
    // Harbor's LiteLLM import would fetch a price map from the internet.
    cmd.env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("PYTHONPATH", agents_dir())
        .env_remove("JUDGE_BASE_URL")
        .env_remove("JUDGE_MODEL")
        .env_remove("JUDGE_API_KEY");
    cmd
}

fn agents_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("agents/harbor")
}

/// The tasks of `problems` (seed 1), exported into `dir`; the index's (name, problem) pairs.
fn export(dir: &Path, problems: &[&str]) -> Vec<(String, String)> {
    let out = Command::new(e2e::binary("collector"))
        .args([
            "harbor",
            "export",
            "--json",
            "--image",
            "faultline-harbor:test",
        ])
        .args(["--problems", &problems.join(",")])
        .arg("--out")
        .arg(dir)
        .output()
        .expect("collector runs");
    assert!(out.status.success(), "{}", e2e::text(&out));
    let index: Value = serde_json::from_slice(&out.stdout).expect("the index");
    index["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| {
            (
                t["name"].as_str().expect("a name").to_string(),
                t["problem"].as_str().expect("a problem").to_string(),
            )
        })
        .collect()
}

/// Runs `harbor run` on `path` with `agent`; each trial's task name and verifier rewards (Null
/// for a trial that errored).
fn run(path: &Path, jobs: &Path, job: &str, agent: &str, extra: &[&str]) -> Vec<(String, Value)> {
    let bind = format!(
        "binds={}:/usr/local/bin/collector",
        e2e::binary("collector").display()
    );
    let out = harbor()
        .args([
            "run", "--yes", "--quiet", "--env", PROVIDER, "--ek", &bind, "-a", agent,
        ])
        .arg("--path")
        .arg(path)
        .arg("--jobs-dir")
        .arg(jobs)
        .args(["--job-name", job])
        .args(extra)
        .output()
        .expect("harbor runs");
    assert!(
        out.status.success(),
        "harbor run {job}: {}",
        e2e::text(&out)
    );
    let mut trials = Vec::new();
    for entry in std::fs::read_dir(jobs.join(job)).expect("the job's directory") {
        let dir = entry.expect("an entry").path();
        let result = dir.join("result.json");
        if !result.is_file() {
            continue;
        }
        let r = e2e::read_json(&result);
        let task = r["task_name"]
            .as_str()
            .map(|t| t.trim_start_matches("faultline/").to_string())
            .unwrap_or_default();
        trials.push((task, r["verifier_result"]["rewards"].clone()));
    }
    trials.sort_by(|a, b| a.0.cmp(&b.0));
    trials
}

/// Ten problems over the three apps, each with a reference fix through the Kubernetes API.
const TEN: [&str; 10] = [
    "hotel-geo-target-port",
    "hotel-profile-wrong-command",
    "hotel-recommendation-netpol",
    "hotel-search-service-port",
    "social-user-scale-zero",
    "social-taint-no-toleration",
    "social-media-mongo-missing-configmap",
    "astro-cart-target-port",
    "astro-ad-missing-service",
    "astro-payment-netpol",
];

#[test]
fn ten_exported_tasks_lint_clean_and_the_oracle_scores_one_and_nop_zero_four_at_a_time() {
    let work = tempfile::tempdir().expect("a temporary directory");
    let tasks = work.path().join("tasks");
    let exported = export(&tasks, &TEN);
    assert_eq!(exported.len(), 10);
    // The verifier grades the agent's own system, so it shares the agent's environment: the one
    // rule of Harbor's linter that such a task breaks by design.
    let dirs: Vec<PathBuf> = exported.iter().map(|(n, _)| tasks.join(n)).collect();
    let lint = harbor()
        .args(["lint", "--ignore", "shared-verifier"])
        .args(&dirs)
        .output()
        .expect("harbor lint runs");
    assert!(lint.status.success(), "harbor lint: {}", e2e::text(&lint));
    let jobs = work.path().join("jobs");
    let oracle = run(&tasks, &jobs, "oracle", "oracle", &["-n", "4"]);
    assert_eq!(oracle.len(), 10, "{oracle:?}");
    for (task, rewards) in &oracle {
        let problem = &exported
            .iter()
            .find(|(n, _)| n == task)
            .expect("exported")
            .1;
        assert_eq!(rewards["reward"], 1.0, "{problem} ({task}): {rewards}");
        assert_eq!(rewards["mitigation"], 1.0, "{problem}: {rewards}");
        assert_eq!(rewards["diagnosis"], 1.0, "{problem}: {rewards}");
    }
    let nop = run(&tasks, &jobs, "nop", "nop", &["-n", "4"]);
    assert_eq!(nop.len(), 10, "{nop:?}");
    for (task, rewards) in &nop {
        assert_eq!(rewards["reward"], 0.0, "{task}: {rewards}");
    }
    // The run comes back with the verifier's logs: the problem is named there, after the fact.
    let trial = std::fs::read_dir(jobs.join("oracle"))
        .expect("the job")
        .filter_map(Result::ok)
        .find(|e| e.path().join("verifier/run.json").is_file())
        .expect("a trial with its run");
    let run = e2e::read_json(&trial.path().join("verifier/run.json"));
    assert!(TEN.contains(&run["problem_id"].as_str().unwrap_or_default()));
    assert_eq!(run["agent_sandbox"], "harness");
}

#[test]
fn a_scripted_agent_that_fixes_through_kubectl_mitigates() {
    let work = tempfile::tempdir().expect("a temporary directory");
    let tasks = work.path().join("tasks");
    let problems = ["hotel-geo-target-port", "astro-cart-target-port"];
    let exported = export(&tasks, &problems);
    let fixes = work.path().join("fixes");
    std::fs::create_dir_all(&fixes).expect("the fixes' directory");
    let catalog = problems::Catalog::builtin().expect("the catalog");
    for (name, problem) in &exported {
        let spec = catalog.problem(problem).expect("the problem");
        let (commands, diagnosis) = e2e::reference(&catalog, spec);
        std::fs::write(fixes.join(format!("{name}.sh")), commands).expect("fix");
        std::fs::write(fixes.join(format!("{name}.txt")), diagnosis).expect("diagnosis");
    }
    let ak = format!("fixes={}", fixes.display());
    let trials = run(
        &tasks,
        &work.path().join("jobs"),
        "fixer",
        "scripted_agents:KubectlFixer",
        &["--ak", &ak, "-n", "2"],
    );
    assert_eq!(trials.len(), 2, "{trials:?}");
    for (task, rewards) in &trials {
        assert_eq!(rewards["mitigation"], 1.0, "{task}: {rewards}");
        assert_eq!(rewards["reward"], 1.0, "{task}: {rewards}");
    }
}

#[test]
fn an_agent_looking_for_the_answers_finds_nothing() {
    let work = tempfile::tempdir().expect("a temporary directory");
    let tasks = work.path().join("tasks");
    let problem = "hotel-geo-target-port";
    let exported = export(&tasks, &[problem]);
    let name = &exported[0].0;
    let episode_file = tasks
        .join(name)
        .join("environment/rootfs/etc/faultline/episode.json");
    let episode = e2e::read_json(&episode_file);
    let grade_token = episode["grade_token"].as_str().expect("a grading token");
    let task_toml = std::fs::read_to_string(tasks.join(name).join("task.toml")).expect("task.toml");
    let solution_token = task_toml
        .lines()
        .find_map(|l| l.strip_prefix("FAULTLINE_SOLUTION_TOKEN = "))
        .expect("the solution token")
        .trim_matches('"')
        .to_string();
    let jobs = work.path().join("jobs");
    let trials = run(&tasks, &jobs, "snoop", "scripted_agents:Snoop", &[]);
    assert_eq!(trials.len(), 1);
    assert_eq!(trials[0].1["reward"], 0.0, "{trials:?}");
    let snoop = std::fs::read_dir(jobs.join("snoop"))
        .expect("the job")
        .filter_map(Result::ok)
        .map(|e| e.path().join("agent/snoop.txt"))
        .find(|p| p.is_file())
        .expect("the snoop's findings");
    let found = std::fs::read_to_string(&snoop).expect("the findings");
    // It did look: as the agent's user, refused the episode file, and it saw the daemon run.
    assert!(found.contains("uid=1000(agent)"), "{found}");
    assert!(found.contains("Permission denied"), "{found}");
    assert!(found.contains("collector harbor daemon"), "{found}");
    assert!(found.contains("a valid token is required"), "{found}");
    assert!(found.contains("== done"), "{found}");
    // Nor did it read what the session records (Parquet files begin with PAR1). (Its own script,
    // which the process list shows, names the files it looks for: those names are no needles.)
    for secret in [
        problem,
        "geo-target-port",
        grade_token,
        &solution_token,
        "targetPort 9999",
        "PAR1",
    ] {
        assert!(
            !found.contains(secret),
            "the agent found {secret:?} in:\n{found}"
        );
    }
}

/// The namespace provider's own checks (integrations/harbor/tests/run_provider.sh): a tiny task
/// under the real `harbor run` (oracle, nop, four concurrent trials on one port), and the
/// provider driven directly: the agent user's confinement, symlinks planted in a trial, binds,
/// timeouts, clean-up, and `kill -9` of the process that started a trial.
#[test]
fn the_namespace_provider_passes_its_own_checks() {
    assert!(
        Path::new(HARBOR).exists(),
        "bash integrations/harbor/install.sh"
    );
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../integrations/harbor/tests/run_provider.sh");
    let out = Command::new("bash")
        .arg(&script)
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "{}", e2e::text(&out));
}
