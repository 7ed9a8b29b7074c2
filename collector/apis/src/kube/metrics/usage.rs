//! What metrics-server reports, read from the cAdvisor series a store holds: per container, the
//! CPU rate between the two newest samples of `container_cpu_usage_seconds_total` (the window
//! metrics-server reports) and the newest `container_memory_working_set_bytes`; per node, the
//! same of its root cgroup (`id="/"`), or the sum of its containers where the root cgroup was not
//! recorded. IO-free: a [`Storage`] in, readings out.

use std::collections::BTreeMap;

use promql::storage::{LabelMatcher, SampleBuf, Storage, is_stale};

pub const CPU: &str = "container_cpu_usage_seconds_total";
pub const MEMORY: &str = "container_memory_working_set_bytes";

/// How far back the newest samples are looked for: a few scrape intervals.
const LOOKBACK_MS: i64 = 120_000;

/// A reading is current while its newest sample is at most this many windows older than the
/// newest scrape.
const FRESH_WINDOWS: i64 = 2;

/// One usage reading, as metrics-server reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// Time of the newer CPU sample (recorded ms).
    pub time_ms: i64,
    /// Time between the two CPU samples the rate was taken over.
    pub window_ms: i64,
    pub cpu_nanocores: i64,
    /// The CPU counter at `time_ms`, in core-nanoseconds.
    pub cpu_core_nanos: i64,
    pub memory_bytes: i64,
}

impl Usage {
    /// Adds a part's usage to a total (a pod's containers, a node's pods): the total is as new
    /// as its newest part.
    pub fn add(&mut self, part: &Usage) {
        if self.window_ms == 0 {
            self.window_ms = part.window_ms;
        }
        self.time_ms = self.time_ms.max(part.time_ms);
        self.cpu_nanocores += part.cpu_nanocores;
        self.cpu_core_nanos += part.cpu_core_nanos;
        self.memory_bytes += part.memory_bytes;
    }
}

/// (namespace, pod, container).
pub type ContainerKey = (String, String, String);

/// Readings at one now.
#[derive(Debug, Default)]
pub struct Readings {
    pub containers: BTreeMap<ContainerKey, Usage>,
    pub nodes: BTreeMap<String, Usage>,
}

impl Readings {
    /// The reading of one container of a pod.
    pub fn container(&self, namespace: &str, pod: &str, container: &str) -> Option<&Usage> {
        self.containers.get(&(
            namespace.to_string(),
            pod.to_string(),
            container.to_string(),
        ))
    }
}

/// Which series to read: one namespace's, one pod's, or every one.
#[derive(Debug, Clone, Copy, Default)]
pub struct Scope<'a> {
    pub namespace: Option<&'a str>,
    pub pod: Option<&'a str>,
    /// Nodes only (the containers are read anyway where a node has no root cgroup series).
    pub nodes: bool,
}

/// The two newest samples of a counter at or before now, newest last.
type Pair = ((i64, f64), (i64, f64));

