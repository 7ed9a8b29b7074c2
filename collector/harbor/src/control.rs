//! The commands a task runs inside its environment: `up` (the healthcheck: starts the session
//! daemon once, detached, and waits until it answers), `grade` (the verifier: grades and writes
//! Harbor's reward) and `solve` (the reference solution: presents its token).

use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;
use schemas::run_result::RunResult;
use serde_json::Value;

use crate::episode::{self, Episode, control_url};

/// How long `up` waits for the session to answer.
pub const READY_WITHIN: Duration = Duration::from_secs(110);

/// The healthcheck: starts the session daemon unless one runs, and returns once it answers.
/// Idempotent, and safe to run twice at once: one of them starts the daemon (the pid file is
/// created exclusively), the other waits.
pub fn up(episode_file: &Path) -> anyhow::Result<()> {
    let episode = Episode::load(episode_file)?;
    let state = Path::new(episode::STATE_DIR);
    crate::daemon::private_dir(state)?;
    let pid_file = state.join("daemon.pid");
    let http = blocking_client(Duration::from_secs(5))?;
    let ready = format!("{}/ready", control_url(episode.base_port));
    if answers(&http, &ready) {
        return Ok(());
    }
    if let Some(pid) = read_pid(&pid_file)
        && !alive(pid)
    {
        // A daemon that died (or the pid of an earlier environment): start afresh.
        let _ = std::fs::remove_file(&pid_file);
    }
    let started = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&pid_file)
    {
        Ok(mut file) => {
            let pid = spawn_daemon(episode_file, &state.join("daemon.log"))?;
            writeln!(file, "{pid}").context("writing the daemon's pid")?;
            Some(pid)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_pid(&pid_file),
        Err(e) => return Err(e).with_context(|| format!("creating {}", pid_file.display())),
    };
    let t0 = Instant::now();
    loop {
        if answers(&http, &ready) {
            return Ok(());
        }
        if let Some(pid) = started
            && !alive(pid)
        {
            let _ = std::fs::remove_file(&pid_file);
            anyhow::bail!(
                "the session ended while starting: {}",
                tail(&state.join("daemon.log"))
            );
        }
        anyhow::ensure!(
            t0.elapsed() < READY_WITHIN,
            "the session did not answer within {READY_WITHIN:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `collector harbor daemon`, detached: its own process group, no terminal, its output in a log
/// only root reads. Its command line names nothing (the episode is in the root-only file).
fn spawn_daemon(episode_file: &Path, log: &Path) -> anyhow::Result<u32> {
    let log = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    // Its temporary files (the recording the analysis tools read, which holds the objects' whole
    // history, the fault's change included) go where only root reads, not in the shared /tmp.
    let tmp = Path::new(episode::RUN_DIR).join("tmp");
    crate::daemon::private_dir(&tmp)?;
    let child = std::process::Command::new(std::env::current_exe()?)
        .args(["harbor", "daemon", "--episode"])
        .arg(episode_file)
        .env("TMPDIR", &tmp)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .context("starting the session daemon")?;
    Ok(child.id())
}

fn read_pid(file: &Path) -> Option<u32> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

fn alive(pid: u32) -> bool {
    // A zombie (exited, not yet reaped) is not alive.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|s| !s.trim_start().starts_with('Z'))
    })
}

fn answers(http: &reqwest::blocking::Client, url: &str) -> bool {
    http.get(url).send().is_ok_and(|r| r.status().is_success())
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(5).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join("\n")
}

fn blocking_client(timeout: Duration) -> anyhow::Result<reqwest::blocking::Client> {
    Ok(reqwest::blocking::Client::builder()
        .timeout(timeout)
        .build()?)
}

/// What the verifier writes: Harbor's reward (`reward.json`, a flat map of numbers) and the run
/// record beside it (`run.json`), with the run's files under `run/`.
pub struct Graded {
    pub reward: session::Reward,
    pub run: RunResult,
}

/// The verifier: grades the session and writes `logs/reward.json` (last, so that a failure
/// anywhere leaves none), `logs/run.json` and the run under `logs/run/`.
pub fn grade(episode_file: &Path, logs: &Path) -> anyhow::Result<Graded> {
    let episode = Episode::load(episode_file)?;
    let body = post_control(
        episode.base_port,
        "grade",
        &episode.grade_token,
        Duration::from_secs(1800),
    )
    .context("grading")?;
    let graded: Value = serde_json::from_str(&body).context("the grading's answer")?;
    let mut run: RunResult =
        serde_json::from_value(graded["run"].clone()).context("the run record")?;
    let dir = PathBuf::from(graded["dir"].as_str().unwrap_or_default());
    rejudge_if_configured(&mut run, &dir, logs)?;
    std::fs::create_dir_all(logs).with_context(|| format!("creating {}", logs.display()))?;
    if dir.is_dir() {
        copy_dir(&dir, &logs.join("run"))?;
    }
    let reward = session::reward(&run);
    write_json(&logs.join("run.json"), &run)?;
    write_json(&logs.join("reward.json"), &reward)?;
    Ok(Graded { reward, run })
}

fn write_json(path: &Path, value: &impl serde::Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)? + "\n";
    datasets::write_atomically(path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// With a judge model in the verifier's environment (`JUDGE_*`, from the host through
/// `[verifier].env`), the diagnosis is judged again by it: the session inside judged it
/// deterministically, since the agent's environment must never hold the judge's key.
fn rejudge_if_configured(run: &mut RunResult, dir: &Path, logs: &Path) -> anyhow::Result<()> {
    let cfg = judge::in_loop::InLoop::from_env(logs.join("judge"), &run.agent, &run.trial)?;
    if cfg.llm.is_none() {
        return Ok(());
    }
    let judged = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(judge::in_loop::rejudge(dir, &cfg))?;
    if let Some(record) = judged {
        run.diagnosis = Some(record);
    }
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// The reference solution: presents `token` (Harbor's `[solution].env`) to the session, which
/// diagnoses and applies the reference fix itself.
pub fn solve(token: &str, base_port: u16) -> anyhow::Result<String> {
    anyhow::ensure!(
        !token.is_empty(),
        "FAULTLINE_SOLUTION_TOKEN is not set: only the reference solution's step is given it"
    );
    post_control(base_port, "solve", token, Duration::from_secs(600))
        .context("the reference solution")
}

/// A POST to the control API with a bearer token; the answer's text, or why it failed.
fn post_control(base_port: u16, path: &str, token: &str, wait: Duration) -> anyhow::Result<String> {
    let answer = blocking_client(wait)?
        .post(format!("{}/{path}", control_url(base_port)))
        .bearer_auth(token)
        .send()
        .context("the session's control API did not answer (is the session up?)")?;
    let status = answer.status();
    let body = answer.text().unwrap_or_default();
    anyhow::ensure!(status.is_success(), "{status}: {body}");
    Ok(body)
}
