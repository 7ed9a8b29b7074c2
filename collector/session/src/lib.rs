//! Sessions: one agent, one problem, start to finish ([`Session`]; `collector live` runs one, and
//! [`eval`] schedules many into a board). The environment starts
//! (a live problem, or a dataset replayed as if it were happening now), the agent is handed its
//! task, a kubeconfig, the URLs of the APIs and of the submission API, and runs in its own process
//! group under a time limit. Its diagnosis is judged as soon as it is submitted; its mitigation is
//! graded on a fork of the world taken at the instant it is submitted (or when the time runs out
//! or the agent ends). Then the agent is ended, the environment stopped and the run written:
//! dataset with the audit of every request, ground truth, the agent's output streams, the
//! trajectory, and `run.json` last.
//!
//! Nothing the agent is given names the problem: its task, kubeconfig and environment name the
//! application and the APIs; the run is written under a random name until it is finished (see
//! [`staging_dir`]); the ground truth is judged from memory and reaches the run directory only
//! after the agent has ended; and `collector live` keeps the problem id out of the process list.

pub mod agent;
mod diagnosis;
pub mod env;
pub mod eval;
pub mod prompt;
pub mod record;
pub mod sandbox;
pub mod stages;
pub mod submit;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use apis::replay::Endpoints;
use chrono::Utc;
use problems::Catalog;
use schemas::AgentOutput;
use schemas::run_result::{
    AgentSandbox, AgentUsage, DiagnosisRecord, MitigationRecord, RUN_RESULT_VERSION, RunMode,
    RunResult, SessionEnd,
};
use tokio::sync::mpsc;

pub use agent::{CommandLauncher, Exit, Launcher, RemoteEnd, RemoteLauncher, RunningAgent};
pub use diagnosis::Judging;
pub use env::Target;
use env::{Ended, Env};
pub use record::{RUN_FILE, Reward, reward, summary};
use stages::Progress;
pub use stages::Stage;
use submit::{Submission, SubmitState};

/// The ground truth's file name in a run (and beside a dataset).
pub const GROUND_TRUTH_FILE: &str = "ground_truth.json";
/// The noise played on a cluster (evaluator-only, like the ground truth).
pub const NOISE_FILE: &str = "noise.json";

/// The agent under evaluation.
#[derive(Debug, Clone)]
pub struct AgentSpec {
    /// Names the agent in records and leaderboards.
    pub name: String,
    /// A shell command line.
    pub command: String,
    /// Extra environment for it.
    pub env: Vec<(String, String)>,
    /// A prompt template replacing the built-in one (see [`prompt::PLACEHOLDERS`]).
    pub prompt: Option<String>,
}

/// One session.
#[derive(Clone)]
pub struct SessionOptions {
    pub agent: AgentSpec,
    pub target: Target,
    /// Wall-clock time the agent has.
    pub time_limit: Duration,
    /// The run directory.
    pub out: PathBuf,
    pub trial: String,
    /// Copy the agent's output to stderr as it comes.
    pub echo: bool,
    pub judging: Judging,
    /// Where unfinished runs are written; default `.unfinished/` beside `out`.
    pub staging: Option<PathBuf>,
    /// An OpenAI- or Anthropic-compatible API (base URL with its `/v1`) that the agent's LLM
    /// calls go to through a counting proxy: the session records the tokens they used.
    pub llm_upstream: Option<String>,
    /// Where the agent's command runs.
    pub isolation: Isolation,
    /// How long an agent that has submitted every stage may go on before it is ended (SREGym
    /// gives 60 s: [`AFTER_LAST_STAGE`]); one that exits sooner ends the session sooner.
    pub after_last_stage: Duration,
    /// Where the session listens: free loopback ports when the port is 0, else consecutive ports
    /// from it ([`PORTS`]), for a front end whose agent is told fixed URLs (a Harbor task).
    pub listen: SocketAddr,
}

/// The ports of a session listening from a fixed base, by offset: the environment's Kubernetes
/// API, Prometheus, Jaeger, Loki, and the Kubernetes API over TLS (as `collector env up` lays
/// them out), then the submission API, the MCP server and the LLM proxy.
pub const PORTS: [(&str, u16); 8] = [
    ("kubernetes", 0),
    ("prometheus", 1),
    ("jaeger", 2),
    ("loki", 3),
    ("kubernetes_https", 4),
    ("submit", 5),
    ("mcp", 6),
    ("llm", 7),
];

/// Free loopback ports.
pub fn any_port() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// The offset of a named port in [`PORTS`].
pub fn port_offset(name: &str) -> u16 {
    PORTS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |(_, offset)| *offset)
}

impl SessionOptions {
    /// A session whose agent is a remote client of a front end (started with a
    /// [`RemoteLauncher`]): no command line, no sandbox of ours, nothing echoed, judged
    /// deterministically, and ended as soon as its last stage is in (the client has nothing left
    /// to read); on free ports.
    pub fn remote(agent: &str, target: Target, out: PathBuf, time_limit: Duration) -> Self {
        SessionOptions {
            agent: AgentSpec {
                name: agent.to_string(),
                command: String::new(),
                env: Vec::new(),
                prompt: None,
            },
            target,
            time_limit,
            out,
            trial: "1".into(),
            echo: false,
            judging: Judging::default(),
            staging: None,
            llm_upstream: None,
            isolation: Isolation::None,
            after_last_stage: Duration::ZERO,
            listen: any_port(),
        }
    }
}

