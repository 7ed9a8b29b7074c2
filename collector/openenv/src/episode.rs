//! One episode: a live session (`session::Session`) whose agent is the OpenEnv client. `reset`
//! starts the session and hands the client what a sandboxed agent is handed (its task, the
//! session's endpoints, the tools); a step is one call of the session's own MCP tools, made over
//! its MCP server as any agent's call is (the same command rules, audit and rollback); the
//! `submit` tool goes to the session's submission API, and once the last stage is in the
//! session is finished and graded, and the reward read from its run record.
//!
//! The client never sees the problem's id or its ground truth until the episode is done: the task
//! and tools name the application, as a sandboxed agent's do, and the record comes back with the
//! reward.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use problems::{Catalog, Dur, ProblemSpec};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use schemas::run_result::{AgentSandbox, RunResult};
use serde_json::{Map, Value, json};
use session::{Handover, Judging, RemoteLauncher, Session, SessionOptions, Stage, Stages, Target};
use tokio::sync::oneshot;

use crate::protocol::{Action, Code, Observation, Refusal, ResetArgs, State, Variant};

/// What every episode of a server shares.
pub struct Settings {
    pub catalog: Arc<Catalog>,
    /// Globs over the problem ids the server offers.
    pub offer: String,
    /// Where each episode's run is written, as `<out>/<episode id>`.
    pub out: PathBuf,
    /// Wall-clock time an episode has.
    pub time_limit: Duration,
    /// How long the failure has been going on when an episode starts.
    pub since_onset: Dur,
    pub judging: Judging,
    /// The agent's name in the records.
    pub agent: String,
}

/// The name of the tool that submits a stage.
const SUBMIT: &str = "submit";

/// A running or finished episode.
pub struct Episode {
    pub id: String,
    steps: u64,
    /// The session's stage, as its submission API sees it.
    stages: Stages,
    tools: RunningService<RoleClient, ()>,
    listed: Vec<Value>,
    /// Each step as a JSON line: the run's `agent.stdout`.
    log: std::fs::File,
    session: Option<Following>,
    interrupt: Option<oneshot::Sender<()>>,
    /// The reward's parts and the run record, once done.
    outcome: Option<(session::Reward, Value)>,
}

/// What a step gives back.
pub struct Stepped {
    pub observation: Observation,
    pub reward: Option<f64>,
    pub done: bool,
    pub metadata: Option<Value>,
}

impl Episode {
    /// Starts an episode; answers its first observation.
    pub async fn start(
        settings: &Settings,
        args: ResetArgs,
    ) -> Result<(Episode, Observation), Refusal> {
        let (problem, seed) = choose(settings, &args)?;
        let id = match args.episode_id {
            Some(id) => id,
            None => uuid::Uuid::new_v4().simple().to_string(),
        };
        crate::protocol::check_episode_id(&id)?;
        let out = settings.out.join(&id);
        if out.exists() {
            return Err(Refusal::new(
                Code::ValidationError,
                format!(
                    "episode `{id}` exists already (its run is {})",
                    out.display()
                ),
            ));
        }
        let target = Target::Live {
            problem: Box::new(problem),
            seed,
            no_noise: args.variant == Some(Variant::Quiet),
            speed: 1.0,
            since_onset: settings.since_onset,
        };
        let opts = SessionOptions {
            judging: settings.judging.clone(),
            ..SessionOptions::remote(&settings.agent, target, out, settings.time_limit)
        };
        let factory = |e: anyhow::Error| {
            Refusal::new(Code::FactoryError, format!("starting the episode: {e:#}"))
        };
        let (interrupt, interrupted) = oneshot::channel::<()>();
        let (task, ready) = follow(settings.catalog.clone(), opts, interrupted).map_err(factory)?;
        let (handover, stages) = match ready.await {
            Ok(started) => started.map_err(factory)?,
            Err(_) => return Err(factory(anyhow::anyhow!("the session's thread ended"))),
        };
        let (tools, listed) = match connect(&handover.mcp_url).await {
            Ok(t) => t,
            Err(e) => {
                let _ = interrupt.send(());
                let _ = task.result.await;
                return Err(factory(e));
            }
        };
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(&handover.stdout)
            .map_err(|e| factory(e.into()))?;
        let observation = Observation {
            instruction: Some(handover.prompt.clone()),
            endpoints: Some(json!({
                "kubernetes": handover.endpoints.kubernetes,
                "prometheus": handover.endpoints.prometheus,
                "jaeger": handover.endpoints.jaeger,
                "loki": handover.endpoints.loki,
                "submit": handover.submit_url,
                "mcp": handover.mcp_url,
                "kubeconfig": handover.endpoints.kubeconfig(),
            })),
            tools: Some(listed.clone()),
            stage: stages.now().name().into(),
            ..Observation::default()
        };
        let episode = Episode {
            id,
            steps: 0,
            stages,
            tools,
            listed,
            log,
            session: Some(task),
            interrupt: Some(interrupt),
            outcome: None,
        };
        Ok((episode, observation))
    }

