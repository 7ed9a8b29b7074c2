//! The kubelet of every node: pulls images (with pull back-off), mounts volumes, runs init
//! containers then the app containers, runs probes, OOM-kills a container whose working set
//! exceeds its limit, restarts exited containers with CrashLoopBackOff back-off (10 s doubling to
//! 5 min), and accounts CPU with CFS throttling at the limit.

use std::collections::BTreeMap;

use problems::app::{AppSpec, Usage};
use problems::primitive::ImageEffect;

use super::logs::{self, Level};
use super::objects::*;
use super::programs::{self, LogStyle, Program};
use super::util::{self, NS_PER_SEC};
use super::world::{Source, World};

const MAX_BACKOFF: i64 = 300;

/// CPU the node's own daemons (kubelet, container runtime, kernel threads) use, in cores.
pub const NODE_SYSTEM_CPU: f64 = 0.15;
/// Memory the node's own daemons and kernel hold, in bytes.
pub const NODE_SYSTEM_MEMORY: f64 = 900e6;

/// One kubelet sync of every pod on a node whose kubelet runs.
pub fn sync(w: &mut World, app: &AppSpec, effects: &super::flags::Effects, dt: i64) {
    let keys: Vec<Key> = w.pods.keys().cloned().collect();
    // CPU seconds the containers of each node used during this sync.
    let mut used: BTreeMap<String, f64> = BTreeMap::new();
    for k in keys {
        let Some(node) = w.pods.get(&k).and_then(|p| p.spec.node_name.clone()) else {
            continue;
        };
        if w.runtime.node(&node).kubelet_down || !w.nodes.contains_key(&node) {
            continue;
        }
        let before = cpu_seconds(w, &k);
        sync_pod(w, app, effects, &k, &node, dt);
        // A pod removed during its sync used nothing more.
        let after = cpu_seconds(w, &k).unwrap_or(before.unwrap_or(0.0));
        *used.entry(node).or_default() += (after - before.unwrap_or(0.0)).max(0.0);
    }
    account_nodes(w, &used, dt);
}

/// The CPU seconds a pod's containers have used so far.
fn cpu_seconds(w: &World, k: &Key) -> Option<f64> {
    w.pods
        .get(k)
        .map(|p| p.statuses.iter().map(|s| s.cpu_seconds).sum())
}

/// Adds `dt` of each node's CPU to its root cgroup's counter: what its containers used, its
/// stressors and its own daemons, no more than its cores can give.
fn account_nodes(w: &mut World, used: &BTreeMap<String, f64>, dt: i64) {
    let dts = dt as f64 / NS_PER_SEC as f64;
    let nodes: Vec<(String, f64)> = w
        .nodes
        .values()
        .filter(|n| !w.runtime.node(&n.meta.name).kubelet_down)
        .map(|n| (n.meta.name.clone(), n.cpu_milli as f64 / 1000.0))
        .collect();
    for (node, cores) in nodes {
        let stress = w.runtime.node(&node).cpu_stress_milli as f64 / 1000.0;
        let containers = used.get(&node).copied().unwrap_or(0.0);
        let total = (containers + (stress + NODE_SYSTEM_CPU) * dts).min(cores * dts);
        *w.node_cpu_seconds.entry(node).or_default() += total;
    }
}

