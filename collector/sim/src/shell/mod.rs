//! What runs when someone executes a command inside a simulated container (`kubectl exec`, a
//! `kubectl run` pod's command, an attached shell): a POSIX shell and the tools the container's
//! image ships, answering from the model. `cat` reads the ConfigMaps and Secrets mounted into the
//! pod, `env` the variables the kubelet resolved, `curl` goes through the same DNS, Services,
//! endpoints, listening ports and policies the workload's requests go through and gets the answer
//! the program gives now, `mongo` and `redis-cli` talk to the database's state. A tool the image
//! does not ship is "not found", as it would be.
//!
//! Everything here is IO-free and bounded: scripts, loops, output and simulated time are capped
//! ([`Limits`]), so that a hostile command cannot hang or exhaust the server.
//!
//! - [`parse`]: the shell grammar;
//! - [`run`]: the evaluator (expansions, pipelines, redirections, control flow, builtins);
//! - [`image`]: which shell and tools an image ships;
//! - [`fs`]: the container's files (mounts, `/etc`, `/proc`, cgroup limits);
//! - [`tools`]: coreutils-style commands; [`net`]: curl, wget, nc, DNS tools, ping;
//!   [`http`]: what a program answers over HTTP (also what `kubectl port-forward` reaches);
//!   [`db`]: the database CLIs.

pub mod db;
pub mod fs;
pub mod http;
pub mod image;
pub mod main;
pub mod net;
pub mod parse;
pub mod process;
pub mod run;
pub mod tools;

use std::collections::BTreeMap;

use problems::AppSpec;

use crate::objects::{CState, Key, Pod, Slot, key};
use crate::workload::Workload;
use crate::world::World;

/// What a command reads and may change: the cluster, the application and its load.
pub struct Model<'a> {
    pub world: &'a mut World,
    pub app: &'a AppSpec,
    pub workload: &'a Workload,
}

impl Model<'_> {
    /// The memory (bytes) and CPU (millicores) of the node a pod runs on, which `free`, `nproc`
    /// and `/proc` report (as a container without limits sees its host); 8 GiB and 4 cores for
    /// a pod with no node.
    pub fn host(&self, pod: &Key) -> (i64, i64) {
        self.world
            .pods
            .get(pod)
            .and_then(|p| p.spec.node_name.as_deref())
            .and_then(|n| self.world.nodes.get(n))
            .map_or((8 << 30, 4000), |n| (n.memory, n.cpu_milli))
    }
}

impl crate::Sim {
    /// The model as the shell sees it.
    pub fn shell_model(&mut self) -> Model<'_> {
        Model {
            world: &mut self.world,
            app: &self.app,
            workload: &self.workload,
        }
    }
}

/// Bounds on one exec session.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Commands run (loops count every iteration).
    pub steps: u32,
    /// Bytes of output kept from one command (a pipeline passes at most this much along).
    pub output_bytes: usize,
    /// Simulated milliseconds the session may spend (sleep, timeouts, slow answers).
    pub wall_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            steps: 20_000,
            output_bytes: 4 << 20,
            wall_ms: 120_000,
        }
    }
}

/// What a command (or a line of an interactive shell) produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Output {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Exit status; `None` while an interactive shell goes on.
    pub exit: Option<i32>,
    /// Simulated milliseconds the command took (the caller waits them before answering).
    pub elapsed_ms: u64,
}

/// Why a container cannot be entered, with the apiserver's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnterError {
    PodNotFound,
    /// A container name the pod does not have.
    NoSuchContainer(String),
    /// The pod is not scheduled yet.
    NotScheduled,
    /// The pod ran to completion (its phase).
    Completed(String),
    /// The container is not running now.
    NotRunning(String),
    /// The node's kubelet cannot be reached (it is stopped).
    KubeletDown {
        node: String,
        ip: String,
    },
}

impl EnterError {
    /// HTTP code and message, as the apiserver answers an exec it cannot serve.
    pub fn status(&self, pod: &str) -> (u16, String) {
        match self {
            EnterError::PodNotFound => (404, format!("pods \"{pod}\" not found")),
            EnterError::NoSuchContainer(c) => {
                (400, format!("container {c} is not valid for pod {pod}"))
            }
            EnterError::NotScheduled => (400, format!("pod {pod} does not have a host assigned")),
            EnterError::Completed(phase) => (
                400,
                format!(
                    "cannot exec into a container in a completed pod; current phase is {phase}"
                ),
            ),
            EnterError::NotRunning(c) => (
                500,
                format!("unable to upgrade connection: container not found (\"{c}\")"),
            ),
            EnterError::KubeletDown { ip, .. } => (
                500,
                format!("error dialing backend: dial tcp {ip}:10250: connect: connection refused"),
            ),
        }
    }
}