    /// The tools a step may call.
    pub fn tools(&self) -> &[Value] {
        &self.listed
    }

    pub fn state(&self) -> State {
        State {
            episode_id: Some(self.id.clone()),
            step_count: self.steps,
            stage: self.stage().name().into(),
        }
    }

    /// Runs one tool call; after the last stage's submission, the graded end of the episode.
    pub async fn step(&mut self, action: Action) -> Result<Stepped, Refusal> {
        if self.outcome.is_some() || self.session.as_ref().is_some_and(Following::is_finished) {
            // The time limit ended the session: its record is the episode's end.
            return self.done(None).await;
        }
        if !self
            .listed
            .iter()
            .any(|t| t["name"].as_str() == Some(action.tool.as_str()))
        {
            let names: Vec<&str> = self
                .listed
                .iter()
                .filter_map(|t| t["name"].as_str())
                .collect();
            return Err(Refusal::new(
                Code::ValidationError,
                format!(
                    "no tool `{}` (the tools: {})",
                    action.tool,
                    names.join(", ")
                ),
            ));
        }
        self.steps += 1;
        let (output, error) = self.call(&action).await;
        self.record(&action, &output, error);
        let stage = if action.tool == SUBMIT && !error {
            let stage = self.stages.settled().await;
            if matches!(stage, Stage::Done | Stage::TearingDown) {
                return self.done(Some((output, error))).await;
            }
            stage
        } else {
            self.stage()
        };
        Ok(Stepped {
            observation: Observation {
                output: Some(output),
                error: Some(error),
                stage: stage.name().into(),
                ..Observation::default()
            },
            reward: None,
            done: false,
            metadata: None,
        })
    }

    /// One tool call through the session's MCP server: its text, and whether it failed.
    async fn call(&self, action: &Action) -> (String, bool) {
        let params =
            CallToolRequestParams::new(action.tool.clone()).with_arguments(action.args.clone());
        match self.tools.call_tool(params).await {
            Ok(result) => {
                let text: Vec<String> = result
                    .content
                    .iter()
                    .filter_map(|c| c.as_text().map(|t| t.text.clone()))
                    .collect();
                (text.join("\n"), result.is_error == Some(true))
            }
            Err(e) => (format!("the tool call failed: {e}"), true),
        }
    }

    fn record(&mut self, action: &Action, output: &str, error: bool) {
        let line = json!({
            "step": self.steps,
            "tool": action.tool,
            "args": action.args,
            "error": error,
            "output": output,
        });
        if let Err(e) = writeln!(self.log, "{line}") {
            tracing::warn!("recording step {} of episode {}: {e}", self.steps, self.id);
        }
    }

    /// The session's stage; `Done` once the episode's outcome is known.
    fn stage(&self) -> Stage {
        if self.outcome.is_some() {
            Stage::Done
        } else {
            self.stages.now()
        }
    }

