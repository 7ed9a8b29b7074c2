//! Runtime conditions end with what holds them, and with nothing else: a new pod clears `tc`
//! impairment set in its predecessor's network namespace while a restarted callee does not; a
//! restarted database process drops its sessions' locks and a password set at runtime but keeps
//! a dropped user; failing reads stay until the pod leaves the node whose disk fails.

use problems::primitive::{AuthMode, Primitive};
use sim::Sim;
use sim::controllers::delete_pod;
use sim::objects::Key;
use sim::runtime::DbAuth;

mod common;
use common::{apply, run, sim_of};

/// The pods whose name starts with the workload's (`geo-` matches geo's ReplicaSet pods).
fn pods_of(sim: &Sim, workload: &str) -> Vec<Key> {
    let prefix = format!("{workload}-");
    sim.world
        .pods
        .iter()
        .filter(|(k, p)| {
            k.0 == sim.app.namespace
                && p.meta.deleted_at.is_none()
                && k.1.starts_with(&prefix)
                && k.1[prefix.len()..].chars().filter(|c| *c == '-').count() <= 1
        })
        .map(|(k, _)| k.clone())
        .collect()
}

fn restart(sim: &mut Sim, workload: &str) {
    for k in pods_of(sim, workload) {
        delete_pod(&mut sim.world, &k);
    }
}

#[test]
fn a_new_caller_pod_leaves_the_delay_behind_but_a_new_callee_pod_does_not() {
    let mut sim = sim_of("hotel-reservation");
    apply(
        &mut sim,
        Primitive::NetworkDelay {
            from: "search".into(),
            to: "geo".into(),
            delay: problems::Dur::from_millis(800),
            jitter: problems::Dur::from_millis(0),
        },
    );
    let link = ("search".to_string(), "geo".to_string());
    run(&mut sim, 120);
    assert!(sim.world.runtime.links.contains_key(&link), "left alone");
    restart(&mut sim, "geo");
    run(&mut sim, 120);
    assert!(
        sim.world.runtime.links.contains_key(&link),
        "the impairment lives in the caller's pods"
    );
    restart(&mut sim, "search");
    run(&mut sim, 120);
    assert!(!sim.world.runtime.links.contains_key(&link));
}

#[test]
fn a_restarted_database_drops_its_locks_and_runtime_password_but_not_a_dropped_user() {
    let mut sim = sim_of("astronomy-shop");
    apply(
        &mut sim,
        Primitive::DatabaseLock {
            service: "postgresql".into(),
            table: "catalog.products".into(),
        },
    );
    apply(
        &mut sim,
        Primitive::DatabaseAuth {
            service: "valkey-cart".into(),
            mode: AuthMode::PasswordChanged,
            restart_clients: vec![],
        },
    );
    run(&mut sim, 300);
    let rt = |sim: &Sim, s: &str| sim.world.runtime.service(s);
    assert!(rt(&sim, "postgresql").locked_table.is_some(), "left alone");
    assert_eq!(rt(&sim, "valkey-cart").db_auth, DbAuth::PasswordChanged);
    restart(&mut sim, "postgresql");
    restart(&mut sim, "valkey-cart");
    run(&mut sim, 120);
    assert_eq!(rt(&sim, "postgresql").locked_table, None);
    assert_eq!(rt(&sim, "valkey-cart").db_auth, DbAuth::Ok);

    let mut sim = sim_of("hotel-reservation");
    apply(
        &mut sim,
        Primitive::DatabaseAuth {
            service: "mongodb-rate".into(),
            mode: AuthMode::DropUser,
            restart_clients: vec![],
        },
    );
    restart(&mut sim, "mongodb-rate");
    run(&mut sim, 180);
    assert_eq!(
        sim.world.runtime.service("mongodb-rate").db_auth,
        DbAuth::UserRemoved,
        "a dropped user is stored in the data"
    );
}

#[test]
fn failing_reads_stay_until_the_database_leaves_the_node() {
    let mut sim = sim_of("hotel-reservation");
    apply(
        &mut sim,
        Primitive::DiskReadErrors {
            service: "mongodb-geo".into(),
            percent: 30.0,
        },
    );
    let rt = sim.world.runtime.service("mongodb-geo");
    assert_eq!(rt.disk_nodes.len(), 1, "{rt:?}");
    let node = rt.disk_nodes[0].clone();
    run(&mut sim, 300);
    assert!(sim.world.runtime.service("mongodb-geo").disk_read_errors > 0.0);
    sim.world.nodes.get_mut(&node).unwrap().unschedulable = true;
    restart(&mut sim, "mongodb-geo");
    run(&mut sim, 120);
    let on: Vec<_> = pods_of(&sim, "mongodb-geo")
        .iter()
        .filter_map(|k| sim.world.pods[k].spec.node_name.clone())
        .collect();
    assert!(!on.is_empty() && !on.contains(&node), "{on:?}");
    assert_eq!(
        sim.world.runtime.service("mongodb-geo").disk_read_errors,
        0.0
    );
}