/// Reads the usage of every container (and, for `scope.nodes`, node) in scope at `now_ms`.
pub fn read(st: &dyn Storage, now_ms: i64, scope: Scope<'_>) -> Readings {
    let mut buf = SampleBuf::default();
    // Per container and per node root: the series (one per container instance) with the newest
    // samples. Every series is read, in scope or not: the newest scrape of all of them says how
    // current a reading is (a recording's now may lie a while after its last scrape).
    let mut containers: BTreeMap<ContainerKey, (Pair, String)> = BTreeMap::new();
    let mut roots: BTreeMap<String, Pair> = BTreeMap::new();
    let mut newest_scrape = i64::MIN;
    for id in st.select(&[LabelMatcher::equal("__name__", CPU)]) {
        let labels = st.series_labels(id);
        let Some(pair) = newest_two(st, id, now_ms, &mut buf) else {
            continue;
        };
        newest_scrape = newest_scrape.max(pair.1.0);
        if labels.get("id") == "/" {
            if scope.nodes {
                let node = node_of(labels.get("node"), labels.get("instance"));
                keep_newest(&mut roots, node, pair, |p| p.1.0);
            }
            continue;
        }
        let (ns, pod, container) = (
            labels.get("namespace"),
            labels.get("pod"),
            labels.get("container"),
        );
        if pod.is_empty()
            || container.is_empty()
            || container == "POD"
            || scope.namespace.is_some_and(|n| n != ns)
            || scope.pod.is_some_and(|p| p != pod)
        {
            continue;
        }
        let key = (ns.to_string(), pod.to_string(), container.to_string());
        let node = labels.get("node").to_string();
        keep_newest(&mut containers, key, (pair, node), |(p, _)| p.1.0);
    }
    let memory = newest_memory(st, now_ms, scope, &mut buf);
    let mut out = Readings::default();
    let mut node_sums: BTreeMap<String, Usage> = BTreeMap::new();
    for (key, (pair, node)) in containers {
        let Some(mem) = memory.containers.get(&key) else {
            // Not running: cAdvisor reports no working set, metrics-server no container.
            continue;
        };
        let Some(usage) = usage_of(pair, *mem, newest_scrape) else {
            continue;
        };
        if !node.is_empty() {
            node_sums.entry(node).or_default().add(&usage);
        }
        out.containers.insert(key, usage);
    }
    if scope.nodes {
        for (node, pair) in roots {
            if let Some(mem) = memory.nodes.get(&node)
                && let Some(usage) = usage_of(pair, *mem, newest_scrape)
            {
                out.nodes.insert(node, usage);
            }
        }
        // A node without a root cgroup series: the sum of its containers.
        for (node, usage) in node_sums {
            out.nodes.entry(node).or_insert(usage);
        }
    }
    out
}

/// The node a series belongs to: its `node` label, else its kubelet's address without the port.
fn node_of(node: &str, instance: &str) -> String {
    if node.is_empty() {
        instance.split(':').next().unwrap_or_default().to_string()
    } else {
        node.to_string()
    }
}

/// Puts `v` under `key` unless what is there is as new (`time` says how new).
fn keep_newest<K: Ord, V>(map: &mut BTreeMap<K, V>, key: K, v: V, time: impl Fn(&V) -> i64) {
    match map.get(&key) {
        Some(old) if time(old) >= time(&v) => {}
        _ => {
            map.insert(key, v);
        }
    }
}

/// The newest working-set sample of every container and node root in scope.
#[derive(Default)]
struct Memory {
    containers: BTreeMap<ContainerKey, (i64, f64)>,
    nodes: BTreeMap<String, (i64, f64)>,
}

fn newest_memory(st: &dyn Storage, now_ms: i64, scope: Scope<'_>, buf: &mut SampleBuf) -> Memory {
    let mut matchers = vec![LabelMatcher::equal("__name__", MEMORY)];
    if let Some(ns) = scope.namespace {
        matchers.push(LabelMatcher::equal("namespace", ns));
    }
    if let Some(pod) = scope.pod {
        matchers.push(LabelMatcher::equal("pod", pod));
    }
    let mut out = Memory::default();
    for id in st.select(&matchers) {
        let labels = st.series_labels(id);
        buf.ts.clear();
        buf.vals.clear();
        st.read_samples(id, now_ms - LOOKBACK_MS, now_ms, buf);
        let Some(sample) = current(buf, now_ms).last().copied() else {
            continue;
        };
        if labels.get("id") == "/" {
            let node = node_of(labels.get("node"), labels.get("instance"));
            keep_newest(&mut out.nodes, node, sample, |s| s.0);
            continue;
        }
        let key = (
            labels.get("namespace").to_string(),
            labels.get("pod").to_string(),
            labels.get("container").to_string(),
        );
        keep_newest(&mut out.containers, key, sample, |s| s.0);
    }
    out
}