/// How long SREGym lets an agent run after its last stage.
pub const AFTER_LAST_STAGE: Duration = Duration::from_secs(60);

/// Where an agent's command line runs.
#[derive(Debug, Clone, Default)]
pub enum Isolation {
    /// As a process of the session's user, seeing what that user sees.
    #[default]
    None,
    /// In a sandbox ([`sandbox`]): the system's tools, its home, the session's endpoints, these
    /// paths read-only, and the internet when `network` says.
    Sandbox {
        binds: Vec<PathBuf>,
        network: sandbox::AgentNetwork,
    },
}

/// How long an agent has to exit after SIGTERM before it is killed.
const GRACE: Duration = Duration::from_secs(5);

/// What happened while the agent ran.
#[derive(Default)]
struct Log {
    diagnosis: Option<(AgentOutput, Duration)>,
    /// The judging of the diagnosis, running while the agent goes on.
    judged: Option<tokio::task::JoinHandle<DiagnosisRecord>>,
    /// What the mitigation is graded on (from when it was submitted), and when.
    mitigation: Option<(env::Grading, Duration)>,
    usage: Option<AgentUsage>,
    submissions: Vec<record::SubmittedStep>,
}

/// Runs one session to its end with the agent's command line as its process (sandboxed as
/// `opts.isolation` says) and writes the run.
/// `interrupt` resolving (Ctrl-C) ends the session early: the agent is ended and the environment
/// stopped, but no `run.json` is written, so the unfinished run is never read as a result. Returns
/// the record written.
pub async fn run(
    catalog: &Catalog,
    opts: &SessionOptions,
    interrupt: impl Future<Output = ()>,
) -> anyhow::Result<RunResult> {
    let launcher: Box<dyn Launcher> = match &opts.isolation {
        Isolation::None => Box::new(agent::CommandLauncher {
            command: opts.agent.command.clone(),
            echo: opts.echo,
        }),
        // Refused before the environment starts when this host cannot build the sandbox.
        Isolation::Sandbox { binds, network } => Box::new(sandbox::SandboxLauncher::new(
            &opts.agent.command,
            opts.echo,
            binds.clone(),
            *network,
        )?),
    };
    Session::start(catalog, opts.clone())
        .await?
        .run(launcher.as_ref(), interrupt)
        .await
}

/// One session, driven step by step: [`Session::start`] brings the environment up and prepares
/// what the agent is handed ([`Session::handover`]); [`Session::launch`] starts the agent;
/// [`Session::wait`] follows its submissions until every stage is in, the agent ends, its time
/// runs out or `interrupt` resolves; [`Session::finish`] grades, stops the environment, writes
/// the records and publishes the run. A session that is not finished is ended with
/// [`Session::abort`], which stops the environment (a real cluster's faults are reverted).
pub struct Session {
    opts: SessionOptions,
    started_at: chrono::DateTime<Utc>,
    /// The run's staging directory (see [`staging_dir`]).
    dir: PathBuf,
    /// The agent's own directory (its task and kubeconfig, nothing else), removed when the session
    /// is dropped.
    _workdir: tempfile::TempDir,
    /// `None` once stopped.
    env: Option<Env>,
    servers: Servers,
    progress: Arc<Mutex<Progress>>,
    submissions: mpsc::Receiver<Submission>,
    handover: Handover,
    mcp_calls: Arc<AtomicU64>,
    llm_usage: Arc<apis::llm_proxy::UsageCounter>,
    truth: Arc<judge::truth::LoadedTruth>,
    agent: Option<Box<dyn RunningAgent>>,
    /// Where the agent runs, once launched.
    sandbox: Option<AgentSandbox>,
    /// When the agent was started.
    t0: Option<Instant>,
    /// How waiting ended, with why when the agent did not submit every stage.
    waited: Option<(SessionEnd, Option<String>)>,
    log: Log,
}

/// A session's stage, shared with its submission API: what a front end reads to answer its
/// client's submissions (see [`Session::stages`]).
#[derive(Clone)]
pub struct Stages(Arc<Mutex<Progress>>);

impl Stages {
    /// How often [`Stages::settled`] looks again.
    const POLL: Duration = Duration::from_millis(25);

    pub fn now(&self) -> Stage {
        lock(&self.0).stage()
    }

    /// The stage once the submission being evaluated is: a diagnosis is judged before the next
    /// stage opens (as in SREGym's conductor), so the agent's next step finds that stage open.
    /// At once when nothing is being evaluated.
    pub async fn settled(&self) -> Stage {
        loop {
            {
                let progress = lock(&self.0);
                if !progress.evaluating() {
                    return progress.stage();
                }
            }
            tokio::time::sleep(Self::POLL).await;
        }
    }
}