    /// The episode's end: the session finished and graded, the reward from its record.
    async fn done(&mut self, last: Option<(String, bool)>) -> Result<Stepped, Refusal> {
        if self.outcome.is_none() {
            let task = self
                .session
                .take()
                .ok_or_else(|| Refusal::new(Code::SessionError, "the episode was closed"))?;
            let run = task
                .result
                .await
                .map_err(|_| Refusal::new(Code::ExecutionError, "the session's thread ended"))?
                .map_err(|e| {
                    Refusal::new(
                        Code::ExecutionError,
                        format!("finishing the episode: {e:#}"),
                    )
                })?;
            let record = serde_json::to_value(&run).unwrap_or(Value::Null);
            self.outcome = Some((session::reward(&run), record));
        }
        let Some((reward, record)) = &self.outcome else {
            unreachable!("the outcome was set above")
        };
        let (output, error) = last.unwrap_or_else(|| {
            let why = record["error"].as_str().unwrap_or("the episode is over");
            (format!("the episode is over: {why}"), false)
        });
        Ok(Stepped {
            observation: Observation {
                output: Some(output),
                error: Some(error),
                stage: Stage::Done.name().into(),
                result: serde_json::to_value(reward).ok(),
                ..Observation::default()
            },
            reward: Some(reward.reward),
            done: true,
            metadata: Some(json!({ "run": record, "episode_id": self.id })),
        })
    }

    /// Ends the episode: a session still running is interrupted (no run is written as finished)
    /// and its environment stopped before this returns.
    pub async fn close(mut self) {
        if let Some(interrupt) = self.interrupt.take() {
            let _ = interrupt.send(());
        }
        if let Some(task) = self.session.take() {
            match task.result.await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::debug!("episode {} closed: {e:#}", self.id),
                Err(_) => tracing::warn!("episode {}: the session's thread ended", self.id),
            }
        }
        if let Err(e) = self.tools.cancel().await {
            tracing::debug!("closing the MCP client of episode {}: {e}", self.id);
        }
    }
}

/// A session followed to its end on a thread of its own: its futures hold the environment across
/// waits and are not `Send`, so they run on a current-thread runtime rather than the server's pool.
struct Following {
    thread: std::thread::JoinHandle<()>,
    result: oneshot::Receiver<anyhow::Result<RunResult>>,
}

impl Following {
    fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }
}

/// What the client is handed, and the session's stage, once its clock runs.
type Started = anyhow::Result<(Handover, Stages)>;

/// Starts the session and launches its (remote) agent on a thread of its own, answers what the
/// agent is handed once the clock runs, and follows the session to its end there.
fn follow(
    catalog: Arc<Catalog>,
    opts: SessionOptions,
    interrupted: oneshot::Receiver<()>,
) -> anyhow::Result<(Following, oneshot::Receiver<Started>)> {
    let (ready, started) = oneshot::channel();
    let (done, result) = oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("episode".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            let followed = match runtime {
                Ok(rt) => rt.block_on(start_and_follow(&catalog, opts, ready, interrupted)),
                Err(e) => Err(e.into()),
            };
            let _ = done.send(followed);
        })?;
    Ok((Following { thread, result }, started))
}

async fn start_and_follow(
    catalog: &Catalog,
    opts: SessionOptions,
    ready: oneshot::Sender<Started>,
    interrupted: oneshot::Receiver<()>,
) -> anyhow::Result<RunResult> {
    // Launched before the client is answered: its first submission must find the stage open.
    let launcher = RemoteLauncher::new(AgentSandbox::Remote);
    let session = match Session::start_launched(catalog, opts, &launcher).await {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Err(e));
            anyhow::bail!("the session did not start");
        }
    };
    let _ = ready.send(Ok((session.handover().clone(), session.stages())));
    session
        .follow(async {
            let _ = interrupted.await;
        })
        .await
}

/// Connects to the session's MCP server and lists its tools as the client is shown them.
async fn connect(url: &str) -> anyhow::Result<(RunningService<RoleClient, ()>, Vec<Value>)> {
    let client = ()
        .serve(StreamableHttpClientTransport::from_uri(url.to_string()))
        .await
        .map_err(|e| anyhow::anyhow!("connecting to the session's MCP server: {e}"))?;
    let tools = client
        .list_all_tools()
        .await
        .map_err(|e| anyhow::anyhow!("listing the session's tools: {e}"))?;
    let listed = tools
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "description": t.description,
                "input_schema": Value::Object(Map::clone(&t.input_schema)),
            })
        })
        .collect();
    Ok((client, listed))
}

