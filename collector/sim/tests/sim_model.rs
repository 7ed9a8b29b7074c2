//! Mechanisms of the simulated cluster, checked on hotel-reservation: the kubelet's crash-loop
//! back-off, object rows shaped like the API server's, endpoints following readiness, and the
//! workload's error propagation (with every metric series sampled once per instant).

use problems::primitive::Primitive;
use problems::{Catalog, Memory};
use schemas::tables::Row;
use sim::objects::{CState, key};
use sim::{Sim, SimConfig, faults};

const T0: i64 = 1_800_000_000_000_000_000;

fn hotel() -> problems::AppSpec {
    Catalog::builtin()
        .unwrap()
        .app("hotel-reservation")
        .unwrap()
        .clone()
}

#[test]
fn oom_killed_container_restarts_with_doubling_back_off() {
    let app = hotel();
    let mut sim = Sim::new(&app, 9, T0, SimConfig::default());
    faults::apply(
        &mut sim.world,
        &app,
        &Primitive::MemoryLimit {
            service: "profile".into(),
            limit: Memory::from_mib(4),
        },
    )
    .unwrap();
    let mut restarts_at = vec![];
    let mut last = 0;
    let mut oom_seen = false;
    for t in 0..400 {
        sim.step();
        sim.drain();
        let pod = sim.world.pods.values().find(|p| {
            p.meta.name.starts_with("profile-")
                && p.meta.deleted_at.is_none()
                && p.spec.containers[0].resources.limits.memory == Some(4 << 20)
        });
        if let Some(p) = pod {
            let s = &p.statuses[0];
            oom_seen |= s
                .last
                .as_ref()
                .is_some_and(|l| l.reason == "OOMKilled" && l.exit_code == 137);
            if s.restart_count > last {
                last = s.restart_count;
                restarts_at.push(t);
            }
        }
    }
    assert!(oom_seen, "last state OOMKilled/137 expected");
    assert!(restarts_at.len() >= 4, "restarts at {restarts_at:?}");
    let gaps: Vec<i64> = restarts_at.windows(2).map(|w| w[1] - w[0]).collect();
    // First restart is immediate, then 10 s, 20 s, 40 s ... of back-off (plus the run time to OOM).
    for (i, want) in [10, 20, 40].iter().enumerate() {
        let g = gaps[i];
        assert!(
            g >= *want && g <= want + 5,
            "gap {i} is {g}s, want ~{want}s (gaps {gaps:?})"
        );
    }
}

#[test]
fn objects_look_like_api_server_objects() {
    let app = hotel();
    let mut sim = Sim::new(&app, 2, T0, SimConfig::default());
    let rows = sim.drain();
    let pod = rows
        .iter()
        .find_map(|r| match r {
            Row::Object(o) if o.kind == "Pod" && o.name.starts_with("geo-") => Some(o.clone()),
            _ => None,
        })
        .expect("a geo pod row");
    let v: serde_json::Value = serde_json::from_str(&pod.object).unwrap();
    assert_eq!(v["apiVersion"], "v1");
    assert_eq!(v["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
    assert_eq!(
        v["metadata"]["resourceVersion"],
        pod.resource_version.as_str()
    );
    assert!(v["metadata"]["uid"].as_str().unwrap().len() == 36);
    assert_eq!(v["metadata"]["labels"]["io.kompose.service"], "geo");
    assert!(v["metadata"]["labels"]["pod-template-hash"].is_string());
    assert_eq!(v["status"]["phase"], "Running");
    assert_eq!(v["status"]["containerStatuses"][0]["ready"], true);
    assert_eq!(v["status"]["containerStatuses"][0]["restartCount"], 0);
    assert!(
        v["status"]["containerStatuses"][0]["containerID"]
            .as_str()
            .unwrap()
            .starts_with("containerd://")
    );
    let conds: Vec<&str> = v["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert!(
        conds.contains(&"Ready") && conds.contains(&"PodScheduled"),
        "{conds:?}"
    );
    assert_eq!(v["spec"]["containers"][0]["command"][0], "geo");
    assert_eq!(pod.change, schemas::tables::ChangeType::Added);
}

#[test]
fn readiness_failure_empties_endpoints_and_callers_fail() {
    let app = hotel();
    let mut sim = Sim::new(&app, 4, T0, SimConfig::default());
    let ready = |sim: &Sim| {
        sim.world.endpoints[&key("hotel-reservation", "geo")]
            .ready
            .len()
    };
    assert!(ready(&sim) > 0);
    let probe: problems::app::Probe = toml::from_str("type = \"http\"\npath = \"/healthz\"\nport = 8080\nperiod = \"5s\"\nfailure_threshold = 1\n").unwrap();
    faults::apply(
        &mut sim.world,
        &app,
        &Primitive::ReadinessProbe {
            service: "geo".into(),
            probe,
        },
    )
    .unwrap();
    let mut error_spans = 0;
    let mut refused_logs = 0;
    // Failing calls come back with several gRPC codes; each series is still sampled once per
    // instant (every failing code is one HTTP 500 series, not one per code).
    let mut series_at = std::collections::HashSet::new();
    for _ in 0..120 {
        sim.step();
        for r in sim.drain() {
            match r {
                Row::Metric(m) => {
                    let key = (m.metric.clone(), m.labels.clone(), m.time_ns);
                    assert!(
                        series_at.insert(key),
                        "{} {:?} sampled twice at {}",
                        m.metric,
                        m.labels,
                        m.time_ns
                    );
                }
                Row::Span(s) if s.service == "search" && s.status_code == "error" => {
                    error_spans += 1
                }
                Row::Log(l)
                    if l.pod.starts_with("search-") && l.line.contains("connection refused") =>
                {
                    refused_logs += 1
                }
                _ => {}
            }
        }
    }
    assert_eq!(
        ready(&sim),
        0,
        "geo endpoints must empty once its pods are unready"
    );
    let geo_running = sim
        .world
        .pods
        .values()
        .filter(|p| p.meta.name.starts_with("geo-"))
        .all(|p| p.statuses[0].state != CState::waiting("x", None));
    assert!(geo_running);
    assert!(error_spans > 0, "search's calls to geo must error");
    assert!(refused_logs > 0, "search must log connection refused");
}
