//! The one list of Kubernetes kinds the simulated API server stores, and the generic way to reach
//! an object of any of them.
//!
//! Each kind names its object type and the [`World`] map that holds it. From that list come the
//! [`Kind`] enum (its order is the order object rows are emitted in), the [`Object`]
//! implementation of every object type (typed access: `w.object::<Service>(&k)`), and
//! [`Kind::objects`] for a kind known only at run time (rendering, resource versions, listing,
//! removal). Faults save and restore objects through [`Object`]; the writable Kubernetes API is
//! meant to create, update and delete objects through the same path.
//!
//! Adding a kind: its type and `to_json` in `objects.rs`, its map in `World`, one line here.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::marker::PhantomData;

use apiserver::status::Cause;
use serde_json::Value;

use super::objects::*;
use super::util;
use super::world::World;
use super::writes::{self, DeleteOptions, Strategy};
use apiserver::status::Failure;

/// How an object of a kind is found in its world map: namespaced kinds by [`Key`]
/// (namespace, name), cluster-scoped kinds by name alone (their [`Key`] has an empty namespace).
pub trait MapKey: Ord + Clone + std::borrow::Borrow<Self::Lookup> {
    type Lookup: Ord + ?Sized;
    fn lookup(k: &Key) -> &Self::Lookup;
    fn from_key(k: Key) -> Self;
    fn to_key(&self) -> Key;
}

impl MapKey for Key {
    type Lookup = Key;
    fn lookup(k: &Key) -> &Key {
        k
    }
    fn from_key(k: Key) -> Key {
        k
    }
    fn to_key(&self) -> Key {
        self.clone()
    }
}

impl MapKey for String {
    type Lookup = str;
    fn lookup(k: &Key) -> &str {
        &k.1
    }
    fn from_key(k: Key) -> String {
        k.1
    }
    fn to_key(&self) -> Key {
        key("", self)
    }
}

/// A Kubernetes object type the world stores. Everything generic over kinds (listing, rendering,
/// saving and restoring around a fault) goes through this trait.
pub trait Object: Clone + Debug + Send + Sync + 'static {
    const KIND: Kind;
    /// [`Key`] for namespaced kinds, `String` (the name) for cluster-scoped ones.
    type Id: MapKey;
    fn meta(&self) -> &Meta;
    fn meta_mut(&mut self) -> &mut Meta;
    /// The object as the API server returns it.
    fn to_json(&self) -> Value;
    /// The object decoded from API JSON, the inverse of [`Object::to_json`] (see `decode.rs`).
    fn from_api(v: &Value) -> Result<Self, Vec<Cause>>;
    /// This kind's map in the world.
    fn map(w: &World) -> &BTreeMap<Self::Id, Self>;
    fn map_mut(w: &mut World) -> &mut BTreeMap<Self::Id, Self>;

    /// Writes a saved version's desired state back into the live object. Kinds whose controllers
    /// keep status on the object copy only their spec (and count a new generation where the real
    /// API server would); the rest are replaced whole.
    fn restore(&mut self, saved: Self) {
        *self = saved;
    }

    /// Turns a saved version into a new object before it is stored again after a deletion
    /// (kinds whose re-creation the cluster would notice get a new identity here).
    fn renew(&mut self, _w: &mut World) {}
}

impl World {
    /// Every object of type `T`, in key order.
    pub fn objects<T: Object>(&self) -> impl Iterator<Item = &T> {
        T::map(self).values()
    }

    /// The object of type `T` at `k`, if any.
    pub fn object<T: Object>(&self, k: &Key) -> Option<&T> {
        T::map(self).get(T::Id::lookup(k))
    }

    pub fn object_mut<T: Object>(&mut self, k: &Key) -> Option<&mut T> {
        T::map_mut(self).get_mut(T::Id::lookup(k))
    }

    /// Stores an object, returning the version it replaced. Like direct map edits, it does not
    /// mark the object changed: callers [`World::touch`] it when the change should be emitted.
    pub fn insert_object<T: Object>(&mut self, k: Key, o: T) -> Option<T> {
        T::map_mut(self).insert(T::Id::from_key(k), o)
    }

