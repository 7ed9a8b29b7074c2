//! What the patch code needs to know about Kubernetes types, kept as data: which lists merge by
//! which key (strategic merge patch), which are list-maps, sets or atomic (server-side apply), and
//! which structs are owned whole. A [`Ctx`] is a position in an object (the Kind plus the type of
//! the node); [`Ctx::field`] steps into a field and says how that field's list (if it is one)
//! behaves. Anything not in the tables is a plain map whose lists are replaced whole, which is what
//! both the strategic merge patch and server-side apply do for fields without list metadata.

/// The types whose fields carry list metadata. `Any` is every other struct or map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    /// The object itself (its fields depend on the Kind).
    Root,
    /// `ObjectMeta`.
    Meta,
    /// The spec of a workload: Deployment, ReplicaSet, StatefulSet, DaemonSet, Job,
    /// ReplicationController, and CronJob (via `jobTemplate`).
    Workload,
    /// CronJob `spec.jobTemplate`.
    JobTemplate,
    /// `PodTemplateSpec`.
    PodTemplate,
    PodSpec,
    Container,
    ServiceSpec,
    NodeSpec,
    /// Any kind's `status`: conditions (by type), node addresses, pod IPs.
    Status,
    /// Owned whole by server-side apply (`+structType=atomic` / `+mapType=atomic`): label
    /// selectors, owner references, `nodeSelector`, a Service's `selector`.
    Atomic,
    Any,
}

/// How a list field merges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum List {
    /// Replaced whole by a strategic merge patch; one leaf for server-side apply.
    Atomic,
    /// Items are maps merged by `key` (`patchMergeKey`); server-side apply identifies them by
    /// `map_keys` (`x-kubernetes-list-map-keys`, which for ports adds `protocol`).
    Merge {
        key: &'static str,
        map_keys: &'static [&'static str],
    },
    /// A list of scalars with set semantics (`patchStrategy:"merge"` on scalars, `listType=set`).
    Set,
}

/// One table row: `parent.name` has item/value type `child` and list behaviour `list`.
struct Row {
    parent: Ty,
    name: &'static str,
    child: Ty,
    list: List,
}

const fn row(parent: Ty, name: &'static str, child: Ty, list: List) -> Row {
    Row {
        parent,
        name,
        child,
        list,
    }
}

const fn by(key: &'static str, map_keys: &'static [&'static str]) -> List {
    List::Merge { key, map_keys }
}

/// List metadata and nested types, from the struct tags (`patchStrategy`, `patchMergeKey`) and
/// the `+listType`/`+listMapKey`/`+structType` markers of `k8s.io/api` core/v1, apps/v1 and
/// meta/v1 `types.go` (Kubernetes 1.28; LIVE.md §2.3). Rows with `List::Atomic` for a nested type
/// only name the type; rows for lists that are atomic anyway (tolerations, taints, command, args,
/// readinessGates) are listed so the table documents them.
const FIELDS: &[Row] = &[
    // ObjectMeta
    row(Ty::Meta, "ownerReferences", Ty::Atomic, by("uid", &["uid"])),
    row(Ty::Meta, "finalizers", Ty::Any, List::Set),
    // Workload specs and templates
    row(Ty::Workload, "template", Ty::PodTemplate, List::Atomic),
    row(Ty::Workload, "jobTemplate", Ty::JobTemplate, List::Atomic),
    row(Ty::Workload, "selector", Ty::Atomic, List::Atomic),
    row(Ty::JobTemplate, "metadata", Ty::Meta, List::Atomic),
    row(Ty::JobTemplate, "spec", Ty::Workload, List::Atomic),
    row(Ty::PodTemplate, "metadata", Ty::Meta, List::Atomic),
    row(Ty::PodTemplate, "spec", Ty::PodSpec, List::Atomic),
    // PodSpec
    row(
        Ty::PodSpec,
        "containers",
        Ty::Container,
        by("name", &["name"]),
    ),
    row(
        Ty::PodSpec,
        "initContainers",
        Ty::Container,
        by("name", &["name"]),
    ),
    row(
        Ty::PodSpec,
        "ephemeralContainers",
        Ty::Container,
        by("name", &["name"]),
    ),
    row(Ty::PodSpec, "volumes", Ty::Any, by("name", &["name"])),
    row(
        Ty::PodSpec,
        "imagePullSecrets",
        Ty::Any,
        by("name", &["name"]),
    ),
    row(
        Ty::PodSpec,
        "schedulingGates",
        Ty::Any,
        by("name", &["name"]),
    ),
    row(
        Ty::PodSpec,
        "resourceClaims",
        Ty::Any,
        by("name", &["name"]),
    ),
    row(Ty::PodSpec, "hostAliases", Ty::Any, by("ip", &["ip"])),
    row(
        Ty::PodSpec,
        "topologySpreadConstraints",
        Ty::Any,
        by("topologyKey", &["topologyKey", "whenUnsatisfiable"]),
    ),
    row(Ty::PodSpec, "nodeSelector", Ty::Atomic, List::Atomic),
    row(Ty::PodSpec, "tolerations", Ty::Any, List::Atomic),
    row(Ty::PodSpec, "readinessGates", Ty::Any, List::Atomic),
    // Container
    row(Ty::Container, "env", Ty::Any, by("name", &["name"])),
    row(
        Ty::Container,
        "ports",
        Ty::Any,
        by("containerPort", &["containerPort", "protocol"]),
    ),
    row(
        Ty::Container,
        "volumeMounts",
        Ty::Any,
        by("mountPath", &["mountPath"]),
    ),
    row(
        Ty::Container,
        "volumeDevices",
        Ty::Any,
        by("devicePath", &["devicePath"]),
    ),
    row(Ty::Container, "command", Ty::Any, List::Atomic),
    row(Ty::Container, "args", Ty::Any, List::Atomic),
    // Service, Node
    row(
        Ty::ServiceSpec,
        "ports",
        Ty::Any,
        by("port", &["port", "protocol"]),
    ),
    row(Ty::ServiceSpec, "selector", Ty::Atomic, List::Atomic),
    row(Ty::NodeSpec, "taints", Ty::Any, List::Atomic),
    row(Ty::NodeSpec, "podCIDRs", Ty::Any, List::Set),
    // Status of any kind
    row(Ty::Status, "conditions", Ty::Any, by("type", &["type"])),
    row(Ty::Status, "addresses", Ty::Any, by("type", &["type"])),
    row(Ty::Status, "podIPs", Ty::Any, by("ip", &["ip"])),
    row(Ty::Status, "hostIPs", Ty::Any, by("ip", &["ip"])),
];

/// The type of `spec` for each Kind with list metadata in its spec.
const SPECS: &[(&str, Ty)] = &[
    ("Pod", Ty::PodSpec),
    ("Service", Ty::ServiceSpec),
    ("Node", Ty::NodeSpec),
    ("Deployment", Ty::Workload),
    ("ReplicaSet", Ty::Workload),
    ("StatefulSet", Ty::Workload),
    ("DaemonSet", Ty::Workload),
    ("Job", Ty::Workload),
    ("CronJob", Ty::Workload),
    ("ReplicationController", Ty::Workload),
];

/// A position in an object of some Kind.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctx<'a> {
    pub kind: &'a str,
    pub ty: Ty,
}