/// The samples in `buf` at or before now, up to a staleness marker (a series that ended is not
/// current).
fn current(buf: &SampleBuf, now_ms: i64) -> Vec<(i64, f64)> {
    let mut out = Vec::new();
    for (&t, &v) in buf.ts.iter().zip(&buf.vals) {
        if t > now_ms {
            break;
        }
        if is_stale(v) {
            out.clear();
        } else {
            out.push((t, v));
        }
    }
    out
}

fn newest_two(st: &dyn Storage, id: u32, now_ms: i64, buf: &mut SampleBuf) -> Option<Pair> {
    buf.ts.clear();
    buf.vals.clear();
    st.read_samples(id, now_ms - LOOKBACK_MS, now_ms, buf);
    let samples = current(buf, now_ms);
    match samples.as_slice() {
        [.., a, b] => Some((*a, *b)),
        _ => None,
    }
}

/// The usage over a pair of CPU samples with the working set beside it, if the pair is current
/// (its newest sample at most two windows older than the newest scrape: one missed scrape is
/// tolerated, a container gone for longer is gone, as metrics-server keeps two scrapes), the
/// working set was taken with it, and the counter did not go back (a reset leaves no rate until
/// the next scrape).
fn usage_of(
    ((t1, c1), (t2, c2)): Pair,
    (mt, mem): (i64, f64),
    newest_scrape: i64,
) -> Option<Usage> {
    let window = t2 - t1;
    if window <= 0 || c2 < c1 || newest_scrape - t2 > FRESH_WINDOWS * window {
        return None;
    }
    if (t2 - mt).abs() > window {
        return None;
    }
    Some(Usage {
        time_ms: t2,
        window_ms: window,
        cpu_nanocores: ((c2 - c1) / (window as f64 / 1000.0) * 1e9).round() as i64,
        cpu_core_nanos: (c2 * 1e9).round() as i64,
        memory_bytes: mem.max(0.0) as i64,
    })
}

/// A CPU amount in nanocores as a canonical Kubernetes quantity (`12345678n`, `250m`, `2`): the
/// largest decimal suffix that keeps the number whole, as metrics-server's quantities print.
pub fn cpu_quantity(nanocores: i64) -> String {
    if nanocores == 0 {
        return "0".into();
    }
    let mut value = nanocores;
    for suffix in ["n", "u", "m"] {
        if value % 1000 != 0 {
            return format!("{value}{suffix}");
        }
        value /= 1000;
    }
    value.to_string()
}

/// Memory in bytes as a canonical binary quantity (`34560Ki`, `12Mi`): cgroups count whole pages,
/// so the working set is taken in whole 4 KiB pages, as a kubelet reports it.
pub fn memory_quantity(bytes: i64) -> String {
    let mut value = bytes - bytes.rem_euclid(4096);
    for suffix in ["", "Ki", "Mi", "Gi"] {
        if value == 0 || value % 1024 != 0 {
            return format!("{value}{suffix}");
        }
        value /= 1024;
    }
    format!("{value}Ti")
}