    /// Removes an object, returning it (not touched, as for [`World::insert_object`]).
    pub fn remove_object<T: Object>(&mut self, k: &Key) -> Option<T> {
        T::map_mut(self).remove(T::Id::lookup(k))
    }
}

/// The objects of one kind, reached from a [`Kind`] value rather than a type.
pub trait Objects: Sync {
    /// Keys of every stored object, in map order.
    fn keys(&self, w: &World) -> Vec<Key>;
    /// The object's API rendering and its resource version.
    fn render(&self, w: &World, k: &Key) -> Option<(Value, u64)>;
    fn meta<'w>(&self, w: &'w World, k: &Key) -> Option<&'w Meta>;
    fn meta_mut<'w>(&self, w: &'w mut World, k: &Key) -> Option<&'w mut Meta>;
    /// Removes the object (not touched); whether there was one.
    fn remove(&self, w: &mut World, k: &Key) -> bool;

    /// Why `body` does not decode as the kind's type, if it does not (the field paths and what
    /// was expected).
    fn decode_error(&self, body: &Value) -> Option<Vec<Cause>>;

    /// A client's create in namespace `ns` (ignored for cluster-scoped kinds): the new key.
    /// See [`writes::create`].
    fn create(&self, w: &mut World, ns: &str, body: &Value) -> Result<Key, Failure>;
    /// A client's update (PUT, or a patched object): whether anything changed.
    fn update(&self, w: &mut World, k: &Key, body: &Value) -> Result<bool, Failure>;
    /// A write to the `/status` subresource: whether anything changed.
    fn update_status(&self, w: &mut World, k: &Key, body: &Value) -> Result<bool, Failure>;
    /// A client's delete: the object as deleted.
    fn delete(&self, w: &mut World, k: &Key, opts: DeleteOptions) -> Result<Value, Failure>;
    /// Stores an object as another cluster reports it (identity and status as given, nothing
    /// defaulted or validated): to look at a real cluster through the model. Its key.
    fn load(&self, w: &mut World, body: &Value) -> Result<Key, Vec<Cause>>;
}

/// [`Objects`] of the kind of `T`.
struct Of<T>(PhantomData<fn() -> T>);

impl<T: Strategy> Objects for Of<T> {
    fn keys(&self, w: &World) -> Vec<Key> {
        T::map(w).keys().map(MapKey::to_key).collect()
    }

    fn render(&self, w: &World, k: &Key) -> Option<(Value, u64)> {
        w.object::<T>(k)
            .map(|o| (o.to_json(), o.meta().resource_version))
    }

    fn meta<'w>(&self, w: &'w World, k: &Key) -> Option<&'w Meta> {
        w.object::<T>(k).map(Object::meta)
    }

    fn meta_mut<'w>(&self, w: &'w mut World, k: &Key) -> Option<&'w mut Meta> {
        w.object_mut::<T>(k).map(Object::meta_mut)
    }

    fn remove(&self, w: &mut World, k: &Key) -> bool {
        w.remove_object::<T>(k).is_some()
    }

    fn decode_error(&self, body: &Value) -> Option<Vec<Cause>> {
        T::from_api(body).err()
    }

    fn create(&self, w: &mut World, ns: &str, body: &Value) -> Result<Key, Failure> {
        writes::create::<T>(w, ns, body)
    }

    fn update(&self, w: &mut World, k: &Key, body: &Value) -> Result<bool, Failure> {
        writes::update::<T>(w, k, body)
    }

    fn update_status(&self, w: &mut World, k: &Key, body: &Value) -> Result<bool, Failure> {
        writes::update_status::<T>(w, k, body)
    }

    fn delete(&self, w: &mut World, k: &Key, opts: DeleteOptions) -> Result<Value, Failure> {
        writes::delete::<T>(w, k, opts)
    }

    fn load(&self, w: &mut World, body: &Value) -> Result<Key, Vec<Cause>> {
        let o = T::from_api(body)?;
        let m = o.meta();
        let ns = if T::KIND.namespaced() {
            m.namespace.clone().unwrap_or_default()
        } else {
            String::new()
        };
        let k = key(&ns, &m.name);
        w.insert_object(k.clone(), o);
        Ok(k)
    }
}

