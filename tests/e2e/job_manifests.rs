//! `collector eval --emit-job`: the manifests that run an evaluation as an Indexed Job. The Job is
//! checked against the Kubernetes schema (k8s-openapi's batch/v1 types: a field they lack would be
//! dropped on the round trip), the ConfigMap goes through `kubectl apply --dry-run=server` against
//! our own writable API, and `--on-cluster` applies them there (a cluster without batch/v1 Jobs is
//! named as such).

use std::path::Path;
use std::process::{Command, Output};

use k8s_openapi::api::batch::v1::Job;
use serde_json::Value;

fn collector(args: &[&str], cwd: &Path) -> Output {
    Command::new(e2e::binary("collector"))
        .args(args)
        .current_dir(cwd)
        .env_remove("JOB_COMPLETION_INDEX")
        .env_remove("FAULTLINE_SHARD_COUNT")
        .env_remove("KUBECONFIG")
        .output()
        .expect("collector runs")
}

fn setup() -> tempfile::TempDir {
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        work.path().join("prompt.md"),
        "Diagnose {{problem}} and fix it.\n",
    )
    .unwrap();
    std::fs::write(
        work.path().join("agents.toml"),
        "[[agents]]\nname = \"stratus\"\ncommand = \"python -m clients.stratus\"\nprompt = \"prompt.md\"\nenv = { MODEL = \"small\" }\n\
         [[agents]]\nname = \"idle\"\ncommand = \"true\"\ntime_limit = \"1m\"\n",
    )
    .unwrap();
    work
}

const EVAL: &[&str] = &[
    "eval",
    "--agents",
    "agents.toml",
    "--problems",
    "hotel-geo-target-port,hotel-geo-config-drift",
    "--runs",
    "5",
    "--noise",
    "on,off",
    "--jobs",
    "3",
    "--out",
    "s3://evals/board-7",
];

/// The emitted documents, as JSON.
fn emitted(work: &Path, extra: &[&str]) -> (Value, Value, String) {
    let out = collector(
        &[EVAL, &["--emit-job", "--shards", "8"], extra].concat(),
        work,
    );
    assert!(out.status.success(), "{}", e2e::text(&out));
    let yaml = String::from_utf8(out.stdout).unwrap();
    use serde::Deserialize;
    let docs: Vec<Value> = serde_norway::Deserializer::from_str(&yaml)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{e}: {yaml}")))
        .collect();
    assert_eq!(docs.len(), 2, "{yaml}");
    (docs[0].clone(), docs[1].clone(), yaml)
}

#[test]
fn the_job_is_an_indexed_job_of_shards_that_retries_only_infrastructure_failures() {
    let work = setup();
    let (config_map, job, _) = emitted(work.path(), &["--parallelism", "4"]);
    // Every field is one of batch/v1 Job's.
    let typed: Job = serde_json::from_value(job.clone()).unwrap();
    assert_eq!(
        serde_json::to_value(&typed).unwrap(),
        job,
        "a field outside the Job schema"
    );
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    assert_eq!(spec["completions"], 8);
    assert_eq!(spec["parallelism"], 4);
    assert_eq!(spec["backoffLimitPerIndex"], 3);
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(pod["automountServiceAccountToken"], false);
    let rules = spec["podFailurePolicy"]["rules"].as_array().unwrap();
    let action_for = |code: i64| {
        rules
            .iter()
            .find(|r| {
                r["onExitCodes"]["values"]
                    .as_array()
                    .is_some_and(|v| v.contains(&Value::from(code)))
            })
            .map(|r| r["action"].as_str().unwrap().to_string())
    };
    assert_eq!(
        action_for(75).as_deref(),
        Some("Count"),
        "exit 75 is retried"
    );
    assert_eq!(
        action_for(1).as_deref(),
        Some("FailIndex"),
        "bad input is not"
    );
    assert_eq!(action_for(0), None);
    assert!(
        rules
            .iter()
            .any(|r| r["action"] == "Ignore"
                && r["onPodConditions"][0]["type"] == "DisruptionTarget")
    );
    let c = &pod["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    // Options are `--flag=value` words: no value stands alone for YAML 1.1 to read as a boolean.
    let after = |flag: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(&format!("{flag}=")))
            .unwrap_or_else(|| panic!("{flag} in {args:?}"))
    };
    assert_eq!(after("--shard-count"), "8");
    assert_eq!(after("--out"), "s3://evals/board-7");
    assert_eq!(after("--agents"), "/etc/faultline/agents.toml");
    assert_eq!(after("--runs"), "5");
    assert_eq!(after("--noise"), "on,off");
    assert_eq!(
        after("--problems"),
        "hotel-geo-config-drift,hotel-geo-target-port"
    );
    assert!(
        !args.iter().any(|a| a.starts_with("--shard-index")),
        "the index comes from JOB_COMPLETION_INDEX"
    );
    // As kubectl reads them (YAML 1.1), every argument is still a string.
    assert!(
        args.iter()
            .all(|a| !["on", "off", "yes", "no", "y", "n"].contains(a)),
        "{args:?}"
    );
    // Three sessions at once: their memory and CPU are requested.
    assert_eq!(c["resources"]["requests"]["cpu"], "1500m");
    assert!(
        c["resources"]["requests"]["memory"]
            .as_str()
            .unwrap()
            .ends_with("Mi")
    );
    assert_eq!(c["envFrom"][0]["secretRef"]["name"], "faultline-store");
    assert_eq!(c["envFrom"][1]["secretRef"]["name"], "faultline-judge");
    // The agents file travels in the ConfigMap, its prompt beside it.
    assert_eq!(
        pod["volumes"][0]["configMap"]["name"],
        config_map["metadata"]["name"]
    );
    let agents = config_map["data"]["agents.toml"].as_str().unwrap();
    assert!(
        agents.contains("prompt = \"prompt-stratus.md\""),
        "{agents}"
    );
    assert!(agents.contains("MODEL = \"small\""), "{agents}");
    assert_eq!(
        config_map["data"]["prompt-stratus.md"],
        "Diagnose {{problem}} and fix it.\n"
    );
    // The same command emits the same names: applying it again updates, never duplicates.
    let (_, again, _) = emitted(work.path(), &["--parallelism", "4"]);
    assert_eq!(again["metadata"]["name"], job["metadata"]["name"]);
}