fn sync_pod(
    w: &mut World,
    app: &AppSpec,
    effects: &super::flags::Effects,
    k: &Key,
    node: &str,
    dt: i64,
) {
    let now = w.now;
    let Some(mut pod) = w.pods.remove(k) else {
        return;
    };
    let before = pod.fingerprint();
    if let Some(at) = pod.meta.deleted_at {
        if pod.statuses.iter().any(|s| s.state.is_running()) && now - at < NS_PER_SEC {
            for s in pod.statuses.iter().filter(|s| s.state.is_running()) {
                let r = World::pod_ref(&pod, Some(&s.name));
                w.event(
                    &r,
                    false,
                    "Killing",
                    &format!("Stopping container {}", s.name),
                    Source::Kubelet(node.into()),
                );
            }
        }
        if now - at >= 2 * NS_PER_SEC {
            w.touch(Kind::Pod, k);
        } else {
            w.pods.insert(k.clone(), pod);
        }
        return;
    }
    if pod.start_time.is_none() {
        pod.start_time = Some(now);
        let idx = w.node_index(node);
        pod.pod_ip = Some(w.pod_ip(idx));
        pod.host_ip = w.nodes.get(node).map(|n| n.ip.clone());
        set_condition(
            &mut pod.conditions,
            "PodReadyToStartContainers",
            true,
            None,
            None,
            now,
        );
        set_condition(
            &mut pod.conditions,
            "Initialized",
            pod.spec.init_containers.is_empty(),
            (!pod.spec.init_containers.is_empty()).then_some("ContainersNotInitialized"),
            None,
            now,
        );
        pod.next_schedule = now;
    }
    let ns = k.0.clone();
    // Volumes.
    let missing = pod.spec.volumes.iter().find_map(|v| {
        if let Some(cm) = &v.config_map
            && !w.configmaps.contains_key(&key(&ns, &cm.name))
        {
            return Some((
                v.name.clone(),
                format!("configmap \"{}\" not found", cm.name),
            ));
        }
        if let Some(s) = &v.secret
            && !w.secrets.contains_key(&key(&ns, &s.secret_name))
        {
            return Some((
                v.name.clone(),
                format!("secret \"{}\" not found", s.secret_name),
            ));
        }
        None
    });
    if let Some((vol, why)) = missing {
        if now >= pod.next_schedule {
            pod.next_schedule = now + 120 * NS_PER_SEC;
            let r = World::pod_ref(&pod, None);
            w.event(
                &r,
                true,
                "FailedMount",
                &format!("MountVolume.SetUp failed for volume \"{vol}\" : {why}"),
                Source::Kubelet(node.into()),
            );
        }
        finish(w, k, pod, before);
        return;
    }
    // Init containers, one at a time.
    while pod.init_done < pod.spec.init_containers.len() {
        let i = pod.init_done;
        let c = pod.spec.init_containers[i].clone();
        let done = run_init(w, app, &mut pod, i, &c, node);
        if !done {
            for s in &mut pod.statuses {
                if !s.state.is_running() && s.state.waiting_reason() != Some("PodInitializing") {
                    s.state = CState::waiting("PodInitializing", None);
                }
            }
            finish(w, k, pod, before);
            return;
        }
        pod.init_done += 1;
    }
    if !pod.spec.init_containers.is_empty() {
        set_condition(&mut pod.conditions, "Initialized", true, None, None, now);
    }
    for i in 0..pod.spec.containers.len() {
        let c = pod.spec.containers[i].clone();
        run_container(w, app, effects, &mut pod, i, &c, node, dt);
    }
    for i in 0..pod.spec.ephemeral_containers.len() {
        run_ephemeral(w, app, &mut pod, i, node);
    }
    finish(w, k, pod, before);
}

/// An ephemeral debugger: started once its image is there, then left to its process (a shell
/// for `kubectl attach`, or the command it was given); never restarted or probed, and not part
/// of the pod's readiness.
fn run_ephemeral(w: &mut World, app: &AppSpec, pod: &mut Pod, i: usize, node: &str) {
    let (Some(c), Some(mut s)) = (
        pod.spec.ephemeral_containers.get(i).cloned(),
        pod.ephemeral_statuses.get(i).cloned(),
    ) else {
        return;
    };
    let now = w.now;
    match s.state.clone() {
        CState::Waiting { .. } if now >= s.backoff_until => {
            if ensure_image(w, app, pod, &mut s, &c, node, List::Ephemeral).is_ok() {
                start_events(w, pod, &mut s, &c, node, List::Ephemeral);
                s.state = CState::Running { started: now };
            }
        }
        CState::Waiting { .. } => pull_backoff_tick(w, pod, &mut s, &c, node, List::Ephemeral),
        CState::Running { started } => {
            if let Some((at, code, reason)) = s.exit_at.clone()
                && now >= at
            {
                // The only instance it will have: no last state, no restart.
                exit(&mut s, now, started, code, &reason);
            }
        }
        CState::Terminated(_) => {}
    }
    pod.ephemeral_statuses[i] = s;
}

/// Writes the pod back with recomputed phase and conditions; touches it when it changed.
fn finish(w: &mut World, k: &Key, mut pod: Pod, before: u64) {
    let now = w.now;
    let node_ok = pod
        .spec
        .node_name
        .as_ref()
        .and_then(|n| w.nodes.get(n))
        .is_some_and(|n| n.ready());
    let all_ready = pod.statuses.iter().all(|s| s.ready) && node_ok;
    let not_ready_names: Vec<&str> = pod
        .statuses
        .iter()
        .filter(|s| !s.ready)
        .map(|s| s.name.as_str())
        .collect();
    let msg = (!all_ready).then(|| {
        format!(
            "containers with unready status: [{}]",
            not_ready_names.join(" ")
        )
    });
    set_condition(
        &mut pod.conditions,
        "ContainersReady",
        all_ready,
        msg.as_ref().map(|_| "ContainersNotReady"),
        msg.as_deref(),
        now,
    );
    set_condition(
        &mut pod.conditions,
        "Ready",
        all_ready,
        msg.as_ref().map(|_| "ContainersNotReady"),
        msg.as_deref(),
        now,
    );
    let any_started = pod.statuses.iter().any(|s| s.container_id.is_some());
    let exit_codes: Option<Vec<i32>> = pod
        .statuses
        .iter()
        .map(|s| match &s.state {
            CState::Terminated(t) if !restarts(&pod.spec.restart_policy, t.exit_code) => {
                Some(t.exit_code)
            }
            _ => None,
        })
        .collect();
    pod.phase = match exit_codes {
        // Every container exited for good: the pod ran to completion.
        Some(codes) if !codes.is_empty() && codes.iter().all(|c| *c == 0) => "Succeeded",
        Some(codes) if !codes.is_empty() => "Failed",
        _ if any_started => "Running",
        _ => "Pending",
    }
    .into();
    order_conditions(&mut pod.conditions);
    let changed = pod.fingerprint() != before;
    w.pods.insert(k.clone(), pod);
    if changed {
        w.touch(Kind::Pod, k);
    }
}