/// The container a session runs in.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub pod: Key,
    /// Which of the pod's containers (an app container or an ephemeral debugger).
    pub slot: Slot,
    pub container: String,
    pub image: String,
}

/// Finds the container `container` (or the pod's default one) of a running pod.
pub fn enter(
    w: &World,
    ns: &str,
    pod: &str,
    container: Option<&str>,
) -> Result<Target, EnterError> {
    let k = key(ns, pod);
    let p = w.pods.get(&k).ok_or(EnterError::PodNotFound)?;
    let slot = match container {
        Some(c) => p
            .slot(c)
            .ok_or_else(|| EnterError::NoSuchContainer(c.to_string()))?,
        None => Slot::App(default_container(p)),
    };
    let c = p
        .container(slot)
        .ok_or_else(|| EnterError::NoSuchContainer(String::new()))?;
    let Some(node) = p.spec.node_name.as_deref() else {
        return Err(EnterError::NotScheduled);
    };
    if matches!(p.phase.as_str(), "Succeeded" | "Failed") {
        return Err(EnterError::Completed(p.phase.clone()));
    }
    if w.runtime.node(node).kubelet_down {
        let ip = p.host_ip.clone().unwrap_or_default();
        return Err(EnterError::KubeletDown {
            node: node.to_string(),
            ip,
        });
    }
    let running = p
        .status(slot)
        .is_some_and(|s| matches!(s.state, CState::Running { .. }));
    if !running {
        return Err(EnterError::NotRunning(c.name.clone()));
    }
    Ok(Target {
        pod: k,
        slot,
        container: c.name.clone(),
        image: c.image.clone(),
    })
}

/// The container kubectl picks when none is named: the annotated default, else the first.
fn default_container(p: &Pod) -> usize {
    p.meta
        .annotations
        .get("kubectl.kubernetes.io/default-container")
        .and_then(|n| p.spec.containers.iter().position(|c| &c.name == n))
        .unwrap_or(0)
}

/// A shell session inside one container: its variables, working directory, the files it wrote
/// and the last status survive from one line to the next.
#[derive(Debug, Clone)]
pub struct Session {
    pub target: Target,
    pub(crate) vars: BTreeMap<String, String>,
    pub(crate) cwd: String,
    /// Files written during the session (containers' writable layer).
    pub(crate) files: BTreeMap<String, Vec<u8>>,
    pub(crate) status: i32,
    pub(crate) limits: Limits,
    pub(crate) steps: u32,
    pub(crate) spent_ms: u64,
    /// Seeds the session's own draws (which request of a failing route fails), apart from the
    /// world's generator so that looking never changes the simulation.
    pub(crate) draws: u64,
}

impl Session {
    /// A session in `target`, with the environment the container's process has.
    pub fn new(m: &Model, target: Target, limits: Limits) -> Session {
        let vars = fs::environment(m, &target);
        let draws = m.world.now as u64 ^ 0x9e37_79b9_7f4a_7c15;
        Session {
            target,
            vars,
            cwd: "/".into(),
            files: BTreeMap::new(),
            status: 0,
            limits,
            steps: 0,
            spent_ms: 0,
            draws,
        }
    }

    /// Runs an argv as the container runtime does (no shell unless argv names one).
    pub fn exec(&mut self, m: &mut Model, argv: &[String], stdin: &[u8]) -> Output {
        run::exec_argv(self, m, argv, stdin)
    }

    /// Runs one line of an interactive shell (`exit` set only when the line ran `exit`).
    pub fn line(&mut self, m: &mut Model, src: &str) -> Output {
        run::line(self, m, src)
    }

    /// The shell this container would run for an interactive session, if its image has one.
    pub fn shell(&self) -> Option<image::Shell> {
        image::toolbox(&self.target.image).shell
    }

    /// The prompt an interactive shell prints (on a terminal).
    pub fn prompt(&self) -> String {
        let user = "root";
        match self.shell() {
            Some(image::Shell::Bash) => {
                format!("{user}@{}:{}# ", self.target.pod.1, self.cwd)
            }
            _ => format!("{} # ", self.cwd),
        }
    }
}
