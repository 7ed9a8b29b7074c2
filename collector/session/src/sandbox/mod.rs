//! The agent's sandbox: what an agent sees of the machine is what an SRE's laptop would show — the
//! system's tools, a home of its own with its task and kubeconfig, and the session's endpoints —
//! and nothing of the benchmark: not `collector`'s processes, binary, command line or
//! environment, not the catalog, the checkout, run directories or the journal, not other
//! sessions' ports.
//!
//! bubblewrap (`bwrap`, what Flatpak runs apps in) builds it: user, PID, mount, IPC, UTS and
//! network namespaces; a root of read-only binds of `/usr`, `/etc` and the `/bin`, `/lib*` links;
//! a private `/tmp`; the agent's directory as its home. Its options reach it on its standard
//! input (`--args 0`), so that the sandbox's first process shows no paths or variables in its
//! command line, only the relay's ports and the agent's own command.
//!
//! Network: the sandbox has its own network namespace, whose loopback is the agent's alone (it may
//! listen and connect there freely: `kubectl port-forward` works). `netrelay` listens on it on each
//! of the session's ports, bound before the agent starts, and carries every connection over a
//! Unix socket to this process, which joins it to the endpoint on the host's loopback
//! ([`relay`]). Nothing else on the host is reachable, and no route leaves the namespace. A
//! network namespace was chosen over Landlock's TCP port rules on the host's network: port rules
//! cannot tell the agent's own port-forward from another session's server, and the endpoints keep
//! their URLs either way. With `--agent-network public` one more port leads out: an HTTP proxy
//! ([`proxy`]) named by the agent's `HTTPS_PROXY`, to the internet and never back to this host's
//! loopback. A proxy was chosen over a user-mode network stack (slirp4netns, pasta) in the
//! namespace: those cannot join a namespace that bubblewrap nests in a second user namespace (as
//! it does to make the agent uid 1000) without privileges, and model SDKs all honour the proxy
//! variables.

pub mod proxy;
pub mod relay;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use futures_util::future::BoxFuture;
use schemas::run_result::AgentSandbox;

use crate::agent::{Agent, Exit, Launch, Launcher, RunningAgent};

/// The agent's home inside the sandbox (its working directory).
pub const HOME: &str = "/home/agent";
/// Where the relay's Unix sockets are inside the sandbox.
const SOCKETS: &str = "/run/endpoints";
/// Where `netrelay` is inside the sandbox.
const RELAY: &str = "/run/netrelay";
/// The agent's user inside its user namespace: not root, whoever runs the session.
const AGENT_ID: &str = "1000";
/// The system directories the root is made of: bound read-only when a directory, recreated as the
/// same link when a link (a merged-/usr system's `/bin -> usr/bin`).
const SYSTEM: [&str; 8] = [
    "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];
/// The sandbox's namespaces and process options, as the sandbox asks for them and as the probe
/// tries them: the agent is uid 1000, in user, PID, IPC, UTS, network (and, where the kernel has
/// it, cgroup) namespaces of its own; it dies with the session, even a killed one, and has no
/// controlling terminal of the session's to type into.
const NAMESPACES: [&str; 12] = [
    "--unshare-user",
    "--uid",
    AGENT_ID,
    "--gid",
    AGENT_ID,
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-net",
    "--unshare-cgroup-try",
    "--die-with-parent",
    "--new-session",
];
/// The variables an agent gets from the session's own environment, beside what the session
/// hands over.
const PASSED: [&str; 3] = ["LANG", "LC_ALL", "TERM"];
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What the sandboxed agent reaches beside the session's endpoints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AgentNetwork {
    /// Nothing.
    #[default]
    Session,
    /// The internet (not this host) through an HTTP proxy: for an agent that calls its model's
    /// API itself.
    Public,
}

/// The port the proxy is on inside the sandbox (or the next one the session does not use).
const PROXY_PORT: u16 = 3128;

/// Runs the agent's command line with `sh -c` inside the sandbox.
#[derive(Debug, Clone)]
pub struct SandboxLauncher {
    pub command: String,
    /// Also copy its output to this process's stderr.
    pub echo: bool,
    /// Paths the agent may read besides the system's (its own code, tools installed elsewhere),
    /// bound read-only at the same path.
    pub binds: Vec<PathBuf>,
    /// The `netrelay` program.
    pub relay: PathBuf,
    /// The `bwrap` program.
    pub bwrap: PathBuf,
    pub network: AgentNetwork,
}

