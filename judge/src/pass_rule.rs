//! Whether a diagnosis passes without an LLM: a ground truth and an agent output go in, a
//! yes / no / cannot-tell comes out. Sessions use it when no judge model is configured or the judge
//! model failed; `judge run` records it beside the checklist pass (`rule_pass`).
//!
//! The rule: **the diagnosis passes when it names every root cause of the ground truth.**
//! Root causes are counted by alias class (a Service and its Pods declared as aliases are one
//! root cause), the way entity recall counts them.
//! - A structured output (at least one entity marked `contributing_factor`) names a root cause when
//!   one of its contributing entities matches a root-cause group by the same rule as ITBench's
//!   entity metrics (`entities.rs`: kind, namespace when both are given, name or filter). Extra,
//!   wrong entities do not fail it: over-attribution is what the checklist judge and the precision
//!   metrics are for; the rule answers only "was the culprit found".
//! - Free text names a root cause when one of its words is the name of a group of that class (its
//!   `name`, a fault target's name or alias of that component, case-insensitively), or a word
//!   matches one of the group's name filters in full and starts with the filter's literal prefix
//!   (so a filter like `.*` that matches any name never counts). Kinds are not required: "the
//!   flagd-config map" names the ConfigMap `flagd-config` as surely as "ConfigMap/flagd-config".
//! - An output that says nothing (no text, no contributing entity) fails.
//! - Free text longer than [`MAX_TEXT`] is not decided (None): a dump of logs or process lists
//!   names every word an app uses, so finding the culprit's name in it means nothing. Diagnoses
//!   are paragraphs; long ones are for the checklist LLM.
//! - The rule cannot decide (None) when the ground truth has no root cause, or when a root cause
//!   has no name a text could contain (no name, no usable filter, no fault target).
//!
//! Naming the culprit is necessary for a correct diagnosis, not sufficient: a text that mentions the
//! root cause's name while blaming something else passes this rule. That is why the checklist LLM is
//! preferred whenever it answers.

use std::collections::BTreeSet;

use schemas::{AgentOutput, GroundTruth};

use crate::entities::{EntityRef, GtGroup, GtIndex, literal_prefix};

/// Longest free-text diagnosis the rule decides (bytes).
pub const MAX_TEXT: usize = 4000;

/// Shortest filter prefix taken as naming something (shorter ones, like `a`, match too much).
const MIN_PREFIX: usize = 3;

/// The deterministic pass of `output` against `gt` (indexed as `idx`); see the module doc.
pub fn rule_pass(gt: &GroundTruth, idx: &GtIndex, output: &AgentOutput) -> Option<bool> {
    let classes: BTreeSet<usize> = idx
        .groups
        .iter()
        .filter(|g| g.root_cause)
        .map(|g| g.class)
        .collect();
    if classes.is_empty() {
        return None;
    }
    if output.root_causes().next().is_some() {
        let named: BTreeSet<usize> = output
            .root_causes()
            .flat_map(|e| {
                idx.matches(&EntityRef::parse(&e.name))
                    .into_iter()
                    .filter(|g| idx.in_root_cause_class(g))
                    .map(|g| g.class)
                    .collect::<Vec<_>>()
            })
            .collect();
        return Some(classes.iter().all(|c| named.contains(c)));
    }
    let text = output.diagnosis.trim();
    if text.is_empty() {
        return Some(false);
    }
    if text.len() > MAX_TEXT {
        return None;
    }
    let words = words(text);
    let lower = text.to_ascii_lowercase();
    let mut all_named = true;
    for class in &classes {
        let members: Vec<&GtGroup> = idx.groups.iter().filter(|g| g.class == *class).collect();
        let names = class_names(gt, &members);
        // A group's compiled patterns are in the order of its component's filter texts.
        let filters: Vec<(&regex_automata::meta::Regex, String)> = members
            .iter()
            .flat_map(|g| {
                let texts: &[String] = gt.component(&g.id).map_or(&[], |c| c.filter.as_slice());
                g.patterns
                    .iter()
                    .zip(texts.iter().map(|f| literal_prefix(f)))
            })
            .filter(|(_, prefix)| prefix.len() >= MIN_PREFIX)
            .collect();
        if names.is_empty() && filters.is_empty() {
            return None;
        }
        let by_name = names.iter().any(|n| {
            if n.chars().all(is_word_char) {
                words.iter().any(|w| w.eq_ignore_ascii_case(n))
            } else {
                contains_bounded(&lower, &n.to_ascii_lowercase())
            }
        });
        let by_filter = filters.iter().any(|(re, prefix)| {
            words
                .iter()
                .any(|w| w.to_ascii_lowercase().starts_with(prefix.as_str()) && re.is_match(w))
        });
        all_named &= by_name || by_filter;
    }
    Some(all_named)
}

/// Characters of a Kubernetes object name (and of ServiceOperation names).
fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// The name-like words of a text, without a sentence's final dot.
fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| !is_word_char(c))
        .map(|w| w.trim_matches('.'))
        .filter(|w| !w.is_empty())
        .collect()
}

/// Does `needle` occur in `hay` with no name character right before or after it?
fn contains_bounded(hay: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    hay.match_indices(needle).any(|(at, _)| {
        let before = hay[..at].chars().next_back();
        let after = hay[at + needle.len()..].chars().next();
        !before.is_some_and(is_word_char) && !after.is_some_and(|c| is_word_char(c) && c != '.')
    })
}