#[test]
fn emitting_a_job_refuses_what_pods_cannot_share() {
    let work = setup();
    let mut args = EVAL.to_vec();
    let at = args
        .iter()
        .position(|a| *a == "s3://evals/board-7")
        .unwrap();
    args[at] = "runs/local";
    let out = collector(&[&args[..], &["--emit-job"]].concat(), work.path());
    assert_eq!(out.status.code(), Some(1), "{}", e2e::text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("s3://"),
        "{}",
        e2e::text(&out)
    );
    let out = collector(
        &[EVAL, &["--emit-job", "--shard-count", "2"]].concat(),
        work.path(),
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--shards"),
        "{}",
        e2e::text(&out)
    );
}

#[test]
fn the_manifests_pass_a_server_dry_run_and_on_cluster_applies_them() {
    let work = setup();
    let (config_map, _, _) = emitted(work.path(), &[]);
    let live = e2e::live::up_app("hotel-reservation", &["--bare"]);
    let file = work.path().join("configmap.yaml");
    std::fs::write(&file, serde_norway::to_string(&config_map).unwrap()).unwrap();
    let dry = live.ok(&[
        "apply",
        "--dry-run=server",
        "-f",
        file.to_str().unwrap(),
        "-o",
        "json",
    ]);
    let dry: Value = serde_json::from_str(&dry).unwrap();
    assert_eq!(dry["kind"], "ConfigMap");
    assert!(
        dry["metadata"]["uid"].is_string(),
        "the server filled it in: {dry:#}"
    );
    assert!(
        live.kubectl(&[
            "get",
            "configmap",
            dry["metadata"]["name"].as_str().unwrap()
        ])
        .status
        .code()
            != Some(0),
        "a dry run stores nothing"
    );
    // --on-cluster applies the ConfigMap for real; this API serves no batch/v1 Jobs, and says so.
    let kc = live.kubeconfig.to_str().unwrap().to_string();
    let out = collector(
        &[
            EVAL,
            &["--on-cluster", "--shards", "2", "--kubeconfig", &kc],
        ]
        .concat(),
        work.path(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", e2e::text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("does not serve batch/v1 Jobs"),
        "{}",
        e2e::text(&out)
    );
    let name = dry["metadata"]["name"].as_str().unwrap();
    let applied: Value =
        serde_json::from_str(&live.ok(&["get", "configmap", name, "-o", "json"])).unwrap();
    assert_eq!(
        applied["metadata"]["labels"]["app.kubernetes.io/component"],
        "eval"
    );
    assert_eq!(
        applied["data"], config_map["data"],
        "the agents file as emitted"
    );
}
