//! node-exporter basics per node whose kubelet answers: CPU time per mode, load (the CPU its pods
//! and any stress demand) and memory (what its containers' working sets leave available).

use crate::kubelet::{NODE_SYSTEM_CPU, NODE_SYSTEM_MEMORY};
use schemas::tables::Labels;

use crate::objects::{Node, key};
use crate::util::NS_PER_SEC;
use crate::world::World;

use super::{Family, Out, containers_memory, labels};

pub(super) const FAMILIES: &[Family] = &[
    (
        "node_cpu_seconds_total",
        "counter",
        "Seconds the CPUs spent in each mode.",
        "seconds",
    ),
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
            + NODE_SYSTEM_CPU;
        let inst = format!("{}:9100", n.ip);
        let l = labels(&[
            ("job", "node-exporter"),
            ("instance", &inst),
            ("node", &n.meta.name),
        ]);
        o.up(
            &[
                ("job", "node-exporter"),
                ("instance", &inst),
                ("node", &n.meta.name),
            ],
            true,
        );
        cpu_modes(o, w, n, &l);
        o.push("node_load1", l.clone(), (demand * 100.0).round() / 100.0);
        let used = containers_memory(w, &n.meta.name);
        o.push("node_memory_MemTotal_bytes", l.clone(), n.memory as f64);
        o.push(
            "node_memory_MemAvailable_bytes",
            l,
            (n.memory as f64 - used - NODE_SYSTEM_MEMORY)
                .max(0.0)
                .round(),
        );
    }
}

/// How a node's busy CPU time splits into modes, as a server running containers spends it.
const BUSY_MODES: [(&str, f64); 4] = [
    ("user", 0.72),
    ("system", 0.22),
    ("softirq", 0.04),
    ("irq", 0.02),
];

/// `node_cpu_seconds_total` per CPU and mode: the node's busy time (its root cgroup's counter)
/// spread evenly over its CPUs and split into modes; idle is the rest of the time since boot
/// (the Node's creation). Modes the model has no cause for (iowait, nice, steal) stay at zero.
/// Counters have the kernel's 10 ms resolution.
fn cpu_modes(o: &mut Out, w: &World, n: &Node, l: &Labels) {
    let cpus = (n.cpu_milli as f64 / 1000.0).round().max(1.0);
    let up_secs = ((w.now - n.meta.created) as f64 / NS_PER_SEC as f64).max(0.0);
    let busy = w.node_cpu_seconds.get(&n.meta.name).copied().unwrap_or(0.0) / cpus;
    let ticks = |secs: f64| (secs * 100.0).floor() / 100.0;
    for cpu in 0..cpus as usize {
        let cpu = cpu.to_string();
        let mut modes: Vec<(&str, f64)> = BUSY_MODES
            .iter()
            .map(|(mode, share)| (*mode, busy * share))
            .collect();
        modes.extend([("iowait", 0.0), ("nice", 0.0), ("steal", 0.0)]);
        modes.push(("idle", (up_secs - busy).max(0.0)));
        for (mode, secs) in modes {
            let mut lm = l.clone();
            lm.insert("cpu".into(), cpu.clone());
            lm.insert("mode".into(), mode.into());
            o.push("node_cpu_seconds_total", lm, ticks(secs));
        }
    }
}