/// Exact names the members of a root-cause class go by: their own names and the names and
/// aliases of the fault targets that point at them.
fn class_names(gt: &GroundTruth, members: &[&GtGroup]) -> Vec<String> {
    let mut names: Vec<String> = members.iter().filter_map(|g| g.name.clone()).collect();
    for f in &gt.faults {
        let Some(component) = &f.target.component else {
            continue;
        };
        if members.iter().any(|g| g.id == *component) {
            names.push(f.target.name.clone());
            names.extend(f.target.aliases.iter().cloned());
        }
    }
    names.retain(|n| !n.trim().is_empty());
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemas::agent_output::AgentEntity;
    use serde_json::json;

    fn gt(value: serde_json::Value) -> GroundTruth {
        serde_json::from_value(value).unwrap()
    }

    /// Root cause: the ConfigMap flagd-config (exact name) and the cart Deployment (filter), aliased
    /// to cart's Pods; the frontend is a victim.
    fn two_causes() -> GroundTruth {
        gt(json!({
            "schema_version": 1,
            "components": [
                {"id": "cm", "kind": "ConfigMap", "namespace": "otel-demo", "name": "flagd-config", "root_cause": true},
                {"id": "cart", "kind": "Deployment", "namespace": "otel-demo", "filter": ["cart-.*"], "root_cause": true},
                {"id": "cart-pods", "kind": "Pod", "namespace": "otel-demo", "filter": ["cart-.*"]},
                {"id": "fe", "kind": "Service", "namespace": "otel-demo", "name": "frontend"}
            ],
            "aliases": [["cart", "cart-pods"]],
            "faults": [{"target": {"component": "cm", "kind": "ConfigMap", "name": "flagd-config", "aliases": ["flagd config map"]}, "mechanism": "flag flipped"}]
        }))
    }

    fn judge(gt: &GroundTruth, out: &AgentOutput) -> Option<bool> {
        rule_pass(gt, &GtIndex::new(gt), out)
    }

    fn entities(names: &[(&str, bool)]) -> AgentOutput {
        AgentOutput {
            entities: names
                .iter()
                .map(|(n, c)| AgentEntity {
                    name: n.to_string(),
                    contributing_factor: *c,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn structured_outputs_pass_only_when_every_root_cause_is_a_contributing_entity() {
        let g = two_causes();
        let both = entities(&[
            ("otel-demo/ConfigMap/flagd-config", true),
            ("otel-demo/Pod/cart-5d8f9c7b6-x2kqp", true),
            ("otel-demo/Service/frontend", true),
        ]);
        assert_eq!(
            judge(&g, &both),
            Some(true),
            "a wrong extra entity does not fail"
        );
        let one = entities(&[("otel-demo/ConfigMap/flagd-config", true)]);
        assert_eq!(judge(&g, &one), Some(false));
        // Named, but not as a cause: a victim is not a diagnosis.
        let as_victim = entities(&[
            ("otel-demo/ConfigMap/flagd-config", true),
            ("otel-demo/Deployment/cart", false),
        ]);
        assert_eq!(judge(&g, &as_victim), Some(false));
        let wrong_kind = entities(&[
            ("otel-demo/Secret/flagd-config", true),
            ("otel-demo/Deployment/cart-1", true),
        ]);
        assert_eq!(judge(&g, &wrong_kind), Some(false));
    }

    #[test]
    fn free_text_passes_when_it_names_every_root_cause_as_a_whole_word() {
        let g = two_causes();
        let t = |s: &str| judge(&g, &AgentOutput::from_text(s));
        assert_eq!(
            t("The flagd-config ConfigMap turned a flag on; pod cart-7c9d8b5f4-zq2mn failed."),
            Some(true)
        );
        // A fault target alias with spaces counts; the Deployment is found by its filter.
        assert_eq!(
            t("The Flagd Config Map was edited, breaking cart-abc."),
            Some(true)
        );
        assert_eq!(t("flagd-config was edited."), Some(false), "cart missing");
        // Part of a longer name is not the name.
        assert_eq!(t("my-flagd-config-v2 and cart-x broke"), Some(false));
        assert_eq!(t("flagd-configs and cart-x broke"), Some(false));
        assert_eq!(t("the frontend is down"), Some(false));
        assert_eq!(t("   "), Some(false), "an empty diagnosis fails");
        assert_eq!(judge(&g, &AgentOutput::default()), Some(false));
        // A dump that happens to contain both names is no diagnosis the rule can vouch for.
        let dump = format!("{} flagd-config cart-x", "ps output line\n".repeat(400));
        assert_eq!(t(&dump), None);
    }

    #[test]
    fn undecidable_without_a_root_cause_or_a_name_for_it() {
        let none = gt(json!({
            "schema_version": 1,
            "components": [{"id": "fe", "kind": "Service", "name": "frontend"}],
            "faults": []
        }));
        assert_eq!(judge(&none, &AgentOutput::from_text("frontend")), None);
        // A root cause matched by any name (`.*`) and with no name of its own.
        let nameless = gt(json!({
            "schema_version": 1,
            "components": [{"id": "n1", "kind": "Node", "filter": [".*"], "root_cause": true}],
            "faults": []
        }));
        assert_eq!(
            judge(&nameless, &AgentOutput::from_text("node-1 is full")),
            None
        );
        // The structured rule still decides: the entity either matches the group or not.
        assert_eq!(
            judge(&nameless, &entities(&[("Node/node-1", true)])),
            Some(true)
        );
    }
}