/// Declares the kinds: the [`Kind`] enum, its API facts, and the [`Object`] implementation of
/// each object type. Per kind: its scope (`namespaced`, or `cluster`: keyed by name) and what a
/// revert restores (`whole` object, or `spec`: through the type's [`RestoreSpec`]).
macro_rules! kinds {
    ($($kind:ident => $ty:ty, $map:ident, $api:literal, $resource:literal, $scope:ident, $restore:ident;)*) => {
        /// The kinds the simulator keeps, in the order their rows are emitted.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Kind {
            $($kind,)*
        }

        impl Kind {
            /// Every kind, in emission order.
            pub const ALL: &[Kind] = &[$(Kind::$kind,)*];

            pub fn name(self) -> &'static str {
                match self {
                    $(Kind::$kind => stringify!($kind),)*
                }
            }

            pub fn api_version(self) -> &'static str {
                match self {
                    $(Kind::$kind => $api,)*
                }
            }

            /// The resource (plural) the API serves the kind as: `deployments`.
            pub fn resource(self) -> &'static str {
                match self {
                    $(Kind::$kind => $resource,)*
                }
            }

            /// The API group: empty for the core group.
            pub fn group(self) -> &'static str {
                self.api_version().rsplit_once('/').map_or("", |(g, _)| g)
            }

            pub fn namespaced(self) -> bool {
                match self {
                    $(Kind::$kind => kinds!(@namespaced $scope),)*
                }
            }

            /// This kind's objects in a world.
            pub fn objects(self) -> &'static dyn Objects {
                match self {
                    $(Kind::$kind => &Of::<$ty>(PhantomData),)*
                }
            }
        }

        $(
            impl Object for $ty {
                const KIND: Kind = Kind::$kind;
                type Id = kinds!(@id $scope);
                fn meta(&self) -> &Meta {
                    &self.meta
                }
                fn meta_mut(&mut self) -> &mut Meta {
                    &mut self.meta
                }
                fn to_json(&self) -> Value {
                    <$ty>::to_json(self)
                }
                fn from_api(v: &Value) -> Result<Self, Vec<Cause>> {
                    <$ty>::from_api(v)
                }
                fn map(w: &World) -> &BTreeMap<Self::Id, Self> {
                    &w.$map
                }
                fn map_mut(w: &mut World) -> &mut BTreeMap<Self::Id, Self> {
                    &mut w.$map
                }
                kinds!(@restore $restore);
            }
        )*
    };
    (@namespaced namespaced) => { true };
    (@namespaced cluster) => { false };
    (@id namespaced) => { Key };
    (@id cluster) => { String };
    (@restore whole) => {};
    (@restore spec) => {
        fn restore(&mut self, saved: Self) {
            RestoreSpec::restore(self, saved)
        }
        fn renew(&mut self, w: &mut World) {
            RestoreSpec::renew(self, w)
        }
    };
}

// Kind => object type, world map, apiVersion, resource, scope, what a revert restores.
kinds! {
    Namespace => Namespace, namespaces, "v1", "namespaces", cluster, whole;
    Node => Node, nodes, "v1", "nodes", cluster, spec;
    ConfigMap => ConfigMap, configmaps, "v1", "configmaps", namespaced, spec;
    Secret => Secret, secrets, "v1", "secrets", namespaced, whole;
    ServiceAccount => ServiceAccount, service_accounts, "v1", "serviceaccounts", namespaced, whole;
    Role => Role, roles, "rbac.authorization.k8s.io/v1", "roles", namespaced, whole;
    RoleBinding => RoleBinding, role_bindings, "rbac.authorization.k8s.io/v1", "rolebindings", namespaced, whole;
    PersistentVolumeClaim => Pvc, pvcs, "v1", "persistentvolumeclaims", namespaced, whole;
    ResourceQuota => ResourceQuota, quotas, "v1", "resourcequotas", namespaced, whole;
    NetworkPolicy => NetworkPolicy, netpols, "networking.k8s.io/v1", "networkpolicies", namespaced, whole;
    HorizontalPodAutoscaler => HorizontalPodAutoscaler, autoscalers, "autoscaling/v2", "horizontalpodautoscalers", namespaced, whole;
    Service => Service, services, "v1", "services", namespaced, spec;
    Deployment => Deployment, deployments, "apps/v1", "deployments", namespaced, spec;
    StatefulSet => StatefulSet, statefulsets, "apps/v1", "statefulsets", namespaced, spec;
    ReplicaSet => ReplicaSet, replicasets, "apps/v1", "replicasets", namespaced, whole;
    Pod => Pod, pods, "v1", "pods", namespaced, whole;
    Endpoints => Endpoints, endpoints, "v1", "endpoints", namespaced, whole;
    EndpointSlice => EndpointSlice, endpoint_slices, "discovery.k8s.io/v1", "endpointslices", namespaced, whole;
}

