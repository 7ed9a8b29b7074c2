//! The control plane: deployment and replicaset reconciliation (rolling updates), statefulsets,
//! the scheduler, the endpoints and EndpointSlice controllers, the node lifecycle controller (with
//! the taint a cordon brings) and quota accounting.
//! Each pass reads the objects as they are and moves them one step toward their spec, emitting the
//! events the real controllers emit.

use std::collections::BTreeMap;

use super::objects::*;
use super::util::{self, NS_PER_SEC};
use super::world::{Source, World};

/// One pass of every controller.
pub fn reconcile(w: &mut World) {
    node_lifecycle(w);
    level_triggered(w, "deployment", deployments);
    level_triggered(w, "statefulset", objects_only(statefulsets));
    level_triggered(w, "replicaset", objects_only(replicasets));
    schedule(w);
    level_triggered(w, "endpoints", objects_only(endpoints));
    level_triggered(w, "endpointslice", objects_only(endpoint_slices));
    level_triggered(w, "resourcequota", objects_only(quotas));
    level_triggered(
        w,
        "garbage-collector",
        objects_only(super::writes::garbage_collect),
    );
}

/// A pass that reads objects only, never the clock.
fn objects_only(pass: fn(&mut World)) -> impl FnOnce(&mut World) -> bool {
    move |w| {
        pass(w);
        false
    }
}

/// Runs a controller whose pass reads only objects (and, when it says so, the clock). A pass that
/// changed nothing, emitted nothing and does not wait on the clock would do nothing again until
/// some object changes, so it is skipped until then: with many services most ticks change
/// nothing, and these passes were a third of the simulation's time.
fn level_triggered(w: &mut World, name: &'static str, pass: impl FnOnce(&mut World) -> bool) {
    if w.quiescent.get(name) == Some(&w.actions) {
        return;
    }
    let before = w.actions;
    let waits_on_clock = pass(w);
    if w.actions == before && !waits_on_clock {
        w.quiescent.insert(name, before);
    } else {
        w.quiescent.remove(name);
    }
}

fn percent_of(spec: &str, replicas: i32, round_up: bool) -> i32 {
    if let Some(p) = spec.strip_suffix('%') {
        let p: f64 = p.parse().unwrap_or(25.0);
        let v = f64::from(replicas) * p / 100.0;
        (if round_up { v.ceil() } else { v.floor() }) as i32
    } else {
        spec.parse().unwrap_or(1)
    }
}

/// The ReplicaSets in `ns` that the Deployment with `uid` owns.
pub fn owned_by<'a>(
    w: &'a World,
    ns: &'a str,
    uid: &'a str,
) -> impl Iterator<Item = (&'a Key, &'a ReplicaSet)> + 'a {
    w.replicasets
        .range((ns.to_string(), String::new())..)
        .take_while(move |((n, _), _)| n == ns)
        .filter(move |(_, rs)| rs.meta.is_owned_by(uid))
}

/// Returns whether a rollout waits on its progress deadline (the pass then depends on the clock).
fn deployments(w: &mut World) -> bool {
    let mut waits_on_clock = false;
    let keys: Vec<Key> = w.deployments.keys().cloned().collect();
    for k in keys {
        let d = w.deployments[&k].clone();
        let hash = template_hash(w, &k, &d);
        let rs_name = format!("{}-{}", d.meta.name, hash);
        let rs_key = key(&k.0, &rs_name);
        let mut revision = d.revision;
        if !w.replicasets.contains_key(&rs_key) {
            revision += 1;
            create_replicaset(w, &d, &rs_key, &hash, revision);
        }
        let unavailable = roll(w, &d, &rs_key);
        waits_on_clock |= !deployment_status(w, &k, &d, &rs_key, revision, unavailable);
    }
    waits_on_clock
}

/// The pod-template hash naming the deployment's current ReplicaSet, cached per generation
/// (hashing the serialized template on every pass was measurable).
fn template_hash(w: &mut World, k: &Key, d: &Deployment) -> String {
    match w.template_hashes.get(k) {
        Some((g, h)) if *g == d.meta.generation => h.clone(),
        _ => {
            let h = util::template_hash(&serde_json::to_string(&d.template).unwrap_or_default());
            w.template_hashes
                .insert(k.clone(), (d.meta.generation, h.clone()));
            h
        }
    }
}

/// A new ReplicaSet for the deployment's current template, at zero replicas, as `revision`.
fn create_replicaset(w: &mut World, d: &Deployment, rs_key: &Key, hash: &str, revision: i64) {
    let ns = &rs_key.0;
    let mut labels = d.template.metadata.labels.clone();
    labels.insert("pod-template-hash".into(), hash.to_string());
    let mut meta = w.meta(Some(ns.as_str()), &rs_key.1, labels.clone());
    meta.owner = Some(OwnerRef {
        kind: Kind::Deployment,
        name: d.meta.name.clone(),
        uid: d.meta.uid.clone(),
    });
    meta.annotations.insert(
        "deployment.kubernetes.io/desired-replicas".into(),
        d.replicas.to_string(),
    );
    meta.annotations.insert(
        "deployment.kubernetes.io/max-replicas".into(),
        (d.replicas + 1).to_string(),
    );
    meta.annotations.insert(
        "deployment.kubernetes.io/revision".into(),
        revision.to_string(),
    );
    let mut selector = d.selector.clone();
    selector.insert("pod-template-hash".into(), hash.to_string());
    let mut template = d.template.clone();
    template.metadata.labels = labels;
    w.replicasets.insert(
        rs_key.clone(),
        ReplicaSet {
            meta,
            replicas: 0,
            selector,
            template,
            observed_generation: 1,
            counts: ReplicaCounts::default(),
            failure: None,
        },
    );
    w.touch(Kind::ReplicaSet, rs_key);
}