fn order_conditions(conds: &mut [Condition]) {
    let rank = |k: &str| match k {
        "PodReadyToStartContainers" => 0,
        "Initialized" => 1,
        "Ready" => 2,
        "ContainersReady" => 3,
        "PodScheduled" => 4,
        _ => 5,
    };
    conds.sort_by_key(|c| rank(&c.kind));
}

/// Pulls the image if needed. Returns false (and sets the waiting state) when it is not there.
/// Which of a pod's container lists a container is in, as event field paths name it.
#[derive(Clone, Copy)]
enum List {
    Init,
    App,
    Ephemeral,
}

impl List {
    fn field_path(self, name: &str) -> String {
        let list = match self {
            List::Init => "initContainers",
            List::App => "containers",
            List::Ephemeral => "ephemeralContainers",
        };
        format!("spec.{list}{{{name}}}")
    }
}

fn ensure_image(
    w: &mut World,
    app: &AppSpec,
    pod: &Pod,
    s: &mut ContainerStatus,
    c: &Container,
    node: &str,
    list: List,
) -> Result<Option<ImageEffect>, ()> {
    let status = programs::image_status(w, app, &c.image);
    let mut r = World::pod_ref(pod, None);
    r.field_path = Some(list.field_path(&c.name));
    let src = || Source::Kubelet(node.to_string());
    if w.pulled.contains(&(node.to_string(), c.image.clone())) {
        return Ok(status.flatten());
    }
    w.event(
        &r,
        false,
        "Pulling",
        &format!("Pulling image \"{}\"", c.image),
        src(),
    );
    match status {
        Some(effect) => {
            use rand::Rng;
            let secs: f64 = w.rng.random_range(0.8..6.0);
            let size: u64 = w.rng.random_range(20_000_000..180_000_000);
            w.event(&r, false, "Pulled", &format!("Successfully pulled image \"{}\" in {secs:.3}s ({secs:.3}s including waiting). Image size: {size} bytes.", c.image), src());
            w.pulled.insert((node.to_string(), c.image.clone()));
            Ok(effect)
        }
        None => {
            let full = if c.image.contains('/') {
                format!("docker.io/{}", c.image)
            } else {
                format!("docker.io/library/{}", c.image)
            };
            w.event(&r, true, "Failed", &format!("Failed to pull image \"{}\": rpc error: code = NotFound desc = failed to pull and unpack image \"{full}\": failed to resolve reference \"{full}\": {full}: not found", c.image), src());
            let first = s.state.waiting_reason() != Some("ErrImagePull")
                && s.state.waiting_reason() != Some("ImagePullBackOff");
            let reason = if first || s.backoff_secs == 0 {
                "ErrImagePull"
            } else {
                "ImagePullBackOff"
            };
            w.event(&r, true, "Failed", &format!("Error: {reason}"), src());
            s.backoff_secs = if s.backoff_secs == 0 {
                10
            } else {
                (s.backoff_secs * 2).min(MAX_BACKOFF)
            };
            s.backoff_until = w.now + s.backoff_secs * NS_PER_SEC;
            s.state = CState::waiting(
                reason,
                Some(format!(
                    "failed to pull and unpack image \"{full}\": failed to resolve reference \"{full}\": {full}: not found"
                )),
            );
            Err(())
        }
    }
}

/// While an image pull backs off, the kubelet reports it on every sync.
fn pull_backoff_tick(
    w: &mut World,
    pod: &Pod,
    s: &mut ContainerStatus,
    c: &Container,
    node: &str,
    list: List,
) {
    if matches!(
        s.state.waiting_reason(),
        Some("ErrImagePull") | Some("ImagePullBackOff")
    ) && w.now >= s.next_backoff_event
    {
        let mut r = World::pod_ref(pod, None);
        r.field_path = Some(list.field_path(&c.name));
        if s.state.waiting_reason() == Some("ErrImagePull") {
            s.state = CState::waiting(
                "ImagePullBackOff",
                Some(format!("Back-off pulling image \"{}\"", c.image)),
            );
        }
        w.event(
            &r,
            false,
            "BackOff",
            &format!("Back-off pulling image \"{}\"", c.image),
            Source::Kubelet(node.into()),
        );
        w.event(
            &r,
            true,
            "Failed",
            "Error: ImagePullBackOff",
            Source::Kubelet(node.into()),
        );
        s.next_backoff_event = w.now + 15 * NS_PER_SEC;
    }
}

fn container_id(w: &mut World) -> String {
    format!("containerd://{}", util::hex_id(&mut w.rng, 32))
}

