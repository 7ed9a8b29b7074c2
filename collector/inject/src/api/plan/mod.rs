//! What a primitive changes on a real cluster, decided from the objects as read (IO-free): the
//! objects to modify (before and after), create or delete, and the services whose pods are
//! restarted so that the change takes effect (as the simulator's faults do, `sim::faults`).
//!
//! Planning asks for objects as it needs them: [`plan`] returns [`PlanError::Read`] naming an
//! object it has not been given, and the caller reads it and plans again. Each primitive applies
//! the fault (the spec change), never a symptom; `workloads` edits pod templates and replica
//! counts, `objects` everything else (Services, ConfigMaps, policies, quotas, RBAC, nodes).

mod objects;
mod workloads;

use std::collections::BTreeMap;

use problems::app::{AppSpec, WorkloadKind};
use problems::primitive::Primitive;
use serde_json::Value;

use super::object::{Kind, ObjectRef, array, member};

/// Objects as read from the cluster: `None` when absent.
pub type Objects = BTreeMap<ObjectRef, Option<Value>>;

/// One object change of a plan.
#[derive(Debug, Clone, PartialEq)]
pub enum Planned {
    Modify {
        target: ObjectRef,
        before: Value,
        after: Value,
    },
    Create {
        target: ObjectRef,
        body: Value,
    },
    Delete {
        target: ObjectRef,
        before: Value,
    },
}

impl Planned {
    pub fn target(&self) -> &ObjectRef {
        match self {
            Planned::Modify { target, .. }
            | Planned::Create { target, .. }
            | Planned::Delete { target, .. } => target,
        }
    }
}

/// What a primitive does to the cluster.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// In the order they are made (what others refer to first).
    pub changes: Vec<Planned>,
    /// Services whose pods are deleted once the changes are made, so that their controllers
    /// start new ones that read the change (a ConfigMap's consumers, evicted pods).
    pub restart: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// Read this object and plan again.
    #[error("{0} must be read first")]
    Read(ObjectRef),
    /// The primitive does not fit the cluster or the app (names what it lacks).
    #[error("{0}")]
    Invalid(String),
}

type Result<T> = std::result::Result<T, PlanError>;

fn invalid<T>(text: impl Into<String>) -> Result<T> {
    Err(PlanError::Invalid(text.into()))
}

/// The changes `primitive` makes to the app's objects in `read`.
pub fn plan(primitive: &Primitive, app: &AppSpec, read: &Objects) -> Result<Plan> {
    let mut w = Work::new(app, read);
    if !objects::apply(&mut w, primitive)? {
        workloads::apply(&mut w, primitive)?;
    }
    Ok(w.finish())
}

/// The objects of one plan as they are being edited.
pub(crate) struct Work<'a> {
    pub app: &'a AppSpec,
    read: &'a Objects,
    state: BTreeMap<ObjectRef, Option<Value>>,
    order: Vec<ObjectRef>,
    restart: Vec<String>,
}

