//! ITBench's deterministic metrics on the real ITBench fixtures: the 44 consolidated ground truths
//! and the sample agent outputs. Expected values are worked out by hand in the comments.

use std::path::PathBuf;

use judge::entities::EntityRef;
use judge::itbench::Evaluation;
use judge::{submission, truth};
use schemas::agent_output::{AgentEntity, AgentPropagation};
use schemas::{AgentOutput, GroundTruth};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/itbench")
}

fn truths() -> std::collections::BTreeMap<String, std::sync::Arc<truth::LoadedTruth>> {
    truth::load(&fixtures().join("judge_inputs/ground_truths.json")).unwrap()
}

fn output(rel: &str) -> AgentOutput {
    let text = std::fs::read_to_string(fixtures().join(rel)).unwrap();
    submission::parse(&text, true).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

macro_rules! assert_prf {
    ($p:expr, $precision:expr, $recall:expr, $f1:expr) => {{
        let p = $p;
        assert!(
            close(p.precision, $precision) && close(p.recall, $recall) && close(p.f1, $f1),
            "{} = {:?}, expected ({}, {}, {})",
            stringify!($p),
            p,
            $precision,
            $recall,
            $f1
        );
    }};
}

const F1_1_8: f64 = 2.0 * 0.125 / 1.125;

#[test]
fn modern_output_for_scenario_2() {
    let gt = &truths()["2"].truth;
    let e = Evaluation::new(
        gt,
        &output("agent_run_artifacts/agent_output.scenario2_run1.json"),
    );
    // Root causes named: ConfigMap flagd-config (the ground truth's one) and Deployment flagd (no
    // Deployment group exists) → P = 1/2, R = 1/1.
    assert_eq!(e.gt_entities, vec!["flagd-config"]);
    assert_eq!(e.predictions.len(), 2);
    assert!(e.predictions[0].matches_gt && !e.predictions[1].matches_gt);
    assert_prf!(e.entity, 0.5, 1.0, 2.0 / 3.0);
    assert_prf!(e.entity_at[0], 1.0, 1.0, 1.0);
    assert_prf!(e.entity_at[1], 0.5, 1.0, 2.0 / 3.0);
    assert_prf!(e.entity_at[4], 0.5, 1.0, 2.0 / 3.0);
    // GT path flagd-config → cart → frontend → frontend-proxy; the agent's flagd-config → cart →
    // checkout → frontend shares 3 in order.
    let names: Vec<String> = e
        .gt_path
        .iter()
        .map(|c| judge::entities::display(c))
        .collect();
    assert_eq!(
        names,
        ["flagd-config", "cart", "frontend", "frontend-proxy"]
    );
    assert_eq!(e.model_path.len(), 4);
    assert_eq!(e.lcs.len(), 3);
    assert_prf!(e.chain, 0.75, 0.75, 0.75);
    // First failing effect "Cart service returns errors ..." names cart, which the agent's path has.
    assert_eq!(e.fault_localization, 1.0);
    assert_eq!(e.fl_details["gt_first_impacted_component"], "cart");
    // Predicted components: flagd-config (hop 0 → 1) and flagd (off the path → 0).
    assert_prf!(e.proximity_no_fp, 0.5, 1.0, 2.0 / 3.0);
    assert_prf!(e.proximity_with_fp, 0.5, 1.0, 2.0 / 3.0);
    // One reasoning check (the correct root cause), two questions.
    let ids: Vec<&str> = e.questions.iter().map(|q| q.id.as_str()).collect();
    assert_eq!(ids, ["RC1-SAME", "RC1-DETAIL"]);
    assert!(
        e.questions[0].text.contains("cartFailure"),
        "{}",
        e.questions[0].text
    );
}

#[test]
fn older_outputs_for_scenario_1() {
    let gt = &truths()["1"].truth;
    // Trial 1: nine root causes, none of them load-generator (the ground truth's) → entity 0.
    let e = Evaluation::new(
        gt,
        &output("judge_inputs/agent_outputs/1/1/outputs/agent_output.json"),
    );
    assert_eq!(e.predictions.len(), 9);
    assert_prf!(e.entity, 0.0, 0.0, 0.0);
    // GT path load-generator → frontend-proxy (the duplicated edge counts once). The agent's walk
    // has 16 steps and contains load-generator then frontend-proxy: P = 2/16, R = 1.
    assert_eq!(e.gt_path.len(), 2);
    assert_eq!(e.model_path.len(), 16);
    assert_prf!(e.chain, 0.125, 1.0, F1_1_8);
    // First failing effect: "frontend-proxy service error rate is above threshold".
    assert_eq!(
        e.fl_details["gt_first_impacted_component"],
        "frontend-proxy"
    );
    assert_eq!(e.fault_localization, 1.0);
    // No predicted root cause lies on the ground-truth path.
    assert_prf!(e.proximity_no_fp, 0.0, 0.0, 0.0);
    assert!(e.questions.is_empty());

    // Trial 2: walk of 10 steps → P = 2/10.
    let e = Evaluation::new(
        gt,
        &output("judge_inputs/agent_outputs/1/2/outputs/agent_output.json"),
    );
    assert_prf!(e.entity, 0.0, 0.0, 0.0);
    assert_eq!(e.model_path.len(), 10);
    assert_prf!(e.chain, 0.2, 1.0, 1.0 / 3.0);
    assert_eq!(e.fault_localization, 1.0);
}

#[test]
fn older_outputs_for_scenario_2() {
    let gt = &truths()["2"].truth;
    // Trial 1: eight root causes; the 2nd (flagd-config ConfigMap) is right → P = 1/8, R = 1.
    let e = Evaluation::new(
        gt,
        &output("judge_inputs/agent_outputs/2/1/outputs/agent_output.json"),
    );
    assert_eq!(e.predictions.len(), 8);
    assert_eq!(e.predictions[1].matched_to.as_deref(), Some("flagd-config"));
    // `cart Service` matches a ground-truth group, but not a root cause.
    assert_eq!(
        e.predictions[2].matched_to.as_deref(),
        Some("cart-service-1")
    );
    assert!(!e.predictions[2].matches_gt);
    assert_prf!(e.entity, 0.125, 1.0, F1_1_8);
    assert_prf!(e.entity_at[0], 0.0, 0.0, 0.0);
    assert_prf!(e.entity_at[1], 0.5, 1.0, 2.0 / 3.0);
    assert_prf!(e.entity_at[2], 1.0 / 3.0, 1.0, 0.5);
    assert_prf!(e.entity_at[3], 0.25, 1.0, 0.4);
    assert_prf!(e.entity_at[4], 0.2, 1.0, 1.0 / 3.0);
    // Walk: flagd-config, flagd, cart, checkout, cart, frontend, ad, frontend, frontend-proxy (9);
    // all four GT components appear in order → P = 4/9, R = 1, F1 = 8/13.
    assert_eq!(e.model_path.len(), 9);
    assert_prf!(e.chain, 4.0 / 9.0, 1.0, 8.0 / 13.0);
    assert_eq!(e.fault_localization, 1.0);
    // Predicted components ad, flagd-config, cart, flagd: scores 0, 1, 1/(1+1), 0 → P = 0.375;
    // with false positives the hop is divided by the path length 4: cart → 1/(1+1/4) = 0.8.
    assert_prf!(e.proximity_no_fp, 0.375, 1.0, 0.75 / 1.375);
    assert_prf!(e.proximity_with_fp, 0.45, 1.0, 0.9 / 1.45);
    // Reasoning: the correct root cause (RC2) and cart one hop away (SY3).
    let ids: Vec<&str> = e.questions.iter().map(|q| q.id.as_str()).collect();
    assert_eq!(ids, ["RC2-SAME", "RC2-DETAIL", "SY3-SAME", "SY3-DETAIL"]);

    // Trial 2: four root causes, the 2nd right → P = 1/4.
    let e = Evaluation::new(
        gt,
        &output("judge_inputs/agent_outputs/2/2/outputs/agent_output.json"),
    );
    assert_prf!(e.entity, 0.25, 1.0, 0.4);
    assert_prf!(e.entity_at[0], 0.0, 0.0, 0.0);
    assert_prf!(e.entity_at[2], 1.0 / 3.0, 1.0, 0.5);
    // Walk of 10 containing flagd-config, cart, frontend, frontend-proxy in order → P = 0.4.
    assert_eq!(e.model_path.len(), 10);
    assert_prf!(e.chain, 0.4, 1.0, 0.8 / 1.4);
    // flagd 0, flagd-config 1, cart 0.5 (0.8 with false positives).
    assert_prf!(e.proximity_no_fp, 0.5, 1.0, 2.0 / 3.0);
    assert_prf!(e.proximity_with_fp, 0.6, 1.0, 0.75);
}

#[test]
fn reasoning_scores_follow_the_answers() {
    use schemas::verdict::{Answer, Confidence, YesNo};
    let gt = &truths()["2"].truth;
    let e = Evaluation::new(
        gt,
        &output("judge_inputs/agent_outputs/2/1/outputs/agent_output.json"),
    );
    let answer = |id: &str, yes: bool| Answer {
        id: id.into(),
        answer: if yes { YesNo::Yes } else { YesNo::No },
        confidence: Confidence::High,
        evidence: String::new(),
    };
    let all_yes: Vec<Answer> = e.questions.iter().map(|q| answer(&q.id, true)).collect();
    let r = e.reasoning(&all_yes);
    assert_eq!(
        (r.root_cause_reasoning, r.root_cause_reasoning_partial),
        (1.0, 1.0)
    );
    // Root cause: same change but a missing detail → 0.5; cart symptom fully right → 1/(1+1).
    let mixed = vec![
        answer("RC2-SAME", true),
        answer("RC2-DETAIL", false),
        answer("SY3-SAME", true),
        answer("SY3-DETAIL", true),
    ];
    let r = e.reasoning(&mixed);
    assert_eq!(
        (r.root_cause_reasoning, r.root_cause_reasoning_partial),
        (0.5, 0.5)
    );
    let none: Vec<Answer> = e.questions.iter().map(|q| answer(&q.id, false)).collect();
    let r = e.reasoning(&none);
    assert_eq!(
        (r.root_cause_reasoning, r.root_cause_reasoning_partial),
        (0.0, 0.0)
    );
}

/// A name that fully matches a ground-truth filter (`.*` → `x`, `\b` dropped).
fn name_for(c: &schemas::ground_truth::Component) -> String {
    c.name
        .clone()
        .unwrap_or_else(|| c.filter[0].replace(".*", "x").replace("\\b", ""))
}

fn perfect(gt: &GroundTruth) -> AgentOutput {
    let full = |c: &schemas::ground_truth::Component| {
        format!(
            "{}/{}/{}",
            c.namespace.as_deref().unwrap_or("default"),
            c.kind,
            name_for(c)
        )
    };
    let mut comps: Vec<_> = gt.components.iter().collect();
    comps.sort_by_key(|c| !c.root_cause);
    AgentOutput {
        entities: comps
            .iter()
            .map(|c| AgentEntity {
                name: full(c),
                contributing_factor: c.root_cause,
                ..Default::default()
            })
            .collect(),
        propagations: gt
            .propagations
            .iter()
            .map(|p| AgentPropagation {
                // A dangling reference (scenario 31) is written as the bare id.
                source: gt
                    .component(&p.source)
                    .map_or_else(|| p.source.clone(), full),
                target: gt
                    .component(&p.target)
                    .map_or_else(|| p.target.clone(), full),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

#[test]
fn every_fixture_ground_truth_scores_a_perfect_answer_1_and_an_empty_one_0() {
    let all = truths();
    assert_eq!(all.len(), 44);
    let mut fl_zero = Vec::new();
    for (id, t) in &all {
        let gt = &t.truth;
        let out = perfect(gt);
        let idx = judge::entities::GtIndex::new(gt);
        for c in &gt.components {
            let r = EntityRef::parse(&format!(
                "{}/{}/{}",
                c.namespace.as_deref().unwrap_or("default"),
                c.kind,
                name_for(c)
            ));
            assert!(
                idx.matches(&r).iter().any(|g| g.id == c.id),
                "{id}: {} does not match its own name",
                c.id
            );
        }
        let e = Evaluation::new(gt, &out);
        let n_rc = idx.root_cause_classes as f64;
        assert_prf!(e.entity, 1.0, 1.0, 1.0);
        // @1 finds one of the root-cause classes (three in scenario 38).
        assert_prf!(
            e.entity_at[0],
            1.0,
            1.0 / n_rc,
            2.0 * (1.0 / n_rc) / (1.0 + 1.0 / n_rc)
        );
        assert!(
            close(
                e.chain.f1,
                if gt.propagations.is_empty() { 0.0 } else { 1.0 }
            ),
            "{id}: chain {:?}",
            e.chain
        );
        assert_prf!(e.proximity_no_fp, 1.0, 1.0, 1.0);
        assert_prf!(e.proximity_with_fp, 1.0, 1.0, 1.0);
        if e.fault_localization != 1.0 {
            fl_zero.push(id.clone());
        }
        let empty = Evaluation::new(gt, &AgentOutput::default());
        assert_prf!(empty.entity, 0.0, 0.0, 0.0);
        assert_prf!(empty.chain, 0.0, 0.0, 0.0);
        assert_prf!(empty.proximity_with_fp, 0.0, 0.0, 0.0);
        assert_eq!(empty.fault_localization, 0.0);
    }
    // Without propagations (37, 38) the agent has no path to hold the first impacted component.
    assert_eq!(fl_zero, ["37", "38"]);
}
