//! A problem's faults (and decoys) on a real cluster: injected one after another, each journaled
//! before it is made, and reverted newest first. An injection that fails reverts those made
//! before it, so a problem is either wholly in effect or not at all.

use inject::api::{InjectError, Injected, Injector, Reverted};
use problems::{AppSpec, ProblemSpec};

/// One injection of a problem, in effect.
pub struct Active {
    /// Index among the problem's injections (faults, then decoys).
    pub index: usize,
    pub primitive: &'static str,
    pub decoy: bool,
    pub injected: Injected,
}

/// What the journal calls an injection (seen by the evaluator only).
pub fn label(problem: &ProblemSpec, index: usize, primitive: &str, decoy: bool) -> String {
    let what = if decoy { "decoy" } else { "fault" };
    format!("problem {} {what} #{index} ({primitive})", problem.id)
}

/// Injects the chosen injections (all of them when `only` is empty), in order.
pub async fn inject_all(
    injector: &Injector,
    problem: &ProblemSpec,
    app: &AppSpec,
    only: &[usize],
) -> anyhow::Result<Vec<Active>> {
    let chosen: Vec<(usize, &problems::FaultSpec, bool)> = problem
        .injections()
        .enumerate()
        .filter(|(i, _)| only.is_empty() || only.contains(i))
        .map(|(i, (spec, decoy))| (i, spec, decoy))
        .collect();
    if let Some(missing) = only.iter().find(|i| **i >= problem.injections().count()) {
        anyhow::bail!(
            "problem {} has {} injections (faults, then decoys): there is no #{missing}",
            problem.id,
            problem.injections().count()
        );
    }
    // Refused before anything is changed: a problem runs whole or not at all.
    for (_, spec, _) in &chosen {
        if let Some(r) = inject::api::refusal(&spec.primitive, app) {
            anyhow::bail!("problem {}: {r}; nothing was changed", problem.id);
        }
    }
    let mut active = Vec::new();
    for (index, spec, decoy) in chosen {
        let primitive = spec.primitive.name();
        let made = injector
            .inject(
                &spec.primitive,
                app,
                label(problem, index, primitive, decoy),
            )
            .await;
        match made {
            Ok(injected) => active.push(Active {
                index,
                primitive,
                decoy,
                injected,
            }),
            Err(e) => {
                let undone = revert_all(injector, active).await;
                let also = match undone {
                    Ok(_) => String::new(),
                    Err(u) => format!("; reverting the injections made before it failed: {u}"),
                };
                return Err(anyhow::anyhow!(
                    "problem {} #{index} ({primitive}): {e}{also}",
                    problem.id
                ));
            }
        }
    }
    Ok(active)
}

/// Reverts injections newest first; every one is tried, the first error is returned.
pub async fn revert_all(
    injector: &Injector,
    active: Vec<Active>,
) -> Result<Vec<Reverted>, InjectError> {
    let mut done = Vec::new();
    let mut first_error = None;
    for a in active.into_iter().rev() {
        match injector.revert(a.injected.entry).await {
            Ok(r) => done.push(r),
            Err(e) => {
                tracing::warn!("{e}");
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(done),
    }
}
