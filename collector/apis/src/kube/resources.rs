//! The API resources the facade serves: names, kinds, scopes, short names and categories as a
//! Kubernetes 1.3x apiserver advertises them, so kubectl's discovery resolves `po`, `deploy`,
//! `svc`, `all` exactly as it would against a real cluster. Kinds found in a dataset that are not
//! listed here (custom resources, say) are added with names derived the way the apiserver derives them.

/// One servable resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    pub group: String,
    pub version: String,
    pub kind: String,
    /// Plural resource name used in URLs (`pods`).
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Subresources that can be read (`log` for pods, `status` for most).
    pub subresources: Vec<String>,
}

impl Resource {
    /// `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// (group, version, kind, plural, namespaced, short names, in category `all`)
type Row = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
    bool,
);

const BUILTIN: &[Row] = &[
    ("", "v1", "Binding", "bindings", true, &[], false),
    (
        "",
        "v1",
        "ComponentStatus",
        "componentstatuses",
        false,
        &["cs"],
        false,
    ),
    ("", "v1", "ConfigMap", "configmaps", true, &["cm"], false),
    ("", "v1", "Endpoints", "endpoints", true, &["ep"], false),
    ("", "v1", "Event", "events", true, &["ev"], false),
    (
        "",
        "v1",
        "LimitRange",
        "limitranges",
        true,
        &["limits"],
        false,
    ),
    ("", "v1", "Namespace", "namespaces", false, &["ns"], false),
    ("", "v1", "Node", "nodes", false, &["no"], false),
    (
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        true,
        &["pvc"],
        false,
    ),
    (
        "",
        "v1",
        "PersistentVolume",
        "persistentvolumes",
        false,
        &["pv"],
        false,
    ),
    ("", "v1", "Pod", "pods", true, &["po"], true),
    ("", "v1", "PodTemplate", "podtemplates", true, &[], false),
    (
        "",
        "v1",
        "ReplicationController",
        "replicationcontrollers",
        true,
        &["rc"],
        true,
    ),
    (
        "",
        "v1",
        "ResourceQuota",
        "resourcequotas",
        true,
        &["quota"],
        false,
    ),
    ("", "v1", "Secret", "secrets", true, &[], false),
    (
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        true,
        &["sa"],
        false,
    ),
    ("", "v1", "Service", "services", true, &["svc"], true),
    (
        "apps",
        "v1",
        "ControllerRevision",
        "controllerrevisions",
        true,
        &[],
        false,
    ),
    ("apps", "v1", "DaemonSet", "daemonsets", true, &["ds"], true),
    (
        "apps",
        "v1",
        "Deployment",
        "deployments",
        true,
        &["deploy"],
        true,
    ),
    (
        "apps",
        "v1",
        "ReplicaSet",
        "replicasets",
        true,
        &["rs"],
        true,
    ),
    (
        "apps",
        "v1",
        "StatefulSet",
        "statefulsets",
        true,
        &["sts"],
        true,
    ),
    (
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        true,
        &["hpa"],
        true,
    ),
    ("batch", "v1", "CronJob", "cronjobs", true, &["cj"], true),
    ("batch", "v1", "Job", "jobs", true, &[], true),
    (
        "coordination.k8s.io",
        "v1",
        "Lease",
        "leases",
        true,
        &[],
        false,
    ),
    (
        "discovery.k8s.io",
        "v1",
        "EndpointSlice",
        "endpointslices",
        true,
        &[],
        false,
    ),
    (
        "events.k8s.io",
        "v1",
        "Event",
        "events",
        true,
        &["ev"],
        false,
    ),
    // metrics-server's resource metrics API, which `kubectl top` requires in discovery.
    (
        "metrics.k8s.io",
        "v1beta1",
        "NodeMetrics",
        "nodes",
        false,
        &[],
        false,
    ),
    (
        "metrics.k8s.io",
        "v1beta1",
        "PodMetrics",
        "pods",
        true,
        &[],
        false,
    ),
    (
        "networking.k8s.io",
        "v1",
        "Ingress",
        "ingresses",
        true,
        &["ing"],
        false,
    ),
    (
        "networking.k8s.io",
        "v1",
        "IngressClass",
        "ingressclasses",
        false,
        &[],
        false,
    ),
    (
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        true,
        &["netpol"],
        false,
    ),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
        &["pdb"],
        false,
    ),
    (
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        false,
        &[],
        false,
    ),
    (
        "authorization.k8s.io",
        "v1",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        false,
        &[],
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
        &[],
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
        &[],
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
        &[],
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
        true,
        &[],
        false,
    ),
    (
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        false,
        &["pc"],
        false,
    ),
    (
        "storage.k8s.io",
        "v1",
        "StorageClass",
        "storageclasses",
        false,
        &["sc"],
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        false,
        &[],
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
        &[],
        false,
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
        &["crd", "crds"],
        false,
    ),
];