fn image_id(image: &str) -> String {
    let h = util::template_hash(image);
    let full = if image.contains('/') {
        format!("docker.io/{}", programs::repository(image))
    } else {
        format!("docker.io/library/{}", programs::repository(image))
    };
    format!(
        "{full}@sha256:{}",
        format!("{h}{}", "0".repeat(64))
            .chars()
            .take(64)
            .map(|c| if c.is_ascii_hexdigit() { c } else { 'a' })
            .collect::<String>()
    )
}

/// An init container: true once it has completed.
fn run_init(
    w: &mut World,
    app: &AppSpec,
    pod: &mut Pod,
    i: usize,
    c: &Container,
    node: &str,
) -> bool {
    let now = w.now;
    let k = key(
        pod.meta.namespace.as_deref().unwrap_or_default(),
        &pod.meta.name,
    );
    let mut s = pod.init_statuses[i].clone();
    if matches!(&s.state, CState::Terminated(t) if t.exit_code == 0) {
        pod.init_statuses[i] = s;
        return true;
    }
    let result = match &s.state {
        CState::Running { started } => {
            let started = *started;
            match init_outcome(w, pod, c) {
                InitOutcome::Done if now - started >= NS_PER_SEC => {
                    s.state = CState::Terminated(Terminated::completed(
                        started,
                        now,
                        s.container_id.as_deref(),
                    ));
                    s.ready = true;
                    true
                }
                InitOutcome::Fail(msg) if now - started >= NS_PER_SEC => {
                    w.log(&k, &c.name, s.restart_count, "stderr", msg);
                    terminate(&mut s, now, started, 1, "Error");
                    false
                }
                InitOutcome::Wait(msg) => {
                    if (now - started) % (2 * NS_PER_SEC) < NS_PER_SEC {
                        w.log(&k, &c.name, s.restart_count, "stdout", msg);
                    }
                    false
                }
                _ => false,
            }
        }
        _ if now >= s.backoff_until => {
            if let Ok(_effect) = ensure_image(w, app, pod, &mut s, c, node, List::Init) {
                start_events(w, pod, &mut s, c, node, List::Init);
                s.state = CState::Running { started: now };
            }
            false
        }
        _ => {
            backoff_event(w, pod, &mut s, c, node);
            false
        }
    };
    pod.init_statuses[i] = s;
    result
}

enum InitOutcome {
    Done,
    Fail(String),
    Wait(String),
}

/// What an init container's command does: `kubectl get configmap` needs RBAC, a `nslookup` loop
/// waits for a name, `sleep infinity` never ends, anything else completes.
fn init_outcome(w: &World, pod: &Pod, c: &Container) -> InitOutcome {
    let cmd = c
        .command
        .iter()
        .chain(&c.args)
        .cloned()
        .collect::<Vec<_>>()
        .join(" ");
    let ns = pod.meta.namespace.clone().unwrap_or_default();
    if cmd.contains("kubectl") {
        let sa = &pod.spec.service_account_name;
        let resource = if cmd.contains("configmap") {
            "configmaps"
        } else {
            "pods"
        };
        let allowed = w.rbac_allows(&ns, sa, resource);
        if allowed {
            return InitOutcome::Done;
        }
        let name = cmd
            .split_whitespace()
            .skip_while(|w| *w != "configmap" && *w != "configmaps")
            .nth(1)
            .unwrap_or("")
            .to_string();
        return InitOutcome::Fail(format!(
            "Error from server (Forbidden): {resource} \"{name}\" is forbidden: User \"system:serviceaccount:{ns}:{sa}\" cannot get resource \"{resource}\" in API group \"\" in the namespace \"{ns}\""
        ));
    }
    if cmd.contains("nslookup") {
        let host = cmd
            .split_whitespace()
            .skip_while(|w| *w != "nslookup")
            .nth(1)
            .unwrap_or("")
            .trim_end_matches(';')
            .to_string();
        let short = host.split('.').next().unwrap_or_default().to_string();
        if w.services.contains_key(&key(&ns, &short)) {
            return InitOutcome::Done;
        }
        return InitOutcome::Wait(format!(
            "nslookup: can't resolve '{host}'\nwaiting for {short}"
        ));
    }
    if cmd.contains("sleep infinity") || cmd.contains("sleep 3600") {
        return InitOutcome::Wait(String::new());
    }
    InitOutcome::Done
}

fn start_events(
    w: &mut World,
    pod: &Pod,
    s: &mut ContainerStatus,
    c: &Container,
    node: &str,
    list: List,
) {
    let mut r = World::pod_ref(pod, None);
    r.field_path = Some(list.field_path(&c.name));
    if s.container_id.is_some() {
        w.event(
            &r,
            false,
            "Pulled",
            &format!("Container image \"{}\" already present on machine", c.image),
            Source::Kubelet(node.into()),
        );
        s.restart_count += 1;
    }
    w.event(
        &r,
        false,
        "Created",
        &format!("Created container: {}", c.name),
        Source::Kubelet(node.into()),
    );
    w.event(
        &r,
        false,
        "Started",
        &format!("Started container {}", c.name),
        Source::Kubelet(node.into()),
    );
    s.container_id = Some(container_id(w));
    s.image_id = Some(image_id(&c.image));
    s.image = c.image.clone();
    s.started = true;
    s.liveness_failures = 0;
    s.readiness_failures = 0;
    s.readiness_successes = 0;
    s.exit_at = None;
    s.ready_since = None;
}