impl SandboxLauncher {
    /// A launcher with `bwrap` from PATH and `netrelay` beside this program, refused with the
    /// reason when this host cannot build the sandbox, a bound path is unusable ([`check`]) or the
    /// agent's program would not be inside it.
    pub fn new(
        command: &str,
        echo: bool,
        mut binds: Vec<PathBuf>,
        network: AgentNetwork,
    ) -> anyhow::Result<SandboxLauncher> {
        let (bwrap, relay) = check(&binds)?;
        let (command, program) = command_inside(command, &binds)?;
        binds.extend(program);
        Ok(SandboxLauncher {
            command,
            echo,
            binds,
            relay,
            bwrap,
            network,
        })
    }
}

/// Whether agents can be sandboxed here with these paths bound: `bwrap` and `netrelay`, or why
/// not.
pub fn check(binds: &[PathBuf]) -> anyhow::Result<(PathBuf, PathBuf)> {
    let probe = probe();
    if let Some(reason) = probe.refusal_reason() {
        anyhow::bail!("{reason}");
    }
    for b in binds {
        anyhow::ensure!(
            b.is_absolute() && b.exists(),
            "--agent-bind {}: expected an absolute path that exists",
            b.display()
        );
    }
    Ok((
        probe.bwrap.context("no bwrap")?,
        probe.relay.context("no netrelay")?,
    ))
}

impl Launcher for SandboxLauncher {
    fn launch(&self, handover: &crate::Handover) -> anyhow::Result<Box<dyn RunningAgent>> {
        let ports = loopback_ports(handover);
        let sockets = tempfile::Builder::new()
            .prefix("endpoints-")
            .tempdir()
            .context("creating the relay's directory")?;
        let mut relays = Vec::new();
        for port in &ports {
            let path = sockets.path().join(port.to_string());
            let listener = tokio::net::UnixListener::bind(&path)
                .with_context(|| format!("listening on {}", path.display()))?;
            let to = std::net::SocketAddr::from(([127, 0, 0, 1], *port));
            relays.push(tokio::spawn(relay::unix_to_tcp(listener, to)));
        }
        let proxy = match self.network {
            AgentNetwork::Session => None,
            AgentNetwork::Public => {
                let path = sockets.path().join("proxy");
                let listener = tokio::net::UnixListener::bind(&path)
                    .with_context(|| format!("listening on {}", path.display()))?;
                relays.push(tokio::spawn(proxy::serve(listener)));
                (PROXY_PORT..).find(|p| !ports.contains(p))
            }
        };
        // The task names the agent's files where it sees them.
        let prompt = handover.workdir.join("prompt.md");
        if let Ok(text) = std::fs::read_to_string(&prompt) {
            std::fs::write(&prompt, as_seen_inside(handover, &text))
                .context("writing the agent's prompt.md")?;
        }
        // Where kubectl looks without KUBECONFIG too.
        let kube_dir = handover.workdir.join(".kube");
        std::fs::create_dir_all(&kube_dir).context("creating the agent's ~/.kube")?;
        std::fs::copy(handover.workdir.join("kubeconfig"), kube_dir.join("config"))
            .context("writing the agent's ~/.kube/config")?;
        let command = self.command.clone();
        let env = inside_env(handover, proxy);
        let plan = Plan {
            home: &handover.workdir,
            sockets: sockets.path(),
            relay: &self.relay,
            binds: &self.binds,
            system: &system_dirs(),
            env: &env,
            ports: &ports,
            proxy,
            command: &command,
        };
        let (options, inside) = bwrap_args(&plan);
        let mut stdin = Vec::new();
        for arg in options {
            stdin.extend_from_slice(arg.as_encoded_bytes());
            stdin.push(0);
        }
        let mut argv: Vec<OsString> = vec![self.bwrap.clone().into(), "--args".into(), "0".into()];
        argv.extend(inside);
        let launch = Launch {
            argv,
            cwd: handover.workdir.clone(),
            env: vec![],
            clear_env: true,
            stdin: Some(stdin),
            stdout: handover.stdout.clone(),
            stderr: handover.stderr.clone(),
            echo: self.echo,
        };
        Ok(Box::new(Sandboxed {
            agent: Some(Agent::spawn(&launch)?),
            relays,
            _sockets: sockets,
        }))
    }

    fn sandbox(&self) -> AgentSandbox {
        AgentSandbox::Bubblewrap
    }
}

