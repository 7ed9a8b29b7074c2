//! The agent under evaluation, as the session sees it: something a [`Launcher`] starts from what
//! the session hands over, that the session can wait for and end ([`RunningAgent`]). The launcher
//! of today, [`CommandLauncher`], runs a shell command line in its own process group, in its own
//! working directory, with the session's environment; its stdout and stderr are stored as they
//! come (and echoed when asked). Ending it ends the whole group, so nothing it started lingers.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::Context;
use futures_util::future::BoxFuture;
use rustix::process::{Pid, Signal};
use schemas::run_result::AgentSandbox;
use tokio::io::{AsyncRead, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

/// Environment variables never passed on to an agent: the session's own settings and the judge's
/// credentials are not the agent's business.
const WITHHELD_PREFIXES: [&str; 2] = ["FAULTLINE_", "JUDGE_"];

/// Starts an agent from what the session hands over: a process, a sandboxed process, a harness's
/// trial, a connection of an external driver.
pub trait Launcher: Send + Sync {
    fn launch(&self, handover: &crate::Handover) -> anyhow::Result<Box<dyn RunningAgent>>;
    /// Where the agents it starts run, as the record says it.
    fn sandbox(&self) -> AgentSandbox;
}

/// A started agent.
pub trait RunningAgent: Send {
    /// Resolves when the agent ends on its own.
    fn wait(&mut self) -> BoxFuture<'_, anyhow::Result<Exit>>;
    /// Ends the agent (asking first, then forcing after `grace`), once what it wrote is stored.
    fn end(self: Box<Self>, grace: Duration) -> BoxFuture<'static, anyhow::Result<Exit>>;
}

/// How an agent ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    pub success: bool,
    /// As a record says it (`exit status 3`, `killed by signal 9`).
    pub description: String,
}

impl Exit {
    pub fn of(status: &ExitStatus) -> Exit {
        Exit {
            success: status.success(),
            description: describe(status),
        }
    }
}

/// Runs the agent's command line with `sh -c` in the handed-over directory and environment.
#[derive(Debug, Clone)]
pub struct CommandLauncher {
    pub command: String,
    /// Also copy its output to this process's stderr.
    pub echo: bool,
}

impl Launcher for CommandLauncher {
    fn launch(&self, handover: &crate::Handover) -> anyhow::Result<Box<dyn RunningAgent>> {
        let command = resolve_program(&self.command, &std::env::current_dir()?);
        Ok(Box::new(Agent::spawn(&Launch::shell(
            &command, handover, self.echo,
        ))?))
    }

    fn sandbox(&self) -> AgentSandbox {
        AgentSandbox::None
    }
}

impl RunningAgent for Agent {
    fn wait(&mut self) -> BoxFuture<'_, anyhow::Result<Exit>> {
        Box::pin(async move { Ok(Exit::of(&Agent::wait(self).await?)) })
    }

    fn end(self: Box<Self>, grace: Duration) -> BoxFuture<'static, anyhow::Result<Exit>> {
        Box::pin(async move { Ok(Exit::of(&Agent::end(*self, grace).await?)) })
    }
}

/// An agent that is not a process of ours: the client of a front end (an OpenEnv connection, a
/// harness's trial) acting through the session's endpoints. It ends when the front end says so
/// ([`RemoteEnd`]), or with the session (its interrupt, or the last submission). What it does is
/// recorded by the front end in `handover.stdout`, which is created empty here.
#[derive(Debug, Clone)]
pub struct RemoteLauncher {
    sandbox: AgentSandbox,
    ended: Option<tokio::sync::watch::Receiver<bool>>,
}

/// Tells a remote agent's session that the agent is done (a harness's agent phase is over).
#[derive(Debug)]
pub struct RemoteEnd(tokio::sync::watch::Sender<bool>);

impl RemoteEnd {
    pub fn end(&self) {
        let _ = self.0.send(true);
    }
}

impl RemoteLauncher {
    /// A client that ends only with the session; `sandbox` is where it runs, as the record says.
    pub fn new(sandbox: AgentSandbox) -> RemoteLauncher {
        RemoteLauncher {
            sandbox,
            ended: None,
        }
    }

    /// A client whose end the returned handle tells.
    pub fn with_end(sandbox: AgentSandbox) -> (RemoteLauncher, RemoteEnd) {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let launcher = RemoteLauncher {
            sandbox,
            ended: Some(rx),
        };
        (launcher, RemoteEnd(tx))
    }
}

impl Launcher for RemoteLauncher {
    fn launch(&self, handover: &crate::Handover) -> anyhow::Result<Box<dyn RunningAgent>> {
        for stream in [&handover.stdout, &handover.stderr] {
            std::fs::File::create(stream)
                .with_context(|| format!("creating {}", stream.display()))?;
        }
        Ok(Box::new(RemoteAgent {
            ended: self.ended.clone(),
        }))
    }

