//! Per-pod CPU demand against the container's limit and the node's capacity: the demand and
//! request rate the world's metrics read, CFS throttling under a limit, node contention, and the
//! backlog a saturated pod builds (and sheds beyond its queue). What flows on is, per service,
//! the worst pod's slowdown, queueing delay, shed share and throttled tail ([`Pressure`]).

use std::collections::{BTreeMap, HashMap};

use crate::calls::OpKey;
use crate::objects::Key;
use crate::util;
use crate::world::World;

use super::{DT, Tick};

/// How CPU shapes each service's latency and errors this step (worst pod of the service).
#[derive(Debug, Default)]
pub(super) struct Pressure {
    /// Factor on the operation's own latency (queueing theory's 1 / (1 - rho), and contention).
    pub slowdown: BTreeMap<String, f64>,
    /// Seconds a request waits behind the backlog and the node's run queue.
    pub queue_wait: BTreeMap<String, f64>,
    /// Share of requests shed by a full queue.
    pub rejected: BTreeMap<String, f64>,
    /// CFS throttling: (share of requests landing in a throttled period, seconds they wait).
    pub throttle_tail: BTreeMap<String, (f64, f64)>,
}

/// One pod's share of its service's load.
struct PodDemand {
    pod: Key,
    service: String,
    /// CPU seconds per second.
    cpu: f64,
    /// Requests per second.
    requests: f64,
    /// The container's CPU limit in cores.
    limit: Option<f64>,
}

/// A node's CPU: its cores and what its pods and stressors ask of them.
struct NodeLoad {
    cores: f64,
    demand: f64,
}

impl Pressure {
    pub fn of(
        w: &mut World,
        t: &Tick,
        rates: &HashMap<OpKey, f64>,
        backlog: &mut HashMap<Key, f64>,
    ) -> Pressure {
        w.demand.clear();
        // Node contention: requested demand vs node CPU minus stressors.
        let mut node_demand: BTreeMap<String, f64> = BTreeMap::new();
        let pods = pod_demand(w, t, rates, &mut node_demand);
        for (node, nr) in &w.runtime.nodes {
            *node_demand.entry(node.clone()).or_default() += nr.cpu_stress_milli as f64 / 1000.0;
        }
        w.requests.clear();
        let mut out = Pressure::default();
        for d in pods {
            let node = w.pods[&d.pod].spec.node_name.clone().unwrap_or_default();
            let cores = w
                .nodes
                .get(&node)
                .map(|n| n.cpu_milli as f64 / 1000.0)
                .unwrap_or(4.0);
            let load = NodeLoad {
                cores,
                demand: node_demand.get(&node).copied().unwrap_or(0.0),
            };
            out.add_pod(w, t, d, &load, backlog);
        }
        out
    }

    /// Records one pod's demand in the world and folds its pressure into its service's.
    fn add_pod(
        &mut self,
        w: &mut World,
        t: &Tick,
        d: PodDemand,
        node: &NodeLoad,
        backlog: &mut HashMap<Key, f64>,
    ) {
        let (nd, node_cores) = (node.demand, node.cores);
        let svc = &d.service;
        let share = if nd > node_cores {
            node_cores / nd
        } else {
            1.0
        };
        let extra =
            w.runtime.service(svc).extra_cpu_milli as f64 / 1000.0 + t.effects.extra_cpu(svc);
        // A service without a limit can burst to a couple of cores.
        let capacity = (d.limit.unwrap_or(2.0) - extra * 0.5).max(0.02) * share;
        w.demand.insert(d.pod.clone(), d.cpu);
        w.requests.insert(d.pod.clone(), d.requests);
        if let Some(l) = d.limit {
            self.throttle(t, &d, l, extra);
        }
        let backlog = backlog.entry(d.pod.clone()).or_default();
        *backlog = (*backlog + (d.cpu - capacity) * DT).max(0.0);
        // A server holds a bounded queue; beyond ~20 s of work it sheds load.
        let cap = capacity * 20.0;
        let shed = if *backlog > cap {
            let x = (*backlog - cap) / (*backlog).max(1e-9);
            *backlog = cap;
            x
        } else {
            0.0
        };
        let rho = (d.cpu / capacity).min(0.97);
        // A saturated node makes every thread wait for a CPU: run-queue delay on each hop.
        let contention = if nd > node_cores * 0.7 {
            1.0 + 2.0 * nd / node_cores
        } else {
            1.0
        };
        let sd = (1.0 / (1.0 - rho)).min(30.0) * contention;
        let sched = 0.004 * (contention - 1.0);
        let e = self.slowdown.entry(svc.clone()).or_insert(0.0);
        *e = e.max(sd);
        let q = self.queue_wait.entry(svc.clone()).or_insert(0.0);
        *q = q.max(*backlog / capacity + sched);
        let rj = self.rejected.entry(svc.clone()).or_insert(0.0);
        *rj = rj.max(shed);
    }