impl<'a> Work<'a> {
    fn new(app: &'a AppSpec, read: &'a Objects) -> Work<'a> {
        Work {
            app,
            read,
            state: BTreeMap::new(),
            order: Vec::new(),
            restart: Vec::new(),
        }
    }

    pub fn ns(&self) -> &'a str {
        &self.app.namespace
    }

    pub fn at(&self, kind: Kind, name: &str) -> ObjectRef {
        ObjectRef::namespaced(kind, self.ns(), name)
    }

    /// The object as edited so far; `None` when absent.
    fn get(&mut self, r: &ObjectRef) -> Result<Option<&mut Value>> {
        if !self.state.contains_key(r) {
            let v = self
                .read
                .get(r)
                .ok_or_else(|| PlanError::Read(r.clone()))?
                .clone();
            self.state.insert(r.clone(), v);
            self.order.push(r.clone());
        }
        Ok(self.state.get_mut(r).and_then(Option::as_mut))
    }

    /// Edits an object, which must exist.
    pub fn edit(
        &mut self,
        r: &ObjectRef,
        f: impl FnOnce(&mut Value) -> std::result::Result<(), String>,
    ) -> Result<()> {
        let what = r.to_string();
        match self.get(r)? {
            Some(v) => f(v).map_err(|e| PlanError::Invalid(format!("{what}: {e}"))),
            None => invalid(format!("{what} does not exist")),
        }
    }

    /// Creates an object, which must not exist.
    pub fn create(&mut self, r: &ObjectRef, body: Value) -> Result<()> {
        if self.get(r)?.is_some() {
            return invalid(format!("{r} exists already"));
        }
        self.state.insert(r.clone(), Some(body));
        Ok(())
    }

    /// Deletes an object, which must exist.
    pub fn delete(&mut self, r: &ObjectRef) -> Result<()> {
        if self.get(r)?.is_none() {
            return invalid(format!("{r} does not exist"));
        }
        self.state.insert(r.clone(), None);
        Ok(())
    }

    /// The workload of an app service, as the app spec says it runs.
    pub fn workload(&self, service: &str) -> Result<ObjectRef> {
        let Some(spec) = self.app.service(service) else {
            return invalid(format!(
                "application {} has no service named `{service}`",
                self.app.name
            ));
        };
        let kind = match spec.kind {
            WorkloadKind::StatefulSet => Kind::StatefulSet,
            WorkloadKind::Deployment | WorkloadKind::Job => Kind::Deployment,
        };
        Ok(self.at(kind, service))
    }

    /// Edits a service's workload (`spec.replicas`, `spec.template`, ...).
    pub fn edit_workload(
        &mut self,
        service: &str,
        f: impl FnOnce(&mut Value) -> std::result::Result<(), String>,
    ) -> Result<()> {
        let r = self.workload(service)?;
        self.edit(&r, f)
    }

    /// Edits a service's pod template spec.
    pub fn edit_pod(
        &mut self,
        service: &str,
        f: impl FnOnce(&mut Value) -> std::result::Result<(), String>,
    ) -> Result<()> {
        self.edit_workload(service, |w| f(pod_spec(w)))
    }

    /// Edits the main container of a service (by its container name, else the first one).
    pub fn edit_container(
        &mut self,
        service: &str,
        f: impl FnOnce(&mut Value) -> std::result::Result<(), String>,
    ) -> Result<()> {
        let name = self
            .app
            .service(service)
            .map(|s| s.container_name().to_string());
        self.edit_pod(service, |pod| {
            let containers = array(pod, "containers");
            let idx = name
                .as_ref()
                .and_then(|n| {
                    containers
                        .iter()
                        .position(|c| c["name"].as_str() == Some(n.as_str()))
                })
                .unwrap_or(0);
            match containers.get_mut(idx) {
                Some(c) => f(c),
                None => Err("the pod template has no container".into()),
            }
        })
    }

    /// Restarts a service's pods once the changes are made.
    pub fn restart(&mut self, service: &str) {
        if !self.restart.iter().any(|s| s == service) {
            self.restart.push(service.to_string());
        }
    }

    fn finish(self) -> Plan {
        let mut changes = Vec::new();
        for r in self.order {
            let before = self.read.get(&r).cloned().flatten();
            let after = self.state.get(&r).cloned().flatten();
            let target = r.clone();
            match (before, after) {
                (None, Some(body)) => changes.push(Planned::Create { target, body }),
                (Some(before), None) => changes.push(Planned::Delete { target, before }),
                (Some(before), Some(after)) if before != after => changes.push(Planned::Modify {
                    target,
                    before,
                    after,
                }),
                _ => {}
            }
        }
        Plan {
            changes,
            restart: self.restart,
        }
    }
}

/// A workload's pod template spec, created when absent.
pub fn pod_spec(workload: &mut Value) -> &mut Value {
    member(member(member(workload, "spec"), "template"), "spec")
}

#[cfg(test)]
mod tests;