/// The command line as the sandbox runs it, and the agent's program file when it must be bound
/// for the agent to run. A program given by its path (`./agent.sh`, run by its absolute path) is
/// bound read-only by itself, so an agent started from a checkout sees its own file and nothing
/// beside it; a program named alone must be on the sandbox's PATH (the system's directories), or
/// when only this host's PATH has it, under a bound path.
fn command_inside(command: &str, binds: &[PathBuf]) -> anyhow::Result<(String, Option<PathBuf>)> {
    let resolved = crate::agent::resolve_program(command, &std::env::current_dir()?);
    let program = crate::agent::program_of(&resolved);
    let (on_host, by_path) = if program.contains('/') {
        let path = PathBuf::from(&program);
        (Some(path).filter(|p| p.is_absolute() && p.is_file()), true)
    } else if find_in(std::ffi::OsStr::new(PATH), &program).is_some() {
        return Ok((resolved, None));
    } else {
        (find_on_path(&program), false)
    };
    let Some(path) = on_host else {
        return Ok((resolved, None));
    };
    let inside = SYSTEM
        .iter()
        .map(Path::new)
        .chain(binds.iter().map(PathBuf::as_path));
    let visible = inside
        .into_iter()
        .any(|dir| path.starts_with(dir) || canonical(&path).starts_with(canonical(dir)));
    if visible {
        return Ok((resolved, None));
    }
    anyhow::ensure!(
        by_path,
        "the agent's program {} is outside its sandbox: bind its directory with --agent-bind \
         DIR (read-only), or give --no-sandbox (the run is then recorded as unsandboxed)",
        path.display()
    );
    Ok((resolved, Some(path)))
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// A sandboxed agent and the relays of its connections.
struct Sandboxed {
    agent: Option<Agent>,
    relays: Vec<tokio::task::JoinHandle<()>>,
    _sockets: tempfile::TempDir,
}

impl RunningAgent for Sandboxed {
    fn wait(&mut self) -> BoxFuture<'_, anyhow::Result<Exit>> {
        Box::pin(async move {
            match self.agent.as_mut() {
                Some(agent) => Ok(Exit::of(&agent.wait().await?)),
                None => std::future::pending().await,
            }
        })
    }

    fn end(mut self: Box<Self>, grace: Duration) -> BoxFuture<'static, anyhow::Result<Exit>> {
        Box::pin(async move {
            let agent = self.agent.take().context("the agent was ended already")?;
            let status = agent.end(grace).await;
            for r in &self.relays {
                r.abort();
            }
            Ok(Exit::of(&status?))
        })
    }
}

/// What bubblewrap is asked to build.
pub struct Plan<'a> {
    /// The agent's directory on the host, its home inside.
    pub home: &'a Path,
    /// The directory of the relay's Unix sockets on the host.
    pub sockets: &'a Path,
    /// `netrelay` on the host.
    pub relay: &'a Path,
    /// Extra read-only paths.
    pub binds: &'a [PathBuf],
    /// The system's directories and, for each, the link it is (when it is one).
    pub system: &'a [(String, Option<PathBuf>)],
    /// The agent's whole environment.
    pub env: &'a [(String, String)],
    /// The session's ports on loopback.
    pub ports: &'a [u16],
    /// The proxy's port inside, with `--agent-network public`.
    pub proxy: Option<u16>,
    /// The agent's command line.
    pub command: &'a str,
}

/// bubblewrap's arguments for a plan (IO-free): the options, which go through a file
/// descriptor, and the command after them (bubblewrap takes the command from its command line
/// only; it names the relay's ports and the agent's own command, nothing else).
pub fn bwrap_args(plan: &Plan<'_>) -> (Vec<OsString>, Vec<OsString>) {
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |items: &[&dyn AsRef<std::ffi::OsStr>]| {
        a.extend(items.iter().map(|i| i.as_ref().to_os_string()));
    };
    for option in NAMESPACES {
        push(&[&option]);
    }
    push(&[&"--hostname", &"workstation"]);
    for (dir, link) in plan.system {
        match link {
            Some(target) => push(&[&"--symlink", target, dir]),
            None => push(&[&"--ro-bind", dir, dir]),
        }
    }
    push(&[&"--proc", &"/proc", &"--dev", &"/dev", &"--tmpfs", &"/tmp"]);
    push(&[&"--tmpfs", &"/run", &"--ro-bind", &plan.sockets, &SOCKETS]);
    push(&[&"--ro-bind", &plan.relay, &RELAY]);
    for b in plan.binds {
        push(&[&"--ro-bind", b, b]);
    }
    push(&[&"--bind", &plan.home, &HOME, &"--chdir", &HOME]);
    // Once every mount point is made: the root and /run read-only, so the agent writes in its
    // home and /tmp only.
    push(&[&"--remount-ro", &"/run", &"--remount-ro", &"/"]);
    push(&[&"--clearenv"]);
    for (k, v) in plan.env {
        push(&[&"--setenv", k, v]);
    }
    let mut command: Vec<OsString> = vec!["--".into(), RELAY.into()];
    for port in plan.ports {
        command.push(format!("127.0.0.1:{port}={SOCKETS}/{port}").into());
    }
    if let Some(port) = plan.proxy {
        command.push(format!("127.0.0.1:{port}={SOCKETS}/proxy").into());
    }
    command.extend(["--", "sh", "-c", plan.command].map(OsString::from));
    (a, command)
}