/// What an agent is handed: its task, its directory, its environment and the session's
/// endpoints. A [`Launcher`] starts the agent from it.
#[derive(Debug, Clone)]
pub struct Handover {
    /// The task, rendered from the prompt template (also in `workdir/prompt.md`).
    pub prompt: String,
    /// The agent's working directory, holding `prompt.md` and `kubeconfig`.
    pub workdir: PathBuf,
    /// The agent's environment (on top of what the launcher passes through).
    pub env: Vec<(String, String)>,
    /// The Kubernetes, Prometheus, Jaeger and Loki APIs.
    pub endpoints: Endpoints,
    /// The submission API's base URL (`POST {submit_url}/submit`).
    pub submit_url: String,
    /// The session's MCP server (Streamable HTTP).
    pub mcp_url: String,
    /// Where the agent's output streams are stored in the run.
    pub stdout: PathBuf,
    pub stderr: PathBuf,
}

impl Session {
    /// Starts the environment, the submission API, the MCP server (and the LLM proxy when
    /// asked), and writes what the agent will be handed.
    pub async fn start(catalog: &Catalog, opts: SessionOptions) -> anyhow::Result<Session> {
        let started_at = Utc::now();
        let dir = staging_dir(&opts.out, opts.staging.as_deref())?;
        let workdir = tempfile::Builder::new()
            .prefix("agent-")
            .tempdir()
            .context("creating the agent's working directory")?;
        let env = Env::start(catalog, &opts.target, &dir, opts.listen).await?;
        let mut servers = Servers::on(opts.listen);
        let progress = Arc::new(Mutex::new(Progress::new(env.mitigates())));
        let (tx, submissions) = mpsc::channel(4);
        let app = env.app();
        let submit_state = Arc::new(SubmitState {
            progress: progress.clone(),
            app: app.clone(),
            submissions: tx,
        });
        let handed = async {
            let (listener, submit_url) = servers.bind("submit").await?;
            servers.serve_on(listener, submit::router(submit_state, &submit_url)?);
            let dirs = (dir.as_path(), workdir.path());
            hand_over(&env, &opts, &app, &submit_url, dirs, &mut servers).await
        }
        .await;
        let (handover, mcp_calls, llm_usage) = match handed {
            Ok(h) => h,
            Err(e) => {
                drop(servers);
                if let Err(stop) = env.stop(&dir).await {
                    tracing::warn!("stopping the environment: {stop:#}");
                }
                return Err(e);
            }
        };
        let truth = Arc::new(env.truth());
        Ok(Session {
            opts,
            started_at,
            dir,
            _workdir: workdir,
            env: Some(env),
            servers,
            progress,
            submissions,
            handover,
            mcp_calls,
            llm_usage,
            truth,
            agent: None,
            sandbox: None,
            t0: None,
            waited: None,
            log: Log::default(),
        })
    }

    /// What the agent is handed.
    pub fn handover(&self) -> &Handover {
        &self.handover
    }

    /// The stage the session waits for (`Done` once every stage is submitted).
    pub fn stage(&self) -> Stage {
        lock(&self.progress).stage()
    }

    /// The session's stage, readable by a front end while the session is followed elsewhere.
    pub fn stages(&self) -> Stages {
        Stages(self.progress.clone())
    }

    /// Starts the session and launches its agent; a session whose agent cannot be launched is
    /// stopped again.
    pub async fn start_launched(
        catalog: &Catalog,
        opts: SessionOptions,
        launcher: &dyn Launcher,
    ) -> anyhow::Result<Session> {
        let mut session = Session::start(catalog, opts).await?;
        match session.launch(launcher) {
            Ok(()) => Ok(session),
            Err(e) => {
                session.abort().await;
                Err(e)
            }
        }
    }

    /// Starts the agent; the session's clock (time to diagnose, time to mitigate, the time
    /// limit) starts with it.
    pub fn launch(&mut self, launcher: &dyn Launcher) -> anyhow::Result<()> {
        anyhow::ensure!(self.agent.is_none(), "the agent was launched already");
        if let Some(env) = &self.env {
            let given: Vec<&str> = self
                .opts
                .agent
                .env
                .iter()
                .map(|(k, _)| k.as_str())
                .collect();
            check_handover(&self.handover, &env.problem_id(), &given)?;
        }
        // The stage opens before the agent starts: an agent that submits at once must not find
        // the session still setting up.
        self.t0 = Some(Instant::now());
        lock(&self.progress).start();
        self.agent = Some(launcher.launch(&self.handover)?);
        self.sandbox = Some(launcher.sandbox());
        Ok(())
    }

