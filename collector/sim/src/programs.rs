//! What runs inside a container: the app service a container's image and command amount to, the
//! ports its process listens on, and what it needs at start (addresses, configuration, its
//! database), so that a changed command, a removed env var or a drifted ConfigMap has the effect it
//! would have on the real program.

use std::collections::BTreeMap;

use problems::app::{AddressSource, AppSpec, Protocol, Role, ServiceSpec};
use problems::primitive::ImageEffect;

use super::logs::Level;
// The log style is the log formatter's vocabulary; it stays reachable here for the callers
// that meet it through a program's identity.
pub use super::logs::LogStyle;
use super::objects::{Container, EnvSource, Pod};
use super::world::World;

/// Images the simulated registry serves besides the app's own.
const PUBLIC_IMAGES: &[&str] = &[
    "busybox:1.28",
    "busybox:1.36",
    "busybox:latest",
    "alpine/k8s:1.28.3",
    "bitnami/kubectl:1.28",
    "python:3.9-slim",
    "registry.k8s.io/coredns/coredns:v1.11.3",
    "polinux/stress:1.0.4",
    // What agents start with `kubectl run` to look around from inside the cluster.
    "busybox:1.37",
    "alpine:latest",
    "alpine:3.20",
    "alpine:3.21",
    "curlimages/curl:latest",
    "curlimages/curl:8.11.1",
    "nicolaka/netshoot:latest",
    "nicolaka/netshoot:v0.13",
    "ubuntu:latest",
    "ubuntu:24.04",
    "debian:latest",
    "debian:bookworm-slim",
    "nginx:latest",
    "python:3.12-slim",
    "registry.k8s.io/e2e-test-images/agnhost:2.39",
];

/// The repository part of an image reference (`deathstarbench/hotel-reservation`).
pub fn repository(image: &str) -> &str {
    let last_slash = image.rfind('/').map(|i| i + 1).unwrap_or(0);
    match image[last_slash..].find(':') {
        Some(colon) => &image[..last_slash + colon],
        None => image,
    }
}

/// A running program's identity: the app service it implements.
#[derive(Debug, Clone, Copy)]
pub struct Program<'a> {
    pub spec: &'a ServiceSpec,
    pub style: LogStyle,
}

/// Log style from the image and the service's name and role.
pub fn log_style(spec: &ServiceSpec) -> LogStyle {
    let image = &spec.image;
    let name = spec.name.as_str();
    // Image references are lower-case (the registry requires it): no case folding needed.
    let has = |s: &str| image.contains(s);
    if has("mongo") {
        LogStyle::Mongo
    } else if has("redis") || has("valkey") {
        LogStyle::Redis
    } else if has("postgres") {
        LogStyle::Postgres
    } else if has("memcached") || has("consul") || has("jaeger") || has("flagd") {
        LogStyle::Quiet
    } else if has("envoy") || name.contains("proxy") {
        LogStyle::Envoy
    } else if has("nginx") || has("openresty") || has("image-provider") {
        LogStyle::Nginx
    } else if has("hotel") {
        LogStyle::Zerolog
    } else if has("social-network") || has("socialnetwork") {
        LogStyle::BoostLog
    } else if has("kafka") {
        LogStyle::Java
    } else {
        match name {
            "cart" | "accounting" => LogStyle::Dotnet,
            "email" => LogStyle::Ruby,
            "shipping" => LogStyle::Rust,
            "quote" => LogStyle::Php,
            "ad" | "fraud-detection" => LogStyle::Java,
            "recommendation" | "load-generator" | "product-reviews" | "llm" => LogStyle::Python,
            "payment" | "frontend" => LogStyle::Pino,
            _ => match spec.role {
                Role::Database => LogStyle::Mongo,
                Role::Cache => LogStyle::Quiet,
                _ => LogStyle::SlogJson,
            },
        }
    }
}

/// The app service a container runs, judged by its image repository and command as a container
/// runtime would: same image with another command is another program.
pub fn identify<'a>(app: &'a AppSpec, c: &Container) -> Option<Program<'a>> {
    // Called for every container on every tick: no allocation on this path.
    let repo = repository(&c.image);
    let mut candidates = app.services.iter().filter(|s| repository(&s.image) == repo);
    let first = candidates.next()?;
    let pick = match candidates.next() {
        None => (first.command.is_empty() || c.command.is_empty() || first.command == c.command)
            .then_some(first)?,
        Some(_) => {
            let mut all = app.services.iter().filter(|s| repository(&s.image) == repo);
            if c.command.is_empty() {
                all.find(|s| s.container_name() == c.name)?
            } else {
                all.find(|s| s.command == c.command)?
            }
        }
    };
    Some(Program {
        spec: pick,
        style: log_style(pick),
    })
}

