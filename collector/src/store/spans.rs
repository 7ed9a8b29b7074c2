//! Spans by trace, service and operation, for the trace query APIs (Jaeger v1 and api_v3).
//! A span is visible once it has started: every query names the instant it looks from.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Deref;
use std::sync::Arc;

use schemas::tables::{Labels, SpanRow};

/// A trace search, in recorded nanoseconds. Conditions hold for one span; a trace matches when
/// any of its visible spans does (as Jaeger's stores search).
#[derive(Debug, Clone, Default)]
pub struct TraceQuery {
    pub service: Option<String>,
    pub operation: Option<String>,
    /// Every tag must equal the span's attribute, resource attribute or derived tag.
    pub tags: BTreeMap<String, String>,
    pub start_min_ns: i64,
    pub start_max_ns: i64,
    pub duration_min_ns: Option<i64>,
    pub duration_max_ns: Option<i64>,
    /// At most this many traces, most recent first.
    pub limit: usize,
}

/// A trace id as looked up: lower-case hex, left-padded to 32 digits (Jaeger accepts the short
/// 16-digit form of 64-bit ids).
pub fn trace_key(id: &str) -> String {
    format!("{:0>32}", id.to_ascii_lowercase())
}

/// A stored span with its resource attributes (kept once per distinct resource: every span of a
/// process repeats them).
#[derive(Debug, Clone, Copy)]
pub struct Span<'a> {
    pub row: &'a SpanRow,
    pub resource: &'a Labels,
}

impl Deref for Span<'_> {
    type Target = SpanRow;
    fn deref(&self) -> &SpanRow {
        self.row
    }
}

#[derive(Debug, Default)]
pub struct SpanStore {
    /// Sorted by start time; `resource_attributes` moved out into `resources`.
    spans: Vec<SpanRow>,
    resources: Vec<Arc<Labels>>,
    by_trace: HashMap<String, Vec<usize>>,
    /// Span indices per service, in start order.
    by_service: BTreeMap<String, Vec<usize>>,
    /// When each (service, operation, kind) was first seen.
    operations: BTreeMap<(String, String, String), i64>,
}

impl SpanStore {
    pub fn new(rows: impl IntoIterator<Item = SpanRow>) -> Self {
        let mut spans: Vec<SpanRow> = rows.into_iter().collect();
        spans.sort_by(|a, b| (a.start_ns, &a.span_id).cmp(&(b.start_ns, &b.span_id)));
        let mut store = SpanStore::default();
        let mut interned: HashMap<Labels, Arc<Labels>> = HashMap::new();
        for s in &mut spans {
            let r = std::mem::take(&mut s.resource_attributes);
            let shared = interned
                .entry(r)
                .or_insert_with_key(|r| Arc::new(r.clone()));
            store.resources.push(shared.clone());
        }
        for (i, s) in spans.iter().enumerate() {
            store
                .by_trace
                .entry(trace_key(&s.trace_id))
                .or_default()
                .push(i);
            store
                .by_service
                .entry(s.service.clone())
                .or_default()
                .push(i);
            store
                .operations
                .entry((s.service.clone(), s.name.clone(), s.kind.clone()))
                .or_insert(s.start_ns);
        }
        store.spans = spans;
        store
    }

    /// Services with a span started by `now`, sorted.
    pub fn services(&self, now: i64) -> Vec<String> {
        let seen: BTreeSet<&str> = self
            .operations
            .iter()
            .filter(|(_, first)| **first <= now)
            .map(|((svc, _, _), _)| svc.as_str())
            .collect();
        seen.into_iter().map(str::to_string).collect()
    }

    /// (operation, span kind) of a service, sorted; `kind` filters when given.
    pub fn operations(&self, service: &str, kind: Option<&str>, now: i64) -> Vec<(String, String)> {
        self.operations
            .iter()
            .filter(|((svc, _, k), first)| {
                svc == service && **first <= now && kind.is_none_or(|want| want == k)
            })
            .map(|((_, op, k), _)| (op.clone(), k.clone()))
            .collect()
    }