    /// Follows the agent's submissions until every stage is submitted, the agent ends, its time
    /// limit is reached or `interrupt` resolves; returns how it ended.
    pub async fn wait(
        &mut self,
        interrupt: impl Future<Output = ()>,
    ) -> anyhow::Result<SessionEnd> {
        let (Some(agent), Some(t0), Some(env)) = (self.agent.as_mut(), self.t0, self.env.as_ref())
        else {
            bail!("the agent was not launched");
        };
        let remaining = self.opts.time_limit.saturating_sub(t0.elapsed());
        let limit = tokio::time::sleep(remaining);
        tokio::pin!(limit, interrupt);
        let waited = loop {
            tokio::select! {
                Some(s) = self.submissions.recv() => {
                    let with = Judge {
                        opts: &self.opts,
                        dir: &self.dir,
                        truth: &self.truth,
                        task: &self.handover.prompt,
                        progress: &self.progress,
                    };
                    on_submission(env, &with, &mut self.log, s, t0);
                    if lock(&self.progress).finished() {
                        break (SessionEnd::Submitted, None);
                    }
                }
                exit = agent.wait() => {
                    let exit = exit.context("waiting for the agent")?;
                    break if exit.success {
                        (SessionEnd::AgentExited, Some("the agent exited before submitting every stage".to_string()))
                    } else {
                        (SessionEnd::AgentFailed, Some(format!("the agent failed: {}", exit.description)))
                    };
                }
                () = &mut limit => break (SessionEnd::TimeLimit, Some(format!("time limit of {:?} reached", self.opts.time_limit))),
                () = &mut interrupt => break (SessionEnd::Interrupted, Some("interrupted".into())),
            }
        };
        let reason = waited.0;
        self.waited = Some(waited);
        Ok(reason)
    }

    /// Launches the agent, waits for it and finishes the session; the environment is stopped
    /// whatever happens.
    pub async fn run(
        mut self,
        launcher: &dyn Launcher,
        interrupt: impl Future<Output = ()>,
    ) -> anyhow::Result<RunResult> {
        match self.launch(launcher) {
            Ok(()) => self.follow(interrupt).await,
            Err(e) => {
                self.abort().await;
                Err(e)
            }
        }
    }

    /// Once launched: waits for the agent and finishes the session; the environment is stopped
    /// whatever happens.
    pub async fn follow(
        mut self,
        interrupt: impl Future<Output = ()>,
    ) -> anyhow::Result<RunResult> {
        match self.wait(interrupt).await {
            Ok(_) => self.finish().await,
            Err(e) => {
                self.abort().await;
                Err(e)
            }
        }
    }

    /// Grades what is left to grade, ends the agent, stops the environment, writes the
    /// trajectory and `run.json`, and moves the run to its place. An interrupted session is
    /// stopped without a `run.json` and answers an error.
    pub async fn finish(mut self) -> anyhow::Result<RunResult> {
        let Some(env) = self.env.take() else {
            bail!("the session was stopped already")
        };
        let concluded = self.conclude(&env).await;
        let logs = self.handover.workdir.join(AGENT_LOGS);
        if let Err(e) = keep_agent_logs(&logs, &self.dir.join("agent_logs")) {
            tracing::warn!("keeping the agent's logs from {}: {e}", logs.display());
        }
        let ended = env.stop(&self.dir).await;
        let end = concluded?;
        let ended = ended?;
        if end.reason == SessionEnd::Interrupted {
            bail!(
                "interrupted: the agent was ended and the environment stopped; what was recorded is in {} (unfinished: no {})",
                self.dir.display(),
                record::RUN_FILE
            );
        }
        let run = write_records(
            &self.opts,
            &self.dir,
            self.started_at,
            end,
            &mut self.log,
            ended,
        )
        .await?;
        std::fs::rename(&self.dir, &self.opts.out).with_context(|| {
            format!(
                "moving the finished run from {} to {}",
                self.dir.display(),
                self.opts.out.display()
            )
        })?;
        // The staging area goes once nothing is left in it (other sessions may be writing there).
        if let Some(staging) = self.dir.parent() {
            let _ = std::fs::remove_dir(staging);
        }
        Ok(run)
    }

    /// Ends the agent and stops the environment without grading or writing a result.
    pub async fn abort(mut self) {
        lock(&self.progress).tear_down();
        if let Some(agent) = self.agent.take()
            && let Err(e) = agent.end(GRACE).await
        {
            tracing::warn!("ending the agent: {e:#}");
        }
        self.servers = Servers::default();
        if let Some(env) = self.env.take()
            && let Err(e) = env.stop(&self.dir).await
        {
            tracing::warn!("stopping the environment: {e:#}");
        }
    }