/// The fields of `ObjectMeta` a client may write.
const META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

impl Kind {
    /// Whether a DELETE answers with the deleted object (the registries with
    /// `ReturnDeletedObject`); the others answer with a Status.
    pub fn returns_deleted_object(self) -> bool {
        matches!(
            self,
            Kind::Pod
                | Kind::Service
                | Kind::Namespace
                | Kind::PersistentVolumeClaim
                | Kind::ServiceAccount
                | Kind::ResourceQuota
        )
    }

    /// The top-level fields of the kind's API type besides `apiVersion`, `kind` and `metadata`.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            Kind::ConfigMap => &["data", "binaryData", "immutable"],
            Kind::Secret => &["data", "stringData", "type", "immutable"],
            Kind::ServiceAccount => &[
                "secrets",
                "imagePullSecrets",
                "automountServiceAccountToken",
            ],
            Kind::Role => &["rules"],
            Kind::RoleBinding => &["subjects", "roleRef"],
            Kind::NetworkPolicy => &["spec"],
            Kind::Endpoints => &["subsets"],
            Kind::EndpointSlice => &["addressType", "endpoints", "ports"],
            Kind::Namespace
            | Kind::Node
            | Kind::PersistentVolumeClaim
            | Kind::ResourceQuota
            | Kind::Service
            | Kind::Deployment
            | Kind::StatefulSet
            | Kind::ReplicaSet
            | Kind::HorizontalPodAutoscaler
            | Kind::Pod => &["spec", "status"],
        }
    }

    /// The fields of a written object that its API type does not have, as the apiserver's strict
    /// decoder names them (`spec` typos are not seen: only the top level and `metadata` are
    /// checked).
    pub fn unknown_fields(self, body: &Value) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(o) = body.as_object() {
            for k in o.keys() {
                if !matches!(k.as_str(), "apiVersion" | "kind" | "metadata")
                    && !self.fields().contains(&k.as_str())
                {
                    out.push(k.clone());
                }
            }
        }
        if let Some(m) = body.get("metadata").and_then(Value::as_object) {
            for k in m.keys() {
                if !META_FIELDS.contains(&k.as_str()) {
                    out.push(format!("metadata.{k}"));
                }
            }
        }
        out
    }
}

/// What a revert writes back into a live object of a kind declared `spec`: the part faults change,
/// leaving what the cluster keeps on the object (status, addresses) alone.
trait RestoreSpec: Sized {
    fn restore(&mut self, saved: Self);
    /// See [`Object::renew`].
    fn renew(&mut self, _w: &mut World) {}
}

impl RestoreSpec for Deployment {
    /// The spec comes back; status stays with the controller, which sees a new generation.
    fn restore(&mut self, saved: Self) {
        self.template = saved.template;
        self.replicas = saved.replicas;
        self.selector = saved.selector;
        self.strategy = saved.strategy;
        self.meta.generation += 1;
    }
}

impl RestoreSpec for StatefulSet {
    fn restore(&mut self, saved: Self) {
        self.template = saved.template;
        self.replicas = saved.replicas;
        self.revision = saved.revision;
        self.meta.generation += 1;
    }
}