/// A duration as Go's `time.Duration.String()` prints a whole number of milliseconds (`15s`,
/// `1m0s`, `14.5s`), which is how metrics-server's `window` reads.
pub fn go_duration(ms: i64) -> String {
    let (m, rest) = (ms / 60_000, ms % 60_000);
    let (s, frac) = (rest / 1000, rest % 1000);
    let secs = if frac == 0 {
        format!("{s}s")
    } else {
        format!("{s}.{}s", format!("{frac:03}").trim_end_matches('0'))
    };
    match (m / 60, m % 60) {
        (0, 0) => secs,
        (0, m) => format!("{m}m{secs}"),
        (h, m) => format!("{h}h{m}m{secs}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use promql::StorageBuilder;

    /// cAdvisor series every 15 s from t = 0 to `until_s`: a container at `cores` with a fixed
    /// working set, on node `n1`.
    fn container(b: &mut StorageBuilder, pod: &str, cores: f64, until_s: i64) {
        let labels = [
            ("namespace", "ns"),
            ("pod", pod),
            ("container", "app"),
            ("node", "n1"),
            ("id", "/kubepods/x"),
        ];
        for t in (0..=until_s).step_by(15) {
            b.add_sample(CPU, labels, t * 1000, cores * t as f64);
            b.add_sample(MEMORY, labels, t * 1000, 10_000_000.0);
        }
    }

    #[test]
    fn rates_over_the_two_newest_samples_and_forgets_what_stopped() {
        let mut b = StorageBuilder::new();
        container(&mut b, "busy", 0.25, 300);
        container(&mut b, "gone", 0.5, 150);
        let st = b.build();
        // 20 s after the last scrape: still current, as a recording's now may be.
        let r = read(&st, 320_000, Scope::default());
        let busy = r.containers[&("ns".into(), "busy".into(), "app".into())];
        assert_eq!(busy.cpu_nanocores, 250_000_000);
        assert_eq!((busy.time_ms, busy.window_ms), (300_000, 15_000));
        assert_eq!(busy.memory_bytes, 10_000_000);
        // Scraped for the last time two and a half minutes before the newest scrape: gone.
        assert!(
            !r.containers
                .contains_key(&("ns".into(), "gone".into(), "app".into()))
        );
        // Scoped to another pod, nothing.
        let r = read(
            &st,
            320_000,
            Scope {
                pod: Some("nope"),
                ..Scope::default()
            },
        );
        assert!(r.containers.is_empty());
    }

    #[test]
    fn a_node_is_its_root_cgroup_or_else_the_sum_of_its_containers() {
        let mut b = StorageBuilder::new();
        container(&mut b, "a", 0.25, 60);
        container(&mut b, "b", 0.5, 60);
        let nodes = Scope {
            nodes: true,
            ..Scope::default()
        };
        let summed = read(&b.build(), 60_000, nodes);
        assert_eq!(summed.nodes["n1"].cpu_nanocores, 750_000_000);
        assert_eq!(summed.nodes["n1"].memory_bytes, 20_000_000);

        let mut b = StorageBuilder::new();
        container(&mut b, "a", 0.25, 60);
        for t in (0..=60).step_by(15) {
            let root = [("id", "/"), ("node", "n1")];
            b.add_sample(CPU, root, t * 1000, 2.0 * t as f64);
            b.add_sample(MEMORY, root, t * 1000, 3e9);
        }
        let rooted = read(&b.build(), 60_000, nodes);
        assert_eq!(rooted.nodes["n1"].cpu_nanocores, 2_000_000_000);
        assert_eq!(rooted.nodes["n1"].memory_bytes, 3_000_000_000);
    }

    #[test]
    fn a_counter_reset_leaves_no_rate() {
        let mut b = StorageBuilder::new();
        let l = [("namespace", "ns"), ("pod", "p"), ("container", "app")];
        b.add_sample(CPU, l, 0, 50.0);
        b.add_sample(CPU, l, 15_000, 1.0);
        b.add_sample(MEMORY, l, 15_000, 1.0);
        assert!(
            read(&b.build(), 15_000, Scope::default())
                .containers
                .is_empty()
        );
    }

    #[test]
    fn quantities_print_as_kubernetes_prints_them() {
        assert_eq!(cpu_quantity(12_345_678), "12345678n");
        assert_eq!(cpu_quantity(250_000_000), "250m");
        assert_eq!(cpu_quantity(12_345_000), "12345u");
        assert_eq!(cpu_quantity(2_000_000_000), "2");
        assert_eq!(cpu_quantity(0), "0");
        assert_eq!(memory_quantity(100), "0");
        assert_eq!(memory_quantity(34_560 * 1024), "34560Ki");
        assert_eq!(memory_quantity(12 * 1024 * 1024 + 100), "12Mi");
        assert_eq!(memory_quantity(4096 * 3 + 5), "12Ki");
        assert_eq!(go_duration(15_000), "15s");
        assert_eq!(go_duration(14_500), "14.5s");
        assert_eq!(go_duration(60_000), "1m0s");
    }
}