    /// After waiting: grades the mitigation (a pending one on the world as it stands now) while
    /// the agent is ended, and says how the agent's part ended.
    async fn conclude(&mut self, env: &Env) -> anyhow::Result<End> {
        let (reason, error) = self.waited.take().unwrap_or((
            SessionEnd::Interrupted,
            Some("the session was not followed".into()),
        ));
        lock(&self.progress).tear_down();
        let t0 = self.t0.unwrap_or_else(Instant::now);
        // A mitigation not submitted is graded as the world stands when the agent's time is over.
        let pending_fork = match (&self.log.mitigation, reason) {
            (None, r) if r != SessionEnd::Interrupted => env.grading().map(|g| (g, t0.elapsed())),
            _ => None,
        };
        let mut agent = self.agent.take();
        if reason == SessionEnd::Submitted
            && let Some(agent) = agent.as_mut()
        {
            // Time to read the last answer and leave on its own, as a finished agent does.
            let _ = tokio::time::timeout(self.opts.after_last_stage, agent.wait()).await;
        }
        // The agent is ended while the mitigation is graded: the fork no longer needs it.
        let end_agent = async {
            match agent {
                Some(agent) => agent.end(GRACE).await.map(Some),
                None => Ok(None),
            }
        };
        let (status, mitigation) =
            tokio::join!(end_agent, grade_mitigation(&mut self.log, pending_fork));
        if let Some(exit) = status? {
            tracing::debug!("agent ended: {}", exit.description);
        }
        self.servers = Servers::default();
        let mitigation = mitigation?;
        let ttm = mitigation
            .as_ref()
            .filter(|(m, _)| m.success)
            .map(|(_, at)| at.as_secs_f64());
        let (problem_id, seed, noise, mode) = match &self.opts.target {
            Target::Live {
                problem,
                seed,
                no_noise,
                ..
            } => (
                problem.id.clone(),
                Some(*seed),
                Some(!no_noise),
                RunMode::Live,
            ),
            Target::Replay { .. } => (env.problem_id(), None, None, RunMode::Replay),
            Target::Kube { problem, .. } => (problem.id.clone(), None, None, RunMode::Live),
        };
        // Tokens measured by the proxy, when the agent's model calls went through it, else what
        // the agent reported on submit.
        let measured = self.llm_usage.snapshot();
        if measured.steps > 0 || measured.input_tokens > 0 {
            self.log.usage = Some(measured);
        }
        Ok(End {
            mcp_requests: self.mcp_calls.load(Ordering::Relaxed),
            reason,
            error: if reason == SessionEnd::Submitted {
                None
            } else {
                error
            },
            mitigation: mitigation.map(|(m, _)| m),
            ttm,
            prompt: self.handover.prompt.clone(),
            mode,
            problem_id,
            seed,
            noise,
            sandbox: self.sandbox,
        })
    }
}

/// Refuses a handover that names its problem (the leak scan's problem markers over every file of
/// the agent's directory and every variable the session gives it; the user's own `given`
/// variables are theirs): that would be faultline's bug, and the run would be worthless.
fn check_handover(handover: &Handover, problem_id: &str, given: &[&str]) -> anyhow::Result<()> {
    let mut texts = vec![handover.prompt.clone()];
    for entry in walk(&handover.workdir) {
        if let Ok(text) = std::fs::read_to_string(&entry) {
            texts.push(text);
        }
        texts.push(entry.to_string_lossy().into_owned());
    }
    texts.extend(
        handover
            .env
            .iter()
            .filter(|(k, _)| !given.contains(&k.as_str()))
            .map(|(k, v)| format!("{k}={v}")),
    );
    let leaks = runner::leak::scan_texts(
        texts.iter().map(String::as_str),
        &runner::leak::problem_markers(problem_id),
    );
    match leaks.first() {
        None => Ok(()),
        Some(leak) => bail!(
            "the agent's handover names its problem ({} in `{}`): not starting it",
            leak.marker,
            leak.text
        ),
    }
}

/// Every file below `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// How the agent's part ended.
struct End {
    /// HTTP requests to the session's MCP server (its tools' own API calls are audited as such).
    mcp_requests: u64,
    reason: SessionEnd,
    error: Option<String>,
    mitigation: Option<MitigationRecord>,
    ttm: Option<f64>,
    prompt: String,
    mode: RunMode,
    problem_id: String,
    seed: Option<u64>,
    noise: Option<bool>,
    sandbox: Option<AgentSandbox>,
}

/// The session's own servers (submission API, MCP, LLM proxy): they stop when this is dropped,
/// also when the session ends early on an error.
#[derive(Default)]
struct Servers {
    tasks: Vec<tokio::task::JoinHandle<std::io::Result<()>>>,
    /// The session's base address; free ports when `None` or port 0.
    base: Option<SocketAddr>,
}

impl Servers {
    fn on(base: SocketAddr) -> Servers {
        Servers {
            tasks: Vec::new(),
            base: Some(base),
        }
    }

    /// Serves a router on its loopback port (see [`PORTS`]); its base URL.
    async fn serve(&mut self, name: &str, router: axum::Router) -> anyhow::Result<String> {
        let (listener, url) = self.bind(name).await?;
        self.serve_on(listener, router);
        Ok(url)
    }

    /// The named server's port and its base URL, for a router that must know its own URL.
    async fn bind(&self, name: &str) -> anyhow::Result<(tokio::net::TcpListener, String)> {
        let base = self.base.unwrap_or_else(any_port);
        let listener = apis::replay::bind(base, port_offset(name)).await?;
        let url = format!("http://{}", listener.local_addr()?);
        Ok((listener, url))
    }

    fn serve_on(&mut self, listener: tokio::net::TcpListener, router: axum::Router) {
        self.tasks.push(tokio::spawn(
            async move { axum::serve(listener, router).await },
        ));
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        for s in &self.tasks {
            s.abort();
        }
    }
}