/// The episode's problem and seed: the one asked for, or one of the suite's drawn by the seed.
fn choose(settings: &Settings, args: &ResetArgs) -> Result<(ProblemSpec, u64), Refusal> {
    let invalid = |m: String| Refusal::new(Code::ValidationError, m);
    let offered = settings
        .catalog
        .problems_matching(&settings.offer)
        .map_err(invalid)?;
    let seed = args
        .seed
        .unwrap_or_else(|| uuid::Uuid::new_v4().as_u64_pair().0);
    if let Some(id) = &args.problem {
        let problem = offered.iter().find(|p| &p.id == id).ok_or_else(|| {
            invalid(format!(
                "problem `{id}` is not offered by this server (its --problems: `{}`)",
                settings.offer
            ))
        })?;
        return Ok(((*problem).clone(), seed));
    }
    let suite = args.suite.as_deref().unwrap_or("*");
    let drawn = settings
        .catalog
        .problems_matching(suite)
        .map_err(|e| invalid(format!("suite: {e}")))?;
    let mut pool: Vec<&ProblemSpec> = drawn
        .into_iter()
        .filter(|p| offered.iter().any(|o| o.id == p.id))
        .collect();
    pool.sort_by(|a, b| a.id.cmp(&b.id));
    if pool.is_empty() {
        return Err(invalid(format!(
            "suite `{suite}` has no problem this server offers (its --problems: `{}`)",
            settings.offer
        )));
    }
    let index = usize::try_from(mix(seed) % pool.len() as u64).unwrap_or(0);
    Ok((pool[index].clone(), seed))
}

/// SplitMix64's finaliser: consecutive seeds draw unrelated problems, and a seed always the same.
fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(offer: &str) -> Settings {
        Settings {
            catalog: Arc::new(Catalog::builtin().unwrap()),
            offer: offer.into(),
            out: PathBuf::from("/nonexistent"),
            time_limit: Duration::from_secs(60),
            since_onset: Dur::from_secs(300),
            judging: Judging::default(),
            agent: "test".into(),
        }
    }

    #[test]
    fn a_seed_draws_the_same_problem_of_the_suite_every_time() {
        let s = settings("*");
        let args = ResetArgs {
            suite: Some("hotel-*".into()),
            seed: Some(11),
            ..ResetArgs::default()
        };
        let (first, seed) = choose(&s, &args).unwrap();
        assert_eq!(seed, 11);
        assert!(first.id.starts_with("hotel-"), "{}", first.id);
        assert_eq!(choose(&s, &args).unwrap().0.id, first.id);
        let drawn: std::collections::BTreeSet<String> = (0..64)
            .map(|seed| {
                let a = ResetArgs {
                    suite: Some("hotel-*".into()),
                    seed: Some(seed),
                    ..ResetArgs::default()
                };
                choose(&s, &a).unwrap().0.id
            })
            .collect();
        assert!(drawn.len() > 3, "seeds draw different problems: {drawn:?}");
    }

    #[test]
    fn a_problem_outside_the_offer_is_refused_with_the_offer() {
        let s = settings("hotel-*");
        let social = s
            .catalog
            .problems()
            .find(|p| p.id.starts_with("social-"))
            .unwrap()
            .id
            .clone();
        let args = ResetArgs {
            problem: Some(social.clone()),
            ..ResetArgs::default()
        };
        let refused = choose(&s, &args).unwrap_err();
        assert_eq!(refused.code, Code::ValidationError);
        assert!(refused.message.contains(&social) && refused.message.contains("hotel-*"));
        let none = ResetArgs {
            suite: Some("social-*".into()),
            ..ResetArgs::default()
        };
        assert!(
            choose(&s, &none)
                .unwrap_err()
                .message
                .contains("no problem")
        );
    }
}
