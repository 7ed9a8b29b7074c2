//! `get_trace_error_tree` over the spans table: each trace's service path (the longest chain of
//! calls from its root, repeated services collapsed), traces grouped by path, and per hop the
//! traffic, error rate and p99 latency before and after a pivot time.
//!
//! Where ITBench's version breaks on raw data this one does not: latency comes from the span
//! duration (ITBench reads a `duration_ms` column raw traces do not have, so every p99 is 0);
//! `span_kind` filters the hop statistics (ITBench ignores it); a call that never reached its
//! server (connection refused, no endpoints) is a hop of the service it was for, named by the
//! client span's peer (`peer.service`, `net.peer.name`, `server.address`), so the path ends at
//! the service that failed rather than at its caller; and the root-cause suspect is the deepest
//! hop with the highest error rate, not the first.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use polars::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::cache::Derived;
use crate::frame::{Entries, collect, each_map, entry};
use crate::params::{de_f64, parse_duration, parse_time};
use crate::{Error, Result, Source};
use schemas::tables::Table;
use schemas::tables::columns::spans as c;

pub const DESCRIPTION: &str = "Critical-path analysis of distributed traces: every trace's service path (a -> b -> c), paths with traffic rates (all_paths), and for paths whose error rate or p99 latency changed past the thresholds between [pivot_time - delta_time, pivot_time) and [pivot_time, pivot_time + delta_time), per-hop traffic, error rate and p99 latency with a root_cause_suspect. A call that never reached its server ends the path at the service it was for. Example: pivot_time='2025-12-15T17:30:00Z', delta_time='5m'. Example: service_name='checkout' (only paths through checkout).";

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Params {
    /// Ignored: the traces are the session's (accepted so ITBench prompts work).
    #[serde(default, rename = "trace_file")]
    pub _trace_file: Option<Value>,
    /// Only paths that contain this service.
    #[serde(default)]
    pub service_name: Option<String>,
    /// Only spans of this kind count in the hop statistics: Client, Server, Internal, Producer, Consumer.
    #[serde(default)]
    pub span_kind: Option<String>,
    /// ISO 8601 pivot for the before/after comparison (highly recommended).
    #[serde(default)]
    pub pivot_time: Option<String>,
    /// Width of each window: 5m (default), 10m, 1h.
    #[serde(default)]
    pub delta_time: Option<String>,
    /// Error-rate change (percent) that marks a path (default 10).
    #[serde(default, deserialize_with = "de_f64")]
    #[schemars(with = "Option<f64>")]
    pub error_threshold_pct: Option<f64>,
    /// p99 latency change (percent) that marks a path (default 10).
    #[serde(default, deserialize_with = "de_f64")]
    #[schemars(with = "Option<f64>")]
    pub latency_threshold_pct: Option<f64>,
}

/// One span as the path analysis needs it. Text that many spans share (their trace, service,
/// kind, peer and protocol) is shared.
#[derive(Debug, Clone)]
pub struct Span {
    pub trace: Arc<str>,
    pub id: String,
    pub parent: Option<String>,
    pub service: Arc<str>,
    pub kind: Arc<str>,
    pub start: i64,
    pub duration_ms: f64,
    pub error: bool,
    pub message: Option<String>,
    /// The service a client span's attributes name as its peer.
    pub peer: Option<Arc<str>>,
}

/// One shared copy of each text.
#[derive(Default)]
struct Interner(PlHashMap<String, Arc<str>>);

impl Interner {
    fn get(&mut self, text: &str) -> Arc<str> {
        if let Some(shared) = self.0.get(text) {
            return shared.clone();
        }
        let shared: Arc<str> = text.into();
        self.0.insert(text.to_string(), shared.clone());
        shared
    }
}

/// The service a peer address names: `geo.hotel-reservation.svc.cluster.local:8083` → `geo`;
/// nothing for an IP address.
pub fn peer_service(peer: &str) -> Option<String> {
    let host = peer.trim();
    let host = host.rsplit_once(':').map_or(host, |(h, port)| {
        if port.chars().all(|c| c.is_ascii_digit()) {
            h
        } else {
            host
        }
    });
    let first = host.split('.').next()?.trim();
    let is_ip = host.chars().all(|c| c.is_ascii_digit() || c == '.') || host.contains(':');
    (!first.is_empty() && !is_ip).then(|| first.to_string())
}