/// Writes the agent's kubeconfig and task, serves the MCP server (and the LLM proxy when asked),
/// and puts together the agent's environment; with the counters of its MCP and LLM use.
async fn hand_over(
    env: &Env,
    opts: &SessionOptions,
    app: &submit::AppInfo,
    submit_url: &str,
    dirs: (&Path, &Path),
    servers: &mut Servers,
) -> anyhow::Result<(Handover, Arc<AtomicU64>, Arc<apis::llm_proxy::UsageCounter>)> {
    let (dir, workdir) = dirs;
    let endpoints = env.endpoints();
    let kubeconfig = workdir.join("kubeconfig");
    std::fs::write(&kubeconfig, endpoints.kubeconfig())
        .with_context(|| format!("writing {}", kubeconfig.display()))?;
    let mcp_calls = Arc::new(AtomicU64::new(0));
    let mcp_targets = mcp::Targets {
        submit: Some(format!("{submit_url}/submit")),
        analysis: env.analysis()?,
        ..mcp::Targets::new(
            kubeconfig.clone(),
            endpoints.prometheus.clone(),
            endpoints.jaeger.clone(),
            endpoints.loki.clone(),
        )
    };
    let mcp_router = mcp::router(mcp_targets)
        .map_err(|e| anyhow::anyhow!("starting the MCP server: {e:?}"))?
        .layer(axum::middleware::from_fn_with_state(
            mcp_calls.clone(),
            count_request,
        ));
    let mcp_base = servers.serve("mcp", mcp_router).await?;
    let mcp_url = format!("{mcp_base}/mcp");
    let kubeconfig_path = kubeconfig.display().to_string();
    let values = prompt::values(
        app,
        &prompt::Pointers {
            kubeconfig: &kubeconfig_path,
            kubernetes: &endpoints.kubernetes,
            prometheus: &endpoints.prometheus,
            jaeger: &endpoints.jaeger,
            loki: &endpoints.loki,
            submit: submit_url,
            mcp: &mcp_url,
        },
    );
    let template = opts
        .agent
        .prompt
        .as_deref()
        .unwrap_or(prompt::builtin(env.mitigates()));
    let prompt_text = prompt::render(template, &values)?;
    std::fs::write(workdir.join("prompt.md"), &prompt_text).context("writing the prompt")?;
    let mut agent_env = vec![
        ("KUBECONFIG".to_string(), kubeconfig.display().to_string()),
        ("PROMETHEUS_URL".into(), endpoints.prometheus.clone()),
        ("JAEGER_URL".into(), endpoints.jaeger.clone()),
        ("LOKI_URL".into(), endpoints.loki.clone()),
        ("FAULTLINE_SUBMIT_URL".into(), submit_url.to_string()),
        (
            "FAULTLINE_PROMPT_FILE".into(),
            workdir.join("prompt.md").display().to_string(),
        ),
        ("FAULTLINE_MCP_URL".into(), mcp_url.clone()),
    ];
    agent_env.extend(sregym_env(workdir, &kubeconfig, submit_url, &mcp_base)?);
    let llm_usage = Arc::new(apis::llm_proxy::UsageCounter::new());
    if let Some(upstream) = &opts.llm_upstream {
        let upstream = apis::llm_proxy::Upstream {
            base_url: upstream.trim_end_matches('/').to_string(),
            api_key: None,
        };
        let base = servers
            .serve("llm", apis::llm_proxy::router(upstream, llm_usage.clone()))
            .await?;
        // The names OpenAI's and Anthropic's SDKs (and the agents built on them) read.
        agent_env.push(("OPENAI_BASE_URL".into(), format!("{base}/v1")));
        agent_env.push(("OPENAI_API_BASE".into(), format!("{base}/v1")));
        agent_env.push(("AGENT_API_BASE".into(), format!("{base}/v1")));
        agent_env.push(("ANTHROPIC_BASE_URL".into(), base));
    }
    agent_env.extend(opts.agent.env.iter().cloned());
    agent_env.push(("FAULTLINE_PROMPT".into(), prompt_text.clone()));
    let handover = Handover {
        prompt: prompt_text,
        workdir: workdir.to_path_buf(),
        env: agent_env,
        endpoints: endpoints.clone(),
        submit_url: submit_url.to_string(),
        mcp_url,
        stdout: dir.join("agent.stdout"),
        stderr: dir.join("agent.stderr"),
    };
    Ok((handover, mcp_calls, llm_usage))
}