    fn span(&self, i: usize) -> Span<'_> {
        Span {
            row: &self.spans[i],
            resource: &self.resources[i],
        }
    }

    /// The visible spans of a trace, in start order; `None` when none is visible.
    pub fn trace(&self, trace_id: &str, now: i64) -> Option<Vec<Span<'_>>> {
        let spans: Vec<Span> = self
            .by_trace
            .get(&trace_key(trace_id))?
            .iter()
            .map(|&i| self.span(i))
            .filter(|s| s.start_ns <= now)
            .collect();
        (!spans.is_empty()).then_some(spans)
    }

    /// Trace ids matching a search, most recently matched first; `tags_of` gives a span's
    /// searchable tags beyond its attributes (the facades derive kind and status tags).
    pub fn find_traces(
        &self,
        q: &TraceQuery,
        now: i64,
        derived_tags: impl Fn(&SpanRow) -> Vec<(String, String)>,
    ) -> Vec<String> {
        let upto = q.start_max_ns.min(now);
        let candidates: Box<dyn Iterator<Item = usize>> = match &q.service {
            Some(svc) => match self.by_service.get(svc) {
                Some(idx) => {
                    let lo = idx.partition_point(|&i| self.spans[i].start_ns < q.start_min_ns);
                    let hi = idx.partition_point(|&i| self.spans[i].start_ns <= upto);
                    Box::new(idx[lo..hi.max(lo)].iter().copied())
                }
                None => Box::new(std::iter::empty()),
            },
            None => {
                let lo = self.spans.partition_point(|s| s.start_ns < q.start_min_ns);
                let hi = self.spans.partition_point(|s| s.start_ns <= upto);
                Box::new(lo..hi.max(lo))
            }
        };
        // Newest match per trace.
        let mut latest: HashMap<&str, i64> = HashMap::new();
        for i in candidates {
            let s = &self.spans[i];
            if q.operation.as_ref().is_some_and(|op| *op != s.name)
                || q.duration_min_ns.is_some_and(|d| s.duration_ns < d)
                || q.duration_max_ns.is_some_and(|d| s.duration_ns > d)
            {
                continue;
            }
            if !q.tags.is_empty() {
                let derived = derived_tags(s);
                let has = |k: &String, v: &String| {
                    s.attributes.get(k) == Some(v)
                        || self.resources[i].get(k) == Some(v)
                        || derived.iter().any(|(dk, dv)| dk == k && dv == v)
                };
                if !q.tags.iter().all(|(k, v)| has(k, v)) {
                    continue;
                }
            }
            let t = latest.entry(s.trace_id.as_str()).or_insert(s.start_ns);
            *t = (*t).max(s.start_ns);
        }
        let mut found: Vec<(&str, i64)> = latest.into_iter().collect();
        found.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        found.truncate(q.limit);
        found.into_iter().map(|(id, _)| trace_key(id)).collect()
    }

    /// Calls between services: (parent service, child service) → count, over traces with a
    /// visible span started in `[from, to]`, as Jaeger derives dependencies from spans.
    pub fn dependencies(&self, from: i64, to: i64, now: i64) -> BTreeMap<(String, String), u64> {
        let upto = to.min(now);
        let lo = self.spans.partition_point(|s| s.start_ns < from);
        let hi = self.spans.partition_point(|s| s.start_ns <= upto);
        let traces: BTreeSet<&str> = self.spans[lo..hi.max(lo)]
            .iter()
            .map(|s| s.trace_id.as_str())
            .collect();
        let mut links = BTreeMap::new();
        for id in traces {
            let Some(spans) = self.trace(&trace_key(id), now) else {
                continue;
            };
            let by_id: HashMap<&str, &SpanRow> =
                spans.iter().map(|s| (s.span_id.as_str(), s.row)).collect();
            for s in &spans {
                let Some(parent) = s.parent_span_id.as_deref().and_then(|p| by_id.get(p)) else {
                    continue;
                };
                if parent.service != s.service {
                    *links
                        .entry((parent.service.clone(), s.service.clone()))
                        .or_insert(0) += 1;
                }
            }
        }
        links
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(
        trace: &str,
        id: &str,
        parent: Option<&str>,
        svc: &str,
        op: &str,
        start: i64,
        dur: i64,
    ) -> SpanRow {
        SpanRow {
            trace_id: trace.into(),
            span_id: id.into(),
            parent_span_id: parent.map(str::to_string),
            service: svc.into(),
            name: op.into(),
            kind: if parent.is_some() { "server" } else { "client" }.into(),
            start_ns: start,
            duration_ns: dur,
            status_code: "unset".into(),
            status_message: None,
            resource_attributes: Default::default(),
            attributes: [("http.status_code".to_string(), (200 + start).to_string())].into(),
        }
    }

    fn store() -> SpanStore {
        SpanStore::new([
            span("t1", "a", None, "front", "GET /", 10, 100),
            span("t1", "b", Some("a"), "cart", "GetCart", 20, 50),
            span("t2", "c", None, "front", "GET /", 30, 300),
            span("t2", "d", Some("c"), "cart", "GetCart", 40, 200),
            span("t3", "e", None, "front", "POST /", 99, 10),
        ])
    }

    #[test]
    fn searches_from_the_virtual_now() {
        let s = store();
        assert_eq!(s.services(50), ["cart", "front"]);
        assert_eq!(s.services(15), ["front"]);
        assert_eq!(
            s.operations("front", None, 50),
            [("GET /".to_string(), "client".to_string())]
        );
        let q = TraceQuery {
            service: Some("cart".into()),
            start_max_ns: i64::MAX,
            limit: 10,
            ..Default::default()
        };
        let none = |_: &SpanRow| Vec::new();
        let ids = |v: &[&str]| -> Vec<String> { v.iter().map(|id| trace_key(id)).collect() };
        assert_eq!(
            s.find_traces(&q, 50, none),
            ids(&["t2", "t1"]),
            "newest first"
        );
        let slow = TraceQuery {
            duration_min_ns: Some(100),
            ..q.clone()
        };
        assert_eq!(s.find_traces(&slow, 50, none), ids(&["t2"]));
        let tagged = TraceQuery {
            tags: [("http.status_code".to_string(), "220".to_string())].into(),
            ..q.clone()
        };
        assert_eq!(s.find_traces(&tagged, 50, none), ids(&["t1"]));
        let all = TraceQuery {
            service: None,
            ..q.clone()
        };
        assert_eq!(
            s.find_traces(&all, 50, none),
            ids(&["t2", "t1"]),
            "t3 starts after now"
        );
        assert_eq!(s.trace("t2", 35).unwrap().len(), 1, "child not started yet");
        assert!(s.trace("t3", 50).is_none());
        let deps = s.dependencies(0, 100, 100);
        assert_eq!(
            deps.get(&("front".to_string(), "cart".to_string())),
            Some(&2)
        );
    }
}