    fn sandbox(&self) -> AgentSandbox {
        self.sandbox
    }
}

struct RemoteAgent {
    ended: Option<tokio::sync::watch::Receiver<bool>>,
}

fn remote_exit() -> Exit {
    Exit {
        success: true,
        description: "the client's session ended".into(),
    }
}

impl RunningAgent for RemoteAgent {
    fn wait(&mut self) -> BoxFuture<'_, anyhow::Result<Exit>> {
        Box::pin(async move {
            let Some(ended) = self.ended.as_mut() else {
                return std::future::pending().await;
            };
            loop {
                if *ended.borrow_and_update() {
                    return Ok(remote_exit());
                }
                // A dropped handle never ends the agent: the session's own end does.
                if ended.changed().await.is_err() {
                    return std::future::pending().await;
                }
            }
        })
    }

    fn end(self: Box<Self>, _grace: Duration) -> BoxFuture<'static, anyhow::Result<Exit>> {
        Box::pin(async { Ok(remote_exit()) })
    }
}

/// How to start the agent's process.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The program and its arguments.
    pub argv: Vec<OsString>,
    pub cwd: PathBuf,
    /// Set on top of this process's environment (minus the withheld variables), or the whole of
    /// its environment when `clear_env`.
    pub env: Vec<(String, String)>,
    pub clear_env: bool,
    /// Written to its standard input, which is then closed; without it, standard input is empty.
    pub stdin: Option<Vec<u8>>,
    /// Where its output streams are stored.
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    /// Also copy its output to this process's stderr.
    pub echo: bool,
}

impl Launch {
    /// `sh -c COMMAND` with the handed-over directory, environment and output files.
    pub fn shell(command: &str, handover: &crate::Handover, echo: bool) -> Launch {
        Launch {
            argv: vec!["sh".into(), "-c".into(), command.into()],
            cwd: handover.workdir.clone(),
            env: handover.env.clone(),
            clear_env: false,
            stdin: None,
            stdout: handover.stdout.clone(),
            stderr: handover.stderr.clone(),
            echo,
        }
    }
}

/// A running agent.
pub struct Agent {
    child: Child,
    pgid: i32,
    streams: Vec<JoinHandle<std::io::Result<()>>>,
}

impl Agent {
    pub fn spawn(launch: &Launch) -> anyhow::Result<Agent> {
        let (program, args) = launch
            .argv
            .split_first()
            .context("an agent's command line is empty")?;
        let shown = launch
            .argv
            .last()
            .map(|a| a.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(&launch.cwd)
            .stdin(match launch.stdin {
                Some(_) => Stdio::piped(),
                None => Stdio::null(),
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group, so that ending it reaches everything it started.
            .process_group(0)
            .kill_on_drop(true);
        if launch.clear_env {
            cmd.env_clear();
        } else {
            for (key, _) in std::env::vars_os() {
                let key = key.to_string_lossy();
                if WITHHELD_PREFIXES.iter().any(|p| key.starts_with(p)) {
                    cmd.env_remove(key.as_ref());
                }
            }
        }
        cmd.envs(launch.env.iter().map(|(k, v)| (k, v)));
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start the agent `{shown}`"))?;
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .context("the agent exited before it could be tracked")?;
        let mut streams = Vec::new();
        if let (Some(mut input), Some(bytes)) = (child.stdin.take(), launch.stdin.clone()) {
            // A program that exits without reading it all is not an error of the session's.
            streams.push(tokio::spawn(async move {
                if input.write_all(&bytes).await.is_ok() {
                    let _ = input.shutdown().await;
                }
                Ok(())
            }));
        }
        if let Some(out) = child.stdout.take() {
            streams.push(store(out, &launch.stdout, launch.echo)?);
        }
        if let Some(err) = child.stderr.take() {
            streams.push(store(err, &launch.stderr, launch.echo)?);
        }
        Ok(Agent {
            child,
            pgid,
            streams,
        })
    }

    /// Waits for the agent to exit.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Ends the agent: SIGTERM to its process group and to every process below it (one that left
    /// the group, or runs in a session of its own inside a sandbox), then SIGKILL after `grace`.
    /// Returns its status, once its output streams are stored.
    pub async fn end(mut self, grace: Duration) -> anyhow::Result<ExitStatus> {
        let status = match self.child.try_wait()? {
            Some(status) => status,
            None => {
                signal_all(self.pgid, Signal::TERM);
                match tokio::time::timeout(grace, self.child.wait()).await {
                    Ok(status) => status?,
                    Err(_) => {
                        signal_all(self.pgid, Signal::KILL);
                        self.child.wait().await?
                    }
                }
            }
        };
        // Whatever is left of the group (a background job of the agent's) goes too.
        signal_group(self.pgid, Signal::KILL);
        for s in self.streams {
            s.await.context("storing the agent's output")??;
        }
        Ok(status)
    }
}

/// Signals the group led by `pid` and every process below `pid`.
fn signal_all(pid: i32, signal: Signal) {
    for p in descendants(pid) {
        if let Some(p) = Pid::from_raw(p) {
            let _ = rustix::process::kill_process(p, signal);
        }
    }
    signal_group(pid, signal);
}

/// The processes below `root`, from the parent links in `/proc` (nothing when `/proc` cannot be
/// read).
fn descendants(root: i32) -> Vec<i32> {
    let mut children: std::collections::HashMap<i32, Vec<i32>> = Default::default();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        // `pid (comm) state ppid ...`: the command may hold spaces and parentheses.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        if let Some(ppid) = ppid {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut found = Vec::new();
    let mut next = vec![root];
    while let Some(p) = next.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or_default() {
            found.push(c);
            next.push(c);
        }
    }
    found
}

fn signal_group(pgid: i32, signal: Signal) {
    // A group that is gone already (ESRCH) is what was wanted.
    if let Some(pid) = Pid::from_raw(pgid) {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

/// Copies a stream to a file (and to stderr when echoing) until it closes.
fn store(
    mut from: impl AsyncRead + Unpin + Send + 'static,
    path: &Path,
    echo: bool,
) -> anyhow::Result<JoinHandle<std::io::Result<()>>> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut file = tokio::fs::File::from_std(file);
    Ok(tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = from.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            file.write_all(&buf[..n]).await?;
            if echo {
                use std::io::Write;
                // Whole chunks to a locked stderr: the agent's lines stay in one piece.
                std::io::stderr().lock().write_all(&buf[..n])?;
            }
        }
        file.flush().await
    }))
}