/// The system directories as this host has them.
fn system_dirs() -> Vec<(String, Option<PathBuf>)> {
    SYSTEM
        .iter()
        .filter_map(|dir| {
            let meta = std::fs::symlink_metadata(dir).ok()?;
            let link = if meta.file_type().is_symlink() {
                Some(std::fs::read_link(dir).ok()?)
            } else {
                None
            };
            Some((dir.to_string(), link))
        })
        .collect()
}

/// The agent's environment inside: what the session hands over, paths into its directory moved
/// to its home, `PATH`, `HOME` and the locale and terminal of the session's, and the proxy to the
/// internet when there is one (the session's endpoints are reached directly).
fn inside_env(handover: &crate::Handover, proxy: Option<u16>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), PATH.into()),
        ("HOME".into(), HOME.into()),
        ("USER".into(), "agent".into()),
    ];
    for key in PASSED {
        if let Ok(value) = std::env::var(key) {
            env.push((key.into(), value));
        }
    }
    for (k, v) in &handover.env {
        env.push((k.clone(), as_seen_inside(handover, v)));
    }
    if let Some(port) = proxy {
        let url = format!("http://127.0.0.1:{port}");
        for key in ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"] {
            env.push((key.into(), url.clone()));
        }
        for key in ["NO_PROXY", "no_proxy"] {
            env.push((key.into(), "127.0.0.1,localhost".into()));
        }
    }
    env
}

/// A text of the handover with the agent's directory named where the agent sees it (its home).
fn as_seen_inside(handover: &crate::Handover, text: &str) -> String {
    text.replace(handover.workdir.to_string_lossy().as_ref(), HOME)
}

/// The session's ports on the host's loopback: every endpoint URL the agent is handed.
fn loopback_ports(handover: &crate::Handover) -> Vec<u16> {
    let e = &handover.endpoints;
    let https = e.kubernetes_https.as_ref().map(|h| &h.url);
    let urls = [&e.kubernetes, &e.prometheus, &e.jaeger, &e.loki]
        .into_iter()
        .chain(https)
        .chain([&handover.submit_url, &handover.mcp_url])
        .chain(handover.env.iter().map(|(_, v)| v));
    let ports: BTreeSet<u16> = urls.filter_map(|u| loopback_port(u)).collect();
    ports.into_iter().collect()
}

/// The port of an `http(s)://127.0.0.1:PORT...` or `http(s)://localhost:PORT...` URL.
fn loopback_port(url: &str) -> Option<u16> {
    let url = url::Url::parse(url).ok()?;
    let web = matches!(url.scheme(), "http" | "https");
    let loopback = matches!(url.host_str()?, "127.0.0.1" | "localhost");
    (web && loopback).then(|| url.port()).flatten()
}

/// What this host allows of the sandbox.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Probe {
    /// `bwrap`, found on PATH.
    pub bwrap: Option<PathBuf>,
    /// `netrelay`, beside this program.
    pub relay: Option<PathBuf>,
    /// Why bubblewrap could not build the namespaces the sandbox uses (its answer); none when it
    /// could.
    pub namespaces_refused: Option<String>,
}

