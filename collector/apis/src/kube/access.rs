//! Access reviews (`kubectl auth can-i`): a SelfSubjectAccessReview or SelfSubjectRulesReview
//! answered for the one user the environment has. On a live environment that user may do
//! anything, as an operator with cluster-admin may; on a replay only what reads do, as the
//! read-only cluster it is refuses every write.

use serde_json::{Value, json};

/// Subresources that open a stream into a pod or through to it, which a replay has no
/// process for.
pub fn is_stream(subresource: &str) -> bool {
    matches!(subresource, "exec" | "attach" | "portforward" | "proxy")
}

/// Verbs a read-only user is granted.
const READS: [&str; 3] = ["get", "list", "watch"];

/// The review with its `status` filled in, for a `SelfSubjectAccessReview` or a
/// `SelfSubjectRulesReview` (`kind` names which).
pub fn review(kind: &str, mut body: Value, writable: bool) -> Value {
    let status = if kind == "SelfSubjectRulesReview" {
        let verbs: Vec<&str> = if writable { vec!["*"] } else { READS.to_vec() };
        json!({
            "resourceRules": [{"verbs": verbs, "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": verbs, "nonResourceURLs": ["*"]}],
            "incomplete": false,
        })
    } else {
        let attrs = body
            .pointer("/spec/resourceAttributes")
            .or_else(|| body.pointer("/spec/nonResourceAttributes"));
        let verb = attrs.and_then(|a| a["verb"].as_str()).unwrap_or_default();
        // A replay refuses streams into pods whatever the verb (`get pods/exec` opens one too).
        let stream = attrs
            .and_then(|a| a["subresource"].as_str())
            .is_some_and(is_stream);
        let allowed = writable || (READS.contains(&verb) && !stream);
        let mut s = json!({"allowed": allowed});
        if !allowed {
            s["reason"] = "the cluster is read-only".into();
        }
        s
    };
    if let Some(m) = body.as_object_mut() {
        m.insert("kind".into(), kind.into());
        m.insert("apiVersion".into(), "authorization.k8s.io/v1".into());
        m.entry("metadata")
            .or_insert_with(|| json!({"creationTimestamp": null}));
        m.insert("status".into(), status);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(verb: &str) -> Value {
        json!({"spec": {"resourceAttributes": {"namespace": "x", "verb": verb, "resource": "pods"}}})
    }

    #[test]
    fn live_allows_writes_and_replay_only_reads() {
        let r = review("SelfSubjectAccessReview", ask("delete"), true);
        assert_eq!(r["status"]["allowed"], true);
        assert_eq!(r["kind"], "SelfSubjectAccessReview");
        let r = review("SelfSubjectAccessReview", ask("delete"), false);
        assert_eq!(r["status"]["allowed"], false);
        assert_eq!(r["status"]["reason"], "the cluster is read-only");
        let r = review("SelfSubjectAccessReview", ask("list"), false);
        assert_eq!(r["status"]["allowed"], true);
        let mut exec = ask("get");
        exec["spec"]["resourceAttributes"]["subresource"] = "exec".into();
        assert_eq!(
            review("SelfSubjectAccessReview", exec.clone(), false)["status"]["allowed"],
            false
        );
        assert_eq!(
            review("SelfSubjectAccessReview", exec, true)["status"]["allowed"],
            true
        );
        let r = review(
            "SelfSubjectRulesReview",
            json!({"spec": {"namespace": "x"}}),
            false,
        );
        assert_eq!(r["status"]["resourceRules"][0]["verbs"], json!(READS));
        assert_eq!(r["spec"]["namespace"], "x");
    }
}