/// Every span, ordered by trace then start (kept until the spans change).
pub struct AllSpans(Vec<Span>);

impl AllSpans {
    /// The spans whose start is in `[from, to)` (all when open), ordered by trace.
    pub fn within(&self, from: Option<i64>, to: Option<i64>) -> Vec<&Span> {
        self.0
            .iter()
            .filter(|s| from.is_none_or(|f| s.start >= f) && to.is_none_or(|t| s.start < t))
            .collect()
    }
}

impl Derived for AllSpans {
    const TABLES: &'static [Table] = &[Table::Spans];

    fn derive(source: &Source) -> Result<AllSpans> {
        read(source).map(AllSpans)
    }
}

/// Every span the source recorded, ordered by trace then start.
pub fn load(source: &Source) -> Result<Arc<AllSpans>> {
    source.derived()
}

/// What a span's attributes say about the call it makes: the peer it names (`peer.service`,
/// `net.peer.name` or `server.address`, the first present) and the protocol (`rpc.system`,
/// `db.system`, `messaging.system`, or http for a span with `http.method`).
pub fn link_attributes<'a>(attributes: &Entries<'a>) -> (Option<&'a str>, Option<&'a str>) {
    let peer = entry(
        attributes,
        &["peer.service", "net.peer.name", "server.address"],
    );
    let protocol = entry(attributes, &["rpc.system", "db.system", "messaging.system"])
        .or_else(|| entry(attributes, &["http.method"]).map(|_| "http"));
    (peer, protocol)
}

fn text_of(v: Option<Option<&str>>) -> &str {
    v.flatten().unwrap_or_default()
}

fn read(source: &Source) -> Result<Vec<Span>> {
    let df = collect(source.scan(Table::Spans)?.select([
        col(c::TRACE_ID),
        col(c::SPAN_ID),
        col(c::PARENT_SPAN_ID),
        col(c::SERVICE),
        col(c::KIND),
        col(c::START).cast(DataType::Int64),
        col(c::DURATION).cast(DataType::Int64),
        col(c::STATUS_CODE),
        col(c::STATUS_MESSAGE),
        col(c::ATTRIBUTES),
    ]))?;
    let text = |name: &str| Ok::<_, Error>(df.column(name)?.str()?.iter());
    let (mut traces, mut ids, mut parents) = (
        text(c::TRACE_ID)?,
        text(c::SPAN_ID)?,
        text(c::PARENT_SPAN_ID)?,
    );
    let (mut services, mut kinds) = (text(c::SERVICE)?, text(c::KIND)?);
    let (mut statuses, mut messages) = (text(c::STATUS_CODE)?, text(c::STATUS_MESSAGE)?);
    let mut starts = df.column(c::START)?.i64()?.iter();
    let mut durations = df.column(c::DURATION)?.i64()?.iter();
    let present =
        |v: Option<Option<&str>>| v.flatten().filter(|s| !s.is_empty()).map(str::to_string);
    let mut shared = Interner::default();
    // Each span's trace as a number, so that ordering by trace compares numbers.
    let mut trace_numbers: PlHashMap<&str, u32> = PlHashMap::default();
    let mut numbers = Vec::with_capacity(df.height());
    let mut spans: Vec<Span> = Vec::with_capacity(df.height());
    each_map(&df, c::ATTRIBUTES, |attributes, _| {
        let trace = text_of(traces.next());
        let next = trace_numbers.len() as u32;
        numbers.push(*trace_numbers.entry(trace).or_insert(next));
        let kind = text_of(kinds.next());
        let kind = if kind.bytes().any(|b| b.is_ascii_uppercase()) {
            shared.get(&kind.to_ascii_lowercase())
        } else {
            shared.get(kind)
        };
        let peer = link_attributes(attributes).0.and_then(peer_service);
        spans.push(Span {
            trace: shared.get(trace),
            id: text_of(ids.next()).to_string(),
            parent: present(parents.next()),
            service: shared.get(text_of(services.next())),
            kind,
            start: starts.next().flatten().unwrap_or(0),
            duration_ms: durations.next().flatten().unwrap_or(0) as f64 / 1e6,
            error: text_of(statuses.next()).eq_ignore_ascii_case("error"),
            message: present(messages.next()),
            peer: peer.map(|p| shared.get(&p)),
        })
    })?;
    // Ordered by trace id, then start (stable: spans of one instant keep the table's order).
    let mut by_id: Vec<(&str, u32)> = trace_numbers.into_iter().collect();
    by_id.sort_unstable();
    let mut rank = vec![0u32; by_id.len()];
    for (r, (_, number)) in by_id.iter().enumerate() {
        rank[*number as usize] = r as u32;
    }
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by_key(|i| (rank[numbers[*i] as usize], spans[*i].start));
    let mut slots: Vec<Option<Span>> = spans.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|i| slots[i].take()).collect())
}