impl Probe {
    /// Why a sandbox cannot be built here, if it cannot.
    pub fn refusal_reason(&self) -> Option<String> {
        if self.bwrap.is_none() {
            return Some(
                "no `bwrap` on PATH: install bubblewrap (apt-get install bubblewrap) or run \
                 the agent with --no-sandbox"
                    .into(),
            );
        }
        if self.relay.is_none() {
            return Some(
                "no `netrelay` beside the collector binary (it is built with it): reinstall \
                 collector, or give --no-sandbox (the run is then recorded as unsandboxed)"
                    .into(),
            );
        }
        self.namespaces_refused.as_ref().map(|e| {
            format!(
                "this host refuses the sandbox's namespaces ({e}); allow unprivileged user \
                 namespaces (sysctl kernel.unprivileged_userns_clone=1, \
                 user.max_user_namespaces > 0) or give --no-sandbox (the run is then recorded as unsandboxed)"
            )
        })
    }
}

/// Looks for bubblewrap and `netrelay`, and asks bubblewrap to build the sandbox's namespaces
/// around `true`: once per process (what the host allows does not change while it runs), so the
/// sessions of an evaluation do not each start a bubblewrap to learn it again.
pub fn probe() -> Probe {
    static PROBED: std::sync::OnceLock<Probe> = std::sync::OnceLock::new();
    PROBED.get_or_init(probe_now).clone()
}

fn probe_now() -> Probe {
    let bwrap = find_on_path("bwrap");
    let relay = std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name("netrelay"))
        .filter(|p| p.is_file());
    let namespaces_refused = match &bwrap {
        None => Some("bwrap is missing".into()),
        Some(bwrap) => std::process::Command::new(bwrap)
            .args(NAMESPACES)
            .args(["--ro-bind", "/", "/", "--proc", "/proc", "--", "true"])
            .output()
            .map_or_else(
                |e| Some(e.to_string()),
                |o| {
                    (!o.status.success())
                        .then(|| String::from_utf8_lossy(&o.stderr).trim().to_string())
                },
            ),
    };
    Probe {
        bwrap,
        relay,
        namespaces_refused,
    }
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    find_in(&std::env::var_os("PATH")?, program)
}

/// `program` in the directories of a PATH value.
fn find_in(path: &std::ffi::OsStr, program: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_ports_are_read_from_urls_only() {
        assert_eq!(loopback_port("http://127.0.0.1:8443"), Some(8443));
        assert_eq!(loopback_port("http://localhost:9/mcp"), Some(9));
        assert_eq!(loopback_port("http://10.0.0.1:80/"), None);
        assert_eq!(loopback_port("https://127.0.0.1:6443"), Some(6443));
        assert_eq!(loopback_port("ftp://127.0.0.1:21"), None);
        assert_eq!(loopback_port("/home/agent/kubeconfig"), None);
    }

    #[test]
    fn the_plan_names_no_host_path_but_what_it_binds() {
        let home = Path::new("/tmp/agent-x1");
        let plan = Plan {
            home,
            sockets: Path::new("/tmp/endpoints-y2"),
            relay: Path::new("/opt/bin/netrelay"),
            binds: &[PathBuf::from("/opt/tools")],
            system: &[
                ("/usr".into(), None),
                ("/bin".into(), Some(PathBuf::from("usr/bin"))),
            ],
            env: &[("KUBECONFIG".into(), "/home/agent/kubeconfig".into())],
            ports: &[6443, 9090],
            proxy: Some(3128),
            command: "./agent.sh",
        };
        let (options, command) = bwrap_args(&plan);
        let args: Vec<String> = options
            .into_iter()
            .chain(command.clone())
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let joined = args.join(" ");
        // What shows in the sandbox's process list is the relay and the agent's own command.
        let shown: Vec<String> = command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(shown[..2], ["--", "/run/netrelay"]);
        assert!(!shown.iter().any(|a| a.contains("/tmp/")), "{shown:?}");
        for needed in [
            "--unshare-user",
            "--unshare-pid",
            "--unshare-net",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--ro-bind /usr /usr",
            "--symlink usr/bin /bin",
            "--ro-bind /opt/tools /opt/tools",
            "--bind /tmp/agent-x1 /home/agent",
            "--setenv KUBECONFIG /home/agent/kubeconfig",
            "-- /run/netrelay 127.0.0.1:6443=/run/endpoints/6443 127.0.0.1:9090=/run/endpoints/9090 \
             127.0.0.1:3128=/run/endpoints/proxy -- sh -c ./agent.sh",
        ] {
            assert!(joined.contains(needed), "{needed} missing from {joined}");
        }
        // The agent's user is not root inside, and nothing binds the host's root.
        assert!(joined.contains("--uid 1000 --gid 1000"));
        assert!(!args.windows(3).any(|w| w[0] == "--bind" && w[1] == "/"));
    }
}
