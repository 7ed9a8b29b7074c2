//! Fixes other than an exact revert pass `fault_cleared` when they really fix the fault, and
//! look-alike actions that do not fix it fail with a reason naming the object: the oracle judges
//! the state the fault left, not the agent's keystrokes.

mod common;

use common::*;
use oracle::{Finding, Verdict, check_state};
use problems::StateAssertion;
use sim::controllers::delete_pod;
use sim::objects::{ConfigMap, Labels, Probe, Toleration, key};

/// A problem with its faults applied and acting for a while.
fn faulty(id: &str) -> (sim::Sim, problems::ProblemSpec) {
    let c = catalog();
    let p = problem(&c, id).clone();
    let mut sim = healthy(&c, &p);
    inject(&mut sim, &p).expect("the faults apply");
    step(&mut sim, 120);
    assert!(!verdict(&sim, &p).passed, "{id} fails while faulty");
    (sim, p)
}

/// The reasons of the failing `fault_cleared` findings.
fn cleared_failures(sim: &sim::Sim, p: &problems::ProblemSpec) -> Vec<String> {
    check_state(sim, p)
        .into_iter()
        .filter(|f| f.assertion.starts_with("fault_cleared") && !f.passed)
        .filter_map(|f| f.reason)
        .collect()
}

fn assert_settles(sim: &mut sim::Sim, p: &problems::ProblemSpec) {
    if let Err(reasons) = settle(sim, p) {
        panic!("{} still fails after the fix: {reasons:?}", p.id);
    }
}

#[test]
fn readiness_probe_on_another_listening_port_clears_the_fault() {
    let (mut sim, p) = faulty("hotel-frontend-readiness");
    // frontend listens on 5000 only: a TCP probe there is a working probe, unlike the injected one.
    edit_template(&mut sim, "frontend", |t| {
        t.spec.containers[0].readiness_probe = Some(Probe::tcp(5000));
    });
    assert_settles(&mut sim, &p);

    edit_template(&mut sim, "frontend", |t| {
        t.spec.containers[0].readiness_probe = Some(Probe::tcp(9999));
    });
    let reasons = cleared_failures(&sim, &p);
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("nothing listens on port 9999")
                && r.contains("hotel-reservation/frontend")),
        "{reasons:?}"
    );
}

#[test]
fn a_toleration_instead_of_removing_the_taint_clears_the_fault() {
    let (mut sim, p) = faulty("social-taint-no-toleration");
    let before = cleared_failures(&sim, &p);
    assert!(
        before
            .iter()
            .any(|r| r.contains("untolerated taint dedicated=batch")),
        "{before:?}"
    );
    edit_template(&mut sim, "user-service", |t| {
        t.spec.tolerations.push(Toleration {
            key: Some("dedicated".into()),
            operator: "Equal".into(),
            value: Some("batch".into()),
            effect: Some("NoSchedule".into()),
            toleration_seconds: None,
        });
    });
    assert_settles(&mut sim, &p);
}

#[test]
fn a_network_policy_changed_to_allow_clears_the_fault() {
    let (mut sim, p) = faulty("hotel-recommendation-netpol");
    let before = cleared_failures(&sim, &p);
    assert!(
        before
            .iter()
            .any(|r| r.contains("NetworkPolicy hotel-reservation/recommendation-isolation")),
        "{before:?}"
    );
    let k = key("hotel-reservation", "recommendation-isolation");
    let np = sim.world.netpols.get_mut(&k).expect("the fault created it");
    np.deny_ingress = false;
    assert_settles(&mut sim, &p);
}

#[test]
fn declaring_the_limit_a_quota_requires_clears_the_fault() {
    let (mut sim, p) = faulty("hotel-search-quota");
    let before = cleared_failures(&sim, &p);
    assert!(
        before
            .iter()
            .any(|r| r.contains("requires limits.memory") && r.contains("hotel-reservation/search")),
        "{before:?}"
    );
    edit_template(&mut sim, "search", |t| {
        t.spec.containers[0].resources.limits.memory = Some(256 << 20);
    });
    assert_settles(&mut sim, &p);
}

#[test]
fn a_corefile_that_no_longer_blocks_the_service_clears_the_fault() {
    let (mut sim, p) = faulty("social-user-dns");
    // Point the NXDOMAIN template at a name nobody uses: the service resolves again.
    let k = key("kube-system", "coredns");
    let cm: &mut ConfigMap = sim.world.configmaps.get_mut(&k).expect("CoreDNS config");
    let text = cm.data.get("Corefile").cloned().unwrap_or_default();
    assert!(
        text.contains("user-service"),
        "the fault edited the Corefile"
    );
    cm.data.insert(
        "Corefile".into(),
        text.replace("user-service", "retired-service"),
    );
    assert_settles(&mut sim, &p);
}

