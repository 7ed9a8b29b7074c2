//! node-exporter basics per node whose kubelet answers: load (the CPU its pods and any stress
//! demand) and memory (what its containers' working sets leave available).

use crate::objects::key;
use crate::world::World;

use super::{Family, Out, labels};

pub(super) const FAMILIES: &[Family] = &[
    ("node_load1", "gauge", "1m load average.", ""),
    (
        "node_memory_MemAvailable_bytes",
        "gauge",
        "Memory information field MemAvailable_bytes.",
        "bytes",
    ),
    (
        "node_memory_MemTotal_bytes",
        "gauge",
        "Memory information field MemTotal_bytes.",
        "bytes",
    ),
];

pub(super) fn scrape(o: &mut Out, w: &World) {
    for n in w.nodes.values() {
        if w.runtime.node(&n.meta.name).kubelet_down {
            continue;
        }
        let nr = w.runtime.node(&n.meta.name);
        let demand: f64 = w
            .pods
            .values()
            .filter(|p| p.spec.node_name.as_ref() == Some(&n.meta.name))
            .filter_map(|p| {
                w.demand.get(&key(
                    p.meta.namespace.as_deref().unwrap_or_default(),
                    &p.meta.name,
                ))
            })
            .sum::<f64>()
            + nr.cpu_stress_milli as f64 / 1000.0
            + 0.15;
        let inst = format!("{}:9100", n.ip);
        let l = labels(&[
            ("job", "node-exporter"),
            ("instance", &inst),
            ("node", &n.meta.name),
        ]);
        o.push("node_load1", l.clone(), (demand * 100.0).round() / 100.0);
        let used: f64 = w
            .pods
            .values()
            .filter(|p| p.spec.node_name.as_ref() == Some(&n.meta.name))
            .flat_map(|p| &p.statuses)
            .map(|s| s.working_set)
            .sum();
        o.push("node_memory_MemTotal_bytes", l.clone(), n.memory as f64);
        o.push(
            "node_memory_MemAvailable_bytes",
            l,
            (n.memory as f64 - used - 900e6).max(0.0).round(),
        );
    }
}