/// The command line with a relative program path (`./my-agent.sh`, `bin/agent`) made absolute
/// against `from`, the directory the session was started in: the agent runs in a fresh directory
/// (its task and kubeconfig, nothing of the user's), yet `--agent ./my-agent.sh` means what it
/// says. Only a first word that names an existing file is touched; anything else is left to the
/// shell.
pub fn resolve_program(command: &str, from: &Path) -> String {
    let trimmed = command.trim_start();
    let end = trimmed
        .find(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|'))
        .unwrap_or(trimmed.len());
    let program = &trimmed[..end];
    let relative = program.contains('/') && !program.starts_with('/') && !program.starts_with('~');
    if !relative || program.contains(['\'', '"', '$', '`']) || !from.join(program).is_file() {
        return command.to_string();
    }
    let absolute = from.join(program);
    let quoted = shell_quote(&absolute.to_string_lossy());
    format!("{quoted}{}", &trimmed[end..])
}

/// The program of a command line as [`resolve_program`] writes it: its first word, unquoted when
/// single-quoted.
pub fn program_of(command: &str) -> String {
    let trimmed = command.trim_start();
    if let Some(rest) = trimmed.strip_prefix('\'') {
        let mut program = String::new();
        let mut rest = rest;
        // `'a'\''b'`: the quoting `shell_quote` writes for a quote inside the word.
        while let Some(end) = rest.find('\'') {
            program.push_str(&rest[..end]);
            rest = &rest[end + 1..];
            match rest.strip_prefix("\\''") {
                Some(more) => {
                    program.push('\'');
                    rest = more;
                }
                None => break,
            }
        }
        return program;
    }
    trimmed
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|'))
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Single-quotes a word for `sh`.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// How an exit status reads in a record.
pub fn describe(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "ended".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_program_is_found_where_the_session_started() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        std::fs::write(dir.path().join("bin/my agent.sh"), "").unwrap();
        std::fs::write(dir.path().join("run.sh"), "").unwrap();
        let at = dir.path();
        let abs = |p: &str| shell_quote(&at.join(p).to_string_lossy());
        assert_eq!(
            resolve_program("./run.sh --fast", at),
            format!("{} --fast", abs("./run.sh"))
        );
        // Not a file there, an absolute path, a bare name or shell syntax: the shell decides.
        for cmd in [
            "./missing.sh",
            "/bin/true",
            "claude -p \"$(cat prompt.md)\"",
            "$HOME/x.sh",
        ] {
            assert_eq!(resolve_program(cmd, at), cmd);
        }
        assert_eq!(
            resolve_program("./run.sh;echo", at),
            format!("{};echo", abs("./run.sh"))
        );
        // What was resolved reads back as the program's path.
        std::fs::write(dir.path().join("bin/agent.sh"), "").unwrap();
        for p in ["bin/agent.sh", "run.sh"] {
            let resolved = resolve_program(&format!("./{p} --x"), at);
            assert_eq!(
                program_of(&resolved),
                at.join(".").join(p).to_string_lossy()
            );
        }
        assert_eq!(program_of("/bin/true --x"), "/bin/true");
        let quoted = shell_quote("/a/it's.sh");
        assert_eq!(program_of(&format!("{quoted} -v")), "/a/it's.sh");
    }
}