/// Whether an exited container starts again under the pod's restartPolicy.
fn restarts(policy: &str, exit_code: i32) -> bool {
    match policy {
        "Never" => false,
        "OnFailure" => exit_code != 0,
        _ => true,
    }
}

/// Schedules the restart of an exited container with the kubelet's back-off: the first restart is
/// immediate, then 10 s doubling to 5 min; a container that ran 10 minutes resets the back-off.
fn schedule_restart(s: &mut ContainerStatus, now: i64, started: i64) {
    if now - started >= 2 * MAX_BACKOFF * NS_PER_SEC {
        s.backoff_secs = 0;
    }
    s.backoff_until = now + s.backoff_secs * NS_PER_SEC;
    s.backoff_secs = if s.backoff_secs == 0 {
        10
    } else {
        (s.backoff_secs * 2).min(MAX_BACKOFF)
    };
    s.ready = false;
}

fn backoff_event(w: &mut World, pod: &Pod, s: &mut ContainerStatus, c: &Container, node: &str) {
    if let CState::Terminated(_) = &s.state
        && w.now < s.backoff_until
    {
        let step = s.backoff_secs / 2;
        s.state = CState::waiting(
            "CrashLoopBackOff",
            Some(format!(
                "back-off {}s restarting failed container={} pod={}_{}({})",
                step.max(10),
                c.name,
                pod.meta.name,
                pod.meta.namespace.clone().unwrap_or_default(),
                pod.meta.uid
            )),
        );
    }
    if s.state.waiting_reason() == Some("CrashLoopBackOff") && w.now >= s.next_backoff_event {
        let r = World::pod_ref(pod, Some(&c.name));
        w.event(
            &r,
            true,
            "BackOff",
            &format!(
                "Back-off restarting failed container {} in pod {}_{}({})",
                c.name,
                pod.meta.name,
                pod.meta.namespace.clone().unwrap_or_default(),
                pod.meta.uid
            ),
            Source::Kubelet(node.into()),
        );
        s.next_backoff_event = w.now + 10 * NS_PER_SEC;
    }
}

/// One container of a synced pod, by state: a running one is accounted and probed; an exited or
/// waiting one starts again once its back-off has passed.
#[allow(clippy::too_many_arguments)]
fn run_container(
    w: &mut World,
    app: &AppSpec,
    effects: &super::flags::Effects,
    pod: &mut Pod,
    i: usize,
    c: &Container,
    node: &str,
    dt: i64,
) {
    let now = w.now;
    let mut s = pod.statuses[i].clone();
    let prog = programs::identify(app, c);
    match s.state.clone() {
        CState::Running { started } => {
            let run = Running {
                k: key(
                    pod.meta.namespace.as_deref().unwrap_or_default(),
                    &pod.meta.name,
                ),
                pod,
                i,
                c,
                node,
                prog,
                svc: prog.map(|p| p.spec.name.as_str()),
                started,
            };
            tick_running(w, effects, &run, &mut s, dt);
        }
        CState::Terminated(t) => {
            if !restarts(&pod.spec.restart_policy, t.exit_code) {
                // restartPolicy Never, or OnFailure after a success: the container stays exited.
            } else if now >= s.backoff_until {
                start(w, app, pod, &mut s, c, node, prog);
            } else {
                backoff_event(w, pod, &mut s, c, node);
            }
        }
        CState::Waiting { .. } => {
            if now >= s.backoff_until {
                start(w, app, pod, &mut s, c, node, prog);
            } else {
                pull_backoff_tick(w, pod, &mut s, c, node, List::App);
                backoff_event(w, pod, &mut s, c, node);
            }
        }
    }
    pod.statuses[i] = s;
}

/// A running container during one sync: what the stages of `tick_running` read.
struct Running<'a> {
    /// The pod's key, under which its load and logs are kept.
    k: Key,
    pod: &'a Pod,
    /// The container's index: the first container is the one that serves the pod's requests.
    i: usize,
    c: &'a Container,
    node: &'a str,
    prog: Option<Program<'a>>,
    /// The app service the container runs, if it runs one.
    svc: Option<&'a str>,
    started: i64,
}