/// One step of the rollout: scales the new ReplicaSet (`rs_key`) up within the surge allowance
/// and the old ones down as far as availability allows. Returns the unavailability the strategy
/// tolerates, which the Available condition is judged against.
fn roll(w: &mut World, d: &Deployment, rs_key: &Key) -> i32 {
    let old: Vec<(Key, i32)> = owned_by(w, &rs_key.0, &d.meta.uid)
        .filter(|(rk, _)| *rk != rs_key)
        .map(|(rk, rs)| (rk.clone(), rs.replicas))
        .collect();
    let new_rs = &w.replicasets[rs_key];
    let (new_replicas, new_available) = (new_rs.replicas, new_rs.counts.available);
    let old_total: i32 = old.iter().map(|o| o.1).sum();
    let (surge, unavailable) = match &d.strategy.rolling_update {
        Some(r) if d.strategy.kind == "RollingUpdate" => (
            percent_of(&r.max_surge, d.replicas, true),
            percent_of(&r.max_unavailable, d.replicas, false),
        ),
        _ => (0, d.replicas),
    };
    let (surge, unavailable) = if surge == 0 && unavailable == 0 {
        (1, 0)
    } else {
        (surge, unavailable)
    };
    // Scale the new replica set up within the surge allowance.
    let target_new = if old_total == 0 {
        d.replicas
    } else {
        // A new replica set above the desired count (the Deployment was scaled down mid-rollout)
        // is scaled down to it, as the Deployment controller does.
        (d.replicas + surge - old_total).clamp(new_replicas.min(d.replicas), d.replicas)
    };
    if target_new != new_replicas {
        scale(w, d, rs_key, target_new, new_replicas);
    }
    // Scale old replica sets down as far as availability allows.
    let all: i32 = old_total + target_new;
    let min_available = d.replicas - unavailable;
    let new_unavailable = target_new - new_available;
    let mut budget = (all - min_available - new_unavailable).max(0);
    for (rk, replicas) in &old {
        if *replicas == 0 {
            continue;
        }
        let cut = if d.replicas == 0 {
            *replicas
        } else {
            budget.min(*replicas)
        };
        if cut > 0 {
            budget -= cut;
            scale(w, d, rk, replicas - cut, *replicas);
        }
    }
    unavailable
}

/// Scales one of the deployment's ReplicaSets from `from` to `to` replicas.
fn scale(w: &mut World, d: &Deployment, rk: &Key, to: i32, from: i32) {
    if let Some(rs) = w.replicasets.get_mut(rk) {
        rs.replicas = to;
        rs.meta.annotations.insert(
            "deployment.kubernetes.io/desired-replicas".into(),
            d.replicas.to_string(),
        );
        rs.meta.generation += 1;
        rs.observed_generation = rs.meta.generation;
    }
    w.touch(Kind::ReplicaSet, rk);
    let verb = if to > from { "up" } else { "down" };
    let dref = World::meta_ref(Kind::Deployment, &d.meta);
    w.event(
        &dref,
        false,
        "ScalingReplicaSet",
        &format!("Scaled {verb} replica set {} to {to} from {from}", rk.1),
        Source::Controller("deployment-controller"),
    );
}

/// Writes the deployment's status: counts summed over its ReplicaSets, the revision, and the
/// Available and Progressing conditions. Returns whether the rollout is complete.
fn deployment_status(
    w: &mut World,
    k: &Key,
    d: &Deployment,
    rs_key: &Key,
    revision: i64,
    unavailable: i32,
) -> bool {
    let rs_name = &rs_key.1;
    let mut counts = ReplicaCounts::default();
    for (rk, rs) in owned_by(w, &k.0, &d.meta.uid) {
        counts.replicas += rs.counts.replicas;
        counts.ready += rs.counts.ready;
        counts.available += rs.counts.available;
        if rk == rs_key {
            counts.updated += rs.counts.replicas;
        }
    }
    let now = w.now;
    let dep = w.deployments.get_mut(k).expect("listed above");
    let mut changed = dep.counts != counts || dep.revision != revision;
    dep.revision = revision;
    dep.meta.annotations.insert(
        "deployment.kubernetes.io/revision".into(),
        revision.to_string(),
    );
    dep.counts = counts.clone();
    dep.observed_generation = dep.meta.generation;
    let available = counts.available >= d.replicas - unavailable;
    changed |= set_condition(
        &mut dep.conditions,
        "Available",
        available,
        Some(if available {
            "MinimumReplicasAvailable"
        } else {
            "MinimumReplicasUnavailable"
        }),
        Some(if available {
            "Deployment has minimum availability."
        } else {
            "Deployment does not have minimum availability."
        }),
        now,
    );
    let complete = counts.updated == d.replicas
        && counts.available == d.replicas
        && counts.replicas == d.replicas;
    changed |= progressing(dep, complete, rs_name, now);
    if changed {
        w.touch(Kind::Deployment, k);
    }
    complete
}

/// Sets the Progressing condition: complete, still progressing, or past the 600 s progress
/// deadline (which sticks for that rollout). Returns whether it changed.
fn progressing(dep: &mut Deployment, complete: bool, rs_name: &str, now: i64) -> bool {
    // A condition about another ReplicaSet belongs to an earlier rollout: a new rollout's
    // deadline counts from its start, as the controller's NewReplicaSetCreated update resets it.
    let quoted = format!("\"{rs_name}\"");
    let this_rollout = |c: &&Condition| c.message.as_deref().is_some_and(|m| m.contains(&quoted));
    let progressing_since = dep
        .conditions
        .iter()
        .find(|c| c.kind == "Progressing")
        .filter(this_rollout)
        .map(|c| c.last_update)
        .unwrap_or(now);
    let (status, reason, msg) = if complete {
        (
            true,
            "NewReplicaSetAvailable",
            format!("ReplicaSet \"{rs_name}\" has successfully progressed."),
        )
    } else if now - progressing_since > 600 * NS_PER_SEC
        || dep
            .conditions
            .iter()
            .filter(this_rollout)
            .any(|c| c.reason.as_deref() == Some("ProgressDeadlineExceeded"))
    {
        (
            false,
            "ProgressDeadlineExceeded",
            format!("ReplicaSet \"{rs_name}\" has timed out progressing."),
        )
    } else {
        (
            true,
            "ReplicaSetUpdated",
            format!("ReplicaSet \"{rs_name}\" is progressing."),
        )
    };
    let was = dep
        .conditions
        .iter()
        .find(|c| c.kind == "Progressing")
        .map(|c| (c.status, c.reason.clone()));
    if was.as_ref().map(|(s, r)| (*s, r.as_deref())) != Some((status, Some(reason))) {
        set_condition(
            &mut dep.conditions,
            "Progressing",
            status,
            Some(reason),
            Some(&msg),
            now,
        )
    } else {
        false
    }
}

