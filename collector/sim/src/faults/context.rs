//! The state one fault application works on ([`Ctx`]: the world, the app, the growing undo) and
//! the edits every layer shares: saving before changing, patching a workload's pod template,
//! restarting a service's pods.

use crate::controllers::{delete_pod, owned_by};
use crate::kinds::Object;
use crate::objects::*;
use crate::runtime::{NodeRuntime, ServiceRuntime};
use crate::util;
use crate::world::World;
use problems::app::AppSpec;

use super::undo::{Saved, Undo};
use super::{FaultError, Result};

pub(super) struct Ctx<'a> {
    pub w: &'a mut World,
    pub app: &'a AppSpec,
    pub undo: Undo,
}

impl Ctx<'_> {
    pub fn ns(&self) -> String {
        self.app.namespace.clone()
    }

    /// Saves the object at `k` before the fault changes it; false (nothing saved) if absent.
    pub fn save<T: Object>(&mut self, k: &Key) -> bool {
        let Some(o) = self.w.object::<T>(k).cloned() else {
            return false;
        };
        self.undo.push(Saved::object(k.clone(), Some(o)));
        true
    }

    /// Saves the app's object of kind `T` named `name`, which must exist.
    fn save_named<T: Object>(&mut self, name: &str) -> Result<Key> {
        let k = key(&self.ns(), name);
        if !self.save::<T>(&k) {
            return Err(FaultError(format!("no {} named `{name}`", T::KIND.name())));
        }
        Ok(k)
    }

    /// Edits the app's object of kind `T` named `name` (which must exist), saved first, and
    /// reports it changed. An error from `f` leaves it unreported (the fault is not applied).
    pub fn modify<T: Object>(
        &mut self,
        name: &str,
        f: impl FnOnce(&mut T) -> Result<()>,
    ) -> Result<()> {
        let k = self.save_named::<T>(name)?;
        f(self.w.object_mut::<T>(&k).expect("saved"))?;
        self.w.touch(T::KIND, &k);
        Ok(())
    }

    /// Deletes the app's object of kind `T` named `name` (which must exist), saved first.
    pub fn delete<T: Object>(&mut self, name: &str) -> Result<()> {
        let k = self.save_named::<T>(name)?;
        self.w.remove_object::<T>(&k);
        self.w.touch(T::KIND, &k);
        Ok(())
    }

    /// Metadata for an object the fault creates in the app's namespace, labelled as the app's.
    pub fn app_meta(&mut self, name: &str) -> Meta {
        let ns = self.ns();
        self.w.meta(Some(&ns), name, self.app.common_labels.clone())
    }

    /// Stores an object the fault creates (saving any it replaces) and reports it changed.
    pub fn create<T: Object>(&mut self, k: Key, o: T) {
        let prev = self.w.insert_object(k.clone(), o);
        self.undo.push(Saved::object(k.clone(), prev));
        self.w.touch(T::KIND, &k);
    }

    /// Saves the object at `k` unless this fault already saved it (a revert must restore the
    /// version from before the fault, however many of its edits touched the object); false if
    /// there is no such object.
    fn save_first<T: Object>(&mut self, k: &Key) -> bool {
        if self.w.object::<T>(k).is_none() {
            return false;
        }
        if !self.undo.saved.iter().any(|s| s.is_object(T::KIND, k)) {
            self.save::<T>(k);
        }
        true
    }

    fn save_workload(&mut self, service: &str) -> Result<()> {
        let k = key(&self.ns(), service);
        if self.save_first::<Deployment>(&k) || self.save_first::<StatefulSet>(&k) {
            return Ok(());
        }
        Err(FaultError(format!(
            "no workload named `{service}` in namespace {}",
            self.ns()
        )))
    }

    /// Edits a service's pod template and replica count (a `kubectl patch` of the workload).
    pub fn edit(
        &mut self,
        service: &str,
        f: impl FnOnce(&mut PodTemplate, &mut i32),
    ) -> Result<()> {
        self.save_workload(service)?;
        let k = key(&self.ns(), service);
        if let Some(d) = self.w.deployments.get_mut(&k) {
            f(&mut d.template, &mut d.replicas);
            d.meta.generation += 1;
            let uid = d.meta.uid.clone();
            self.w.touch(Kind::Deployment, &k);
            // Like the delete-and-apply of the real injectors, the change reaches every pod at
            // once: the old ReplicaSets go to zero and their pods are deleted.
            let old: Vec<Key> = owned_by(self.w, &k.0, &uid)
                .map(|(rk, _)| rk.clone())
                .collect();
            for rk in old {
                self.retire_replicaset(&rk);
            }
        } else if let Some(s) = self.w.statefulsets.get_mut(&k) {
            f(&mut s.template, &mut s.replicas);
            s.meta.generation += 1;
            s.revision = format!(
                "{}-{}",
                s.meta.name,
                util::template_hash(&serde_json::to_string(&s.template).unwrap_or_default())
            );
            self.w.touch(Kind::StatefulSet, &k);
        }
        Ok(())
    }

    /// Scales a ReplicaSet to zero and deletes its pods.
    fn retire_replicaset(&mut self, rk: &Key) {
        let Some(rs) = self.w.replicasets.get_mut(rk) else {
            return;
        };
        rs.replicas = 0;
        let rs_uid = rs.meta.uid.clone();
        self.w.touch(Kind::ReplicaSet, rk);
        let pods: Vec<Key> = self
            .w
            .pods
            .range((rk.0.clone(), String::new())..)
            .take_while(|((n, _), _)| *n == rk.0)
            .filter(|(_, p)| p.meta.is_owned_by(&rs_uid))
            .map(|(pk, _)| pk.clone())
            .collect();
        for pk in pods {
            delete_pod(self.w, &pk);
        }
    }

    /// Edits the main container of a service.
    pub fn edit_container(&mut self, service: &str, f: impl FnOnce(&mut Container)) -> Result<()> {
        let name = self
            .app
            .service(service)
            .map(|s| s.container_name().to_string());
        self.edit(service, |t, _| {
            let idx = name
                .as_ref()
                .and_then(|n| t.spec.containers.iter().position(|c| &c.name == n))
                .unwrap_or(0);
            if let Some(c) = t.spec.containers.get_mut(idx) {
                f(c);
            }
        })
    }

    /// The runtime conditions of a service, saved first.
    pub fn service_rt(&mut self, service: &str) -> &mut ServiceRuntime {
        let prev = self.w.runtime.services.get(service).cloned();
        self.undo.push(Saved::ServiceRt(service.to_string(), prev));
        self.w
            .runtime
            .services
            .entry(service.to_string())
            .or_default()
    }

    /// The runtime conditions of a node, saved first; the node must exist.
    pub fn node_rt(&mut self, node: &str) -> Result<&mut NodeRuntime> {
        if !self.w.nodes.contains_key(node) {
            return Err(FaultError(format!("no node named `{node}`")));
        }
        let prev = self.w.runtime.nodes.get(node).cloned();
        self.undo.push(Saved::NodeRt(node.to_string(), prev));
        Ok(self.w.runtime.nodes.entry(node.to_string()).or_default())
    }

    /// Nodes the running pods of a service are bound to.
    pub fn nodes_running(&self, service: &str) -> Vec<String> {
        crate::lifetimes::nodes_running(self.w, self.app, service)
    }

    /// Deletes the pods of a service so its controller recreates them with the current spec.
    pub fn restart(&mut self, service: &str) {
        let ns = self.ns();
        let sel: Labels = [(self.app.selector_label.clone(), service.to_string())].into();
        let pods: Vec<Key> = self
            .w
            .pods_selected(&ns, &sel)
            .map(|p| key(&ns, &p.meta.name))
            .collect();
        for pk in pods {
            delete_pod(self.w, &pk);
        }
    }

    /// Services whose pods use a ConfigMap (mounted or through env refs).
    pub fn consumers(&self, cm: &str) -> Vec<String> {
        let uses = |t: &PodTemplate| {
            t.spec
                .volumes
                .iter()
                .any(|v| v.config_map.as_ref().is_some_and(|c| c.name == cm))
                || t.spec.containers.iter().flat_map(|c| &c.env).any(
                    |e| matches!(&e.value_from, Some(EnvSource::ConfigMapKeyRef(r)) if r.name == cm),
                )
        };
        self.app
            .services
            .iter()
            .filter(|s| {
                let k = key(&self.app.namespace, &s.name);
                let t = self.w.deployments.get(&k).map(|d| &d.template).or(self
                    .w
                    .statefulsets
                    .get(&k)
                    .map(|s| &s.template));
                t.is_some_and(uses)
            })
            .map(|s| s.name.clone())
            .collect()
    }
}
