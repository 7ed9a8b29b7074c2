//! What a fault changed, as saved prior versions, and the revert that puts them back.
//!
//! Applying a fault pushes one [`Saved`] per thing it is about to change: an object of any kind
//! (through [`Object`]) or an entry of the runtime conditions below the API. Reverting walks
//! them newest first, so the oldest saved version of anything changed twice wins.

use std::collections::BTreeMap;
use std::fmt::Debug;

use problems::primitive::ImageEffect;

use crate::kinds::Object;
use crate::objects::{Key, Kind};
use crate::runtime::{Link, NodeRuntime, ServiceRuntime};
use crate::world::World;

/// A saved prior state of one thing a fault changed.
#[derive(Debug, Clone)]
pub(super) enum Saved {
    /// An object of any kind, or its absence.
    Object(Box<dyn SavedObject>),
    Load(f64),
    NodeRt(String, Option<NodeRuntime>),
    ServiceRt(String, Option<ServiceRuntime>),
    Link((String, String), Option<Link>),
    Image(String, Option<ImageEffect>),
    AuthAt(String, Option<i64>),
}

impl Saved {
    /// The prior version of the object at `k` (`None`: there was none).
    pub(super) fn object<T: Object>(k: Key, prev: Option<T>) -> Saved {
        Saved::Object(Box::new(Version { key: k, prev }))
    }

    /// Whether this is a saved version of the object of `kind` at `k`.
    pub(super) fn is_object(&self, kind: Kind, k: &Key) -> bool {
        matches!(self, Saved::Object(o) if o.id() == (kind, k))
    }
}

/// A saved object version whose kind is known only to itself.
pub(super) trait SavedObject: Debug + Send + Sync {
    fn id(&self) -> (Kind, &Key);
    fn revert(self: Box<Self>, w: &mut World);
    fn clone_box(&self) -> Box<dyn SavedObject>;
}

impl Clone for Box<dyn SavedObject> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

#[derive(Debug, Clone)]
struct Version<T> {
    key: Key,
    prev: Option<T>,
}

impl<T: Object> SavedObject for Version<T> {
    fn id(&self) -> (Kind, &Key) {
        (T::KIND, &self.key)
    }

    /// A live object gets the saved desired state back; a deleted one is stored again; one the
    /// fault created goes away. Either way the object is reported changed.
    fn revert(self: Box<Self>, w: &mut World) {
        let Version { key: k, prev } = *self;
        match prev {
            Some(saved) => match w.object_mut::<T>(&k) {
                Some(live) => live.restore(saved),
                None => {
                    let mut o = saved;
                    o.renew(w);
                    w.insert_object(k.clone(), o);
                }
            },
            None => {
                w.remove_object::<T>(&k);
            }
        }
        w.touch(T::KIND, &k);
    }

    fn clone_box(&self) -> Box<dyn SavedObject> {
        Box::new(self.clone())
    }
}

/// How to undo one applied fault.
#[derive(Debug, Clone, Default)]
pub struct Undo {
    pub(super) saved: Vec<Saved>,
}

impl Undo {
    pub(super) fn push(&mut self, s: Saved) {
        self.saved.push(s);
    }

    /// Puts back everything the fault changed, newest change first.
    pub(super) fn revert(self, w: &mut World) {
        for s in self.saved.into_iter().rev() {
            let rt = &mut w.runtime;
            match s {
                Saved::Object(o) => o.revert(w),
                Saved::Load(v) => rt.load_multiplier = v,
                Saved::NodeRt(n, old) => put_back(&mut rt.nodes, n, old),
                Saved::ServiceRt(n, old) => put_back(&mut rt.services, n, old),
                Saved::Link(k, old) => put_back(&mut rt.links, k, old),
                Saved::Image(i, old) => put_back(&mut rt.images, i, old),
                Saved::AuthAt(s, old) => put_back(&mut rt.auth_changed_at, s, old),
            }
        }
    }
}

/// Restores a map entry to its saved value, or removes it if there was none.
fn put_back<K: Ord, V>(m: &mut BTreeMap<K, V>, k: K, old: Option<V>) {
    match old {
        Some(v) => m.insert(k, v),
        None => m.remove(&k),
    };
}
