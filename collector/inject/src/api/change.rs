//! An object change as the undo journal keeps it ([`Change`]), written before the change is sent,
//! and how undoing it is decided from the object as it stands now ([`judge`], IO-free).
//!
//! Undoing never overwrites what someone else did after the fault: a field that no longer holds
//! the value the fault set is left as found and reported (`kept`), an object the fault created is
//! deleted only while it still holds what the fault put there, and a deleted object is created
//! again only while nobody else has created one of that name. Judging a change that was never
//! made, or was undone already, finds nothing to do: undoing is idempotent.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::object::{Field, ObjectRef, contained, content, for_create, get, uid};

/// One object change and what undoing it needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Change {
    /// Fields of an existing object set to new values (each with its value before and after, as
    /// the server stores them).
    Modify {
        target: ObjectRef,
        fields: Vec<Field>,
    },
    /// An object created, with its desired state as the server stores it and its uid once known.
    Create {
        target: ObjectRef,
        content: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uid: Option<String>,
    },
    /// An object deleted, kept whole to be created again.
    Delete { target: ObjectRef, object: Value },
}

impl Change {
    pub fn target(&self) -> &ObjectRef {
        match self {
            Change::Modify { target, .. }
            | Change::Create { target, .. }
            | Change::Delete { target, .. } => target,
        }
    }

    /// One line for people (`Service hotel-reservation/geo: spec.ports[0].targetPort`).
    pub fn describe(&self) -> String {
        match self {
            Change::Modify { target, fields } => {
                let names: Vec<String> = fields.iter().map(Field::dotted).collect();
                format!("{target}: {}", names.join(", "))
            }
            Change::Create { target, .. } => format!("{target}: created"),
            Change::Delete { target, .. } => format!("{target}: deleted"),
        }
    }
}

/// What undoing a change takes now.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Nothing: the change is not in effect (never made, undone already, or replaced by someone
    /// else's, then reported in `kept`).
    Nothing(String),
    /// Put these fields back, on the object at this resourceVersion.
    Patch {
        fields: Vec<Field>,
        resource_version: Option<String>,
    },
    /// Delete the object the fault created (this uid, at this resourceVersion).
    Delete {
        uid: Option<String>,
        resource_version: Option<String>,
    },
    /// Create the deleted object again.
    Create(Value),
}

/// How to undo a change, and what someone else changed after it (left as found).
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub step: Step,
    pub kept: Vec<String>,
}

fn show(v: Option<&Value>) -> String {
    v.map_or("absent".into(), |v| v.to_string())
}