fn statefulsets(w: &mut World) {
    let keys: Vec<Key> = w.statefulsets.keys().cloned().collect();
    for k in keys {
        let s = w.statefulsets[&k].clone();
        let owned: Vec<(usize, bool, bool)> = (0..s.replicas.max(0) as usize + 8)
            .filter_map(|i| {
                w.pods
                    .get(&key(&k.0, &format!("{}-{i}", s.meta.name)))
                    .map(|p| (i, p.ready(), p.meta.deleted_at.is_some()))
            })
            .collect();
        // Ordered ready: create the next ordinal only when all before it are ready.
        let mut next = None;
        for i in 0..s.replicas.max(0) as usize {
            match owned.iter().find(|o| o.0 == i) {
                Some((_, true, false)) => continue,
                Some(_) => break,
                None => {
                    next = Some(i);
                    break;
                }
            }
        }
        if let Some(i) = next {
            let name = format!("{}-{i}", s.meta.name);
            let mut labels = s.template.metadata.labels.clone();
            labels.insert("controller-revision-hash".into(), s.revision.clone());
            labels.insert("statefulset.kubernetes.io/pod-name".into(), name.clone());
            let owner = OwnerRef {
                kind: Kind::StatefulSet,
                name: s.meta.name.clone(),
                uid: s.meta.uid.clone(),
            };
            if create_pod(w, &k.0, &name, None, labels, &s.template, owner) {
                let sref = World::meta_ref(Kind::StatefulSet, &s.meta);
                w.event(
                    &sref,
                    false,
                    "SuccessfulCreate",
                    &format!(
                        "create Pod {name} in StatefulSet {} successful",
                        s.meta.name
                    ),
                    Source::Controller("statefulset-controller"),
                );
            }
        }
        for (i, _, terminating) in &owned {
            if *i >= s.replicas.max(0) as usize && !terminating {
                let pk = key(&k.0, &format!("{}-{i}", s.meta.name));
                delete_pod(w, &pk);
            }
        }
        if next.is_none() {
            roll_statefulset(w, &k.0, &s, &owned);
        }
        let revision_of = |i: usize| {
            w.pods
                .get(&key(&k.0, &format!("{}-{i}", s.meta.name)))
                .and_then(|p| p.meta.labels.get("controller-revision-hash"))
                .cloned()
        };
        let ready = owned
            .iter()
            .filter(|o| o.1 && (o.0 as i32) < s.replicas)
            .count() as i32;
        let counts = ReplicaCounts {
            replicas: owned.iter().filter(|o| !o.2).count() as i32,
            updated: owned
                .iter()
                .filter(|o| !o.2 && revision_of(o.0).as_deref() == Some(s.revision.as_str()))
                .count() as i32,
            ready,
            available: ready,
        };
        let st = w.statefulsets.get_mut(&k).expect("listed above");
        if st.counts != counts || st.observed_generation != st.meta.generation {
            st.counts = counts;
            st.observed_generation = st.meta.generation;
            w.touch(Kind::StatefulSet, &k);
        }
    }
}

/// The rolling update of a StatefulSet (partition 0): once every pod is ready, the highest
/// ordinal still on an older revision is deleted, to be recreated from the current template.
fn roll_statefulset(w: &mut World, ns: &str, s: &StatefulSet, owned: &[(usize, bool, bool)]) {
    let replicas = s.replicas.max(0) as usize;
    let in_range = owned.iter().filter(|o| o.0 < replicas);
    if !in_range.clone().all(|o| o.1 && !o.2) {
        return;
    }
    let stale = in_range.map(|o| o.0).rev().find(|i| {
        w.pods
            .get(&key(ns, &format!("{}-{i}", s.meta.name)))
            .and_then(|p| p.meta.labels.get("controller-revision-hash"))
            != Some(&s.revision)
    });
    if let Some(i) = stale {
        let name = format!("{}-{i}", s.meta.name);
        delete_pod(w, &key(ns, &name));
        let sref = World::meta_ref(Kind::StatefulSet, &s.meta);
        w.event(
            &sref,
            false,
            "SuccessfulDelete",
            &format!(
                "delete Pod {name} in StatefulSet {} successful",
                s.meta.name
            ),
            Source::Controller("statefulset-controller"),
        );
    }
}

