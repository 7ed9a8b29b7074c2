//! Spans by trace, service and operation, for the trace query APIs (Jaeger v1 and api_v3).
//! A span is visible once it has started: every query names the instant it looks from.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use schemas::tables::SpanRow;

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

/// When each (service, operation, span kind) was first seen: the services and operations lists.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Catalog {
    operations: BTreeMap<(String, String, String), i64>,
}

impl Catalog {
    pub fn add(&mut self, service: &str, name: &str, kind: &str, start_ns: i64) {
        match self
            .operations
            .get_mut(&(service.to_string(), name.to_string(), kind.to_string()))
        {
            Some(first) => *first = (*first).min(start_ns),
            None => {
                self.operations.insert(
                    (service.to_string(), name.to_string(), kind.to_string()),
                    start_ns,
                );
            }
        }
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
}

/// Tags a span carries beyond its attributes (the facades derive kind and status tags).
pub type DerivedTags = fn(&SpanRow) -> Vec<(String, String)>;

/// Whether one span meets a search's conditions other than service and start time.
pub fn span_matches(q: &TraceQuery, s: &SpanRow, derived: DerivedTags) -> bool {
    if q.operation.as_ref().is_some_and(|op| *op != s.name)
        || q.duration_min_ns.is_some_and(|d| s.duration_ns < d)
        || q.duration_max_ns.is_some_and(|d| s.duration_ns > d)
    {
        return false;
    }
    if q.tags.is_empty() {
        return true;
    }
    let extra = derived(s);
    q.tags.iter().all(|(k, v)| {
        s.attributes.get(k) == Some(v)
            || s.resource_attributes.get(k) == Some(v)
            || extra.iter().any(|(dk, dv)| dk == k && dv == v)
    })
}

/// The newest matching span of each trace seen so far; the answer is the `limit` newest traces.
#[derive(Debug, Default)]
pub struct Newest {
    latest: HashMap<String, i64>,
}

impl Newest {
    pub fn add(&mut self, trace_id: &str, start_ns: i64) {
        match self.latest.get_mut(trace_id) {
            Some(t) => *t = (*t).max(start_ns),
            None => {
                self.latest.insert(trace_id.to_string(), start_ns);
            }
        }
    }

    /// The `limit` newest traces: most recent match first, then by id.
    pub fn top(&self, limit: usize) -> Vec<(&str, i64)> {
        let mut found: Vec<(&str, i64)> = self
            .latest
            .iter()
            .map(|(id, t)| (id.as_str(), *t))
            .collect();
        found.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        found.truncate(limit);
        found
    }

    /// Whether spans starting at or before `t` can no longer change the answer: `limit` traces
    /// already have a newer match.
    pub fn settled_above(&self, limit: usize, t: i64) -> bool {
        limit == 0 || self.top(limit).get(limit - 1).is_some_and(|k| k.1 > t)
    }

    pub fn ids(&self, limit: usize) -> Vec<String> {
        self.top(limit)
            .into_iter()
            .map(|(id, _)| trace_key(id))
            .collect()
    }
}

/// The visible spans of a trace in start order (then span id; stored order among equals).
pub fn visible_in_order(mut spans: Vec<SpanRow>, now: i64) -> Vec<SpanRow> {
    spans.retain(|s| s.start_ns <= now);
    spans.sort_by(|a, b| (a.start_ns, &a.span_id).cmp(&(b.start_ns, &b.span_id)));
    spans
}

/// Adds the calls between services of one trace's visible spans: (parent service, child
/// service) for every span whose parent, in another service, is among them.
pub fn add_links<'a>(
    links: &mut BTreeMap<(String, String), u64>,
    spans: impl IntoIterator<Item = (&'a str, Option<&'a str>, &'a str)> + Clone,
) {
    let by_id: HashMap<&str, &str> = spans
        .clone()
        .into_iter()
        .map(|(id, _, service)| (id, service))
        .collect();
    for (_, parent, service) in spans {
        let Some(parent_service) = parent.and_then(|p| by_id.get(p)) else {
            continue;
        };
        if *parent_service != service {
            *links
                .entry((parent_service.to_string(), service.to_string()))
                .or_insert(0) += 1;
        }
    }
}

/// Calls between services: (parent service, child service) → count.
pub type Links = BTreeMap<(String, String), u64>;

/// Where the trace query APIs get spans from: rows in memory, or a dataset's spans file.
pub trait SpanSource: Send + Sync {
    /// The (service, operation, kind) catalog.
    fn catalog(&self) -> anyhow::Result<Arc<Catalog>>;

