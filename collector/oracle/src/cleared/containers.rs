//! What a workload's pods run: an image the registry serves as a working build, the env the
//! manifest sets, the service's own program, containers that do not fight over a port, and init
//! containers that finish (their API calls allowed by RBAC, the names they wait for resolvable),
//! judged as the simulator's kubelet and program model judge them.

use problems::primitive::{ImageEffect, Primitive};
use sim::objects::{Container, key};
use sim::programs;

use super::{Outcome, no_check};
use crate::view::{View, ports};

pub(super) fn check(v: &View, p: &Primitive) -> Outcome {
    use Primitive as P;
    match p {
        P::ContainerImage { service, image, .. } => working_image(v, service, image),
        P::EnvRemove { service, var }
        | P::EnvSet { service, var, .. }
        | P::EnvAddressPort { service, var, .. } => env_as_manifest(v, service, var),
        P::RbacDeniedInit { service, .. } | P::InitContainerHang { service, .. } => {
            init_containers_finish(v, service)
        }
        P::WrongCommand { service, .. } => own_program(v, service),
        P::SidecarPortConflict { service, .. } => free_ports(v, service),
        other => Err(no_check(other)),
    }
}

/// The main container no longer runs the injected image, and runs one that pulls and works.
fn working_image(v: &View, service: &str, injected: &str) -> Outcome {
    let wl = v.serving(service)?;
    let c = v.main_container(&wl)?;
    let what = format!("container {} of {}", c.name, v.name(wl.kind, service));
    if c.image == injected {
        return Err(format!("{what} still runs image {injected}"));
    }
    match programs::image_status(v.w, v.app, &c.image) {
        Some(None) => Ok(()),
        None => Err(format!(
            "{what} runs image {}, which cannot be pulled",
            c.image
        )),
        Some(Some(effect)) => {
            let does = match effect {
                ImageEffect::Crash => "exits at start",
                ImageEffect::Incompatible | ImageEffect::PullError => "is a broken build",
            };
            Err(format!("{what} runs image {}, which {does}", c.image))
        }
    }
}

/// The env var is back to the manifest's value (or unset, when the manifest does not set it).
fn env_as_manifest(v: &View, service: &str, var: &str) -> Outcome {
    let wl = v.serving(service)?;
    let c = v.main_container(&wl)?;
    let what = format!("container {} of {}", c.name, v.name(wl.kind, service));
    let want = v.spec(service)?.env.get(var);
    let found = programs::env_value(v.w, v.ns, c, var);
    match (want, found) {
        (Some(w), Some(f)) if *w == f => Ok(()),
        (None, None) => Ok(()),
        (Some(w), Some(f)) => Err(format!("{what} sets {var}={f} ({var}={w} expected)")),
        (Some(w), None) => Err(format!("{what} has no env var {var} ({var}={w} expected)")),
        (None, Some(f)) => Err(format!(
            "{what} sets {var}={f}, which its manifest does not set"
        )),
    }
}

/// Every init container of the workload's pods runs to completion.
fn init_containers_finish(v: &View, service: &str) -> Outcome {
    let wl = v.serving(service)?;
    let spec = &wl.template.spec;
    for c in &spec.init_containers {
        let what = format!("init container {} of {}", c.name, v.name(wl.kind, service));
        let cmd = command_line(c);
        if cmd.contains("kubectl") {
            let resource = if cmd.contains("configmap") {
                "configmaps"
            } else {
                "pods"
            };
            let sa = &spec.service_account_name;
            if !v.w.rbac_allows(v.ns, sa, resource) {
                return Err(format!(
                    "{what} calls the API as ServiceAccount {}/{sa}, which may not get {resource}",
                    v.ns
                ));
            }
        } else if cmd.contains("nslookup") {
            let host = cmd
                .split_whitespace()
                .skip_while(|w| *w != "nslookup")
                .nth(1)
                .unwrap_or_default()
                .trim_end_matches(';');
            let short = host.split('.').next().unwrap_or_default();
            if !v.w.services.contains_key(&key(v.ns, short)) {
                return Err(format!(
                    "{what} waits for {host} to resolve, and no Service {}/{short} exists",
                    v.ns
                ));
            }
        } else if cmd.contains("sleep infinity") || cmd.contains("sleep 3600") {
            return Err(format!("{what} never finishes ({cmd})"));
        }
    }
    Ok(())
}

fn command_line(c: &Container) -> String {
    c.command
        .iter()
        .chain(&c.args)
        .cloned()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The main container runs the service's own program (its image and command).
fn own_program(v: &View, service: &str) -> Outcome {
    let wl = v.serving(service)?;
    let c = v.main_container(&wl)?;
    let what = format!("container {} of {}", c.name, v.name(wl.kind, service));
    let own = &v.spec(service)?.command;
    match programs::identify(v.app, c) {
        Some(pr) if pr.spec.name == service => Ok(()),
        Some(pr) => Err(format!(
            "{what} runs the program of {} (command {:?}); {service}'s own command is {own:?}",
            pr.spec.name, c.command
        )),
        None => Err(format!(
            "{what} runs no program of application {} (image {}, command {:?}); {service}'s own command is {own:?}",
            v.app.name, c.image, c.command
        )),
    }
}

/// No two containers of the pod listen on the same port, and the main one is still there.
fn free_ports(v: &View, service: &str) -> Outcome {
    let wl = v.serving(service)?;
    v.main_container(&wl)?;
    let listening: Vec<(&str, Vec<u16>)> = wl
        .template
        .spec
        .containers
        .iter()
        .map(|c| {
            let prog = programs::identify(v.app, c);
            (c.name.as_str(), programs::listen_ports(c, prog.as_ref()))
        })
        .collect();
    for (i, (a, pa)) in listening.iter().enumerate() {
        for (b, pb) in listening.iter().skip(i + 1) {
            let shared: Vec<u16> = pa.iter().copied().filter(|p| pb.contains(p)).collect();
            if !shared.is_empty() {
                return Err(format!(
                    "containers {a} and {b} of {} both listen on port {}",
                    v.name(wl.kind, service),
                    ports(&shared)
                ));
            }
        }
    }
    Ok(())
}
