//! Read-only lookups the assertions share: an app service's workload (Deployment or
//! StatefulSet, as one shape), its main container, its Service, the ports its processes listen
//! on, and the wording that names objects in reasons (`Deployment hotel-reservation/geo`).
//!
//! Every lookup that can miss returns `Err(reason)`, so a check reads as a chain of `?`.

use problems::app::{AppSpec, ServiceSpec};
use sim::objects::{
    Container, IntOrString, Labels, Pod, PodSpec, PodTemplate, ReplicaCounts, Service, ServicePort,
    key,
};
use sim::programs;
use sim::world::World;

/// What a check reads: the world and the app it runs.
pub(crate) struct View<'a> {
    pub w: &'a World,
    pub app: &'a AppSpec,
    pub ns: &'a str,
}

/// An app service's workload, whichever kind runs it.
pub(crate) struct Workload<'a> {
    /// `Deployment` or `StatefulSet`.
    pub kind: &'static str,
    pub name: &'a str,
    pub uid: &'a str,
    pub replicas: i32,
    pub selector: &'a Labels,
    pub template: &'a PodTemplate,
    pub generation: i64,
    pub observed_generation: i64,
    pub counts: &'a ReplicaCounts,
}

impl<'a> View<'a> {
    pub fn new(w: &'a World, app: &'a AppSpec) -> View<'a> {
        View {
            w,
            app,
            ns: &app.namespace,
        }
    }

    /// `Kind namespace/name`, as reasons name namespaced objects.
    pub fn name(&self, kind: &str, name: &str) -> String {
        format!("{kind} {}/{name}", self.ns)
    }

    /// The app service's spec (what its manifest declares).
    pub fn spec(&self, service: &str) -> Result<&'a ServiceSpec, String> {
        self.app.service(service).ok_or_else(|| {
            format!(
                "application {} has no service named {service}",
                self.app.name
            )
        })
    }

    /// The service's workload, if one exists.
    pub fn workload(&self, service: &str) -> Option<Workload<'a>> {
        let k = key(self.ns, service);
        if let Some(d) = self.w.deployments.get(&k) {
            return Some(Workload {
                kind: "Deployment",
                name: &d.meta.name,
                uid: &d.meta.uid,
                replicas: d.replicas,
                selector: &d.selector,
                template: &d.template,
                generation: d.meta.generation,
                observed_generation: d.observed_generation,
                counts: &d.counts,
            });
        }
        self.w.statefulsets.get(&k).map(|s| Workload {
            kind: "StatefulSet",
            name: &s.meta.name,
            uid: &s.meta.uid,
            replicas: s.replicas,
            selector: &s.selector,
            template: &s.template,
            generation: s.meta.generation,
            observed_generation: s.observed_generation,
            counts: &s.counts,
        })
    }

    /// The service's workload, which must exist (scaled to zero is allowed here).
    pub fn existing_workload(&self, service: &str) -> Result<Workload<'a>, String> {
        self.workload(service).ok_or_else(|| {
            format!(
                "no Deployment or StatefulSet {}/{service} exists (the workload was deleted)",
                self.ns
            )
        })
    }

    /// The service's workload, which must exist and want at least one replica.
    pub fn live_workload(&self, service: &str) -> Result<Workload<'a>, String> {
        let wl = self.existing_workload(service)?;
        if wl.replicas < 1 {
            return Err(format!(
                "{} wants {} replicas (at least 1 expected)",
                self.name(wl.kind, service),
                wl.replicas
            ));
        }
        Ok(wl)
    }

    /// The service is in a state to serve: its workload exists and wants at least one replica,
    /// and its Service exists when the manifest declares one.
    pub fn serving(&self, service: &str) -> Result<Workload<'a>, String> {
        let wl = self.live_workload(service)?;
        if self.spec(service)?.has_service() {
            self.service(service)?;
        }
        Ok(wl)
    }

    /// The Service object named `name`.
    pub fn service(&self, name: &str) -> Result<&'a Service, String> {
        self.w
            .services
            .get(&key(self.ns, name))
            .ok_or_else(|| format!("{} does not exist", self.name("Service", name)))
    }

    /// The port of Service `name` called `port_name` (the first one when none is named).
    pub fn service_port(
        &self,
        name: &str,
        port_name: Option<&str>,
    ) -> Result<&'a ServicePort, String> {
        self.service(name)?
            .ports
            .iter()
            .find(|p| port_name.is_none_or(|n| p.name.as_deref() == Some(n)))
            .ok_or_else(|| {
                format!(
                    "{} has no port named {}",
                    self.name("Service", name),
                    port_name.unwrap_or("(any)")
                )
            })
    }

    /// The main container of a service's workload (the manifest's container name, else the
    /// first container).
    pub fn main_container(&self, wl: &Workload<'a>) -> Result<&'a Container, String> {
        let containers = &wl.template.spec.containers;
        let wanted = self.app.service(wl.name).map(|s| s.container_name());
        let found = match wanted {
            Some(n) => containers.iter().find(|c| c.name == n),
            None => containers.first(),
        };
        found.ok_or_else(|| {
            format!(
                "{} has no container named {}",
                self.name(wl.kind, wl.name),
                wanted.unwrap_or("(any)")
            )
        })
    }

    /// Ports every container of the workload's pods listens on, all together.
    pub fn listening(&self, template: &PodTemplate) -> Vec<u16> {
        let mut ports: Vec<u16> = template
            .spec
            .containers
            .iter()
            .flat_map(|c| programs::listen_ports(c, programs::identify(self.app, c).as_ref()))
            .collect();
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// A pod to resolve names from: a copy of some pod of the cluster, in the app's namespace,
    /// with `spec` when given (else cluster-first DNS).
    pub fn resolver_pod(&self, spec: Option<&PodSpec>) -> Result<Pod, String> {
        let mut pod = self
            .w
            .pods
            .values()
            .next()
            .cloned()
            .ok_or_else(|| "no pod exists in the cluster to resolve names from".to_string())?;
        pod.meta.namespace = Some(self.ns.to_string());
        match spec {
            Some(s) => pod.spec = s.clone(),
            None => {
                pod.spec.dns_policy = "ClusterFirst".into();
                pod.spec.dns_config = None;
            }
        }
        Ok(pod)
    }
}

/// The container port a Service port's `targetPort` names, looked up in a pod template.
pub(crate) fn target_port(template: &PodTemplate, target: &IntOrString) -> Option<u16> {
    match target {
        IntOrString::Int(n) => u16::try_from(*n).ok(),
        IntOrString::Str(name) => template
            .spec
            .containers
            .iter()
            .flat_map(|c| &c.ports)
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .and_then(|p| u16::try_from(p.container_port).ok()),
    }
}

/// Labels as `{k=v, k=v}`.
pub(crate) fn labels(l: &Labels) -> String {
    let parts: Vec<String> = l.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", parts.join(", "))
}

/// Ports as `8080, 8081` (or `no port`).
pub(crate) fn ports(p: &[u16]) -> String {
    if p.is_empty() {
        return "no port".into();
    }
    let parts: Vec<String> = p.iter().map(u16::to_string).collect();
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_ports_read_as_written_in_reasons() {
        let l: Labels = [("app".to_string(), "geo".to_string())].into();
        assert_eq!(labels(&l), "{app=geo}");
        assert_eq!(labels(&Labels::new()), "{}");
        assert_eq!(ports(&[8080, 8081]), "8080, 8081");
        assert_eq!(ports(&[]), "no port");
    }

    #[test]
    fn named_target_ports_resolve_through_the_template() {
        let mut c = Container::new("geo", "geo:1");
        c.ports.push(sim::objects::ContainerPort {
            name: Some("grpc".into()),
            container_port: 8083,
            host_port: None,
            protocol: "TCP".into(),
        });
        let t = PodTemplate {
            metadata: Default::default(),
            spec: PodSpec::new(vec![c]),
        };
        assert_eq!(
            target_port(&t, &IntOrString::Str("grpc".into())),
            Some(8083)
        );
        assert_eq!(target_port(&t, &IntOrString::Str("http".into())), None);
        assert_eq!(target_port(&t, &IntOrString::Int(9999)), Some(9999));
        assert_eq!(target_port(&t, &IntOrString::Int(-1)), None);
    }
}
