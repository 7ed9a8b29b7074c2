//! The diagnosis judged in the loop, with the `judge` library (`judge::in_loop`): deterministic
//! metrics and pass rule always, the checklist LLM when `JUDGE_*` configures one. A judge failure
//! is recorded beside the deterministic scores; it never fails the session.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use judge::in_loop::{self, InLoop};
use judge::llm::Llm;
use judge::truth::LoadedTruth;
use schemas::AgentOutput;
use schemas::run_result::DiagnosisRecord;

/// How diagnoses are judged; shared by every session of an evaluation.
#[derive(Clone, Default)]
pub struct Judging {
    /// None: deterministic metrics and pass rule only.
    pub llm: Option<Arc<Llm>>,
    /// The verdict cache shared with `judge run`.
    pub cache_dir: Option<PathBuf>,
}

impl Judging {
    /// The judge model configured by `JUDGE_BASE_URL` / `JUDGE_MODEL` / `JUDGE_API_KEY`, and the
    /// cache of `JUDGE_CACHE_DIR`.
    pub fn from_env() -> anyhow::Result<Judging> {
        // The judge reads its settings; each session then gets its own log directory and names.
        let settings = InLoop::from_env(PathBuf::new(), "", "")?;
        Ok(Judging {
            llm: settings.llm,
            cache_dir: settings.cache_dir,
        })
    }

    /// Which judge decides, for people reading a summary.
    pub fn describe(&self) -> String {
        match &self.llm {
            Some(llm) => format!("checklist LLM {}", llm.config.model),
            None => "deterministic (no JUDGE_* model configured)".into(),
        }
    }
}

/// Judges one diagnosis against its ground truth; the verdict log is kept in `log_dir`.
pub async fn judge(
    output: &AgentOutput,
    truth: &LoadedTruth,
    how: &Judging,
    log_dir: &Path,
    agent: &str,
    trial: &str,
) -> DiagnosisRecord {
    let mut cfg = InLoop::new(log_dir, agent, trial);
    cfg.llm = how.llm.clone();
    cfg.cache_dir = how.cache_dir.clone();
    let mut record = in_loop::judge_diagnosis(output, truth, &cfg).await;
    record.submitted = true;
    record
}

/// The record of a session without a diagnosis.
pub fn not_submitted() -> DiagnosisRecord {
    in_loop::not_submitted()
}