/// Whether the registry has the image, and what it does when it is not the app's own build.
pub fn image_status(w: &World, app: &AppSpec, image: &str) -> Option<Option<ImageEffect>> {
    if let Some(effect) = w.runtime.images.get(image) {
        return match effect {
            ImageEffect::PullError => None,
            other => Some(Some(*other)),
        };
    }
    if app.services.iter().any(|s| s.image == image) || PUBLIC_IMAGES.contains(&image) {
        return Some(None);
    }
    // No tag means `latest`, as the container runtime reads it.
    let untagged = !image[image.rfind('/').map_or(0, |i| i + 1)..].contains(':');
    if untagged && !image.contains('@') {
        let latest = format!("{image}:latest");
        if PUBLIC_IMAGES.contains(&latest.as_str()) {
            return Some(None);
        }
    }
    None
}

/// The value of an env var as the container sees it (resolving ConfigMap and Secret refs).
pub fn env_value(w: &World, ns: &str, c: &Container, name: &str) -> Option<String> {
    // A later duplicate shadows an earlier one, as in the kubelet.
    let var = c.env.iter().rev().find(|e| e.name == name)?;
    if let Some(v) = &var.value {
        return Some(v.clone());
    }
    match var.value_from.as_ref()? {
        EnvSource::ConfigMapKeyRef(r) => w
            .configmaps
            .get(&(ns.to_string(), r.name.clone()))
            .and_then(|cm| cm.data.get(&r.key).cloned()),
        EnvSource::SecretKeyRef(r) => w
            .secrets
            .get(&(ns.to_string(), r.name.clone()))
            .and_then(|s| s.data.get(&r.key).cloned()),
    }
}

/// The configuration error that keeps a container from being created, if any
/// (`CreateContainerConfigError`).
pub fn config_error(w: &World, ns: &str, c: &Container) -> Option<String> {
    for e in &c.env {
        match &e.value_from {
            Some(EnvSource::ConfigMapKeyRef(r)) => {
                match w.configmaps.get(&(ns.into(), r.name.clone())) {
                    None => return Some(format!("configmap \"{}\" not found", r.name)),
                    Some(cm) if !cm.data.contains_key(&r.key) => {
                        return Some(format!(
                            "couldn't find key {} in ConfigMap {ns}/{}",
                            r.key, r.name
                        ));
                    }
                    _ => {}
                }
            }
            Some(EnvSource::SecretKeyRef(r)) => match w.secrets.get(&(ns.into(), r.name.clone())) {
                None => return Some(format!("secret \"{}\" not found", r.name)),
                Some(s) if !s.data.contains_key(&r.key) => {
                    return Some(format!(
                        "couldn't find key {} in Secret {ns}/{}",
                        r.key, r.name
                    ));
                }
                _ => {}
            },
            None => {}
        }
    }
    None
}

/// Where a running program dials `callee`: the `host:port` it reads from its env or mounted
/// configuration now. `None` when it has no address (the program falls back to `localhost`).
pub fn dial_address(
    w: &World,
    app: &AppSpec,
    pod: &Pod,
    c: &Container,
    caller: &ServiceSpec,
    callee: &str,
) -> Option<(String, u16)> {
    let ns = pod.meta.namespace.as_deref().unwrap_or_default();
    match app.address_of(&caller.name, callee)? {
        AddressSource::Env { var, port } => {
            let v = env_value(w, ns, c, &var)?;
            if let Some((h, p)) = super::util::split_address(&v) {
                return Some((h.to_string(), p));
            }
            // A host-only variable (`FRONTEND_HOST`) pairs with its `_PORT` sibling, as the
            // Envoy template of the OpenTelemetry demo does, else with the Service port.
            let port = var
                .strip_suffix("_HOST")
                .and_then(|prefix| env_value(w, ns, c, &format!("{prefix}_PORT")))
                .and_then(|p| p.trim().parse().ok())
                .unwrap_or(port);
            let host = v.trim();
            (!host.is_empty()).then(|| (host.to_string(), port))
        }
        AddressSource::ConfigMap {
            config_map, key, ..
        } => {
            let text = w
                .configmaps
                .get(&(ns.into(), config_map))?
                .data
                .get(&key)?
                .clone();
            let port = problems::app::address_port(&text, callee)?;
            Some((callee.to_string(), port))
        }
        AddressSource::Dns { port } => Some((callee.to_string(), port)),
    }
}