/// The names SREGym's launcher gives its agents, for agents written for it: the conductor as
/// `API_HOSTNAME`/`API_PORT`, the MCP server as `MCP_SERVER_URL`/`MCP_SERVER_PORT` (its SSE
/// mounts are on ours), the kubeconfig also at `~/.kube/config`, a logs directory
/// (`AGENT_LOGS_DIR`, kept in the run as `agent_logs/`), and the model settings
/// (`AGENT_MODEL_ID`, …) from the collector's own environment.
fn sregym_env(
    workdir: &Path,
    kubeconfig: &Path,
    submit_url: &str,
    mcp_base: &str,
) -> anyhow::Result<Vec<(String, String)>> {
    let kube = workdir.join(".kube");
    std::fs::create_dir_all(&kube).context("creating the agent's ~/.kube")?;
    std::fs::copy(kubeconfig, kube.join("config")).context("writing the agent's ~/.kube/config")?;
    let logs = workdir.join(AGENT_LOGS);
    std::fs::create_dir_all(&logs).context("creating the agent's logs directory")?;
    let (host, api_port) = host_port(submit_url)?;
    let (_, mcp_port) = host_port(mcp_base)?;
    let mut env = vec![
        ("API_HOSTNAME".to_string(), host),
        ("API_PORT".into(), api_port),
        ("MCP_SERVER_URL".into(), mcp_base.to_string()),
        ("MCP_SERVER_PORT".into(), mcp_port),
        ("AGENT_LOGS_DIR".into(), logs.display().to_string()),
    ];
    for key in [
        "AGENT_MODEL_ID",
        "AGENT_API_BASE",
        "AGENT_API_KEY",
        "AGENT_REASONING_EFFORT",
    ] {
        if let Ok(value) = std::env::var(key) {
            env.push((key.into(), value));
        }
    }
    Ok(env)
}

/// The agent's logs directory, below its working directory.
const AGENT_LOGS: &str = "logs";

/// `http://HOST:PORT` as its host and port.
fn host_port(url: &str) -> anyhow::Result<(String, String)> {
    let parsed = url::Url::parse(url).with_context(|| format!("`{url}` is not a URL"))?;
    let host = parsed
        .host_str()
        .with_context(|| format!("`{url}` has no host"))?;
    let port = parsed
        .port()
        .with_context(|| format!("`{url}` has no port"))?;
    Ok((host.to_string(), port.to_string()))
}