impl RestoreSpec for Service {
    /// Only what routes traffic comes back: the Service keeps its cluster IP.
    fn restore(&mut self, saved: Self) {
        self.selector = saved.selector;
        self.ports = saved.ports;
    }

    /// A re-created Service is a new object with a new uid and address.
    fn renew(&mut self, w: &mut World) {
        self.meta.uid = util::uuid(&mut w.rng);
        self.meta.created = w.now;
        self.cluster_ip = w.cluster_ip();
    }
}

impl RestoreSpec for ConfigMap {
    fn restore(&mut self, saved: Self) {
        self.data = saved.data;
    }

    fn renew(&mut self, w: &mut World) {
        self.meta.uid = util::uuid(&mut w.rng);
        self.meta.created = w.now;
    }
}

impl RestoreSpec for Node {
    /// Only what faults change on a node comes back; its status is the kubelet's.
    fn restore(&mut self, saved: Self) {
        self.taints = saved.taints;
        self.unschedulable = saved.unschedulable;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::runtime::Runtime;

    /// A namespaced and a cluster-scoped kind go through the same typed and by-kind paths.
    #[test]
    fn objects_of_any_kind_by_key() {
        let mut w = World::new(1, 0, Runtime::new());
        let cm = ConfigMap {
            meta: w.meta(Some("app"), "settings", Labels::new()),
            data: [("k".to_string(), "v".to_string())].into(),
            extra: serde_json::Map::new(),
        };
        let ns = Namespace {
            meta: w.meta(None, "app", Labels::new()),
            body: json!({"status": {"phase": "Active"}}),
        };
        let (cm_key, ns_key) = (key("app", "settings"), key("", "app"));
        assert!(w.insert_object(cm_key.clone(), cm).is_none());
        assert!(w.insert_object(ns_key.clone(), ns).is_none());
        assert!(w.namespaces.contains_key("app"));

        assert_eq!(Kind::ConfigMap.objects().keys(&w), vec![cm_key.clone()]);
        assert_eq!(Kind::Namespace.objects().keys(&w), vec![ns_key.clone()]);
        let (v, _) = Kind::Namespace.objects().render(&w, &ns_key).unwrap();
        assert_eq!(v["kind"], "Namespace");
        assert_eq!(v["status"]["phase"], "Active");
        assert_eq!(w.object::<ConfigMap>(&cm_key).unwrap().data["k"], "v");

        Kind::ConfigMap
            .objects()
            .meta_mut(&mut w, &cm_key)
            .unwrap()
            .resource_version = 7;
        assert_eq!(
            w.objects::<ConfigMap>()
                .next()
                .unwrap()
                .meta
                .resource_version,
            7
        );
        assert!(Kind::ConfigMap.objects().remove(&mut w, &cm_key));
        assert!(w.remove_object::<Namespace>(&ns_key).is_some());
        assert!(w.object::<ConfigMap>(&cm_key).is_none());
        assert!(w.namespaces.is_empty());
    }

    #[test]
    fn unknown_fields_are_named_with_their_path() {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labelz": {}},
                          "data": {"a": "1"}, "spec": {}});
        assert_eq!(
            Kind::ConfigMap.unknown_fields(&body),
            vec!["spec".to_string(), "metadata.labelz".to_string()]
        );
        assert!(
            Kind::Deployment
                .unknown_fields(&json!({"metadata": {"name": "d", "finalizers": []}, "spec": {}}))
                .is_empty()
        );
        assert!(Kind::ALL.iter().all(|k| !k.fields().is_empty()));
    }

    #[test]
    fn kind_facts_follow_the_list() {
        assert_eq!(Kind::ALL.first(), Some(&Kind::Namespace));
        assert!(Kind::ALL.windows(2).all(|p| p[0] < p[1]));
        assert_eq!(Kind::PersistentVolumeClaim.name(), "PersistentVolumeClaim");
        assert_eq!(
            Kind::RoleBinding.api_version(),
            "rbac.authorization.k8s.io/v1"
        );
        assert!(!Kind::Node.namespaced() && Kind::Pod.namespaced());
        assert_eq!(<Pvc as Object>::KIND, Kind::PersistentVolumeClaim);
    }
}