/// One trace's spans with each span's service as the path sees it: a client or producer span
/// with no child span is a hop of the service it called.
pub struct Trace<'a> {
    pub spans: Vec<&'a Span>,
    pub hop_service: Vec<Arc<str>>,
    children: Vec<Vec<usize>>,
    root: Option<usize>,
}

/// The traces of spans sorted by trace, one at a time.
pub fn each_trace<'a, 's>(spans: &'s [&'a Span]) -> impl Iterator<Item = Trace<'a>> + 's
where
    'a: 's,
{
    spans
        .chunk_by(|a, b| a.trace == b.trace)
        .map(|one| Trace::new(one.to_vec()))
}

impl<'a> Trace<'a> {
    pub fn new(spans: Vec<&'a Span>) -> Trace<'a> {
        let index: HashMap<&str, usize> = spans
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.as_str(), i))
            .collect();
        let mut children = vec![Vec::new(); spans.len()];
        let mut root = None;
        for (i, s) in spans.iter().enumerate() {
            match s.parent.as_deref().and_then(|p| index.get(p)) {
                Some(&p) if p != i => children[p].push(i),
                _ => {
                    if root.is_none_or(|r: usize| spans[r].start > s.start) {
                        root = Some(i);
                    }
                }
            }
        }
        let hop_service = spans
            .iter()
            .enumerate()
            .map(|(i, s)| match &s.peer {
                Some(peer)
                    if children[i].is_empty()
                        && matches!(&*s.kind, "client" | "producer")
                        && *peer != s.service =>
                {
                    peer.clone()
                }
                _ => s.service.clone(),
            })
            .collect();
        Trace {
            spans,
            hop_service,
            children,
            root,
        }
    }

    /// The services along the chain from the root that leads to an error when one does (the
    /// deepest error's), else along the longest chain (ITBench's rule); consecutive repeats
    /// collapsed. Following the error matters: a call that fails early often leaves a longer,
    /// healthy sibling branch, and the longest chain would hide where the trace failed.
    pub fn path(&self) -> Vec<String> {
        let Some(root) = self.root else {
            return Vec::new();
        };
        // Spans in breadth-first order, so children come after their parents (iteratively:
        // traces can be deep).
        let mut order = vec![root];
        let mut i = 0;
        while i < order.len() {
            order.extend(self.children[order[i]].iter().copied());
            i += 1;
        }
        // Per span: whether an error is at or below it, and the length of the chain below it.
        let mut best = vec![(false, 0usize); self.spans.len()];
        let mut next: Vec<Option<usize>> = vec![None; self.spans.len()];
        for &s in order.iter().rev() {
            let own = self.spans[s].error;
            let mut pick: Option<(bool, usize, usize)> = None;
            for &ch in &self.children[s] {
                let cand = (best[ch].0, best[ch].1 + 1, ch);
                if pick.is_none_or(|p| (cand.0, cand.1) > (p.0, p.1)) {
                    pick = Some(cand);
                }
            }
            best[s] = match pick {
                Some((err, depth, ch)) => {
                    next[s] = Some(ch);
                    (own || err, depth)
                }
                None => (own, 0),
            };
        }
        let mut path: Vec<String> = Vec::new();
        let mut at = Some(root);
        while let Some(s) = at {
            if path.last().map(String::as_str) != Some(&*self.hop_service[s]) {
                path.push(self.hop_service[s].to_string());
            }
            at = next[s];
        }
        path
    }
}

#[derive(Debug, Default, Clone)]
struct Window {
    count: u64,
    errors: u64,
    latencies: Vec<f64>,
    /// The traces with spans here, by their order in the analysis.
    traces: BTreeSet<usize>,
}

