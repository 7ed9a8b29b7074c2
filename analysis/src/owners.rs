//! Which workload a Pod or ReplicaSet belongs to, from the ownerReferences the objects table
//! recorded (Pod → ReplicaSet → Deployment, Pod → StatefulSet, ...). ITBench cuts pod names at
//! their last two dashes, which is wrong for StatefulSet pods (`mongodb-geo-0`) and for pods of
//! bare ReplicaSets; the name rule is kept only for objects the table never saw.

use std::collections::HashMap;
use std::sync::Arc;

use polars::prelude::*;
use schemas::tables::Table;
use schemas::tables::columns::objects as c;
use serde_json::Value;

use crate::cache::Derived;
use crate::frame::{collect, strings, strings_or_empty};
use crate::{Result, Source};

#[derive(Debug, Default, Clone)]
pub struct Owners {
    /// (namespace, kind, name) → (owner kind, owner name), the controller owner.
    owner: HashMap<(String, String, String), (String, String)>,
}

impl Derived for Owners {
    const TABLES: &'static [Table] = &[Table::Objects];

    /// The owners of every Pod and ReplicaSet the source recorded (each object's latest version).
    fn derive(source: &Source) -> Result<Owners> {
        let lf = source
            .scan(Table::Objects)?
            .filter(
                col(c::KIND)
                    .eq(lit("Pod"))
                    .or(col(c::KIND).eq(lit("ReplicaSet")))
                    .or(col(c::KIND).eq(lit("Job"))),
            )
            .group_by([col(c::KIND), col(c::NAMESPACE), col(c::NAME)])
            .agg([col(c::OBJECT)
                .sort_by(
                    [col(c::OBSERVED)],
                    SortMultipleOptions::default().with_maintain_order(true),
                )
                .last()]);
        let df = collect(lf)?;
        let kinds = strings_or_empty(&df, c::KIND)?;
        let namespaces = strings(&df, c::NAMESPACE)?;
        let names = strings_or_empty(&df, c::NAME)?;
        let objects = strings_or_empty(&df, c::OBJECT)?;
        let mut owners = Owners::default();
        for i in 0..df.height() {
            let Ok(v) = serde_json::from_str::<Value>(&objects[i]) else {
                continue;
            };
            let refs = v
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let controller = refs
                .iter()
                .find(|r| r["controller"].as_bool() == Some(true))
                .or_else(|| refs.first());
            if let Some(r) = controller
                && let (Some(kind), Some(name)) = (r["kind"].as_str(), r["name"].as_str())
            {
                owners.owner.insert(
                    (
                        namespaces[i].clone().unwrap_or_default(),
                        kinds[i].clone(),
                        names[i].clone(),
                    ),
                    (kind.to_string(), name.to_string()),
                );
            }
        }
        Ok(owners)
    }
}

impl Owners {
    /// The owners of every Pod and ReplicaSet the source recorded (each object's latest version).
    pub fn load(source: &Source) -> Result<Arc<Owners>> {
        source.derived()
    }

    /// The top controller of an object: (kind, name), following owners up to four levels.
    pub fn top(&self, namespace: &str, kind: &str, name: &str) -> Option<(String, String)> {
        let mut at = (kind.to_string(), name.to_string());
        let mut found = None;
        for _ in 0..4 {
            match self
                .owner
                .get(&(namespace.to_string(), at.0.clone(), at.1.clone()))
            {
                Some(next) => {
                    found = Some(next.clone());
                    at = next.clone();
                }
                None => break,
            }
        }
        found
    }

    /// The workload name an object rolls up to, as ITBench's `deployment` column means it: the
    /// top controller of a Pod or ReplicaSet, else the name rule; other objects are themselves.
    pub fn workload(&self, namespace: &str, kind: &str, name: &str) -> String {
        if let Some((_, owner)) = self.top(namespace, kind, name) {
            return owner;
        }
        match kind {
            "Pod" => pod_workload_by_name(name),
            "ReplicaSet" => match name.rsplit_once('-') {
                Some((stem, hash)) if hash.len() >= 5 => stem.to_string(),
                _ => name.to_string(),
            },
            _ if name.is_empty() => "unknown".to_string(),
            _ => name.to_string(),
        }
    }

    /// Pods whose top controller is the workload `name` (any kind) in `namespace` (any when
    /// none), known from the objects.
    pub fn pods_of(&self, namespace: Option<&str>, name: &str) -> Vec<(String, String)> {
        let mut pods: Vec<(String, String)> = self
            .owner
            .keys()
            .filter(|(ns, kind, _)| kind == "Pod" && namespace.is_none_or(|n| n == ns))
            .filter(|(ns, kind, pod)| {
                self.top(ns, kind, pod)
                    .is_some_and(|(_, owner)| owner.eq_ignore_ascii_case(name))
            })
            .map(|(ns, _, pod)| (ns.clone(), pod.clone()))
            .collect();
        pods.sort();
        pods
    }
}

/// ITBench's rule: `<deployment>-<replicaset hash>-<pod hash>` → `<deployment>`.
pub fn pod_workload_by_name(pod: &str) -> String {
    let parts: Vec<&str> = pod.rsplitn(3, '-').collect();
    match parts.as_slice() {
        [_, _, stem] => stem.to_string(),
        [_, stem] => stem.to_string(),
        _ if pod.is_empty() => "unknown".to_string(),
        _ => pod.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_rule_is_itbench_s() {
        assert_eq!(
            pod_workload_by_name("frontend-675fd7b5c5-gd8gl"),
            "frontend"
        );
        assert_eq!(pod_workload_by_name("mongodb-geo-0"), "mongodb");
        assert_eq!(pod_workload_by_name("solo"), "solo");
    }

    #[test]
    fn owners_are_followed_to_the_top() {
        let mut o = Owners::default();
        let key = |k: &str, n: &str| ("ns".to_string(), k.to_string(), n.to_string());
        o.owner.insert(
            key("Pod", "geo-abc-x"),
            ("ReplicaSet".into(), "geo-abc".into()),
        );
        o.owner.insert(
            key("ReplicaSet", "geo-abc"),
            ("Deployment".into(), "geo".into()),
        );
        o.owner.insert(
            key("Pod", "mongodb-geo-0"),
            ("StatefulSet".into(), "mongodb-geo".into()),
        );
        assert_eq!(o.workload("ns", "Pod", "geo-abc-x"), "geo");
        assert_eq!(o.workload("ns", "Pod", "mongodb-geo-0"), "mongodb-geo");
        assert_eq!(
            o.pods_of(Some("ns"), "geo"),
            [("ns".to_string(), "geo-abc-x".to_string())]
        );
    }
}