    /// Builds now what would otherwise be built on first use (after start, in the background).
    fn warm(&self) -> anyhow::Result<()> {
        self.catalog().map(drop)
    }

    /// The visible spans of each trace (ids as [`trace_key`] gives them), in start order; an
    /// empty list for a trace with none.
    fn traces(&self, ids: &[String], now: i64) -> anyhow::Result<Vec<Vec<SpanRow>>>;

    /// Trace ids matching a search, most recently matched first.
    fn find_traces(
        &self,
        q: &TraceQuery,
        now: i64,
        derived: DerivedTags,
    ) -> anyhow::Result<Vec<String>>;

    /// Calls between services over traces with a visible span started in `[from, to]`, as Jaeger
    /// derives dependencies from spans.
    fn dependencies(&self, from: i64, to: i64, now: i64) -> anyhow::Result<Links>;
}

/// The span store the facades hold.
pub type SpanStore = dyn SpanSource;

/// The query API every source answers, in the facades' terms.
impl dyn SpanSource {
    pub fn services(&self, now: i64) -> anyhow::Result<Vec<String>> {
        Ok(self.catalog()?.services(now))
    }

    pub fn operations(
        &self,
        service: &str,
        kind: Option<&str>,
        now: i64,
    ) -> anyhow::Result<Vec<(String, String)>> {
        Ok(self.catalog()?.operations(service, kind, now))
    }

    /// The visible spans of a trace, in start order; `None` when none is visible.
    pub fn trace(&self, trace_id: &str, now: i64) -> anyhow::Result<Option<Vec<SpanRow>>> {
        let spans = self
            .traces(&[trace_key(trace_id)], now)?
            .pop()
            .unwrap_or_default();
        Ok((!spans.is_empty()).then_some(spans))
    }
}

/// Spans held in memory, indexed by trace, service and time (small datasets, tests, the
/// reference the file-backed source is compared with, and a live environment's spans).
#[derive(Debug, Default)]
pub struct MemSpans {
    /// Sorted by start time up to `sorted`; spans appended since (a live environment's newest)
    /// follow unsorted and are scanned, until there are enough of them to sort everything again.
    spans: Vec<SpanRow>,
    sorted: usize,
    by_trace: HashMap<String, Vec<usize>>,
    /// Span indices per service, in start order.
    by_service: BTreeMap<String, Vec<usize>>,
    catalog: Arc<Catalog>,
}

impl MemSpans {
    pub fn new(rows: impl IntoIterator<Item = SpanRow>) -> Self {
        let mut spans: Vec<SpanRow> = rows.into_iter().collect();
        spans.sort_by(|a, b| (a.start_ns, &a.span_id).cmp(&(b.start_ns, &b.span_id)));
        let mut store = MemSpans::default();
        let mut catalog = Catalog::default();
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
            catalog.add(&s.service, &s.name, &s.kind, s.start_ns);
        }
        store.sorted = spans.len();
        store.spans = spans;
        store.catalog = Arc::new(catalog);
        store
    }

    /// Adds spans newer than most already held (a live environment's latest second).
    pub fn append(&mut self, rows: impl IntoIterator<Item = SpanRow>) {
        let catalog = Arc::make_mut(&mut self.catalog);
        for s in rows {
            catalog.add(&s.service, &s.name, &s.kind, s.start_ns);
            self.by_trace
                .entry(trace_key(&s.trace_id))
                .or_default()
                .push(self.spans.len());
            self.spans.push(s);
        }
        // Re-sorting costs O(n log n): doing it when the unsorted tail reaches a quarter of the
        // whole keeps appends amortised O(log n) a span and scans of the tail short.
        let tail = self.spans.len() - self.sorted;
        if tail > 4096.max(self.sorted / 4) {
            *self = MemSpans::new(std::mem::take(&mut self.spans));
        }
    }

    /// Indices of the spans started in `[from, upto]`: a range of the sorted part, then the
    /// matching part of the unsorted tail.
    fn started_in(&self, from: i64, upto: i64) -> impl Iterator<Item = usize> + '_ {
        let sorted = &self.spans[..self.sorted];
        let lo = sorted.partition_point(|s| s.start_ns < from);
        let hi = sorted.partition_point(|s| s.start_ns <= upto);
        (lo..hi.max(lo)).chain(
            (self.sorted..self.spans.len())
                .filter(move |&i| (from..=upto).contains(&self.spans[i].start_ns)),
        )
    }

    fn trace_rows(&self, key: &str, now: i64) -> Vec<SpanRow> {
        let rows = self
            .by_trace
            .get(key)
            .into_iter()
            .flatten()
            .map(|&i| self.spans[i].clone())
            .collect();
        visible_in_order(rows, now)
    }
}

