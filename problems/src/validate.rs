//! Checks across specs that parsing alone cannot make: references (apps, services, nodes,
//! ConfigMaps, flags, noise profiles, operations of the call graph), timing, ground-truth
//! references, duplicate ids, and leaks of a problem's identity into what the run will create.

use std::collections::BTreeMap;

use crate::app::{AppSpec, FlagEffect};
use crate::noise::NO_NOISE;
use crate::noise::NoiseProfile;
use crate::primitive::{Primitive, Target};
use crate::problem::{Expectation, FaultSpec, ProblemSpec, StateAssertion};
use crate::source::{Diagnostic, Located, SourceFile};
use crate::units::Dur;

/// Longest run a problem (or `--duration`) may ask for, in simulated time: the simulator keeps a
/// run's rows until they are written, so memory grows with it.
pub const MAX_RUN_DURATION: Dur = Dur::from_secs(24 * 3600);
/// Largest `load_spike` multiplier: the workload model sends every request it is asked to.
pub const MAX_LOAD_MULTIPLIER: f64 = 1000.0;
/// Most faults (and, apart, decoys) one problem may inject.
pub const MAX_FAULTS: usize = 32;
/// Most replicas a fault may scale a workload to: each is a simulated pod.
pub const MAX_REPLICAS: u32 = 1000;
/// Most disturbances a noise profile may start per period.
pub const MAX_NOISE_PER_PERIOD: u32 = 100;

/// The parsed specs of a catalog, as validation reads them (the catalog is built from what passes).
#[derive(Clone, Copy)]
pub struct Specs<'a> {
    pub apps: &'a [Located<AppSpec>],
    pub noise: &'a [Located<NoiseProfile>],
    pub problems: &'a [Located<ProblemSpec>],
}

impl<'a> Specs<'a> {
    pub fn app(&self, name: &str) -> Option<&'a AppSpec> {
        self.apps.iter().map(|a| &a.spec).find(|a| a.name == name)
    }

    pub fn noise(&self, name: &str) -> Option<&'a NoiseProfile> {
        self.noise.iter().map(|n| &n.spec).find(|n| n.name == name)
    }
}

/// Every cross-spec problem of a parsed catalog.
pub fn catalog(specs: Specs<'_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    duplicates(specs.apps, |a| &a.name, "name", &mut out);
    duplicates(specs.noise, |n| &n.name, "name", &mut out);
    duplicates(specs.problems, |p| &p.id, "id", &mut out);
    for app in specs.apps {
        check_app(&app.spec, &app.file, &mut out);
    }
    for n in specs.noise {
        check_noise(&n.spec, &n.file, &mut out);
    }
    for p in specs.problems {
        check_problem(specs, &p.spec, &p.file, &mut out);
    }
    out
}

fn duplicates<T>(
    items: &[Located<T>],
    key: impl Fn(&T) -> &String,
    field: &str,
    out: &mut Vec<Diagnostic>,
) {
    let mut first: BTreeMap<&str, &str> = BTreeMap::new();
    for item in items {
        let k = key(&item.spec);
        if let Some(prev) = first.insert(k, &item.file.path) {
            out.push(
                item.file
                    .at_field(field, format!("`{k}` is already defined in {prev}")),
            );
        }
    }
}