/// `dt` of a running container's life, in stages: a scheduled exit, CPU, memory (which may end
/// in an OOM kill), then the probes that are due (a failed liveness probe kills it).
fn tick_running(
    w: &mut World,
    effects: &super::flags::Effects,
    run: &Running,
    s: &mut ContainerStatus,
    dt: i64,
) {
    let now = w.now;
    // A scheduled exit (start-up failure, crashing build).
    if let Some((at, code, reason)) = s.exit_at.clone()
        && now >= at
    {
        terminate(s, now, run.started, code, &reason);
        return;
    }
    let usage = run.prog.map(|p| p.spec.usage.clone()).unwrap_or_default();
    let dts = dt as f64 / NS_PER_SEC as f64;
    let demand = account_cpu(w, effects, run, s, &usage, dts);
    if grow_memory(w, effects, run, s, &usage, demand, dts) {
        return;
    }
    let startup_ns = (usage.startup.as_millis() as i64) * 1_000_000;
    let listening = now - run.started >= startup_ns;
    if now >= s.next_probe && run_probes(w, effects, run, s, listening) {
        return;
    }
    if run.c.readiness_probe.is_none() && !s.ready {
        s.ready = true;
        s.ready_since = Some(now);
    }
}

/// Adds `dts` seconds of CPU: the program's idle use, the pod's request load (on its first
/// container) and any injected extra, capped by the limit, where CFS throttles the excess.
/// Returns the demand, which memory follows.
fn account_cpu(
    w: &World,
    effects: &super::flags::Effects,
    run: &Running,
    s: &mut ContainerStatus,
    usage: &Usage,
    dts: f64,
) -> f64 {
    // The first container serves the pod's requests; the others only idle.
    let pod_load = |per_pod: &BTreeMap<Key, f64>| {
        if run.i == 0 {
            per_pod.get(&run.k).copied().unwrap_or(0.0)
        } else {
            0.0
        }
    };
    let mut demand = usage.idle_cpu.cores() + pod_load(&w.demand);
    if let Some(n) = run.svc {
        demand += w.runtime.service(n).extra_cpu_milli as f64 / 1000.0 + effects.extra_cpu(n);
    }
    let limit = run.c.resources.limits.cpu_milli.map(|m| m as f64 / 1000.0);
    let used = limit.map_or(demand, |l| demand.min(l));
    s.cpu_seconds += used * dts;
    if let Some(l) = limit {
        s.cfs_periods += 10.0 * dts;
        let served = pod_load(&w.requests);
        let steady = demand - pod_load(&w.demand);
        let cost = if served > 0.0 {
            (demand - steady) / served
        } else {
            0.0
        };
        let share = util::cfs_throttled_share(l, steady, served, cost);
        s.cfs_throttled_periods += 10.0 * dts * share;
        s.cfs_throttled_seconds += share * 10.0 * dts * 0.1 * (1.0 - l.min(0.9));
    }
    demand
}

/// Memory approaches its target (the program's base, more under load, less with an aggressive
/// GOGC); leaks add to it over time. Returns true when the working set went over the limit and
/// the kernel OOM-killed the container.
fn grow_memory(
    w: &mut World,
    effects: &super::flags::Effects,
    run: &Running,
    s: &mut ContainerStatus,
    usage: &Usage,
    demand: f64,
    dts: f64,
) -> bool {
    let (pod, c, node, now) = (run.pod, run.c, run.node, w.now);
    let gogc = programs::env_value(w, &run.k.0, c, "GOGC")
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(100.0);
    let base = usage.memory.bytes() as f64;
    let load = if usage.idle_cpu.cores() > 0.0 {
        (demand / (usage.idle_cpu.cores() * 20.0)).min(2.0)
    } else {
        0.0
    };
    let mut target = base * (1.0 + 0.1 * load) * if gogc < 50.0 { 0.8 } else { 1.0 };
    if let Some(n) = run.svc {
        target +=
            effects.memory_growth(n) * ((now - run.started) as f64 / 60.0 / NS_PER_SEC as f64);
    }
    if s.working_set == 0.0 {
        s.working_set = base * 0.35;
    }
    s.working_set += (target - s.working_set) * (dts / 20.0).min(1.0);
    if let Some(lim) = c.resources.limits.memory
        && s.working_set > lim as f64
    {
        let pid = 1000 + (util::template_hash(&pod.meta.uid).len() as i64 * 131) % 30000;
        let proc_name = c.command.first().cloned().unwrap_or_else(|| c.name.clone());
        let nref = w
            .nodes
            .get(node)
            .map(|n| World::meta_ref(Kind::Node, &n.meta));
        if let Some(nref) = nref {
            let rss = (s.working_set as i64) >> 10;
            w.event(&nref, true, "OOMKilling", &format!("Memory cgroup out of memory: Killed process {pid} ({proc_name}) total-vm:{}kB, anon-rss:{rss}kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:{}kB oom_score_adj:{}", rss * 3, rss / 400 + 4, if pod.qos_class() == "Guaranteed" { -997 } else { 984 }), Source::KernelMonitor(node.into()));
        }
        terminate(s, now, run.started, 137, "OOMKilled");
        return true;
    }
    false
}