/// Requests a pod would add to a namespace, checked against its ResourceQuotas. Returns the
/// admission error message when a quota refuses it.
fn quota_refusal(w: &World, ns: &str, template: &PodTemplate) -> Option<String> {
    for q in w
        .quotas
        .values()
        .filter(|q| q.meta.namespace.as_deref() == Some(ns))
    {
        for (res, hard) in &q.hard {
            let needs_declared = |c: &Container| match res.as_str() {
                "limits.memory" => c.resources.limits.memory.is_none(),
                "limits.cpu" => c.resources.limits.cpu_milli.is_none(),
                "requests.memory" | "memory" => {
                    c.resources.requests.memory.is_none() && c.resources.limits.memory.is_none()
                }
                "requests.cpu" | "cpu" => {
                    c.resources.requests.cpu_milli.is_none()
                        && c.resources.limits.cpu_milli.is_none()
                }
                _ => false,
            };
            if let Some(c) = template.spec.containers.iter().find(|c| needs_declared(c)) {
                return Some(format!(
                    "pods \"{}\" is forbidden: failed quota: {}: must specify {res}",
                    c.name, q.meta.name
                ));
            }
            let used = q.used.get(res).cloned().unwrap_or_default();
            let want: i64 = template
                .spec
                .containers
                .iter()
                .map(|c| quota_charge(c, res))
                .sum();
            let (want, used, hard_v) = match res.as_str() {
                "pods" => (
                    1,
                    used.parse().unwrap_or(0),
                    hard.parse().unwrap_or(i64::MAX),
                ),
                r if r.ends_with("memory") => (
                    want,
                    util::parse_memory(&used).unwrap_or(0),
                    util::parse_memory(hard).unwrap_or(i64::MAX),
                ),
                r if r.ends_with("cpu") => (
                    want,
                    util::parse_cpu(&used).unwrap_or(0),
                    util::parse_cpu(hard).unwrap_or(i64::MAX),
                ),
                _ => continue,
            };
            if used + want > hard_v {
                let fmt = |v: i64| {
                    if res.ends_with("memory") {
                        util::memory_quantity(v)
                    } else if res.ends_with("cpu") {
                        util::cpu_quantity(v)
                    } else {
                        v.to_string()
                    }
                };
                return Some(format!(
                    "pods \"{{name}}\" is forbidden: exceeded quota: {}, requested: {res}={}, used: {res}={}, limited: {res}={}",
                    q.meta.name,
                    fmt(want),
                    fmt(used),
                    hard
                ));
            }
        }
    }
    None
}

/// Creates a pod from a template (admission included). Returns false when admission refused it.
fn create_pod(
    w: &mut World,
    ns: &str,
    name: &str,
    generate_name: Option<String>,
    labels: Labels,
    template: &PodTemplate,
    owner: OwnerRef,
) -> bool {
    if let Some(msg) = quota_refusal(w, ns, template) {
        let msg = msg.replace("{name}", name);
        let (kind, oref) = match owner.kind {
            Kind::ReplicaSet => (Kind::ReplicaSet, key(ns, &owner.name)),
            _ => (Kind::StatefulSet, key(ns, &owner.name)),
        };
        let involved = match kind {
            Kind::ReplicaSet => w
                .replicasets
                .get(&oref)
                .map(|r| World::meta_ref(kind, &r.meta)),
            _ => w
                .statefulsets
                .get(&oref)
                .map(|r| World::meta_ref(kind, &r.meta)),
        };
        if let Some(inv) = involved {
            w.event(
                &inv,
                true,
                "FailedCreate",
                &format!("Error creating: {msg}"),
                Source::Controller(if kind == Kind::ReplicaSet {
                    "replicaset-controller"
                } else {
                    "statefulset-controller"
                }),
            );
        }
        if let Some(rs) = w.replicasets.get_mut(&oref) {
            rs.failure = Some(msg);
            w.touch(Kind::ReplicaSet, &oref);
        }
        return false;
    }
    let mut meta = w.meta(Some(ns), name, labels);
    meta.generate_name = generate_name;
    meta.owner = Some(owner);
    meta.annotations = template.metadata.annotations.clone();
    let mut spec = template.spec.clone();
    let mut tolerations = spec.tolerations.clone();
    tolerations.extend(default_tolerations());
    spec.tolerations = tolerations;
    let pod = Pod {
        meta,
        statuses: spec
            .containers
            .iter()
            .map(|c| ContainerStatus::new(&c.name, &c.image))
            .collect(),
        init_statuses: spec
            .init_containers
            .iter()
            .map(|c| ContainerStatus::new(&c.name, &c.image))
            .collect(),
        ephemeral_statuses: vec![],
        spec,
        phase: "Pending".into(),
        conditions: vec![],
        host_ip: None,
        pod_ip: None,
        start_time: None,
        reason: None,
        next_schedule: w.now,
        schedule_backoff: 0,
        init_done: 0,
    };
    let k = key(ns, name);
    w.pods.insert(k.clone(), pod);
    w.touch(Kind::Pod, &k);
    true
}

/// Marks a pod for deletion; the kubelet finishes it (or the pod goes at once if it never ran).
pub fn delete_pod(w: &mut World, k: &Key) {
    let now = w.now;
    let Some(p) = w.pods.get_mut(k) else { return };
    if p.meta.deleted_at.is_some() {
        return;
    }
    if p.spec.node_name.is_none() {
        w.pods.remove(k);
    } else {
        p.meta.deleted_at = Some(now);
    }
    w.touch(Kind::Pod, k);
}