impl Window {
    fn add(&mut self, s: &Span, trace: usize) {
        self.count += 1;
        self.errors += u64::from(s.error);
        self.latencies.push(s.duration_ms);
        self.traces.insert(trace);
    }
    fn error_pct(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.errors as f64 * 100.0 / self.count as f64
        }
    }
    fn p99(&self) -> f64 {
        percentile(&self.latencies, 0.99)
    }
    fn merge(&mut self, o: &Window) {
        self.count += o.count;
        self.errors += o.errors;
        self.latencies.extend_from_slice(&o.latencies);
        self.traces.extend(o.traces.iter().copied());
    }
}

/// ITBench's nearest-rank percentile: the value at index ⌊n·q⌋ of the sorted values.
pub fn percentile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 * q) as usize).min(v.len() - 1);
    (v[i] * 100.0).round() / 100.0
}

fn delta_pct(pre: f64, post: f64) -> f64 {
    if pre == 0.0 {
        if post > 0.0 { f64::INFINITY } else { 0.0 }
    } else {
        ((post - pre) / pre * 1000.0).round() / 10.0
    }
}

/// ITBench's classification of a path: NEW, DISAPPEARED, CRITICAL, WARNING or unchanged.
fn severity(pre: &Window, post: &Window, err_thr: f64, lat_thr: f64) -> Option<&'static str> {
    match (pre.count, post.count) {
        (0, 0) => return None,
        (0, _) => return Some("NEW"),
        (_, 0) => return Some("DISAPPEARED"),
        _ => {}
    }
    let (pre_err, post_err) = (pre.error_pct(), post.error_pct());
    let (pre_lat, post_lat) = (pre.p99(), post.p99());
    let err_change = if pre_err > 0.0 || post_err > 0.0 {
        delta_pct(pre_err, post_err).abs()
    } else {
        0.0
    };
    let lat_change = if pre_lat > 0.0 || post_lat > 0.0 {
        delta_pct(pre_lat, post_lat).abs()
    } else {
        0.0
    };
    let err_exceeds = err_change > err_thr || (pre_err == 0.0 && post_err > err_thr);
    if !err_exceeds && lat_change <= lat_thr {
        return None;
    }
    if err_change > 50.0 || post_err > 50.0 || lat_change > 100.0 {
        Some("CRITICAL")
    } else {
        Some("WARNING")
    }
}

fn rate(count: u64, secs: f64) -> String {
    let r = if secs > 0.0 { count as f64 / secs } else { 0.0 };
    if r < 1.0 {
        format!("{r:.2}/s")
    } else {
        format!("{r:.0}/s")
    }
}

fn latency(ms: f64) -> String {
    if ms < 1.0 {
        format!("{ms:.2}ms")
    } else if ms < 1000.0 {
        format!("{ms:.0}ms")
    } else if ms < 60_000.0 {
        format!("{:.1}s", ms / 1000.0)
    } else {
        format!("{:.1}m", ms / 60_000.0)
    }
}

/// Per path: the services and, per service, the spans before and after the pivot.
#[derive(Default)]
struct PathStats {
    services: Vec<String>,
    hops: BTreeMap<String, (Window, Window)>,
    errors: BTreeSet<String>,
}