impl<'a> Ctx<'a> {
    pub fn root(kind: &'a str) -> Ctx<'a> {
        Ctx { kind, ty: Ty::Root }
    }

    /// The context of field `name` (for a list: of its items) and the field's list behaviour.
    pub fn field(self, name: &str) -> (Ctx<'a>, List) {
        let child = |ty| Ctx {
            kind: self.kind,
            ty,
        };
        if self.ty == Ty::Root {
            let ty = match name {
                "metadata" => Ty::Meta,
                "status" => Ty::Status,
                "spec" => SPECS
                    .iter()
                    .find(|(kind, _)| *kind == self.kind)
                    .map_or(Ty::Any, |(_, ty)| *ty),
                // The PodTemplate kind keeps its template at the top level.
                "template" if self.kind == "PodTemplate" => Ty::PodTemplate,
                _ => Ty::Any,
            };
            return (child(ty), List::Atomic);
        }
        // Inside an atomic struct everything is part of one owned value; the strategic merge
        // patch still merges its maps (only list metadata matters there).
        match FIELDS
            .iter()
            .find(|r| r.parent == self.ty && r.name == name)
        {
            Some(r) => (child(r.child), r.list),
            None => (child(Ty::Any), List::Atomic),
        }
    }

    /// Whether server-side apply owns this node as one value.
    pub fn atomic(self) -> bool {
        self.ty == Ty::Atomic
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_depend_on_where_they_are() {
        let pod = Ctx::root("Deployment")
            .field("spec")
            .0
            .field("template")
            .0
            .field("spec")
            .0;
        let (container, list) = pod.field("containers");
        assert_eq!(list, by("name", &["name"]));
        assert_eq!(
            container.field("ports").1,
            by("containerPort", &["containerPort", "protocol"])
        );
        let svc = Ctx::root("Service").field("spec").0;
        assert_eq!(svc.field("ports").1, by("port", &["port", "protocol"]));
        // A ConfigMap has no list metadata at all.
        assert_eq!(
            Ctx::root("ConfigMap").field("spec").0.field("ports").1,
            List::Atomic
        );
    }

    #[test]
    fn replaced_lists_and_sets() {
        let pod = Ctx::root("Pod").field("spec").0;
        assert_eq!(pod.field("tolerations").1, List::Atomic);
        assert_eq!(pod.field("containers").0.field("command").1, List::Atomic);
        assert_eq!(
            Ctx::root("Node").field("spec").0.field("taints").1,
            List::Atomic
        );
        assert_eq!(
            Ctx::root("Pod").field("metadata").0.field("finalizers").1,
            List::Set
        );
        assert!(
            Ctx::root("Deployment")
                .field("spec")
                .0
                .field("selector")
                .0
                .atomic()
        );
    }
}
