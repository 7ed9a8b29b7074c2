//! Settings that turn load into overload: an RPC client with a short timeout and many retries
//! (a retry storm), and a garbage collector run very often under a tight memory cap. Cleared
//! when the caller's settings are back to the manifest's or within safe bounds, read from the
//! env the way the simulator's workload model reads them.

use problems::Dur;
use problems::primitive::Primitive;
use sim::objects::Container;
use sim::programs;

use super::resources::memory_fits;
use super::{Outcome, no_check};
use crate::view::View;

/// The most retries on error the oracle accepts beyond the manifest's own.
const SAFE_RETRIES: u32 = 3;
/// The shortest client timeout the oracle accepts when the manifest sets none.
const SAFE_TIMEOUT: Dur = Dur::from_millis(500);
/// GOGC at or above which the collector's CPU overhead is negligible in the model.
const SAFE_GOGC: f64 = 50.0;

pub(super) fn check(v: &View, p: &Primitive) -> Outcome {
    use Primitive as P;
    match p {
        P::RpcRetryConfig {
            service,
            dependency,
            timeout,
            ..
        } => client_settings_safe(v, service, dependency, *timeout),
        P::GcPressure { services, .. } => services.iter().try_for_each(|s| gc_relaxed(v, s)),
        other => Err(no_check(other)),
    }
}

/// The first of `names` the container's env sets, as the workload model looks them up.
fn env_first(v: &View, c: &Container, names: &[String]) -> Option<String> {
    names
        .iter()
        .find_map(|n| programs::env_value(v.w, v.ns, c, n))
}

/// The caller retries at most a few times and waits long enough for the dependency (or uses
/// its manifest's settings).
fn client_settings_safe(v: &View, service: &str, dependency: &str, injected: Dur) -> Outcome {
    let wl = v.serving(service)?;
    v.serving(dependency)?;
    let c = v.main_container(&wl)?;
    let spec = v.spec(service)?;
    let prefix = dependency.to_ascii_uppercase().replace('-', "_");
    let retry_vars = [
        format!("{prefix}_RETRIES"),
        "GRPC_CLIENT_RETRIES_ON_ERROR".into(),
    ];
    let timeout_vars = [format!("{prefix}_TIMEOUT"), "GRPC_CLIENT_TIMEOUT".into()];
    let manifest = |names: &[String]| names.iter().find_map(|n| spec.env.get(n).cloned());
    let what = format!("container {} of {}", c.name, v.name(wl.kind, service));

    let retries: u32 = env_first(v, c, &retry_vars)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    let manifest_retries: u32 = manifest(&retry_vars)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    if retries > manifest_retries.max(SAFE_RETRIES) {
        return Err(format!(
            "{what} still retries calls to {dependency} {retries} times on error (at most {} expected)",
            manifest_retries.max(SAFE_RETRIES)
        ));
    }
    let timeout: Option<Dur> = env_first(v, c, &timeout_vars).and_then(|t| t.parse().ok());
    let floor = manifest(&timeout_vars)
        .and_then(|t| t.parse::<Dur>().ok())
        .unwrap_or(SAFE_TIMEOUT);
    if let Some(t) = timeout
        && (t <= injected || t < floor)
    {
        return Err(format!(
            "{what} still times calls to {dependency} out after {t} (at least {floor} expected)"
        ));
    }
    Ok(())
}

/// GOGC no longer makes the collector run constantly, and the memory limit leaves room for
/// the working set.
fn gc_relaxed(v: &View, service: &str) -> Outcome {
    let wl = v.serving(service)?;
    let c = v.main_container(&wl)?;
    let gogc = programs::env_value(v.w, v.ns, c, "GOGC");
    let value: f64 = gogc
        .as_deref()
        .and_then(|g| g.parse().ok())
        .unwrap_or(100.0);
    let manifest: f64 = v
        .spec(service)?
        .env
        .get("GOGC")
        .and_then(|g| g.parse().ok())
        .unwrap_or(100.0);
    if value < SAFE_GOGC && value < manifest {
        return Err(format!(
            "container {} of {} still sets GOGC={} (at least {SAFE_GOGC} expected)",
            c.name,
            v.name(wl.kind, service),
            gogc.unwrap_or_default()
        ));
    }
    memory_fits(v, &wl)
}
