//! A live environment's `exec` and `attach`: processes in the simulated containers
//! (`sim::shell`), each call run under the world's lock, so that what a command reads is the
//! world as it stands and what it changes (a database's users) the simulation sees next second;
//! and `port-forward`, connections to the processes' ports answered as the programs answer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use apis::kube::exec::{Chunk, ContainerExec, ExecSession};
use apis::kube::portforward::{Answer, PodPorts, PortConnection};
use apiserver::remotecommand::Options;
use apiserver::status::Failure;
use sim::objects::key;
use sim::shell::process::Process;
use sim::shell::{self, EnterError, Limits, Output, Session, http};

use runner::problem::ProblemRun;

/// The containers of the running world.
pub struct LiveContainers {
    pub run: Arc<Mutex<ProblemRun>>,
}

impl ContainerExec for LiveContainers {
    fn open(
        &self,
        namespace: &str,
        pod: &str,
        options: &Options,
        attach: bool,
    ) -> Result<Box<dyn ExecSession>, Failure> {
        let mut run = self.run.lock().unwrap_or_else(|e| e.into_inner());
        let target = shell::enter(&run.sim.world, namespace, pod, options.container.as_deref())
            .map_err(|e| failure(&e, pod))?;
        let session = Session::new(&run.sim.shell_model(), target, Limits::default());
        Ok(Box::new(LiveProcess {
            run: self.run.clone(),
            pending: Some((session, options.command.clone())),
            stdin: options.stdin,
            tty: options.tty,
            attach,
            process: None,
        }))
    }
}

/// The apiserver's answer when a container cannot be entered.
fn failure(e: &EnterError, pod: &str) -> Failure {
    let (code, message) = e.status(pod);
    let reason = match code {
        404 => "NotFound",
        400 => "BadRequest",
        _ => "InternalError",
    };
    Failure::new(code, reason, message)
}

/// One process: started on the first call, then fed the client's input.
struct LiveProcess {
    run: Arc<Mutex<ProblemRun>>,
    pending: Option<(Session, Vec<String>)>,
    stdin: bool,
    tty: bool,
    /// Attached to the container's main process: when it ends, the container exits.
    attach: bool,
    process: Option<Process>,
}

fn chunk(out: Output) -> Chunk {
    Chunk {
        stdout: out.stdout,
        stderr: out.stderr,
        wait: Duration::from_millis(out.elapsed_ms),
        exit: out.exit,
    }
}

impl LiveProcess {
    fn with(&mut self, f: impl FnOnce(&mut Process, &mut shell::Model) -> Output) -> Chunk {
        let mut run = self.run.lock().unwrap_or_else(|e| e.into_inner());
        let mut m = run.sim.shell_model();
        let Some(p) = self.process.as_mut() else {
            return Chunk {
                exit: Some(1),
                ..Chunk::default()
            };
        };
        let out = f(p, &mut m);
        if self.attach {
            shell::main::log_output(m.world, &p.session.target, &out);
            if let Some(code) = out.exit {
                shell::main::end(m.world, &p.session.target, code);
            }
        }
        chunk(out)
    }
}

impl ExecSession for LiveProcess {
    fn start(&mut self) -> Chunk {
        let Some((session, argv)) = self.pending.take() else {
            return Chunk::default();
        };
        let mut run = self.run.lock().unwrap_or_else(|e| e.into_inner());
        let mut m = run.sim.shell_model();
        let (process, out) = Process::start(&mut m, session, &argv, self.stdin, self.tty);
        if self.attach {
            shell::main::log_output(m.world, &process.session.target, &out);
        }
        self.process = Some(process);
        chunk(out)
    }

    fn stdin(&mut self, data: &[u8]) -> Chunk {
        self.with(|p, m| p.input(m, data))
    }

    fn stdin_closed(&mut self) -> Chunk {
        self.with(|p, m| p.close_stdin(m))
    }
}

impl PodPorts for LiveContainers {
    fn check(&self, namespace: &str, pod: &str) -> Result<(), Failure> {
        let run = self.run.lock().unwrap_or_else(|e| e.into_inner());
        shell::enter(&run.sim.world, namespace, pod, None)
            .map(|_| ())
            .map_err(|e| failure(&e, pod))
    }

    fn connect(
        &self,
        namespace: &str,
        pod: &str,
        port: u16,
    ) -> Result<Box<dyn PortConnection>, String> {
        let mut run = self.run.lock().unwrap_or_else(|e| e.into_inner());
        let m = run.sim.shell_model();
        let conn = http::Connection::open(&m, &key(namespace, pod), port)?;
        Ok(Box::new(LiveConnection {
            run: self.run.clone(),
            conn,
        }))
    }
}

/// A forwarded connection to a process of the running world.
struct LiveConnection {
    run: Arc<Mutex<ProblemRun>>,
    conn: http::Connection,
}

impl PortConnection for LiveConnection {
    fn send(&mut self, bytes: &[u8]) -> Option<Answer> {
        let mut run = self.run.lock().unwrap_or_else(|e| e.into_inner());
        let m = run.sim.shell_model();
        self.conn.send(&m, bytes).map(|r| Answer {
            bytes: r.bytes,
            wait: Duration::from_micros((r.latency_ms * 1000.0) as u64),
            close: r.close,
        })
    }
}