/// Runs the probes that are due and schedules the next round at the shortest period. Returns
/// true when the container failed its liveness probe too often and was killed.
fn run_probes(
    w: &mut World,
    effects: &super::flags::Effects,
    run: &Running,
    s: &mut ContainerStatus,
    listening: bool,
) -> bool {
    let now = w.now;
    let mut period = 10;
    if let Some(p) = &run.c.readiness_probe {
        period = p.period_seconds.max(1);
        match check(w, effects, run, p, "Readiness", listening) {
            Some(true) => {
                s.readiness_failures = 0;
                s.readiness_successes += 1;
                if !s.ready {
                    s.ready = true;
                    s.ready_since = Some(now);
                }
            }
            Some(false) => {
                s.readiness_successes = 0;
                s.readiness_failures += 1;
                if s.readiness_failures >= p.failure_threshold {
                    s.ready = false;
                }
            }
            None => {}
        }
    }
    if let Some(p) = &run.c.liveness_probe {
        period = period.min(p.period_seconds.max(1));
        match check(w, effects, run, p, "Liveness", listening) {
            Some(true) => s.liveness_failures = 0,
            Some(false) => {
                s.liveness_failures += 1;
                if s.liveness_failures >= p.failure_threshold {
                    kill_unhealthy(w, run, s);
                    return true;
                }
            }
            None => {}
        }
    }
    s.next_probe = now + i64::from(period) * NS_PER_SEC;
    false
}

/// Runs one probe once its initial delay has passed (`None` before) and says whether it passed;
/// a failure is reported as an Unhealthy event.
fn check(
    w: &mut World,
    effects: &super::flags::Effects,
    run: &Running,
    p: &Probe,
    what: &str,
    listening: bool,
) -> Option<bool> {
    if w.now - run.started < i64::from(p.initial_delay_seconds) * NS_PER_SEC {
        return None;
    }
    let ip = run.pod.pod_ip.clone().unwrap_or_default();
    let Err(msg) = probe(run.prog.as_ref(), run.c, p, &ip, listening, effects) else {
        return Some(true);
    };
    w.event(
        &World::pod_ref(run.pod, Some(&run.c.name)),
        true,
        "Unhealthy",
        &format!("{what} probe failed: {msg}"),
        Source::Kubelet(run.node.into()),
    );
    Some(false)
}

/// The kubelet kills a container that failed its liveness probe; the program logs its shutdown.
fn kill_unhealthy(w: &mut World, run: &Running, s: &mut ContainerStatus) {
    let c = run.c;
    w.event(
        &World::pod_ref(run.pod, Some(&c.name)),
        false,
        "Killing",
        &format!(
            "Container {} failed liveness probe, will be restarted",
            c.name
        ),
        Source::Kubelet(run.node.into()),
    );
    let style = run.prog.map(|p| p.style).unwrap_or(LogStyle::Quiet);
    let line = logs::line(
        style,
        run.svc.unwrap_or(&c.name),
        Level::Info,
        w.now,
        "Received signal terminated, shutting down",
    );
    w.log(&run.k, &c.name, s.restart_count, "stdout", line);
    terminate(s, w.now, run.started, 143, "Error");
}

/// The container's process exited (or was killed) with `code` at `now`; it restarts after the
/// back-off.
fn terminate(s: &mut ContainerStatus, now: i64, started: i64, code: i32, reason: &str) {
    let t = exit(s, now, started, code, reason);
    s.last = Some(t);
    schedule_restart(s, now, started);
}

/// The container's process exited with `code` at `now`: its state, which it returns.
fn exit(s: &mut ContainerStatus, now: i64, started: i64, code: i32, reason: &str) -> Terminated {
    let t = Terminated {
        reason: reason.into(),
        exit_code: code,
        started,
        finished: now,
        container_id: s.container_id.clone().unwrap_or_default(),
        message: None,
    };
    s.state = CState::Terminated(t.clone());
    s.exit_at = None;
    t
}

