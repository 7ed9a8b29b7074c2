//! Shared test setup: the local OpenAI-compatible server, agent outputs written in ITBench's
//! layout, and judge configurations pointed at the server.

#![allow(dead_code)]

pub mod server;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use judge::layout::{self, Item, Scan};
use judge::llm::{Llm, LlmConfig, StructuredMode};
use judge::prices::PriceTable;
use judge::rubric::Rubric;
use judge::runner::RunConfig;
use judge::store::Cache;
use judge::truth::{self, LoadedTruth};
use schemas::agent_output::{AgentEntity, AgentOutput};

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/itbench")
}

pub fn setup() {
    judge::llm::install_crypto_provider();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

pub fn truths() -> std::collections::BTreeMap<String, Arc<LoadedTruth>> {
    truth::load(&fixtures().join("judge_inputs/ground_truths.json")).unwrap()
}

/// Writes `trials` outputs for each of the first `problems` fixture ground truths, in ITBench's
/// layout. Each names the right root cause and carries a unique tag plus `extra` in its diagnosis.
pub fn write_outputs(
    dir: &Path,
    problems: usize,
    trials: usize,
    extra: impl Fn(&str, usize) -> String,
) {
    for (id, t) in truths().iter().take(problems) {
        let rc = t.truth.components.iter().find(|c| c.root_cause).unwrap();
        let name = rc
            .name
            .clone()
            .unwrap_or_else(|| rc.filter[0].replace(".*", "x").replace("\\b", ""));
        for trial in 1..=trials {
            let out = AgentOutput {
                diagnosis: format!(
                    "case-{id}-{trial}: the fault is in {name}. {}",
                    extra(id, trial)
                ),
                entities: vec![AgentEntity {
                    name: format!(
                        "{}/{}/{}",
                        rc.namespace.as_deref().unwrap_or("default"),
                        rc.kind,
                        name
                    ),
                    contributing_factor: true,
                    reasoning: format!("{name} was changed"),
                    ..Default::default()
                }],
                ..Default::default()
            };
            let path = dir
                .join(id)
                .join(trial.to_string())
                .join("outputs/agent_output.json");
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, serde_json::to_vec(&out).unwrap()).unwrap();
        }
    }
}

pub fn items(outputs: &Path, agent: &str) -> Vec<Item> {
    let mut scan = Scan::default();
    layout::scan(outputs, agent, None, &truths(), &mut scan).unwrap();
    scan.items
}

pub fn llm_config(base_url: &str) -> LlmConfig {
    LlmConfig {
        base_url: base_url.to_string(),
        api_key: "test-key".into(),
        model: "judge-test".into(),
        temperature: 0.0,
        seed: None,
        max_tokens: None,
        structured: StructuredMode::Auto,
        timeout: Duration::from_millis(500),
        max_attempts: 12,
        backoff_base: Duration::from_millis(2),
        backoff_cap: Duration::from_millis(40),
        rate: None,
        burst: 4,
    }
}

pub fn run_config(llm: LlmConfig, out_dir: &Path, cache: Option<&Path>) -> RunConfig {
    RunConfig {
        rubric: Rubric::default_rubric(),
        llm: Some(Arc::new(Llm::new(llm).unwrap())),
        samples: 1,
        concurrency: 8,
        cache: cache.map(Cache::new),
        out_dir: out_dir.to_path_buf(),
        prices: PriceTable::built_in(),
        exchanges: 3,
        pass_k: None,
        progress: false,
        trial_outputs: false,
    }
}

/// The first root cause of a ground truth and a name that matches it: its own, or one made from
/// its first name filter.
pub fn root_cause(
    truth: &judge::truth::LoadedTruth,
) -> (&schemas::ground_truth::Component, String) {
    let rc = truth
        .truth
        .components
        .iter()
        .find(|c| c.root_cause)
        .expect("a root cause");
    let name = rc
        .name
        .clone()
        .unwrap_or_else(|| rc.filter[0].replace(".*", "x").replace("\\b", ""));
    (rc, name)
}