impl SpanSource for MemSpans {
    fn catalog(&self) -> anyhow::Result<Arc<Catalog>> {
        Ok(self.catalog.clone())
    }

    fn traces(&self, ids: &[String], now: i64) -> anyhow::Result<Vec<Vec<SpanRow>>> {
        Ok(ids.iter().map(|id| self.trace_rows(id, now)).collect())
    }

    fn find_traces(
        &self,
        q: &TraceQuery,
        now: i64,
        derived: DerivedTags,
    ) -> anyhow::Result<Vec<String>> {
        let upto = q.start_max_ns.min(now);
        let candidates: Box<dyn Iterator<Item = usize>> = match &q.service {
            Some(svc) => {
                let idx = self.by_service.get(svc).map_or(&[][..], Vec::as_slice);
                let lo = idx.partition_point(|&i| self.spans[i].start_ns < q.start_min_ns);
                let hi = idx.partition_point(|&i| self.spans[i].start_ns <= upto);
                let tail = (self.sorted..self.spans.len()).filter(move |&i| {
                    let s = &self.spans[i];
                    &s.service == svc && (q.start_min_ns..=upto).contains(&s.start_ns)
                });
                Box::new(idx[lo..hi.max(lo)].iter().copied().chain(tail))
            }
            None => Box::new(self.started_in(q.start_min_ns, upto)),
        };
        let mut newest = Newest::default();
        for i in candidates {
            let s = &self.spans[i];
            if span_matches(q, s, derived) {
                newest.add(&s.trace_id, s.start_ns);
            }
        }
        Ok(newest.ids(q.limit))
    }

    fn dependencies(&self, from: i64, to: i64, now: i64) -> anyhow::Result<Links> {
        let traces: BTreeSet<String> = self
            .started_in(from, to.min(now))
            .map(|i| trace_key(&self.spans[i].trace_id))
            .collect();
        let mut links = Links::new();
        for id in traces {
            let spans = self.trace_rows(&id, now);
            add_links(
                &mut links,
                spans.iter().map(|s| {
                    (
                        s.span_id.as_str(),
                        s.parent_span_id.as_deref(),
                        s.service.as_str(),
                    )
                }),
            );
        }
        Ok(links)
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

    fn store() -> MemSpans {
        MemSpans::new([
            span("t1", "a", None, "front", "GET /", 10, 100),
            span("t1", "b", Some("a"), "cart", "GetCart", 20, 50),
            span("t2", "c", None, "front", "GET /", 30, 300),
            span("t2", "d", Some("c"), "cart", "GetCart", 40, 200),
            span("t3", "e", None, "front", "POST /", 99, 10),
        ])
    }

    #[test]
    fn searches_from_the_virtual_now() {
        let mem = store();
        let s: &dyn SpanSource = &mem;
        assert_eq!(s.services(50).unwrap(), ["cart", "front"]);
        assert_eq!(s.services(15).unwrap(), ["front"]);
        assert_eq!(
            s.operations("front", None, 50).unwrap(),
            [("GET /".to_string(), "client".to_string())]
        );
        let q = TraceQuery {
            service: Some("cart".into()),
            start_max_ns: i64::MAX,
            limit: 10,
            ..Default::default()
        };
        let none: DerivedTags = |_| Vec::new();
        let ids = |v: &[&str]| -> Vec<String> { v.iter().map(|id| trace_key(id)).collect() };
        assert_eq!(
            s.find_traces(&q, 50, none).unwrap(),
            ids(&["t2", "t1"]),
            "newest first"
        );
        let slow = TraceQuery {
            duration_min_ns: Some(100),
            ..q.clone()
        };
        assert_eq!(s.find_traces(&slow, 50, none).unwrap(), ids(&["t2"]));
        let tagged = TraceQuery {
            tags: [("http.status_code".to_string(), "220".to_string())].into(),
            ..q.clone()
        };
        assert_eq!(s.find_traces(&tagged, 50, none).unwrap(), ids(&["t1"]));
        let all = TraceQuery {
            service: None,
            ..q.clone()
        };
        assert_eq!(
            s.find_traces(&all, 50, none).unwrap(),
            ids(&["t2", "t1"]),
            "t3 starts after now"
        );
        assert_eq!(
            s.trace("t2", 35).unwrap().unwrap().len(),
            1,
            "child not started yet"
        );
        assert!(s.trace("t3", 50).unwrap().is_none());
        let deps = s.dependencies(0, 100, 100).unwrap();
        assert_eq!(
            deps.get(&("front".to_string(), "cart".to_string())),
            Some(&2)
        );
    }
}