    /// A request landing in a throttled CFS period waits for the next one.
    fn throttle(&mut self, t: &Tick, d: &PodDemand, limit: f64, extra: f64) {
        let base = t
            .app
            .service(&d.service)
            .map_or(0.0, |s| s.usage.idle_cpu.cores())
            + extra;
        let cost = if d.requests > 0.0 {
            d.cpu / d.requests
        } else {
            0.0
        };
        let share = util::cfs_throttled_share(limit, base, d.requests, cost);
        // Once the quota is spent the container waits out the rest of the period.
        let wait = 0.1 * (1.0 - limit.min(0.9));
        let tail = self
            .throttle_tail
            .entry(d.service.clone())
            .or_insert((0.0, 0.0));
        if share > tail.0 {
            *tail = (share, wait);
        }
    }
}

/// Each serving pod's even share of its service's requests and CPU, adding it (and the service's
/// idle CPU) to its node's demand.
fn pod_demand(
    w: &World,
    t: &Tick,
    rates: &HashMap<OpKey, f64>,
    node_demand: &mut BTreeMap<String, f64>,
) -> Vec<PodDemand> {
    let mut out = vec![];
    for s in &t.app.services {
        let pods = &t.serving[&s.name];
        if pods.is_empty() {
            continue;
        }
        let gogc = pods
            .first()
            .and_then(|pk| w.pods.get(pk))
            .and_then(|p| {
                p.spec
                    .containers
                    .first()
                    .and_then(|c| crate::programs::env_value(w, &t.app.namespace, c, "GOGC"))
            })
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(100.0);
        // A lower GOGC collects more often: more CPU per request.
        let gc_factor = 1.0 + (100.0 / gogc.max(1.0) - 1.0).clamp(0.0, 99.0) * 0.03;
        // Requests per second and CPU seconds per second over the service's operations.
        let (req_per_s, cpu_per_s) = s.operations.iter().fold((0.0, 0.0), |(req, cpu), o| {
            let rate = rates
                .get(&(s.name.clone(), o.name.clone()))
                .copied()
                .unwrap_or(0.0);
            (req + rate, cpu + rate * o.cpu_ms / 1000.0)
        });
        let cpu_per_s = cpu_per_s * gc_factor;
        let per_pod = cpu_per_s / pods.len() as f64;
        let req_per_pod = req_per_s / pods.len() as f64;
        for pk in pods {
            let p = &w.pods[pk];
            let limit = p
                .spec
                .containers
                .first()
                .and_then(|c| c.resources.limits.cpu_milli)
                .map(|m| m as f64 / 1000.0);
            let node = p.spec.node_name.clone().unwrap_or_default();
            *node_demand.entry(node.clone()).or_default() += per_pod + s.usage.idle_cpu.cores();
            out.push(PodDemand {
                pod: pk.clone(),
                service: s.name.clone(),
                cpu: per_pod,
                requests: req_per_pod,
                limit,
            });
        }
    }
    out
}