fn replicasets(w: &mut World) {
    let keys: Vec<Key> = w.replicasets.keys().cloned().collect();
    for k in keys {
        let rs = w.replicasets[&k].clone();
        let mut pods: Vec<(Key, bool, bool, bool)> = w
            .pods
            .range((k.0.clone(), String::new())..)
            .take_while(|((n, _), _)| *n == k.0)
            .filter(|(_, p)| p.meta.is_owned_by(&rs.meta.uid))
            .map(|(pk, p)| {
                (
                    pk.clone(),
                    p.meta.deleted_at.is_some(),
                    p.ready(),
                    p.spec.node_name.is_some(),
                )
            })
            .collect();
        let live = pods.iter().filter(|p| !p.1).count() as i32;
        let rsref = World::meta_ref(Kind::ReplicaSet, &rs.meta);
        if live < rs.replicas {
            let mut created_any = false;
            for _ in live..rs.replicas {
                let suffix = util::name_suffix(&mut w.rng, 5);
                let name = format!("{}-{suffix}", rs.meta.name);
                let owner = OwnerRef {
                    kind: Kind::ReplicaSet,
                    name: rs.meta.name.clone(),
                    uid: rs.meta.uid.clone(),
                };
                let labels = rs.template.metadata.labels.clone();
                if create_pod(
                    w,
                    &k.0,
                    &name,
                    Some(format!("{}-", rs.meta.name)),
                    labels,
                    &rs.template,
                    owner,
                ) {
                    created_any = true;
                    w.event(
                        &rsref,
                        false,
                        "SuccessfulCreate",
                        &format!("Created pod: {name}"),
                        Source::Controller("replicaset-controller"),
                    );
                    pods.push((key(&k.0, &name), false, false, false));
                } else {
                    break;
                }
            }
            if created_any
                && let Some(r) = w.replicasets.get_mut(&k)
                && r.failure.take().is_some()
            {
                w.touch(Kind::ReplicaSet, &k);
            }
        } else if live > rs.replicas {
            // Delete unscheduled, then not-ready, then newest pods first.
            let mut victims: Vec<&(Key, bool, bool, bool)> = pods.iter().filter(|p| !p.1).collect();
            victims.sort_by_key(|p| (p.3, p.2));
            let victims: Vec<Key> = victims
                .into_iter()
                .take((live - rs.replicas) as usize)
                .map(|p| p.0.clone())
                .collect();
            for pk in victims {
                delete_pod(w, &pk);
                w.event(
                    &rsref,
                    false,
                    "SuccessfulDelete",
                    &format!("Deleted pod: {}", pk.1),
                    Source::Controller("replicaset-controller"),
                );
            }
        }
        let live_pods: Vec<&Pod> = w
            .pods
            .range((k.0.clone(), String::new())..)
            .take_while(|((n, _), _)| *n == k.0)
            .map(|(_, p)| p)
            .filter(|p| p.meta.is_owned_by(&rs.meta.uid) && p.meta.deleted_at.is_none())
            .collect();
        let ready = live_pods.iter().filter(|p| p.ready()).count() as i32;
        let counts = ReplicaCounts {
            replicas: live_pods.len() as i32,
            updated: live_pods.len() as i32,
            ready,
            available: ready,
        };
        let r = w.replicasets.get_mut(&k).expect("listed above");
        if r.counts != counts {
            r.counts = counts;
            w.touch(Kind::ReplicaSet, &k);
        }
    }
}

/// Why a node cannot take a pod, in the scheduler's words.
fn node_misfit(
    w: &World,
    node: &Node,
    pod: &Pod,
    used: &BTreeMap<String, (i64, i64, i64)>,
) -> Option<String> {
    if !node.ready() {
        return Some("1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }".into());
    }
    if node.unschedulable {
        return Some("1 node(s) were unschedulable".into());
    }
    for t in &node.taints {
        if t.effect == "PreferNoSchedule" {
            continue;
        }
        let tolerated = pod.spec.tolerations.iter().any(|tol| tol.tolerates(t));
        if !tolerated {
            return Some(format!(
                "1 node(s) had untolerated taint {{{}: {}}}",
                t.key,
                t.value.clone().unwrap_or_default()
            ));
        }
    }
    if !pod
        .spec
        .node_selector
        .iter()
        .all(|(k, v)| node.meta.labels.get(k) == Some(v))
    {
        return Some("1 node(s) didn't match Pod's node affinity/selector".into());
    }
    let (cpu, mem) = pod.spec.requests();
    let (ucpu, umem, upods) = used.get(&node.meta.name).copied().unwrap_or((0, 0, 0));
    let alloc_mem = node.memory - (100 << 20);
    if upods + 1 > node.max_pods {
        return Some("1 Too many pods".into());
    }
    if ucpu + cpu > node.cpu_milli {
        return Some("1 Insufficient cpu".into());
    }
    if umem + mem > alloc_mem {
        return Some("1 Insufficient memory".into());
    }
    let ns = pod.meta.namespace.as_deref().unwrap_or_default();
    // Host ports.
    for c in &pod.spec.containers {
        for p in c.ports.iter().filter_map(|p| p.host_port) {
            let taken = w.pods.values().any(|o| {
                o.spec.node_name.as_deref() == Some(&node.meta.name)
                    && o.meta.deleted_at.is_none()
                    && o.spec
                        .containers
                        .iter()
                        .any(|oc| oc.ports.iter().any(|op| op.host_port == Some(p)))
            });
            if taken {
                return Some("1 node(s) didn't have free ports for the requested pod ports".into());
            }
        }
    }
    if let Some(aff) = &pod.spec.affinity {
        for term in &aff
            .pod_anti_affinity
            .required_during_scheduling_ignored_during_execution
        {
            let clash = w.pods.values().any(|o| {
                o.meta.namespace.as_deref() == Some(ns)
                    && o.spec.node_name.as_deref() == Some(&node.meta.name)
                    && o.meta.deleted_at.is_none()
                    && selects(&term.label_selector.match_labels, &o.meta.labels)
            });
            if clash {
                return Some("1 node(s) didn't match pod anti-affinity rules".into());
            }
        }
    }
    None
}