#[test]
fn the_apps_own_command_clears_a_wrong_command_and_another_does_not() {
    let (mut sim, p) = faulty("hotel-profile-wrong-command");
    let reasons = cleared_failures(&sim, &p);
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("runs the program of geo")),
        "{reasons:?}"
    );
    edit_template(&mut sim, "profile", |t| {
        t.spec.containers[0].command = vec!["rate".into()];
    });
    let reasons = cleared_failures(&sim, &p);
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("runs the program of rate")),
        "{reasons:?}"
    );
    edit_template(&mut sim, "profile", |t| {
        t.spec.containers[0].command = vec!["profile".into()];
    });
    assert_settles(&mut sim, &p);
}

#[test]
fn a_node_selector_naming_an_existing_node_clears_the_fault() {
    let (mut sim, p) = faulty("social-user-missing-node");
    let reasons = cleared_failures(&sim, &p);
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("kubernetes.io/hostname=extra-node")),
        "{reasons:?}"
    );
    edit_template(&mut sim, "user-service", |t| {
        t.spec.node_selector =
            Labels::from([("kubernetes.io/hostname".into(), "kind-worker".into())]);
    });
    assert_settles(&mut sim, &p);
}

#[test]
fn a_memory_limit_raised_well_above_the_working_set_passes() {
    let (mut sim, p) = faulty("hotel-profile-oom");
    edit_template(&mut sim, "profile", |t| {
        t.spec.containers[0].resources.limits.memory = Some(1 << 30);
    });
    assert_settles(&mut sim, &p);
}

/// Deletes every pod of a service (a `kubectl rollout restart` without changing anything).
fn restart_pods(sim: &mut sim::Sim, service: &str) {
    let prefix = format!("{service}-");
    let pods: Vec<_> = sim
        .world
        .pods
        .keys()
        .filter(|k| k.1.starts_with(&prefix))
        .cloned()
        .collect();
    assert!(!pods.is_empty(), "{service} has pods to restart");
    for k in pods {
        delete_pod(&mut sim.world, &k);
    }
}

#[test]
fn restarting_pods_does_not_fix_a_configuration_fault() {
    for (id, service) in [
        ("hotel-geo-config-drift", "geo"),
        ("hotel-frontend-readiness", "frontend"),
        ("astro-frontend-selector", "frontend"),
    ] {
        let (mut sim, p) = faulty(id);
        restart_pods(&mut sim, service);
        step(&mut sim, 120);
        let v = verdict(&sim, &p);
        assert!(!v.passed, "{id}: restarting {service} passed");
        assert!(
            v.reasons.iter().any(|r| r.contains(service)),
            "{id}: {:?}",
            v.reasons
        );
    }
}

#[test]
fn scaling_to_zero_fails_with_the_replica_count_in_the_reason() {
    let (mut sim, p) = faulty("hotel-search-scale-zero");
    let v = verdict(&sim, &p);
    assert!(
        v.reasons.iter().any(|r| r.contains(
            "Deployment hotel-reservation/search wants 0 replicas (at least 1 expected)"
        )),
        "{:?}",
        v.reasons
    );
    // Deleting the Deployment is no better.
    assert!(hack(&mut sim, "search", Hack::DeleteWorkload));
    let v = verdict(&sim, &p);
    assert!(
        v.reasons
            .iter()
            .any(|r| r.contains("the workload was deleted")),
        "{:?}",
        v.reasons
    );
}

#[test]
fn a_fault_index_out_of_range_fails_instead_of_passing() {
    let c = catalog();
    let mut p = problem(&c, "hotel-geo-target-port").clone();
    p.oracle.state = vec![StateAssertion::FaultCleared { fault: 5 }];
    let sim = healthy(&c, &p);
    let findings = check_state(&sim, &p);
    let bad: Vec<&Finding> = findings.iter().filter(|f| !f.passed).collect();
    assert_eq!(bad.len(), 1, "{findings:?}");
    assert!(
        bad[0]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("fault #5") && r.contains("1 fault")),
        "{bad:?}"
    );
}

#[test]
fn verdicts_round_trip_through_json_with_their_reasons() {
    let (sim, p) = faulty("hotel-geo-target-port");
    let v = verdict(&sim, &p);
    assert!(!v.passed);
    assert!(
        v.reasons
            .iter()
            .any(|r| r.starts_with("target_port_is geo: ")
                && r.contains("Service hotel-reservation/geo port 8083 targets 9999")),
        "{:?}",
        v.reasons
    );
    let json = serde_json::to_string(&v).expect("serializes");
    let back: Verdict = serde_json::from_str(&json).expect("deserializes");
    assert_eq!(back, v);
    assert_eq!(oracle::failure_reasons(&sim, &p), v.reasons);
}