fn check_app(app: &AppSpec, file: &SourceFile, out: &mut Vec<Diagnostic>) {
    let mut err = |field: String, msg: String| out.push(file.at_field(&field, msg));
    let mut seen = BTreeMap::new();
    for (i, s) in app.services.iter().enumerate() {
        if seen.insert(s.name.as_str(), i).is_some() {
            err(
                format!("services[{i}].name"),
                format!("service `{}` is defined twice", s.name),
            );
        }
    }
    for (i, s) in app.services.iter().enumerate() {
        for (j, op) in s.operations.iter().enumerate() {
            for (k, call) in op.calls.iter().enumerate() {
                let at = format!("services[{i}].operations[{j}].calls[{k}]");
                match app.service(&call.service) {
                    None => err(
                        format!("{at}.service"),
                        format!("no service `{}` in app `{}`", call.service, app.name),
                    ),
                    Some(callee) if callee.operation(&call.operation).is_none() => err(
                        format!("{at}.operation"),
                        format!(
                            "service `{}` has no operation `{}` (has: {})",
                            callee.name,
                            call.operation,
                            names(callee.operations.iter().map(|o| &o.name))
                        ),
                    ),
                    Some(_) => {}
                }
                if !(0.0..=1.0).contains(&call.probability) {
                    err(
                        format!("{at}.probability"),
                        format!("{} is not a probability (expected 0..=1)", call.probability),
                    );
                }
            }
        }
        for (j, m) in s.config_mounts.iter().enumerate() {
            if app.config_map(&m.config_map).is_none() {
                err(
                    format!("services[{i}].config_mounts[{j}].config_map"),
                    format!("no config map `{}` in app `{}`", m.config_map, app.name),
                );
            }
        }
    }
    let w = &app.workload;
    match app.service(&w.target) {
        None => err(
            "workload.target".into(),
            format!("no service `{}` in app `{}`", w.target, app.name),
        ),
        Some(t) => {
            for (i, m) in w.mix.iter().enumerate() {
                if t.operation(&m.operation).is_none() {
                    err(
                        format!("workload.mix[{i}].operation"),
                        format!("service `{}` has no operation `{}`", t.name, m.operation),
                    );
                }
            }
        }
    }
    if app.service(&w.generator).is_none() {
        err(
            "workload.generator".into(),
            format!("no service `{}` in app `{}`", w.generator, app.name),
        );
    }
    for (i, f) in app.feature_flags.iter().enumerate() {
        if app.config_map(&f.config_map).is_none() {
            err(
                format!("feature_flags[{i}].config_map"),
                format!("no config map `{}` in app `{}`", f.config_map, app.name),
            );
        }
        for (variant, effects) in &f.variants {
            for (j, e) in effects.iter().enumerate() {
                let at = format!("feature_flags[{i}].variants.{variant}[{j}]");
                let (svc, op) = match e {
                    FlagEffect::Error {
                        service, operation, ..
                    }
                    | FlagEffect::Latency {
                        service, operation, ..
                    } => (Some(service), Some(operation)),
                    FlagEffect::Cpu { service, .. }
                    | FlagEffect::MemoryGrowth { service, .. }
                    | FlagEffect::ReadinessFailure { service } => (Some(service), None),
                    FlagEffect::Unreachable {
                        service,
                        dependency,
                    } => {
                        if app.service(dependency).is_none() {
                            err(
                                format!("{at}.dependency"),
                                format!("no service `{dependency}` in app `{}`", app.name),
                            );
                        }
                        (Some(service), None)
                    }
                    FlagEffect::Load { multiplier } => {
                        if !(*multiplier > 0.0 && *multiplier <= MAX_LOAD_MULTIPLIER) {
                            err(
                                format!("{at}.multiplier"),
                                format!(
                                    "{multiplier} is not a load multiplier (expected a number above 0 and at most {MAX_LOAD_MULTIPLIER})"
                                ),
                            );
                        }
                        (None, None)
                    }
                };
                if let Some(svc) = svc {
                    match app.service(svc) {
                        None => err(
                            format!("{at}.service"),
                            format!("no service `{svc}` in app `{}`", app.name),
                        ),
                        Some(s) => {
                            if let Some(op) = op.filter(|op| s.operation(op).is_none()) {
                                err(
                                    format!("{at}.operation"),
                                    format!("service `{svc}` has no operation `{op}`"),
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

fn names<'a>(it: impl Iterator<Item = &'a String>) -> String {
    let v: Vec<&str> = it.map(String::as_str).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn check_problem(specs: Specs<'_>, p: &ProblemSpec, file: &SourceFile, out: &mut Vec<Diagnostic>) {
    let mut err = |field: &str, msg: String| out.push(file.at_field(field, msg));
    let stem = std::path::Path::new(&file.path)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned());
    if !p
        .id
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        || p.id.is_empty()
    {
        err(
            "id",
            format!(
                "`{}` is not a valid id (expected lowercase letters, digits and `-`)",
                p.id
            ),
        );
    }
    if stem.as_deref().is_some_and(|s| s != p.id) {
        err(
            "id",
            format!(
                "id `{}` differs from the file name `{}.toml`",
                p.id,
                stem.unwrap_or_default()
            ),
        );
    }
    if p.noise != NO_NOISE && specs.noise(&p.noise).is_none() {
        err(
            "noise",
            format!(
                "no noise profile `{}` (have: {}, or `{NO_NOISE}`)",
                p.noise,
                names(specs.noise.iter().map(|n| &n.spec.name))
            ),
        );
    }
    if p.faults.is_empty() {
        err("faults", "a problem needs at least one fault".into());
    }
    if p.duration > MAX_RUN_DURATION {
        err(
            "duration",
            format!(
                "{} is longer than the limit of {MAX_RUN_DURATION} of simulated time",
                p.duration
            ),
        );
    }
    if p.baseline >= p.duration {
        err(
            "baseline",
            format!(
                "baseline {} is not shorter than the duration {}",
                p.baseline, p.duration
            ),
        );
    }
    let Some(app) = specs.app(&p.application) else {
        err(
            "application",
            format!(
                "no application `{}` (have: {})",
                p.application,
                names(specs.apps.iter().map(|a| &a.spec.name))
            ),
        );
        return;
    };
    for (list, faults) in [("faults", &p.faults), ("decoys", &p.decoys)] {
        if faults.len() > MAX_FAULTS {
            err(
                list,
                format!(
                    "{} entries, more than the limit of {MAX_FAULTS} (not checked further)",
                    faults.len()
                ),
            );
            continue;
        }
        for (i, f) in faults.iter().enumerate() {
            check_fault(app, p, f, &format!("{list}[{i}]"), &mut err);
        }
    }
    for (i, a) in p.oracle.state.iter().enumerate() {
        let at = format!("oracle.state[{i}]");
        match a {
            StateAssertion::FaultCleared { fault } if *fault >= p.faults.len() => {
                err(
                    &format!("{at}.fault"),
                    format!("no fault {fault} (the problem has {})", p.faults.len()),
                );
            }
            StateAssertion::FlagVariant { flag, .. } if app.feature_flag(flag).is_none() => {
                err(
                    &format!("{at}.flag"),
                    format!("no feature flag `{flag}` in app `{}`", app.name),
                );
            }
            StateAssertion::NodeReady { node } if app.node(node).is_none() => {
                err(
                    &format!("{at}.node"),
                    format!("no node `{node}` in app `{}`", app.name),
                );
            }
            StateAssertion::ConfigMapHasKey { config_map, .. }
                if app.config_map(config_map).is_none() =>
            {
                err(
                    &format!("{at}.config_map"),
                    format!("no config map `{config_map}` in app `{}`", app.name),
                );
            }
            _ => {}
        }
        if let Some(s) = assertion_service(a).filter(|s| app.service(s).is_none()) {
            err(
                &format!("{at}.service"),
                format!("no service `{s}` in app `{}`", app.name),
            );
        }
    }
    if let Some(fix) = &p.reference_fix {
        check_reference_fix(fix, &mut err);
    }
    if p.oracle.state.is_empty() {
        err(
            "oracle.state",
            "the mitigation oracle needs at least one state assertion".into(),
        );
    }
    if let Err(msg) = p
        .ground_truth(&app.namespace, chrono::DateTime::UNIX_EPOCH)
        .check()
    {
        let field = format!("ground_truth.{}", msg.split(':').next().unwrap_or_default());
        err(&field, msg);
    }
    for (i, f) in p.ground_truth.faults.iter().enumerate() {
        if f.fault >= p.faults.len() {
            err(
                &format!("ground_truth.faults[{i}].fault"),
                format!("no fault {} (the problem has {})", f.fault, p.faults.len()),
            );
        }
    }
    if p.visibility.is_empty() {
        err(
            "visibility",
            "a problem must say what the dataset has to show".into(),
        );
    }
    for (i, v) in p.visibility.iter().enumerate() {
        let at = format!("visibility[{i}]");
        let (svcs, node) = expectation_refs(v);
        for (field, s) in svcs {
            if app.service(s).is_none() {
                err(
                    &format!("{at}.{field}"),
                    format!("no service `{s}` in app `{}`", app.name),
                );
            }
        }
        if let Some(n) = node.filter(|n| app.node(n).is_none()) {
            err(
                &format!("{at}.node"),
                format!("no node `{n}` in app `{}`", app.name),
            );
        }
    }
    check_leaks(p, &mut err);
}

fn check_fault(
    app: &AppSpec,
    p: &ProblemSpec,
    f: &FaultSpec,
    at: &str,
    err: &mut impl FnMut(&str, String),
) {
    let onset = p.onset_offset(f);
    if onset >= p.duration {
        err(
            &format!("{at}.onset"),
            format!(
                "onset {} after a baseline of {} is beyond the duration {}",
                f.onset, p.baseline, p.duration
            ),
        );
    }
    let params = f.primitive.params();
    let field_of = |name: &str| -> String {
        for (k, v) in &params {
            if v.as_str() == Some(name) {
                return format!("{at}.{k}");
            }
            if let Some(i) = v
                .as_array()
                .and_then(|a| a.iter().position(|x| x.as_str() == Some(name)))
            {
                return format!("{at}.{k}[{i}]");
            }
        }
        at.to_string()
    };
    for target in f.primitive.targets() {
        let missing = match target {
            Target::Service(s) => app
                .service(s)
                .is_none()
                .then(|| format!("no service `{s}` in app `{}`", app.name)),
            Target::Node(n) => app.node(n).is_none().then(|| {
                format!(
                    "no node `{n}` in app `{}` (have: {})",
                    app.name,
                    names(app.nodes.iter().map(|n| &n.name))
                )
            }),
            Target::ConfigMap(c) => app
                .config_map(c)
                .is_none()
                .then(|| format!("no config map `{c}` in app `{}`", app.name)),
            Target::FeatureFlag(fl) => app.feature_flag(fl).is_none().then(|| {
                format!(
                    "no feature flag `{fl}` in app `{}` (have: {})",
                    app.name,
                    names(app.feature_flags.iter().map(|f| &f.name))
                )
            }),
            Target::Cluster => None,
        };
        if let Some(msg) = missing {
            let name = match target {
                Target::Service(s)
                | Target::Node(s)
                | Target::ConfigMap(s)
                | Target::FeatureFlag(s) => s,
                Target::Cluster => "",
            };
            err(&field_of(name), msg);
        }
    }
    check_params(app, &f.primitive, at, err);
}

/// Parameter checks that need the app: the thing changed must exist there.
fn check_params(app: &AppSpec, prim: &Primitive, at: &str, err: &mut impl FnMut(&str, String)) {
    use Primitive::*;
    let percent = |v: f64, field: &str, err: &mut dyn FnMut(&str, String)| {
        if !(0.0..=100.0).contains(&v) || v == 0.0 {
            err(
                &format!("{at}.{field}"),
                format!("{v} is not a percentage in (0, 100]"),
            );
        }
    };
    match prim {
        ServiceTargetPort { target_port: 0, .. } => err(
            &format!("{at}.target_port"),
            "0 is not a port (expected 1 to 65535)".into(),
        ),
        ServicePort { port: 0, .. } => err(
            &format!("{at}.port"),
            "0 is not a port (expected 1 to 65535)".into(),
        ),
        Scale { replicas, .. } | AntiAffinityDeadlock { replicas, .. }
            if *replicas > MAX_REPLICAS =>
        {
            err(
                &format!("{at}.replicas"),
                format!("{replicas} replicas is more than the limit of {MAX_REPLICAS}"),
            )
        }
        ServiceTargetPort {
            service, port_name, ..
        }
        | ServicePort {
            service, port_name, ..
        } => {
            if let Some(s) = app.service(service) {
                if !s.has_service() {
                    err(
                        &format!("{at}.service"),
                        format!("service `{service}` has no Service object (no ports)"),
                    );
                } else if let Some(pn) = port_name.as_ref().filter(|pn| s.port(pn).is_none()) {
                    err(
                        &format!("{at}.port_name"),
                        format!("service `{service}` has no port `{pn}`"),
                    );
                }
            }
        }
        EnvRemove { service, var } | EnvAddressPort { service, var, .. } => {
            if let Some(s) = app.service(service).filter(|s| !s.env.contains_key(var)) {
                err(
                    &format!("{at}.var"),
                    format!(
                        "service `{}` has no env var `{var}` (has: {})",
                        s.name,
                        names(s.env.keys())
                    ),
                );
            } else if let (EnvAddressPort { .. }, Some(s)) = (prim, app.service(service)) {
                let value = &s.env[var];
                if value
                    .rsplit_once(':')
                    .is_none_or(|(_, p)| !p.starts_with(|c: char| c.is_ascii_digit()))
                {
                    err(
                        &format!("{at}.var"),
                        format!("env var `{var}` = `{value}` holds no `host:port` address"),
                    );
                }
            }
        }
        ConfigMapKeyDrift {
            config_map, key, ..
        } => {
            if let Some(c) = app
                .config_map(config_map)
                .filter(|c| !c.data.contains_key(key))
            {
                err(
                    &format!("{at}.key"),
                    format!(
                        "config map `{config_map}` has no key `{key}` (has: {})",
                        names(c.data.keys())
                    ),
                );
            }
        }
        FeatureFlag { flag, variant } => {
            if let Some(f) = app
                .feature_flag(flag)
                .filter(|f| !f.variants.contains_key(variant) && f.default_variant != *variant)
            {
                err(
                    &format!("{at}.variant"),
                    format!(
                        "flag `{flag}` has no variant `{variant}` (has: {})",
                        names(f.variants.keys())
                    ),
                );
            }
        }
        PvcClaimMismatch { service, .. }
            if app.service(service).is_some_and(|s| s.volumes.is_empty()) =>
        {
            err(
                &format!("{at}.service"),
                format!("service `{service}` mounts no volume claim"),
            );
        }
        DatabaseAuth { service, .. }
        | DatabaseLock { service, .. }
        | DiskReadErrors { service, .. } => {
            use crate::app::Role;
            if app
                .service(service)
                .is_some_and(|s| !matches!(s.role, Role::Database | Role::Cache | Role::Queue))
            {
                err(
                    &format!("{at}.service"),
                    format!("service `{service}` is not a store (role database, cache or queue)"),
                );
            }
            if let DiskReadErrors { percent: p, .. } = prim {
                percent(*p, "percent", err);
            }
        }
        NetworkLoss { percent: p, .. } => percent(*p, "percent", err),
        SyscallFailure { percent: p, .. } => percent(*p, "percent", err),
        LoadSpike { multiplier } if !(*multiplier > 0.0 && *multiplier <= MAX_LOAD_MULTIPLIER) => {
            err(
                &format!("{at}.multiplier"),
                format!(
                    "{multiplier} is not a load multiplier (expected a number above 0 and at most {MAX_LOAD_MULTIPLIER})"
                ),
            );
        }

        RpcRetryConfig {
            service,
            dependency,
            ..
        } if app.service(service).is_some()
            && !app.dependencies(service).contains(&dependency.as_str()) =>
        {
            err(
                &format!("{at}.dependency"),
                format!("service `{service}` does not call `{dependency}`"),
            );
        }
        _ => {}
    }
}

fn assertion_service(a: &StateAssertion) -> Option<&str> {
    use StateAssertion::*;
    match a {
        ImageNot { service, .. }
        | TargetPortIs { service, .. }
        | EnvEquals { service, .. }
        | MemoryLimitAtLeast { service, .. }
        | CpuLimitAtLeast { service, .. }
        | ReplicasAtLeast { service, .. }
        | DeploymentReady { service }
        | EndpointsReady { service } => Some(service),
        _ => None,
    }
}

fn expectation_refs(v: &Expectation) -> (Vec<(&'static str, &str)>, Option<&str>) {
    use Expectation::*;
    match v {
        Restarts { service, .. }
        | EndpointsEmpty { service }
        | PodPhase { service, .. }
        | ContainerWaiting { service, .. }
        | ContainerTerminated { service, .. }
        | LogContains { service, .. }
        | LatencyAbove { service, .. }
        | ErrorRatioAbove { service, .. }
        | ReplicasUnavailable { service } => (vec![("service", service)], None),
        EndpointsInclude { service, other } => (
            vec![("service", service.as_str()), ("other", other.as_str())],
            None,
        ),
        ErrorSpans { service, peer } => {
            let mut v = vec![("service", service.as_str())];
            v.extend(peer.as_deref().map(|p| ("peer", p)));
            (v, None)
        }
        Event { service, node, .. } | MetricIncrease { service, node, .. } => (
            service
                .as_deref()
                .map(|s| ("service", s))
                .into_iter()
                .collect(),
            node.as_deref(),
        ),
        AlertFiring { service, .. } => (
            service
                .as_deref()
                .map(|s| ("service", s))
                .into_iter()
                .collect(),
            None,
        ),
        NodeNotReady { node } => (Vec::new(), Some(node)),
    }
}

/// Nothing a run creates may carry the problem id or a primitive's name.
fn check_leaks(p: &ProblemSpec, err: &mut impl FnMut(&str, String)) {
    for (list, faults) in [("faults", &p.faults), ("decoys", &p.decoys)] {
        for (i, f) in faults.iter().enumerate() {
            for name in f.primitive.introduced_names() {
                let lower = name.to_ascii_lowercase();
                let leak = if lower.contains(&p.id) {
                    Some(format!("`{name}` contains the problem id"))
                } else {
                    crate::primitive::PRIMITIVE_NAMES
                        .iter()
                        .find(|prim| {
                            prim.len() > 5
                                && (lower.contains(*prim)
                                    || lower.contains(&prim.replace('_', "-")))
                        })
                        .map(|prim| format!("`{name}` contains the primitive name `{prim}`"))
                };
                if let Some(msg) = leak.or_else(|| {
                    marker(&lower)
                        .map(|m| format!("`{name}` contains `{m}`, which gives the injection away"))
                }) {
                    err(
                        &format!("{list}[{i}]"),
                        format!("{msg}: the run would create it where an agent can read it"),
                    );
                }
            }
        }
    }
}

/// Words that mark an object as made by a fault injector.
fn marker(name: &str) -> Option<&'static str> {
    [
        "fault",
        "inject",
        "chaos",
        "decoy",
        "faultline",
        "sregym",
        "broken",
        "bad-",
    ]
    .into_iter()
    .find(|m| name.contains(m))
}

/// A reference fix is kubectl command lines, or the reason there are none; not both.
fn check_reference_fix(fix: &crate::problem::ReferenceFix, err: &mut impl FnMut(&str, String)) {
    match (fix.commands.is_empty(), &fix.unreachable) {
        (true, None) => err(
            "reference_fix.commands",
            "a reference fix needs kubectl commands, or `unreachable` saying why there are none"
                .into(),
        ),
        (false, Some(_)) => err(
            "reference_fix.unreachable",
            "a reference fix has either commands or `unreachable`, not both".into(),
        ),
        _ => {}
    }
    for (i, c) in fix.commands.iter().enumerate() {
        if !c.trim_start().starts_with("kubectl ") {
            err(
                &format!("reference_fix.commands[{i}]"),
                format!("`{c}` is not a kubectl command (a fix goes through the Kubernetes API)"),
            );
        }
    }
}

/// A noise profile must schedule something, on a period that ends: a zero `every` would never
/// start a period (silently no noise), a disturbance cannot outlast its period, and kinds are
/// drawn without repetition, so a period holds at most one of each.
fn check_noise(n: &NoiseProfile, file: &SourceFile, out: &mut Vec<Diagnostic>) {
    use crate::noise::NoiseKind;
    let mut err = |field: String, msg: String| out.push(file.at_field(&field, msg));
    if n.every.as_millis() < 1000 {
        err(
            "every".into(),
            format!("{} is not a period (expected at least 1s)", n.every),
        );
    }
    if n.length == Dur::ZERO || n.length > n.every {
        err(
            "length".into(),
            format!(
                "{} is not a disturbance length (expected above 0 and at most every = {})",
                n.length, n.every
            ),
        );
    }
    if n.disturbances.is_empty() {
        err(
            "disturbances".into(),
            "a noise profile needs at least one disturbance".into(),
        );
    }
    let most = (n.disturbances.len() as u32).min(MAX_NOISE_PER_PERIOD);
    if n.per_period == 0 || n.per_period > most {
        err(
            "per_period".into(),
            format!(
                "{} is not a number of disturbances per period (expected 1 to {most}: kinds are \
                 drawn without repetition, at most {MAX_NOISE_PER_PERIOD})",
                n.per_period
            ),
        );
    }
    for (i, d) in n.disturbances.iter().enumerate() {
        match d {
            NoiseKind::RequestDrop { percent } if !(*percent > 0.0 && *percent <= 100.0) => err(
                format!("disturbances[{i}].percent"),
                format!("{percent} is not a percentage in (0, 100]"),
            ),
            NoiseKind::CpuBurst { cpu } if cpu.millicores() == 0 => err(
                format!("disturbances[{i}].cpu"),
                "a CPU burst needs more than 0 CPU".into(),
            ),
            _ => {}
        }
    }
}
