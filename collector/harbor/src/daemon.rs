//! The live session inside a task's environment (`collector harbor daemon`, started once by the
//! healthcheck): the problem of the episode file runs on the session's fixed ports, the agent's
//! kubeconfig is written into its home, and the agent (Harbor's, whatever it is) is a remote
//! client of the session. A control API beside it answers:
//!
//! - `GET /ready`: 200 once the agent can start;
//! - `POST /grade` with the grading token (the verifier, as root): the agent's part ends, the
//!   session is finished and graded, and the run record is the answer; then the daemon exits;
//! - `POST /solve` with the solution token (the reference solution only): the correct diagnosis
//!   and the problem's reference fix, submitted through the session's own APIs as an agent would.

use std::future::IntoFuture as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use problems::{Catalog, Dur, ProblemSpec};
use schemas::run_result::{AgentSandbox, RunResult};
use serde_json::json;
use session::{Handover, RemoteLauncher, Session, SessionOptions, Stage, Stages};
use tokio::sync::{mpsc, oneshot};

use crate::episode::{self, AGENT_HOME, AGENT_UID, Episode};

/// What a grading answers: the run record and where the run is, or why it failed.
type Graded = Result<(RunResult, PathBuf), String>;

struct Control {
    episode: Episode,
    problem: ProblemSpec,
    namespace: String,
    handover: Handover,
    stages: Stages,
    grade: mpsc::Sender<oneshot::Sender<Graded>>,
    /// One reference solution at a time.
    solving: tokio::sync::Mutex<()>,
}

/// Runs the episode until it is graded.
pub fn run(catalog: &Catalog, episode_file: &Path) -> anyhow::Result<()> {
    let episode = Episode::load(episode_file)?;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(serve(catalog, episode))
}

async fn serve(catalog: &Catalog, episode: Episode) -> anyhow::Result<()> {
    let problem = catalog
        .problem(&episode.problem)
        .with_context(|| {
            format!(
                "no problem `{}` in this collector's catalog",
                episode.problem
            )
        })?
        .clone();
    let namespace = catalog
        .app(&problem.application)
        .with_context(|| format!("no application `{}`", problem.application))?
        .namespace
        .clone();
    let runs = Path::new(episode::RUN_DIR);
    private_dir(runs)?;
    let out = runs.join("run");
    if out.exists() {
        // A run left by an earlier daemon of this environment (it was killed): it is not this
        // episode's, which starts now.
        std::fs::remove_dir_all(&out).with_context(|| format!("removing {}", out.display()))?;
    }
    let (launcher, agent_done) = RemoteLauncher::with_end(AgentSandbox::Harness);
    let session =
        Session::start_launched(catalog, options(&episode, &problem, out), &launcher).await?;
    let handover = session.handover().clone();
    install_kubeconfig(&handover.workdir.join("kubeconfig"))?;
    let (grade, mut graders) = mpsc::channel::<oneshot::Sender<Graded>>(4);
    let control = Arc::new(Control {
        episode: episode.clone(),
        problem,
        namespace,
        handover,
        stages: session.stages(),
        grade,
        solving: tokio::sync::Mutex::new(()),
    });
    let listener =
        tokio::net::TcpListener::bind(("127.0.0.1", episode.base_port + episode::CONTROL_OFFSET))
            .await
            .context("the control API's port")?;
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(
        axum::serve(listener, router(control))
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .into_future(),
    );
    let follow = session.follow(std::future::pending());
    tokio::pin!(follow);
    // Whichever comes first: the verifier asks (the agent's part is over), or the session ends on
    // its own (its time limit); either way the verifier's question gets the record.
    let (finished, asker) = tokio::select! {
        asked = graders.recv() => {
            agent_done.end();
            ((&mut follow).await, asked)
        }
        finished = &mut follow => (finished, graders.recv().await),
    };
    let graded = finished
        .map(|run| (run, runs.join("run")))
        .map_err(|e| format!("{e:#}"));
    if let Some(asker) = asker {
        let _ = asker.send(graded);
    }
    let _ = stop.send(());
    let _ = server.await;
    Ok(())
}