pub fn error_tree(source: &Source, p: Params) -> Result<Value> {
    let reading = source.reading();
    let delta_text = p.delta_time.clone().unwrap_or_else(|| "5m".into());
    let delta = parse_duration(&delta_text, "delta_time")?;
    let pivot = p
        .pivot_time
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .map(|s| parse_time(s, "pivot_time").map(|t| reading.recorded(t)))
        .transpose()?;
    let err_thr = p.error_threshold_pct.unwrap_or(10.0);
    let lat_thr = p.latency_threshold_pct.unwrap_or(10.0);
    let kind_filter = p
        .span_kind
        .as_deref()
        .map(str::to_ascii_lowercase)
        .filter(|k| !k.is_empty());
    let all = load(source)?;
    let spans = match pivot {
        Some(t) => all.within(Some(t - delta), Some(t + delta)),
        None => all.within(None, None),
    };
    if spans.is_empty() {
        return Ok(
            json!({"message": "No traces found in the window", "all_paths": [], "critical_paths": []}),
        );
    }
    let (first, last) = spans.iter().fold((i64::MAX, i64::MIN), |(a, b), s| {
        (a.min(s.start), b.max(s.start))
    });
    let window_secs = match pivot {
        Some(_) => delta as f64 / 1e9,
        None => ((last - first) as f64 / 1e9).max(1.0),
    };
    let is_post = |t: i64| pivot.is_none_or(|p| t >= p);
    let mut paths: BTreeMap<String, PathStats> = BTreeMap::new();
    let mut ordinal = 0;
    for trace in each_trace(&spans) {
        let path = trace.path();
        if path.is_empty() {
            continue;
        }
        if let Some(svc) = p.service_name.as_deref().filter(|s| !s.is_empty())
            && !path.iter().any(|h| h == svc)
        {
            continue;
        }
        let key = path.join(" → ");
        let stats = paths.entry(key).or_default();
        stats.services = path;
        ordinal += 1;
        for (s, svc) in trace.spans.iter().zip(&trace.hop_service) {
            if kind_filter.as_deref().is_some_and(|k| k != &*s.kind) {
                continue;
            }
            let hop = stats.hops.entry(svc.to_string()).or_default();
            if is_post(s.start) {
                hop.1.add(s, ordinal)
            } else {
                hop.0.add(s, ordinal)
            }
            if s.error
                && let Some(m) = &s.message
            {
                stats.errors.insert(m.chars().take(200).collect());
            }
        }
    }
    if paths.is_empty() {
        let msg = match &p.service_name {
            Some(s) => format!("No traces found containing service: {s}"),
            None => "No valid trace paths found".to_string(),
        };
        return Ok(json!({"message": msg, "all_paths": [], "critical_paths": []}));
    }
    let mut listed: Vec<(u8, u64, String)> = Vec::new();
    let mut critical: Vec<(u8, u64, Value)> = Vec::new();
    let (mut total_pre, mut total_post) = (Window::default(), Window::default());
    for (key, stats) in &paths {
        let (mut pre, mut post) = (Window::default(), Window::default());
        for svc in &stats.services {
            if let Some((a, b)) = stats.hops.get(svc) {
                pre.merge(a);
                post.merge(b);
            }
        }
        total_pre.merge(&pre);
        total_post.merge(&post);
        let sev = severity(&pre, &post, err_thr, lat_thr);
        let rank = match sev {
            Some("CRITICAL") => 0,
            Some("WARNING") => 1,
            Some("NEW") => 2,
            Some("DISAPPEARED") => 3,
            _ => 4,
        };
        let mut line = format!("{key} [{}]", rate(post.count, window_secs));
        if let Some(s) = sev {
            line.push_str(&format!(" ({s})"));
        }
        listed.push((rank, post.count, line));
        if let (Some(s), Some(_)) = (sev, pivot) {
            critical.push((rank, post.count, critical_path(key, s, stats, window_secs)));
        }
    }
    listed.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    critical.sort_by(|a, b| a.0.min(1).cmp(&b.0.min(1)).then(b.1.cmp(&a.1)));
    let mut out = json!({
        "_description": {
            "overview": "Critical path analysis - stats computed per unique trace path using trace_id stitching",
            "time_windows": {
                "pre": if pivot.is_some() { format!("[pivot_time - {delta_text}, pivot_time)") } else { "N/A".into() },
                "post": if pivot.is_some() { format!("[pivot_time, pivot_time + {delta_text})") } else { "All data".into() },
            },
            "thresholds": {"error_rate_change_pct": err_thr, "latency_change_pct": lat_thr},
            "note": "Each path groups traces that follow the same service chain; a call that never reached its server is a hop of the service it called. Stats are computed from spans within those traces.",
        },
    });
    if pivot.is_none() {
        out["warnings"] = json!([
            "pivot_time not provided - comparative analysis disabled. Providing pivot_time is highly encouraged for incident investigation."
        ]);
    } else {
        let side = |w: &Window| {
            (w.count > 0).then(|| {
                json!({
                    "trace_count": w.traces.len(),
                    "span_count": w.count,
                    "error_rate_pct": (w.error_pct() * 10.0).round() / 10.0,
                    "latency_p99_ms": w.p99(),
                })
            })
        };
        out["summary"] = json!({"pre": side(&total_pre), "post": side(&total_post)});
    }
    out["all_paths"] = listed
        .into_iter()
        .take(50)
        .map(|(_, _, l)| Value::String(l))
        .collect();
    out["critical_paths"] = critical.into_iter().map(|(_, _, v)| v).collect();
    out["filters_applied"] = json!({
        "service_name": p.service_name,
        "span_kind": p.span_kind,
        "pivot_time": p.pivot_time,
        "delta_time": p.pivot_time.as_ref().map(|_| delta_text.clone()),
        "error_threshold_pct": err_thr,
        "latency_threshold_pct": lat_thr,
    });
    Ok(out)
}