/// Why a program exits right after start, with the lines it prints; `None` when it starts fine.
pub struct StartFailure {
    pub exit_code: i32,
    pub lines: Vec<(Level, String)>,
}

/// Checks what the program needs at start: its addresses (from env or configuration), its config
/// files, a free port, and (for clients of an authenticating database) a working login.
pub fn start_failure(
    w: &World,
    app: &AppSpec,
    pod: &Pod,
    c: &Container,
    prog: &Program,
) -> Option<StartFailure> {
    let ns = pod.meta.namespace.as_deref().unwrap_or_default();
    let spec = prog.spec;
    // Another container of the pod already holds one of our ports.
    for port in listen_ports(c, Some(prog)) {
        let clash = pod.spec.containers.iter().any(|o| {
            o.name != c.name && listen_ports(o, identify(app, o).as_ref()).contains(&port)
        });
        if clash {
            return Some(StartFailure {
                exit_code: 1,
                lines: vec![(
                    Level::Fatal,
                    format!("listen tcp :{port}: bind: address already in use"),
                )],
            });
        }
    }
    // Configuration files with a dependency address that went missing.
    for dep in app.dependencies(&spec.name) {
        match app.address_of(&spec.name, dep) {
            Some(AddressSource::ConfigMap {
                config_map, key, ..
            }) => {
                let text = w
                    .configmaps
                    .get(&(ns.into(), config_map.clone()))
                    .and_then(|cm| cm.data.get(&key));
                if text
                    .and_then(|t| problems::app::address_port(t, dep))
                    .is_none()
                {
                    let field = text
                        .map(|_| format!("{dep} address"))
                        .unwrap_or_else(|| key.clone());
                    return Some(StartFailure {
                        exit_code: 2,
                        lines: vec![
                            (Level::Info, "Reading config...".to_string()),
                            (
                                Level::Fatal,
                                format!("no reachable servers: missing {field} in {key}"),
                            ),
                        ],
                    });
                }
            }
            Some(AddressSource::Env { var, .. })
                if required_env(prog.style) && env_value(w, ns, c, &var).is_none() =>
            {
                return Some(StartFailure {
                    exit_code: if prog.style == LogStyle::SlogJson {
                        2
                    } else {
                        1
                    },
                    lines: vec![(Level::Fatal, format!("environment variable {var} not set"))],
                });
            }
            _ => {}
        }
    }
    None
}

/// Programs that refuse to start without their address variables (Go `mustMapEnv`, .NET
/// configuration binding); others fall back to a default address.
fn required_env(style: LogStyle) -> bool {
    matches!(style, LogStyle::SlogJson | LogStyle::Dotnet)
}

/// Ports the container's process listens on once started.
pub fn listen_ports(c: &Container, prog: Option<&Program>) -> Vec<u16> {
    if let Some(p) = prog {
        return p.spec.ports.iter().map(|p| p.target_port()).collect();
    }
    // `nc -lk -p PORT` style sidecars and anything else that names a port on its command line.
    let words: Vec<&str> = c
        .command
        .iter()
        .chain(&c.args)
        .flat_map(|w| w.split_whitespace())
        .collect();
    let mut out = vec![];
    for (i, w) in words.iter().enumerate() {
        if (*w == "-p" || *w == "--port")
            && let Some(n) = words.get(i + 1).and_then(|n| n.parse().ok())
        {
            out.push(n);
        }
    }
    out
}

/// The protocol a program speaks on a port it listens on.
pub fn protocol_on(prog: &Program, port: u16) -> Option<Protocol> {
    prog.spec
        .ports
        .iter()
        .find(|p| p.target_port() == port)
        .map(|p| p.protocol)
}

/// HTTP paths a program answers 200 on: its routes, `/`, and the paths of its declared probes.
pub fn serves_path(prog: &Program, path: &str) -> bool {
    if path == "/" {
        return true;
    }
    let declared = [&prog.spec.readiness, &prog.spec.liveness]
        .into_iter()
        .flatten()
        .any(|p| matches!(&p.handler, problems::app::ProbeHandler::Http { path: pp, .. } if pp == path));
    declared
        || prog
            .spec
            .operations
            .iter()
            .any(|o| o.name.split_whitespace().last() == Some(path))
}

/// Dependency address environment of a service, for building its container.
pub fn env_of(spec: &ServiceSpec) -> BTreeMap<String, String> {
    spec.env.clone()
}