/// Creates and starts a container, deciding now whether its process will exit right away.
fn start(
    w: &mut World,
    app: &AppSpec,
    pod: &Pod,
    s: &mut ContainerStatus,
    c: &Container,
    node: &str,
    prog: Option<Program>,
) {
    let now = w.now;
    let ns = pod.meta.namespace.clone().unwrap_or_default();
    let k = key(&ns, &pod.meta.name);
    let effect = match ensure_image(w, app, pod, s, c, node, List::App) {
        Ok(e) => e,
        Err(()) => return,
    };
    if let Some(err) = programs::config_error(w, &ns, c) {
        let r = World::pod_ref(pod, Some(&c.name));
        w.event(
            &r,
            true,
            "Failed",
            &format!("Error: {err}"),
            Source::Kubelet(node.into()),
        );
        s.state = CState::waiting("CreateContainerConfigError", Some(err));
        s.backoff_until = now + 10 * NS_PER_SEC;
        return;
    }
    // An app image run with a command that is not in it.
    let app_repo = app
        .services
        .iter()
        .any(|sv| programs::repository(&sv.image) == programs::repository(&c.image));
    if prog.is_none() && app_repo && !c.command.is_empty() {
        let r = World::pod_ref(pod, Some(&c.name));
        let msg = format!(
            "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: \"{}\": executable file not found in $PATH: unknown",
            c.command[0]
        );
        w.event(
            &r,
            false,
            "Created",
            &format!("Created container: {}", c.name),
            Source::Kubelet(node.into()),
        );
        w.event(
            &r,
            true,
            "Failed",
            &format!("Error: {msg}"),
            Source::Kubelet(node.into()),
        );
        if s.container_id.is_some() {
            s.restart_count += 1;
        }
        s.container_id = Some(container_id(w));
        let t = Terminated {
            reason: "StartError".into(),
            exit_code: 128,
            started: now,
            finished: now,
            container_id: s.container_id.clone().unwrap_or_default(),
            message: Some(msg),
        };
        s.state = CState::Terminated(t.clone());
        s.last = Some(t);
        schedule_restart(s, now, now);
        return;
    }
    start_events(w, pod, s, c, node, List::App);
    s.state = CState::Running { started: now };
    let Some(p) = prog else { return };
    let svc = p.spec.name.clone();
    let port = p.spec.ports.first().map(|x| x.target_port());
    let failure = programs::start_failure(w, app, pod, c, &p);
    let mut lines = logs::startup(p.style, &svc, port);
    let exit = match (&failure, effect) {
        (Some(f), _) => {
            lines.truncate(2.min(lines.len()));
            lines.extend(f.lines.iter().cloned());
            Some((f.exit_code, 1))
        }
        (None, Some(ImageEffect::Crash)) => {
            lines.truncate(1.min(lines.len()));
            lines.push((
                Level::Fatal,
                "panic: runtime error: invalid memory address or nil pointer dereference".into(),
            ));
            lines.push((
                Level::Fatal,
                "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x8b1a2f]".into(),
            ));
            Some((2, 2))
        }
        _ => None,
    };
    for (lvl, msg) in lines {
        let line = logs::line(p.style, &svc, lvl, now, &msg);
        let stream = if lvl == Level::Fatal {
            "stderr"
        } else {
            "stdout"
        };
        w.log(&k, &c.name, s.restart_count, stream, line);
    }
    if let Some((code, after)) = exit {
        s.exit_at = Some((now + after * NS_PER_SEC, code, "Error".into()));
    }
}

/// Runs one probe against the container's process.
fn probe(
    prog: Option<&Program>,
    c: &Container,
    p: &Probe,
    ip: &str,
    listening: bool,
    effects: &super::flags::Effects,
) -> Result<(), String> {
    let ports = programs::listen_ports(c, prog);
    let resolve = |port: &IntOrString| -> Option<u16> {
        match port {
            IntOrString::Int(n) => u16::try_from(*n).ok(),
            IntOrString::Str(name) => c
                .ports
                .iter()
                .find(|cp| cp.name.as_deref() == Some(name))
                .and_then(|cp| u16::try_from(cp.container_port).ok()),
        }
    };
    let failing = prog.is_some_and(|pr| effects.readiness_failure(&pr.spec.name));
    if let Some(h) = &p.http_get {
        let Some(port) = resolve(&h.port) else {
            return Err(format!(
                "strconv.Atoi: parsing {:?}: invalid syntax",
                h.port
            ));
        };
        if !listening || !ports.contains(&port) {
            return Err(format!(
                "Get \"http://{ip}:{port}{}\": dial tcp {ip}:{port}: connect: connection refused",
                h.path
            ));
        }
        let Some(pr) = prog else { return Ok(()) };
        if programs::protocol_on(pr, port) != Some(problems::app::Protocol::Http) {
            return Err(format!(
                "Get \"http://{ip}:{port}{}\": net/http: HTTP/1.x transport connection broken: malformed HTTP response \"\\x00\\x00\\x06\\x04\\x00\\x00\\x00\\x00\\x00\\x00\\x05\\x00\\x00@\\x00\"",
                h.path
            ));
        }
        if failing {
            return Err("HTTP probe failed with statuscode: 503".into());
        }
        if !programs::serves_path(pr, &h.path) {
            return Err("HTTP probe failed with statuscode: 404".into());
        }
        return Ok(());
    }
    if let Some(t) = &p.tcp_socket {
        let port = resolve(&t.port).unwrap_or(0);
        if !listening || !ports.contains(&port) {
            return Err(format!("dial tcp {ip}:{port}: connect: connection refused"));
        }
        return Ok(());
    }
    if let Some(g) = &p.grpc {
        let port = resolve(&g.port).unwrap_or(0);
        if !listening || !ports.contains(&port) {
            return Err(format!(
                "timeout: failed to connect service \"{ip}:{port}\" within 1s: context deadline exceeded"
            ));
        }
        if failing {
            return Err("service unhealthy (responded with \"NOT_SERVING\")".into());
        }
        return Ok(());
    }
    if failing || !listening {
        return Err("command terminated with non-zero exit code: exit status 1".into());
    }
    Ok(())
}