fn options(episode: &Episode, problem: &ProblemSpec, out: PathBuf) -> SessionOptions {
    let target = session::Target::Live {
        problem: Box::new(problem.clone()),
        seed: episode.seed,
        no_noise: !episode.noise,
        speed: 1.0,
        since_onset: Dur::from_secs(episode.since_onset_secs),
    };
    // Judged deterministically: the verifier re-judges with an LLM when it is given one (see
    // `control::grade`). On the fixed ports the task's files name.
    SessionOptions {
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], episode.base_port)),
        ..SessionOptions::remote(
            "harbor",
            target,
            out,
            Duration::from_secs(episode.time_limit_secs),
        )
    }
}

/// A directory only root can enter (its parents made as needed).
pub(crate) fn private_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("making {} private", dir.display()))
}

/// The session's kubeconfig as the agent's `~/.kube/config`, the agent's own.
fn install_kubeconfig(from: &Path) -> anyhow::Result<()> {
    let dir = Path::new(AGENT_HOME).join(".kube");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let to = dir.join("config");
    std::fs::copy(from, &to).with_context(|| format!("writing {}", to.display()))?;
    for path in [&dir, &to] {
        std::os::unix::fs::chown(path, Some(AGENT_UID), Some(AGENT_UID))
            .with_context(|| format!("giving {} to the agent", path.display()))?;
    }
    Ok(())
}

fn router(control: Arc<Control>) -> Router {
    Router::new()
        .route("/ready", get(|| async { "ready\n" }))
        .route("/grade", post(grade))
        .route("/solve", post(solve))
        .with_state(control)
}

fn bearer(headers: &HeaderMap) -> &str {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
}

fn refused() -> Response {
    (StatusCode::UNAUTHORIZED, "a valid token is required\n").into_response()
}

async fn grade(State(c): State<Arc<Control>>, headers: HeaderMap) -> Response {
    let grade_sha = episode::sha256_hex(&c.episode.grade_token);
    if !episode::matches(bearer(&headers), &grade_sha) {
        return refused();
    }
    let (tx, rx) = oneshot::channel();
    if c.grade.send(tx).await.is_err() {
        return (StatusCode::CONFLICT, "the episode was graded already\n").into_response();
    }
    match rx.await {
        Ok(Ok((run, dir))) => {
            axum::Json(json!({ "run": run, "dir": dir.display().to_string() })).into_response()
        }
        Ok(Err(e)) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("grading failed: {e}\n"),
        )
            .into_response(),
        Err(_) => (StatusCode::CONFLICT, "the episode was graded already\n").into_response(),
    }
}

async fn solve(State(c): State<Arc<Control>>, headers: HeaderMap) -> Response {
    if !episode::matches(bearer(&headers), &c.episode.solution_token_sha256) {
        return refused();
    }
    let _one = c.solving.lock().await;
    match reference_solution(&c).await {
        Ok(done) => (StatusCode::OK, done).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}\n")).into_response(),
    }
}

/// The reference solution, through the session's submission API as an agent submits: the
/// diagnosis, then (once the mitigation stage is open) the reference fix and the mitigation.
async fn reference_solution(c: &Control) -> anyhow::Result<String> {
    let commands = c.problem.fix_commands().map_err(anyhow::Error::msg)?;
    let http = reqwest::Client::new();
    let submit = |solution: String| {
        let http = http.clone();
        let url = format!("{}/submit", c.handover.submit_url);
        async move {
            http.post(&url)
                .json(&json!({ "solution": solution }))
                .send()
                .await?
                .error_for_status()
                .map(|_| ())
                .map_err(anyhow::Error::from)
        }
    };
    submit(c.problem.reference_diagnosis(&c.namespace)).await?;
    let stage = c.stages.settled().await;
    anyhow::ensure!(
        stage == Stage::Mitigation,
        "the session is at stage {}, not mitigation",
        stage.name()
    );
    let kubeconfig = c.handover.workdir.join("kubeconfig");
    let mut log = String::new();
    for command in commands {
        let run = live::proof::kubectl(command, &kubeconfig).await?;
        anyhow::ensure!(run.ok, "`{command}` failed: {}", run.output);
        log.push_str(&run.output);
        log.push('\n');
    }
    submit(String::new()).await?;
    Ok(format!("diagnosed, fixed and submitted\n{log}"))
}