fn schedule(w: &mut World) {
    let pending: Vec<Key> = w
        .pods
        .iter()
        .filter(|(_, p)| {
            p.spec.node_name.is_none() && p.meta.deleted_at.is_none() && p.next_schedule <= w.now
        })
        .map(|(k, _)| k.clone())
        .collect();
    if pending.is_empty() {
        return;
    }
    for pk in pending {
        let mut used: BTreeMap<String, (i64, i64, i64)> = BTreeMap::new();
        // Scores by the LeastAllocated strategy over non-zero requests: (cpu, memory).
        let mut scored: BTreeMap<String, (i64, i64)> = BTreeMap::new();
        for p in w.pods.values() {
            if let Some(n) = &p.spec.node_name
                && p.meta.deleted_at.is_none()
            {
                let (c, m) = p.spec.requests();
                let e = used.entry(n.clone()).or_default();
                e.0 += c;
                e.1 += m;
                e.2 += 1;
                let (sc, sm) = p.spec.scoring_requests();
                let s = scored.entry(n.clone()).or_default();
                s.0 += sc;
                s.1 += sm;
            }
        }
        let pod = w.pods[&pk].clone();
        let ns = &pk.0;
        // Volumes first: a missing claim makes every node unsuitable.
        let missing_claim = pod.spec.volumes.iter().find_map(|v| {
            v.persistent_volume_claim
                .as_ref()
                .filter(|c| !w.pvcs.contains_key(&key(ns, &c.claim_name)))
                .map(|c| c.claim_name.clone())
        });
        let total = w.nodes.len();
        let mut best: Option<(i64, String)> = None;
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        if missing_claim.is_none() {
            for node in w.nodes.values() {
                match node_misfit(w, node, &pod, &used) {
                    Some(r) => {
                        let r = r.trim_start_matches("1 ").to_string();
                        *reasons.entry(r).or_default() += 1;
                    }
                    None => {
                        let (c, m) = scored.get(&node.meta.name).copied().unwrap_or_default();
                        let (pc, pm) = pod.spec.scoring_requests();
                        // Lower is better: the mean requested share after placing the pod.
                        let score = ((c + pc) * 1000 / node.cpu_milli.max(1)
                            + (m + pm) * 1000 / node.memory.max(1))
                            / 2;
                        if best.as_ref().is_none_or(|(s, _)| score < *s) {
                            best = Some((score, node.meta.name.clone()));
                        }
                    }
                }
            }
        }
        let pref = World::pod_ref(&pod, None);
        match best {
            Some((_, node)) => {
                let now = w.now;
                let p = w.pods.get_mut(&pk).expect("listed above");
                p.spec.node_name = Some(node.clone());
                set_condition(&mut p.conditions, "PodScheduled", true, None, None, now);
                w.touch(Kind::Pod, &pk);
                w.event(
                    &pref,
                    false,
                    "Scheduled",
                    &format!("Successfully assigned {ns}/{} to {node}", pk.1),
                    Source::Scheduler,
                );
            }
            None => {
                let msg = match missing_claim {
                    Some(c) => format!(
                        "0/{total} nodes are available: persistentvolumeclaim \"{c}\" not found. preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling."
                    ),
                    None => {
                        let parts: Vec<String> =
                            reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
                        format!(
                            "0/{total} nodes are available: {}. preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling.",
                            parts.join(", ")
                        )
                    }
                };
                let now = w.now;
                let p = w.pods.get_mut(&pk).expect("listed above");
                set_condition(
                    &mut p.conditions,
                    "PodScheduled",
                    false,
                    Some("Unschedulable"),
                    Some(&msg),
                    now,
                );
                p.schedule_backoff = (p.schedule_backoff * 2).clamp(5, 300);
                p.next_schedule = now + p.schedule_backoff * NS_PER_SEC;
                w.touch(Kind::Pod, &pk);
                w.event(&pref, true, "FailedScheduling", &msg, Source::Scheduler);
            }
        }
    }
}

/// The container port a Service port's targetPort names on a pod, if any.
pub fn resolve_target_port(pod: &Pod, target: &IntOrString) -> Option<i32> {
    match target {
        IntOrString::Int(p) => Some(*p),
        IntOrString::Str(name) => pod
            .spec
            .containers
            .iter()
            .flat_map(|c| &c.ports)
            .find(|p| p.name.as_deref() == Some(name))
            .map(|p| p.container_port),
    }
}

fn endpoints(w: &mut World) {
    let keys: Vec<Key> = w.services.keys().cloned().collect();
    for k in &keys {
        let svc = &w.services[k];
        if svc.selector.is_empty() {
            continue;
        }
        let mut ready = vec![];
        let mut not_ready = vec![];
        let mut ports = vec![];
        for sp in &svc.ports {
            let mut resolved = None;
            for p in w.pods_selected(&k.0, &svc.selector) {
                let (Some(ip), Some(node)) = (&p.pod_ip, &p.spec.node_name) else {
                    continue;
                };
                if p.meta.deleted_at.is_some() {
                    continue;
                }
                let Some(port) = resolve_target_port(p, &sp.target_port) else {
                    continue;
                };
                resolved.get_or_insert(port);
                let a = EndpointAddress {
                    ip: ip.clone(),
                    node: node.clone(),
                    pod: p.meta.name.clone(),
                    pod_uid: p.meta.uid.clone(),
                };
                let list = if p.ready() {
                    &mut ready
                } else {
                    &mut not_ready
                };
                if !list.contains(&a) {
                    list.push(a);
                }
            }
            if let Some(port) = resolved {
                ports.push((sp.name.clone(), port));
            }
        }
        let svc_meta = svc.meta.clone();
        match w.endpoints.get_mut(k) {
            Some(e) => {
                if e.ready != ready || e.not_ready != not_ready || e.ports != ports {
                    e.ready = ready;
                    e.not_ready = not_ready;
                    e.ports = ports;
                    w.touch(Kind::Endpoints, k);
                }
            }
            None => {
                let mut meta = w.meta(Some(&k.0), &k.1, svc_meta.labels.clone());
                meta.created = svc_meta.created;
                w.endpoints.insert(
                    k.clone(),
                    Endpoints {
                        meta,
                        ready,
                        not_ready,
                        ports,
                    },
                );
                w.touch(Kind::Endpoints, k);
            }
        }
    }
    let orphans: Vec<Key> = w
        .endpoints
        .keys()
        .filter(|k| !w.services.contains_key(*k))
        .cloned()
        .collect();
    for k in orphans {
        w.endpoints.remove(&k);
        w.touch(Kind::Endpoints, &k);
    }
}