/// Copies what the agent left in its logs directory into the run: files and directories only
/// (a link the agent made would otherwise be followed out of its directory).
fn keep_agent_logs(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            keep_agent_logs(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::create_dir_all(to)?;
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Records a submission; the agent's request is answered once it is recorded (for a mitigation,
/// once the world has been forked at that instant).
fn on_submission(env: &Env, with: &Judge<'_>, log: &mut Log, s: Submission, t0: Instant) {
    let Judge {
        opts, dir, truth, ..
    } = *with;
    let at = s.at.saturating_duration_since(t0);
    if let Some(usage) = s.usage {
        log.usage = Some(usage);
    }
    log.submissions.push(record::SubmittedStep {
        at: schemas::time::rfc3339_nanos(schemas::time::real_now_ns()),
        stage: s.stage.name(),
        solution: s.output.diagnosis.clone(),
    });
    match s.stage {
        Stage::Mitigation => {
            if let Some(grading) = env.grading() {
                log.mitigation = Some((grading, at));
            }
        }
        _ => {
            // Judged on what the agent said itself: text copied from its task (which names the
            // app's services) is no diagnosis.
            let mut output = s.output.clone();
            output.diagnosis = judge::copied::without_task(&output.diagnosis, with.task);
            let (judging, truth) = (opts.judging.clone(), truth.clone());
            let (log_dir, agent, trial) = (
                dir.join("judge"),
                opts.agent.name.clone(),
                opts.trial.clone(),
            );
            let progress = with.progress.clone();
            log.judged = Some(tokio::spawn(async move {
                let judged =
                    diagnosis::judge(&output, &truth, &judging, &log_dir, &agent, &trial).await;
                lock(&progress).evaluated();
                judged
            }));
            log.diagnosis = Some((s.output, at));
        }
    }
    let _ = s.recorded.send(());
}

/// What a diagnosis is judged with.
#[derive(Clone, Copy)]
struct Judge<'a> {
    opts: &'a SessionOptions,
    /// The run's directory (the judge's log goes below it).
    dir: &'a Path,
    truth: &'a Arc<judge::truth::LoadedTruth>,
    /// The agent's task.
    task: &'a str,
    /// Told when the diagnosis is judged: the next stage opens then.
    progress: &'a Arc<Mutex<Progress>>,
}

/// Grades the submitted mitigation, or the world at the end when none was submitted.
async fn grade_mitigation(
    log: &mut Log,
    pending: Option<(env::Grading, Duration)>,
) -> anyhow::Result<Option<(MitigationRecord, Duration)>> {
    let (grading, at, submitted) = match (log.mitigation.take(), pending) {
        (Some((grading, at)), _) => (grading, at, true),
        (None, Some((grading, at))) => (grading, at, false),
        (None, None) => return Ok(None),
    };
    let started = Instant::now();
    let verdict = grading.grade().await?;
    Ok(Some((
        MitigationRecord {
            submitted,
            success: verdict.passed,
            reasons: verdict.reasons,
            recovered_after_secs: verdict.recovered_after_secs,
            grading_secs: started.elapsed().as_secs_f64(),
        },
        at,
    )))
}

/// Writes the records of a finished session: trajectory, then `run.json`.
async fn write_records(
    opts: &SessionOptions,
    dir: &Path,
    started_at: chrono::DateTime<Utc>,
    end: End,
    log: &mut Log,
    ended: Ended,
) -> anyhow::Result<RunResult> {
    let diagnosis = match log.judged.take() {
        Some(task) => task.await.context("judging the diagnosis")?,
        None => diagnosis::not_submitted(),
    };
    let mut mitigation = end.mitigation;
    let mut ttm = end.ttm;
    if let Some(m) = &mut mitigation {
        let loops = record::restart_loops(&ended.audit);
        if !loops.is_empty() {
            m.success = false;
            m.reasons.splice(0..0, loops);
            ttm = None;
        }
    }
    let usage = log.usage.clone();
    let trajectory = record::trajectory(
        &opts.trial,
        &opts.agent.name,
        &end.prompt,
        &ended.audit,
        &log.submissions,
        usage.as_ref(),
    );
    datasets::write_atomically(
        &dir.join(record::TRAJECTORY_FILE),
        &serde_json::to_vec_pretty(&trajectory)?,
    )?;
    let mut files = BTreeMap::new();
    files.insert(
        "trajectory".to_string(),
        record::TRAJECTORY_FILE.to_string(),
    );
    files.insert("stdout".to_string(), "agent.stdout".to_string());
    files.insert("stderr".to_string(), "agent.stderr".to_string());
    if ended.dataset.is_some() {
        files.insert("dataset".to_string(), "dataset".to_string());
    }
    let run = RunResult {
        schema_version: RUN_RESULT_VERSION,
        agent: opts.agent.name.clone(),
        problem_id: end.problem_id,
        trial: opts.trial.clone(),
        mode: end.mode,
        dataset_id: None,
        started_at,
        finished_at: Some(Utc::now()),
        ground_truth: Some(GROUND_TRUTH_FILE.to_string()),
        output: log.diagnosis.as_ref().map(|(o, _)| o.clone()),
        error: end.error,
        agent_usage: usage,
        seed: end.seed,
        noise: end.noise,
        ended: Some(end.reason),
        ttd_secs: log.diagnosis.as_ref().map(|(_, at)| at.as_secs_f64()),
        ttm_secs: ttm,
        diagnosis: Some(diagnosis),
        mitigation,
        api_requests: Some(record::count_requests(&ended.audit, end.mcp_requests)),
        files,
        agent_sandbox: end.sandbox,
    };
    record::write_run(dir, &run)?;
    Ok(run)
}

/// Where a run is written until it is finished: a directory of a random name beside `out`
/// (under `.unfinished/`), renamed to `out` once `run.json` is in it. A reader never takes a
/// half-written run for a result, and while the agent runs no path this process has open names
/// the problem (a run directory laid out `<agent>/<problem>/<trial>` would).
fn staging_dir(out: &Path, staging: Option<&Path>) -> anyhow::Result<PathBuf> {
    if out.exists() {
        bail!(
            "{} exists already: choose another --out or remove it",
            out.display()
        );
    }
    let root = match (staging, out.parent()) {
        (Some(s), _) => s.to_path_buf(),
        (None, Some(p)) if !p.as_os_str().is_empty() => p.join(".unfinished"),
        (None, _) => PathBuf::from(".unfinished"),
    };
    let dir = root.join(uuid::Uuid::new_v4().simple().to_string());
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// Counts the requests a router answers.
async fn count_request(
    axum::extract::State(count): axum::extract::State<Arc<AtomicU64>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    count.fetch_add(1, Ordering::Relaxed);
    next.run(request).await
}

fn lock(p: &Mutex<Progress>) -> std::sync::MutexGuard<'_, Progress> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handover(dir: &Path, prompt: &str, env: &[(&str, &str)]) -> Handover {
        std::fs::write(dir.join("prompt.md"), prompt).unwrap();
        Handover {
            prompt: prompt.into(),
            workdir: dir.to_path_buf(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            endpoints: Endpoints {
                kubernetes: String::new(),
                prometheus: String::new(),
                jaeger: String::new(),
                loki: String::new(),
                kubernetes_https: None,
            },
            submit_url: String::new(),
            mcp_url: String::new(),
            stdout: dir.join("out"),
            stderr: dir.join("err"),
        }
    }

    #[test]
    fn a_handover_naming_its_problem_is_refused_and_the_users_own_variables_are_theirs() {
        let dir = tempfile::tempdir().unwrap();
        let id = "hotel-geo-target-port";
        let clean = handover(
            dir.path(),
            "Users see failures: which resource is at fault?",
            &[],
        );
        check_handover(&clean, id, &[]).unwrap();
        let given = handover(dir.path(), "Users see failures.", &[("HINT", id)]);
        check_handover(&given, id, &["HINT"]).unwrap();
        let err = check_handover(&given, id, &[]).unwrap_err().to_string();
        assert!(err.contains("names its problem"), "{err}");
        std::fs::create_dir_all(dir.path().join(".kube")).unwrap();
        std::fs::write(dir.path().join(".kube/config"), "name: service_target_port").unwrap();
        let err = check_handover(&clean, id, &[]).unwrap_err().to_string();
        assert!(err.contains("service_target_port"), "{err}");
    }
}
