//! The main process of a pod a client created itself with a tool image (`kubectl run
//! --image=busybox -- wget -qO- http://svc/`): its command runs through the shell when the
//! container starts, its output becomes the container's log and its exit status the container's
//! (the pod completes, or restarts, by its restartPolicy). A shell waiting for stdin (`kubectl run
//! -it -- sh`) stays up for `kubectl attach`; `sleep` sleeps; listeners keep listening.
//!
//! Only pods without an owner are run this way, and the ephemeral debuggers clients add to any
//! pod (`kubectl debug POD --image=busybox -- nslookup geo`): the application's own containers,
//! and the containers faults add to them, keep the behaviour the programs model gives them.

use super::fs::main_argv;
use super::image::toolbox;
use super::{Limits, Session, Target};
use crate::objects::{CState, Key, Pod, Slot};
use crate::programs;
use crate::util::NS_PER_SEC;

/// Images whose default command is a shell.
fn shell_by_default(image: &str) -> bool {
    let repo = programs::repository(image);
    let name = repo.rsplit('/').next().unwrap_or(repo);
    matches!(name, "busybox" | "alpine" | "ubuntu" | "debian")
}

/// What a started main process does.
enum Main {
    /// Runs as long as nobody stops it (a shell on stdin, a listener, `sleep infinity`).
    Stays,
    /// Exits by itself after this many seconds with status 0 (`sleep N`).
    Sleeps(f64),
    /// Runs now: its output and status.
    Runs(Vec<String>),
}

fn classify(argv: &[String], stdin: bool) -> Main {
    let joined = argv.join(" ");
    let shell_only =
        argv.len() == 1 && matches!(argv[0].rsplit('/').next(), Some("sh" | "bash" | "ash"));
    if (shell_only && stdin)
        || joined.contains("sleep infinity")
        || joined.contains("tail -f")
        || joined.contains("nc -l")
        || joined.contains("while true")
        || joined.contains("while :")
    {
        return Main::Stays;
    }
    let words: Vec<&str> = joined.split_whitespace().collect();
    if let ["sleep", n] = words.as_slice()
        && let Ok(secs) = n.trim_end_matches('s').parse::<f64>()
    {
        return Main::Sleeps(secs.max(0.0));
    }
    Main::Runs(argv.to_vec())
}

/// Runs the main process of every client pod's container that started this second.
pub fn run_started(sim: &mut crate::Sim) {
    let now = sim.world.now;
    let started: Vec<(Key, Slot)> = sim
        .world
        .pods
        .iter()
        .filter(|(_, p)| p.meta.deleted_at.is_none())
        .flat_map(|(k, p)| client_slots(p).map(move |slot| (k.clone(), slot)))
        .filter(|(k, slot)| {
            let status = sim.world.pods[k].status(*slot);
            status.is_some_and(|s| matches!(s.state, CState::Running { started } if started == now))
        })
        .collect();
    for (k, slot) in started {
        let Some(c) = sim
            .world
            .pods
            .get(&k)
            .and_then(|p| p.container(slot))
            .cloned()
        else {
            continue;
        };
        if programs::identify(&sim.app, &c).is_some() || toolbox(&c.image).shell.is_none() {
            continue;
        }
        let explicit = !c.command.is_empty() || !c.args.is_empty();
        if !explicit && !shell_by_default(&c.image) {
            continue;
        }
        let stdin = c
            .extra
            .get("stdin")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        let mut m = sim.shell_model();
        let argv = main_argv(&m, &c);
        let (code, after_ns) = match classify(&argv, stdin) {
            Main::Stays => continue,
            Main::Sleeps(secs) => (0, (secs * NS_PER_SEC as f64).min(1e18) as i64),
            Main::Runs(argv) => {
                let target = Target {
                    pod: k.clone(),
                    slot,
                    container: c.name.clone(),
                    image: c.image.clone(),
                };
                let mut session = Session::new(&m, target, Limits::default());
                let out = session.exec(&mut m, &argv, b"");
                log_output(m.world, &session.target, &out);
                (out.exit.unwrap_or(0), out.elapsed_ms as i64 * 1_000_000)
            }
        };
        let reason = if code == 0 { "Completed" } else { "Error" };
        if let Some(s) = sim.world.pods.get_mut(&k).and_then(|p| p.status_mut(slot)) {
            s.exit_at = Some((now + after_ns.max(1), code, reason.into()));
        }
    }
}

/// The containers of `p` whose main process a client chose: all of a pod without an owner, and
/// the ephemeral debuggers of any pod.
fn client_slots(p: &Pod) -> impl Iterator<Item = Slot> + '_ {
    let apps = if p.meta.owner.is_none() {
        p.spec.containers.len()
    } else {
        0
    };
    (0..apps)
        .map(Slot::App)
        .chain((0..p.spec.ephemeral_containers.len()).map(Slot::Ephemeral))
}

/// What a container's main process wrote is its log (what `kubectl logs` shows of it after an
/// attached session too).
pub fn log_output(w: &mut crate::world::World, target: &Target, out: &super::Output) {
    let Some(pod) = w.pods.get(&target.pod) else {
        return;
    };
    let restart = pod.status(target.slot).map_or(0, |s| s.restart_count);
    for (stream, data) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        for line in String::from_utf8_lossy(data).lines() {
            w.log(
                &target.pod,
                &target.container,
                restart,
                stream,
                line.to_string(),
            );
        }
    }
}

/// The attached main process ended (its shell read the end of stdin, or ran `exit`): the
/// container exits with its status.
pub fn end(w: &mut crate::world::World, target: &Target, code: i32) {
    let now = w.now;
    if let Some(s) = w
        .pods
        .get_mut(&target.pod)
        .and_then(|p| p.status_mut(target.slot))
        && s.state.is_running()
    {
        let reason = if code == 0 { "Completed" } else { "Error" };
        s.exit_at = Some((now + 1, code, reason.into()));
    }
}