fn critical_path(key: &str, severity: &str, stats: &PathStats, secs: f64) -> Value {
    let mut suspect: Option<(f64, &str)> = None;
    let hops: Vec<Value> = stats
        .services
        .iter()
        .map(|svc| {
            let (pre, post) = stats.hops.get(svc).cloned().unwrap_or_default();
            let post_err = post.error_pct();
            // The deepest of the hops with the highest error rate: a failure shows in every
            // caller above the service where it starts.
            if post_err > 50.0 && suspect.is_none_or(|(best, _)| post_err.round() >= best.round()) {
                suspect = Some((post_err, svc.as_str()));
            }
            json!({
                "service": svc,
                "traffic": format!("{} → {}", rate(pre.count, secs), rate(post.count, secs)),
                "error_rate": format!("{:.0}% → {:.0}%", pre.error_pct(), post_err),
                "latency_p99": format!("{} → {}", latency(pre.p99()), latency(post.p99())),
            })
        })
        .collect();
    let mut path = json!({
        "path": key,
        "severity": severity,
        "hops": hops,
        "sample_errors": stats.errors.iter().take(3).collect::<Vec<_>>(),
    });
    if let Some((err, svc)) = suspect {
        path["root_cause_suspect"] =
            json!({"service": svc, "reason": format!("{err:.0}% error rate")});
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(id: &str, parent: Option<&str>, service: &str, kind: &str, peer: Option<&str>) -> Span {
        Span {
            trace: "t".into(),
            id: id.into(),
            parent: parent.map(str::to_string),
            service: service.into(),
            kind: kind.into(),
            start: id.len() as i64,
            duration_ms: 1.0,
            error: false,
            message: None,
            peer: peer.and_then(peer_service).map(Into::into),
        }
    }

    #[test]
    fn a_call_that_never_reached_its_server_ends_the_path_at_the_callee() {
        let spans = [
            span("a", None, "frontend", "server", None),
            span("ab", Some("a"), "frontend", "client", Some("search")),
            span("abc", Some("ab"), "search", "server", None),
            span(
                "abcd",
                Some("abc"),
                "search",
                "client",
                Some("geo.hotel.svc.cluster.local"),
            ),
        ];
        let t = Trace::new(spans.iter().collect());
        assert_eq!(t.path(), ["frontend", "search", "geo"]);
    }

    #[test]
    fn the_path_follows_the_error_rather_than_the_longest_branch() {
        let mut failed = span("abcd", Some("abc"), "search", "client", Some("geo"));
        failed.error = true;
        let spans = [
            span("a", None, "frontend", "server", None),
            span("ab", Some("a"), "frontend", "client", Some("search")),
            span("abc", Some("ab"), "search", "server", None),
            failed,
            span("abce", Some("abc"), "search", "client", Some("rate")),
            span("abcef", Some("abce"), "rate", "server", None),
            span(
                "abcefg",
                Some("abcef"),
                "rate",
                "client",
                Some("memcached-rate"),
            ),
        ];
        let t = Trace::new(spans.iter().collect());
        assert_eq!(t.path(), ["frontend", "search", "geo"]);
        let healthy: Vec<&Span> = spans.iter().filter(|s| !s.error).collect();
        assert_eq!(
            Trace::new(healthy).path(),
            ["frontend", "search", "rate", "memcached-rate"]
        );
    }

    #[test]
    fn peers_name_services_not_addresses() {
        assert_eq!(peer_service("geo:8083").as_deref(), Some("geo"));
        assert_eq!(
            peer_service("mongodb-geo.ns.svc").as_deref(),
            Some("mongodb-geo")
        );
        assert_eq!(peer_service("10.0.0.1"), None);
        assert_eq!(percentile(&[3.0, 1.0, 2.0], 0.99), 3.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