/// What the EndpointSlice controller writes for one Service: the ports (each Service port's name,
/// `""` when unnamed, and the container port its targetPort resolves to) and one endpoint per pod
/// with an IP, terminating pods included with their conditions (ready only when serving and not
/// terminating).
fn slice_contents(w: &World, k: &Key, svc: &Service) -> (Vec<SlicePort>, Vec<SliceEndpoint>) {
    let pods: Vec<&Pod> = w
        .pods_selected(&k.0, &svc.selector)
        .filter(|p| p.pod_ip.is_some() && !matches!(p.phase.as_str(), "Succeeded" | "Failed"))
        .collect();
    let ports = svc
        .ports
        .iter()
        .filter_map(|sp| {
            let port = pods
                .iter()
                .find_map(|p| resolve_target_port(p, &sp.target_port))?;
            Some(SlicePort {
                name: Some(sp.name.clone().unwrap_or_default()),
                protocol: Some(sp.protocol.clone()),
                port: Some(port),
                app_protocol: None,
            })
        })
        .collect();
    let endpoints = pods
        .iter()
        .map(|p| {
            let terminating = p.meta.deleted_at.is_some();
            let node = p.spec.node_name.clone();
            let zone = node
                .as_ref()
                .and_then(|n| w.nodes.get(n))
                .and_then(|n| n.meta.labels.get("topology.kubernetes.io/zone"))
                .cloned();
            SliceEndpoint {
                addresses: p.pod_ip.iter().cloned().collect(),
                conditions: SliceConditions {
                    ready: Some(p.ready() && !terminating),
                    serving: Some(p.ready()),
                    terminating: Some(terminating),
                },
                hostname: None,
                target_ref: Some(SliceTarget {
                    kind: "Pod".into(),
                    namespace: Some(k.0.clone()),
                    name: p.meta.name.clone(),
                    uid: Some(p.meta.uid.clone()),
                }),
                node_name: node,
                zone,
            }
        })
        .collect();
    (ports, endpoints)
}

/// A new controller-managed slice for the Service at `k`: `generateName` `<service>-` completed
/// with five characters, the Service's labels plus the two the controller owns, the Service as
/// its controller.
fn new_slice(w: &mut World, k: &Key, svc: &Service) -> (Key, EndpointSlice) {
    // The apiserver keeps a generated name within 63 characters: a base of at most 58.
    let mut prefix = format!("{}-", k.1);
    prefix.truncate(58);
    let name = format!("{prefix}{}", util::name_suffix(&mut w.slice_rng, 5));
    let mut labels = svc.meta.labels.clone();
    labels.insert(SLICE_SERVICE_LABEL.into(), k.1.clone());
    labels.insert(SLICE_MANAGED_BY_LABEL.into(), SLICE_CONTROLLER.into());
    let meta = Meta {
        name: name.clone(),
        namespace: Some(k.0.clone()),
        uid: util::uuid(&mut w.slice_rng),
        created: w.now,
        labels,
        owner: Some(OwnerRef {
            kind: Kind::Service,
            name: k.1.clone(),
            uid: svc.meta.uid.clone(),
        }),
        generation: 1,
        generate_name: Some(prefix),
        ..Meta::default()
    };
    let slice = EndpointSlice {
        meta,
        address_type: "IPv4".into(),
        endpoints: vec![],
        ports: vec![],
    };
    (key(&k.0, &name), slice)
}

/// The EndpointSlice controller: one slice per Service with a selector, kept equal to what
/// [`slice_contents`] finds (a new generation per change), removed with its Service or selector.
///
/// Slices are derived objects nothing in the simulation reads, so their changes are marked for
/// emission without counting as actions ([`World::touch_derived`]): datasets recorded before
/// slices existed keep every other row (only resource versions shift).
fn endpoint_slices(w: &mut World) {
    let mut wanted: BTreeMap<String, Key> = BTreeMap::new();
    let services: Vec<Key> = w
        .services
        .iter()
        .filter(|(_, s)| !s.selector.is_empty())
        .map(|(k, _)| k.clone())
        .collect();
    for k in services {
        let svc = w.services[&k].clone();
        let (ports, endpoints) = slice_contents(w, &k, &svc);
        let existing = w
            .endpoint_slices
            .iter()
            .find(|(sk, s)| {
                sk.0 == k.0 && s.controller_managed() && s.meta.is_owned_by(&svc.meta.uid)
            })
            .map(|(sk, _)| sk.clone());
        let sk = match existing {
            Some(sk) => sk,
            None => {
                let (sk, slice) = new_slice(w, &k, &svc);
                w.endpoint_slices.insert(sk.clone(), slice);
                w.touch_derived(Kind::EndpointSlice, &sk);
                sk
            }
        };
        wanted.insert(svc.meta.uid.clone(), sk.clone());
        if let Some(slice) = w.endpoint_slices.get_mut(&sk)
            && (slice.ports != ports || slice.endpoints != endpoints)
        {
            slice.ports = ports;
            slice.endpoints = endpoints;
            slice.meta.generation += 1;
            w.touch_derived(Kind::EndpointSlice, &sk);
        }
    }
    // Managed slices of Services that are gone, lost their selector, or have a newer slice.
    let stale: Vec<Key> = w
        .endpoint_slices
        .iter()
        .filter(|(sk, s)| {
            s.controller_managed()
                && s.meta
                    .owner
                    .as_ref()
                    .is_none_or(|o| wanted.get(&o.uid) != Some(*sk))
        })
        .map(|(sk, _)| sk.clone())
        .collect();
    for sk in stale {
        w.endpoint_slices.remove(&sk);
        w.touch_derived(Kind::EndpointSlice, &sk);
    }
}

/// The taint that mirrors `spec.unschedulable` (a cordon), as the node lifecycle controller keeps
/// it: added while the node is unschedulable, removed when it is uncordoned.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

fn unschedulable_taint(w: &mut World, name: &str) {
    let Some(node) = w.nodes.get_mut(name) else {
        return;
    };
    let tainted = node
        .taints
        .iter()
        .any(|t| t.key == UNSCHEDULABLE_TAINT && t.effect == "NoSchedule");
    if node.unschedulable == tainted {
        return;
    }
    if node.unschedulable {
        node.taints.push(Taint {
            key: UNSCHEDULABLE_TAINT.into(),
            value: None,
            effect: "NoSchedule".into(),
        });
    } else {
        node.taints.retain(|t| t.key != UNSCHEDULABLE_TAINT);
    }
    w.touch(Kind::Node, &key("", name));
}