/// Every resource the facade serves, in discovery order (core group first).
#[derive(Debug, Clone)]
pub struct Registry {
    resources: Vec<Resource>,
}

impl Registry {
    /// The built-in resources plus any (apiVersion, kind) pairs seen in the data.
    pub fn new<'a>(seen: impl IntoIterator<Item = (&'a str, &'a str, bool)>) -> Self {
        let mut resources: Vec<Resource> = BUILTIN
            .iter()
            .map(|(g, v, k, plural, namespaced, short, all)| Resource {
                group: g.to_string(),
                version: v.to_string(),
                kind: k.to_string(),
                plural: plural.to_string(),
                singular: k.to_lowercase(),
                namespaced: *namespaced,
                short_names: short.iter().map(|s| s.to_string()).collect(),
                categories: if *all { vec!["all".into()] } else { vec![] },
                subresources: match *k {
                    // `kubectl drain` evicts only when discovery lists `pods/eviction`.
                    "Pod" => [
                        "attach",
                        "ephemeralcontainers",
                        "eviction",
                        "exec",
                        "log",
                        "portforward",
                        "status",
                    ]
                    .map(String::from)
                    .to_vec(),
                    "Deployment" | "ReplicaSet" | "StatefulSet" => {
                        vec!["scale".into(), "status".into()]
                    }
                    _ => vec![],
                },
            })
            .collect();
        for (api_version, kind, namespaced) in seen {
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            if resources
                .iter()
                .any(|r| r.group == group && r.version == version && r.kind == kind)
            {
                continue;
            }
            resources.push(Resource {
                group: group.into(),
                version: version.into(),
                kind: kind.into(),
                plural: plural_of(kind),
                singular: kind.to_lowercase(),
                namespaced,
                short_names: vec![],
                categories: vec![],
                subresources: vec![],
            });
        }
        Registry { resources }
    }

    pub fn all(&self) -> &[Resource] {
        &self.resources
    }

    /// The resource at `/apis/{group}/{version}/{plural}` (group empty for `/api/v1`).
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&Resource> {
        self.resources
            .iter()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
    }

    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<&Resource> {
        self.resources
            .iter()
            .find(|r| r.api_version() == api_version && r.kind == kind)
    }

    /// Groups with their versions, in discovery order.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for r in &self.resources {
            match groups.iter_mut().find(|(g, _)| *g == r.group) {
                Some((_, versions)) if !versions.contains(&r.version) => {
                    versions.push(r.version.clone())
                }
                Some(_) => {}
                None => groups.push((r.group.clone(), vec![r.version.clone()])),
            }
        }
        groups
    }
}

/// English plural of a kind, as the apiserver's default RESTMapper forms it.
fn plural_of(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if lower.ends_with('s')
        || lower.ends_with("sh")
        || lower.ends_with("ch")
        || lower.ends_with('x')
    {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_builtin_and_derives_custom_resources() {
        let reg = Registry::new([
            ("chaos-mesh.org/v1alpha1", "NetworkChaos", true),
            ("v1", "Pod", true),
        ]);
        assert_eq!(reg.find("", "v1", "pods").unwrap().short_names, vec!["po"]);
        assert_eq!(
            reg.find("apps", "v1", "deployments").unwrap().kind,
            "Deployment"
        );
        let custom = reg
            .by_kind("chaos-mesh.org/v1alpha1", "NetworkChaos")
            .unwrap();
        assert_eq!(custom.plural, "networkchaos".to_string() + "es");
        assert_eq!(plural_of("Policy"), "policies");
        assert_eq!(plural_of("Gateway"), "gateways");
        assert_eq!(reg.groups()[0], ("".to_string(), vec!["v1".to_string()]));
        assert_eq!(reg.all().iter().filter(|r| r.kind == "Pod").count(), 1);
    }
}