/// Decides how to undo `change` given the object as it stands now (`None`: absent).
pub fn judge(change: &Change, current: Option<&Value>) -> Judged {
    let nothing = |why: String, kept: Vec<String>| Judged {
        step: Step::Nothing(why),
        kept,
    };
    match change {
        Change::Modify { target, fields } => {
            let Some(cur) = current else {
                return nothing(
                    format!("{target} is gone"),
                    vec![format!(
                        "{target} was deleted after the fault; it is not created again"
                    )],
                );
            };
            let mut back = Vec::new();
            let mut kept = Vec::new();
            for f in fields {
                let now = get(cur, &f.path);
                if now == f.after.as_ref() {
                    back.push(f.clone());
                } else if now != f.before.as_ref() {
                    kept.push(format!(
                        "{target} {}: is {} where the fault set {}: changed after the fault, left as found",
                        f.dotted(),
                        show(now),
                        show(f.after.as_ref())
                    ));
                }
            }
            if back.is_empty() {
                return nothing(format!("{target} no longer holds the fault"), kept);
            }
            Judged {
                step: Step::Patch {
                    fields: back,
                    resource_version: super::object::resource_version(cur).map(str::to_string),
                },
                kept,
            }
        }
        Change::Create {
            target,
            content: created,
            uid: created_uid,
        } => {
            let Some(cur) = current else {
                return nothing(format!("{target} is absent"), vec![]);
            };
            let cur_uid = uid(cur).map(str::to_string);
            if created_uid.is_some() && cur_uid != *created_uid {
                return nothing(
                    format!("{target} is not the one the fault created"),
                    vec![format!(
                        "{target} was created again by someone else after the fault; left as found"
                    )],
                );
            }
            if !contained(created, &content(cur)) {
                return nothing(
                    format!("{target} changed after the fault"),
                    vec![format!(
                        "{target}, created by the fault, was changed after it; it is not deleted"
                    )],
                );
            }
            Judged {
                step: Step::Delete {
                    uid: cur_uid,
                    resource_version: super::object::resource_version(cur).map(str::to_string),
                },
                kept: vec![],
            }
        }
        Change::Delete { target, object } => match current {
            None => Judged {
                step: Step::Create(for_create(object)),
                kept: vec![],
            },
            Some(cur) if uid(cur) == uid(object) => {
                nothing(format!("{target} was never deleted"), vec![])
            }
            // Created again as it was (by an undo that was interrupted before its journal entry
            // went): restored, whoever made it.
            Some(cur) if contained(&for_create(object), &content(cur)) => {
                nothing(format!("{target} is back as it was"), vec![])
            }
            Some(_) => nothing(
                format!("{target} exists again"),
                vec![format!(
                    "{target}, deleted by the fault, was created again by someone else; left as found"
                )],
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::object::{Kind, diff};
    use serde_json::json;

    fn svc(target_port: u16, rv: &str) -> Value {
        json!({"metadata": {"name": "geo", "uid": "u1", "resourceVersion": rv},
               "spec": {"ports": [{"port": 8083, "targetPort": target_port}]}})
    }

    #[test]
    fn a_modify_is_undone_only_where_the_fault_still_holds() {
        let target = ObjectRef::namespaced(Kind::Service, "h", "geo");
        let change = Change::Modify {
            target,
            fields: diff(&content(&svc(8083, "1")), &content(&svc(9999, "2"))),
        };
        // In effect: patched back at the resourceVersion read.
        let j = judge(&change, Some(&svc(9999, "2")));
        assert!(
            matches!(&j.step, Step::Patch { fields, resource_version } if fields.len() == 1 && resource_version.as_deref() == Some("2"))
        );
        assert!(j.kept.is_empty());
        // Never made, or undone already: nothing.
        let j = judge(&change, Some(&svc(8083, "3")));
        assert!(matches!(j.step, Step::Nothing(_)) && j.kept.is_empty());
        // Someone else's later value: left and reported.
        let j = judge(&change, Some(&svc(7000, "4")));
        assert!(matches!(j.step, Step::Nothing(_)));
        assert!(
            j.kept[0].contains("spec.ports[0].targetPort: is 7000"),
            "{:?}",
            j.kept
        );
        let j = judge(&change, None);
        assert!(matches!(j.step, Step::Nothing(_)) && j.kept.len() == 1);
    }

    #[test]
    fn creates_and_deletes_are_undone_unless_someone_else_took_over() {
        let target = ObjectRef::namespaced(Kind::NetworkPolicy, "h", "deny");
        let created = json!({"metadata": {"name": "deny"}, "spec": {"podSelector": {"matchLabels": {"a": "b"}}}});
        let change = Change::Create {
            target: target.clone(),
            content: created.clone(),
            uid: None,
        };
        let mut stored = created.clone();
        stored["metadata"]["uid"] = json!("u9");
        stored["spec"]["policyTypes"] = json!(["Ingress"]);
        assert!(matches!(
            judge(&change, Some(&stored)).step,
            Step::Delete { uid: Some(ref u), .. } if u == "u9"
        ));
        assert!(matches!(judge(&change, None).step, Step::Nothing(_)));
        let mut edited = stored.clone();
        edited["spec"]["podSelector"] = json!({"matchLabels": {"a": "c"}});
        assert_eq!(judge(&change, Some(&edited)).kept.len(), 1);

        let deleted = Change::Delete {
            target,
            object: stored.clone(),
        };
        assert!(
            matches!(judge(&deleted, None).step, Step::Create(ref b) if b["metadata"].get("uid").is_none())
        );
        assert!(matches!(
            judge(&deleted, Some(&stored)).step,
            Step::Nothing(_)
        ));
        // Created again as it was (an interrupted undo): nothing to do, nothing to report.
        let mut again = stored.clone();
        again["metadata"]["uid"] = json!("u10");
        let j = judge(&deleted, Some(&again));
        assert!(
            matches!(j.step, Step::Nothing(_)) && j.kept.is_empty(),
            "{j:?}"
        );
        // Someone else's object of that name: left and reported.
        let mut other = again.clone();
        other["spec"]["podSelector"] = json!({"matchLabels": {"a": "z"}});
        assert_eq!(judge(&deleted, Some(&other)).kept.len(), 1);
    }
}