/// Node heartbeats, NotReady after the grace period, pod readiness on lost nodes, and taint-based
/// eviction after the pods' 300 s toleration.
fn node_lifecycle(w: &mut World) {
    let now = w.now;
    let names: Vec<String> = w.nodes.keys().cloned().collect();
    for name in names {
        unschedulable_taint(w, &name);
        let down = w.runtime.node(&name).kubelet_down;
        let node = w.nodes.get_mut(&name).expect("listed");
        if !down {
            // Heartbeats are leases in modern clusters; the object only changes on transitions.
            if !node.kubelet_up {
                node.kubelet_up = true;
                node.heartbeat = now;
                set_condition(
                    &mut node.conditions,
                    "Ready",
                    true,
                    Some("KubeletReady"),
                    Some("kubelet is posting ready status"),
                    now,
                );
                node.taints
                    .retain(|t| !t.key.starts_with("node.kubernetes.io/unreachable"));
                let nref = World::meta_ref(Kind::Node, &node.meta);
                w.touch(Kind::Node, &key("", &name));
                w.event(
                    &nref,
                    false,
                    "NodeReady",
                    &format!("Node {name} status is now: NodeReady"),
                    Source::Kubelet(name.clone()),
                );
            }
            continue;
        }
        let since = node.heartbeat;
        if node.kubelet_up && now - since >= 40 * NS_PER_SEC {
            node.kubelet_up = false;
            set_condition(
                &mut node.conditions,
                "Ready",
                false,
                Some("NodeStatusUnknown"),
                Some("Kubelet stopped posting node status."),
                now,
            );
            for c in node.conditions.iter_mut().filter(|c| c.kind != "Ready") {
                c.reason = Some("NodeStatusUnknown".into());
                c.message = Some("Kubelet stopped posting node status.".into());
                c.last_transition = now;
            }
            for effect in ["NoSchedule", "NoExecute"] {
                node.taints.push(Taint {
                    key: "node.kubernetes.io/unreachable".into(),
                    value: None,
                    effect: effect.into(),
                });
            }
            let nref = World::meta_ref(Kind::Node, &node.meta);
            w.touch(Kind::Node, &key("", &name));
            w.event(
                &nref,
                false,
                "NodeNotReady",
                &format!("Node {name} status is now: NodeNotReady"),
                Source::Controller("node-controller"),
            );
            let on_node: Vec<Key> = w
                .pods
                .iter()
                .filter(|(_, p)| p.spec.node_name.as_deref() == Some(&name))
                .map(|(k, _)| k.clone())
                .collect();
            for pk in on_node {
                let p = w.pods.get_mut(&pk).expect("listed");
                set_condition(&mut p.conditions, "Ready", false, None, None, now);
                for s in &mut p.statuses {
                    s.ready = false;
                }
                let pref = World::pod_ref(p, None);
                w.touch(Kind::Pod, &pk);
                w.event(
                    &pref,
                    true,
                    "NodeNotReady",
                    "Node is not ready",
                    Source::Controller("node-controller"),
                );
            }
        }
        if !w.nodes[&name].kubelet_up {
            let lost_at = w.nodes[&name]
                .conditions
                .iter()
                .find(|c| c.kind == "Ready")
                .map(|c| c.last_transition)
                .unwrap_or(now);
            if now - lost_at >= 300 * NS_PER_SEC {
                let evict: Vec<Key> = w
                    .pods
                    .iter()
                    .filter(|(_, p)| {
                        p.spec.node_name.as_deref() == Some(&name) && p.meta.deleted_at.is_none()
                    })
                    .map(|(k, _)| k.clone())
                    .collect();
                for pk in evict {
                    let pref = World::pod_ref(&w.pods[&pk], None);
                    w.event(
                        &pref,
                        false,
                        "TaintManagerEviction",
                        &format!("Marking for deletion Pod {}/{}", pk.0, pk.1),
                        Source::Controller("taint-controller"),
                    );
                    delete_pod(w, &pk);
                }
            }
        }
    }
}

/// What one container charges against a quota resource (`limits.memory`, `requests.cpu`, `cpu`,
/// ...): a request left out counts as its limit, as the apiserver defaults it.
fn quota_charge(c: &Container, resource: &str) -> i64 {
    let (limit, request) = if resource.ends_with("memory") {
        (c.resources.limits.memory, c.resources.requests.memory)
    } else if resource.ends_with("cpu") {
        (c.resources.limits.cpu_milli, c.resources.requests.cpu_milli)
    } else {
        return 0;
    };
    if resource.starts_with("limits") {
        limit.unwrap_or(0)
    } else {
        request.or(limit).unwrap_or(0)
    }
}

fn quotas(w: &mut World) {
    let keys: Vec<Key> = w.quotas.keys().cloned().collect();
    for k in keys {
        let hard = w.quotas[&k].hard.clone();
        let pods: Vec<&Pod> = w
            .pods
            .values()
            .filter(|p| p.meta.namespace.as_deref() == Some(&k.0) && p.meta.deleted_at.is_none())
            .collect();
        let mut used = BTreeMap::new();
        for res in hard.keys() {
            let v = match res.as_str() {
                "pods" => pods.len().to_string(),
                r if r.ends_with("memory") => util::memory_quantity(
                    pods.iter()
                        .flat_map(|p| &p.spec.containers)
                        .map(|c| quota_charge(c, r))
                        .sum(),
                ),
                r if r.ends_with("cpu") => util::cpu_quantity(
                    pods.iter()
                        .flat_map(|p| &p.spec.containers)
                        .map(|c| quota_charge(c, r))
                        .sum(),
                ),
                _ => "0".into(),
            };
            used.insert(res.clone(), v);
        }
        let q = w.quotas.get_mut(&k).expect("listed");
        if q.used != used {
            q.used = used;
            w.touch(Kind::ResourceQuota, &k);
        }
    }
}
