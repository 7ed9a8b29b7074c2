//! The series store the evaluator reads: a `Storage` trait and a compact in-memory implementation.
//!
//! Memory layout of [`MemStorage`]: samples are compressed in chunks of 120 (see [`crate::chunk`],
//! typically 2–5 bytes a sample) kept in a shared, segmented byte arena with a small per-chunk index (time
//! bounds, offset); label names and values are interned once (`Arc<str>`), so a label set costs
//! one small vector of pointer pairs; the inverted index maps name → value → sorted series ids.

use std::collections::{BTreeMap, HashMap, HashSet};

use regex::Regex;
use serde::Serialize;

use crate::chunk::{ChunkEncoder, decode};
use crate::labels::{Labels, METRIC_NAME, Str};

/// The bit pattern Prometheus writes when a series disappears (a "staleness marker").
pub const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

/// A staleness marker value.
pub fn stale_nan() -> f64 {
    f64::from_bits(STALE_NAN_BITS)
}

/// Whether `v` is a staleness marker (an ordinary NaN sample is not).
pub fn is_stale(v: f64) -> bool {
    v.to_bits() == STALE_NAN_BITS
}

/// A value standing in for a native-histogram sample, which this store cannot hold: the evaluator
/// answers "unsupported" when a query reads one (used by the promqltest runner).
pub const HISTOGRAM_PLACEHOLDER_BITS: u64 = 0x7ff0_0000_0000_0003;

/// Whether `v` is the native-histogram placeholder.
pub fn is_histogram_placeholder(v: f64) -> bool {
    v.to_bits() == HISTOGRAM_PLACEHOLDER_BITS
}

/// Index of a series inside a store.
pub type SeriesId = u32;

/// How a matcher compares a label value.
#[derive(Clone, Debug)]
pub enum MatchKind {
    Equal,
    NotEqual,
    /// Fully anchored regex.
    Regex(Regex),
    NotRegex(Regex),
}

/// One `name op "value"` matcher; a missing label matches as the empty string.
#[derive(Clone, Debug)]
pub struct LabelMatcher {
    pub name: String,
    pub value: String,
    pub kind: MatchKind,
}

impl LabelMatcher {
    pub fn equal(name: &str, value: &str) -> Self {
        LabelMatcher {
            name: name.into(),
            value: value.into(),
            kind: MatchKind::Equal,
        }
    }

    /// A regex matcher; the pattern is anchored at both ends as PromQL requires.
    pub fn regex(name: &str, pattern: &str) -> Result<Self, regex::Error> {
        let re = Regex::new(&format!("^(?s:{pattern})$"))?;
        Ok(LabelMatcher {
            name: name.into(),
            value: pattern.into(),
            kind: MatchKind::Regex(re),
        })
    }

    pub fn matches(&self, v: &str) -> bool {
        match &self.kind {
            MatchKind::Equal => self.value == v,
            MatchKind::NotEqual => self.value != v,
            MatchKind::Regex(re) => re.is_match(v),
            MatchKind::NotRegex(re) => !re.is_match(v),
        }
    }

    /// Converts a matcher parsed by promql-parser (whose regexes are already anchored).
    pub fn from_parsed(m: &promql_parser::label::Matcher) -> Self {
        use promql_parser::label::MatchOp;
        let kind = match &m.op {
            MatchOp::Equal => MatchKind::Equal,
            MatchOp::NotEqual => MatchKind::NotEqual,
            MatchOp::Re(re) => MatchKind::Regex(re.clone()),
            MatchOp::NotRe(re) => MatchKind::NotRegex(re.clone()),
        };
        LabelMatcher {
            name: m.name.clone(),
            value: m.value.clone(),
            kind,
        }
    }
}

/// The samples of one series, sorted by time, timestamps unique.
#[derive(Clone, Copy, Debug)]
pub struct Samples<'a> {
    /// Milliseconds since the Unix epoch.
    pub ts: &'a [i64],
    pub vals: &'a [f64],
}

impl Samples<'_> {
    pub fn len(&self) -> usize {
        self.ts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }

    /// Index of the first sample with `ts > t`.
    pub fn after(&self, t: i64) -> usize {
        self.ts.partition_point(|&x| x <= t)
    }
}

/// Decoded samples of one series, owned.
#[derive(Clone, Debug, Default)]
pub struct SampleBuf {
    pub ts: Vec<i64>,
    pub vals: Vec<f64>,
}

impl SampleBuf {
    pub fn samples(&self) -> Samples<'_> {
        Samples {
            ts: &self.ts,
            vals: &self.vals,
        }
    }
}

/// Metric metadata as `/api/v1/metadata` reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MetricMetadata {
    #[serde(rename = "type")]
    pub kind: String,
    pub help: String,
    pub unit: String,
}

/// A source of series for the evaluator and the HTTP API.
pub trait Storage: Send + Sync {
    /// Series matching every matcher, in label order.
    fn select(&self, matchers: &[LabelMatcher]) -> Vec<SeriesId>;
    fn series_labels(&self, id: SeriesId) -> &Labels;
    /// Appends the samples of `id` in time order, at least all of those with a time in
    /// `[mint, maxt]` (a store may hand out a few more around the edges).
    fn read_samples(&self, id: SeriesId, mint: i64, maxt: i64, out: &mut SampleBuf);
    /// Times of the first and last sample of `id`.
    fn time_bounds(&self, id: SeriesId) -> Option<(i64, i64)>;
    /// Every label name, sorted.
    fn label_names(&self) -> Vec<Str>;
    /// Every value of `name`, sorted.
    fn label_values(&self, name: &str) -> Vec<Str>;
    /// Metadata by metric name.
    fn metadata(&self) -> &BTreeMap<String, Vec<MetricMetadata>>;
}

/// A [`Storage`] read for the length of one request: plain stores are read as they are, a live
/// environment's store under its lock (the simulation appends between requests).
pub type StorageGuard<'a> = Box<dyn std::ops::Deref<Target = dyn Storage + 'a> + 'a>;

/// Where the API gets its [`Storage`] for one request.
pub trait StorageSource: Send + Sync {
    fn read(&self) -> StorageGuard<'_>;
}

struct Plain<'a>(&'a dyn Storage);

impl<'a> std::ops::Deref for Plain<'a> {
    type Target = dyn Storage + 'a;
    fn deref(&self) -> &Self::Target {
        self.0
    }
}

impl<T: Storage> StorageSource for T {
    fn read(&self) -> StorageGuard<'_> {
        Box::new(Plain(self))
    }
}

/// A store whose sample times are moved by `shift_ms`: reads translate the window back to recorded
/// times and the samples forward to served ones.
pub struct TimeShifted<'a> {
    inner: &'a dyn Storage,
    pub shift_ms: i64,
}

impl<'a> TimeShifted<'a> {
    pub fn new(inner: &'a dyn Storage, shift_ms: i64) -> Self {
        TimeShifted { inner, shift_ms }
    }
}

impl Storage for TimeShifted<'_> {
    fn select(&self, matchers: &[LabelMatcher]) -> Vec<SeriesId> {
        self.inner.select(matchers)
    }
    fn series_labels(&self, id: SeriesId) -> &Labels {
        self.inner.series_labels(id)
    }
    fn read_samples(&self, id: SeriesId, mint: i64, maxt: i64, out: &mut SampleBuf) {
        let from = out.ts.len();
        self.inner.read_samples(
            id,
            mint.saturating_sub(self.shift_ms),
            maxt.saturating_sub(self.shift_ms),
            out,
        );
        if self.shift_ms != 0 {
            for t in &mut out.ts[from..] {
                *t += self.shift_ms;
            }
        }
    }
    fn time_bounds(&self, id: SeriesId) -> Option<(i64, i64)> {
        self.inner
            .time_bounds(id)
            .map(|(lo, hi)| (lo + self.shift_ms, hi + self.shift_ms))
    }
    fn label_names(&self) -> Vec<Str> {
        self.inner.label_names()
    }
    fn label_values(&self, name: &str) -> Vec<Str> {
        self.inner.label_values(name)
    }
    fn metadata(&self) -> &BTreeMap<String, Vec<MetricMetadata>> {
        self.inner.metadata()
    }
}

#[derive(Debug)]
struct SeriesEntry {
    labels: Labels,
    /// Index range into `MemStorage::chunks`.
    first_chunk: u32,
    num_chunks: u32,
}

#[derive(Clone, Copy, Debug)]
struct ChunkMeta {
    min_t: i64,
    max_t: i64,
    offset: u64,
    len: u32,
    samples: u32,
}

/// An immutable in-memory series store; build one with [`StorageBuilder`].
#[derive(Debug, Default)]
pub struct MemStorage {
    series: Vec<SeriesEntry>,
    chunks: Vec<ChunkMeta>,
    bytes: Arena,
    /// name → value → series ids (ascending; ids are assigned in label order).
    index: Postings,
    metadata: BTreeMap<String, Vec<MetricMetadata>>,
}

impl MemStorage {
    pub fn num_series(&self) -> usize {
        self.series.len()
    }

    pub fn num_samples(&self) -> usize {
        self.chunks.iter().map(|c| c.samples as usize).sum()
    }

    /// Bytes held by compressed samples and their chunk index.
    pub fn sample_bytes(&self) -> usize {
        self.bytes.len() + self.chunks.len() * std::mem::size_of::<ChunkMeta>()
    }

    /// Earliest and latest sample time (ms), if any sample exists.
    pub fn time_range(&self) -> Option<(i64, i64)> {
        let lo = self.chunks.iter().map(|c| c.min_t).min()?;
        let hi = self.chunks.iter().map(|c| c.max_t).max()?;
        Some((lo, hi))
    }

    fn series_chunks(&self, id: SeriesId) -> &[ChunkMeta] {
        let s = &self.series[id as usize];
        &self.chunks[s.first_chunk as usize..(s.first_chunk + s.num_chunks) as usize]
    }
}

/// name → value → series ids (ascending).
pub(crate) type Postings = BTreeMap<Str, BTreeMap<Str, Vec<SeriesId>>>;

/// Every label name in the postings, sorted.
pub(crate) fn posted_names(index: &Postings) -> Vec<Str> {
    index.keys().cloned().collect()
}

/// Every value of label `name` in the postings, sorted.
pub(crate) fn posted_values(index: &Postings, name: &str) -> Vec<Str> {
    index
        .get(name)
        .map(|v| v.keys().cloned().collect())
        .unwrap_or_default()
}

/// Ids of series whose `name` label satisfies `m`, for a matcher that rejects the empty
/// string (so series lacking the label are excluded, and postings are exact).
fn postings_for(index: &Postings, m: &LabelMatcher) -> Vec<SeriesId> {
    let Some(values) = index.get(m.name.as_str()) else {
        return Vec::new();
    };
    if let MatchKind::Equal = m.kind {
        return values.get(m.value.as_str()).cloned().unwrap_or_default();
    }
    let mut out: Vec<SeriesId> = Vec::new();
    let mut parts = 0;
    for (v, ids) in values {
        if m.matches(v) {
            out.extend_from_slice(ids);
            parts += 1;
        }
    }
    if parts > 1 {
        out.sort_unstable();
    }
    out
}

/// The ids (ascending) of the `count` series that match every matcher, through the postings.
pub(crate) fn select_indexed<'a>(
    index: &Postings,
    count: usize,
    labels_of: impl Fn(SeriesId) -> &'a Labels,
    matchers: &[LabelMatcher],
) -> Vec<SeriesId> {
    // Matchers that reject "" can only match series carrying the label: use the index for
    // those, then check the rest series by series.
    let (indexed, rest): (Vec<&LabelMatcher>, Vec<&LabelMatcher>) =
        matchers.iter().partition(|m| !m.matches(""));
    let mut candidates: Option<Vec<SeriesId>> = None;
    for m in &indexed {
        let p = postings_for(index, m);
        candidates = Some(match candidates {
            None => p,
            Some(c) => intersect(&c, &p),
        });
        if candidates.as_ref().is_some_and(|c| c.is_empty()) {
            return Vec::new();
        }
    }
    let keep = |id: &SeriesId| {
        let l = labels_of(*id);
        rest.iter().all(|m| m.matches(l.get(&m.name)))
    };
    match candidates {
        Some(c) => c.into_iter().filter(keep).collect(),
        None => (0..count as SeriesId).filter(keep).collect(),
    }
}

fn intersect(a: &[SeriesId], b: &[SeriesId]) -> Vec<SeriesId> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(a.len().min(b.len()));
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

impl Storage for MemStorage {
    fn select(&self, matchers: &[LabelMatcher]) -> Vec<SeriesId> {
        select_indexed(
            &self.index,
            self.series.len(),
            |id| &self.series[id as usize].labels,
            matchers,
        )
    }

    fn series_labels(&self, id: SeriesId) -> &Labels {
        &self.series[id as usize].labels
    }

    fn read_samples(&self, id: SeriesId, mint: i64, maxt: i64, out: &mut SampleBuf) {
        for c in self.series_chunks(id) {
            if c.max_t < mint || c.min_t > maxt {
                continue;
            }
            let b = self.bytes.get(c.offset, c.len);
            if decode(b, c.samples as usize, &mut out.ts, &mut out.vals).is_none() {
                tracing::error!(series = id, "corrupt sample chunk");
            }
        }
    }

    fn time_bounds(&self, id: SeriesId) -> Option<(i64, i64)> {
        let c = self.series_chunks(id);
        Some((c.first()?.min_t, c.last()?.max_t))
    }

    fn label_names(&self) -> Vec<Str> {
        posted_names(&self.index)
    }

    fn label_values(&self, name: &str) -> Vec<Str> {
        posted_values(&self.index, name)
    }

    fn metadata(&self) -> &BTreeMap<String, Vec<MetricMetadata>> {
        &self.metadata
    }
}

/// Handle of a series inside a [`StorageBuilder`], for pushing many samples without re-hashing
/// the label set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeriesHandle(usize);

/// Append-only bytes in fixed-size segments: growing never copies (or doubles) what is stored.
#[derive(Debug, Default)]
struct Arena {
    segs: Vec<Vec<u8>>,
}

const SEGMENT: usize = 8 << 20;

impl Arena {
    fn append(&mut self, b: &[u8]) -> u64 {
        if self
            .segs
            .last()
            .is_none_or(|s| s.len() + b.len() > s.capacity())
        {
            self.segs.push(Vec::with_capacity(SEGMENT.max(b.len())));
        }
        let si = self.segs.len() - 1;
        let seg = &mut self.segs[si];
        let pos = seg.len();
        seg.extend_from_slice(b);
        (si * SEGMENT + pos) as u64
    }

    fn get(&self, offset: u64, len: u32) -> &[u8] {
        let (si, pos) = (offset as usize / SEGMENT, offset as usize % SEGMENT);
        self.segs
            .get(si)
            .and_then(|s| s.get(pos..pos + len as usize))
            .unwrap_or(&[])
    }

    fn len(&self) -> usize {
        self.segs.iter().map(|s| s.len()).sum()
    }
}

/// One series being built: samples arriving in time order are compressed at once (closed chunks
/// go to the shared arena); the rare out-of-order or duplicate ones wait in `late` and are merged
/// at build time.
#[derive(Default)]
struct PendingSeries {
    open: Vec<u8>,
    chunks: Vec<ChunkMeta>,
    enc: ChunkEncoder,
    chunk_min: i64,
    last_t: Option<i64>,
    late: Vec<(i64, f64)>,
}

impl PendingSeries {
    fn push(&mut self, arena: &mut Arena, t: i64, v: f64) {
        if self.last_t.is_some_and(|l| t <= l) {
            self.late.push((t, v));
            return;
        }
        if self.enc.is_full() {
            self.close_chunk(arena);
        }
        if self.enc.is_empty() {
            self.chunk_min = t;
        }
        self.enc.push(&mut self.open, t, v);
        self.last_t = Some(t);
    }

    fn close_chunk(&mut self, arena: &mut Arena) {
        if self.enc.is_empty() {
            return;
        }
        let offset = arena.append(&self.open);
        self.chunks.push(ChunkMeta {
            min_t: self.chunk_min,
            max_t: self.last_t.unwrap_or(self.chunk_min),
            offset,
            len: self.open.len() as u32,
            samples: self.enc.len() as u32,
        });
        // Release the buffer: with many series, idle capacity would add up.
        self.open = Vec::new();
        self.enc = ChunkEncoder::default();
    }

    /// Closes the open chunk and merges late samples (a later write at the same time wins);
    /// returns the series' chunks.
    fn finish(mut self, arena: &mut Arena) -> Vec<ChunkMeta> {
        self.close_chunk(arena);
        if self.late.is_empty() {
            return self.chunks;
        }
        let mut all = SampleBuf::default();
        for c in &self.chunks {
            let _ = decode(
                arena.get(c.offset, c.len),
                c.samples as usize,
                &mut all.ts,
                &mut all.vals,
            );
        }
        let mut merged: Vec<(i64, f64)> = all.ts.into_iter().zip(all.vals).collect();
        merged.append(&mut self.late);
        merged.sort_by_key(|p| p.0);
        let mut fresh = PendingSeries::default();
        for (i, &(t, v)) in merged.iter().enumerate() {
            if merged.get(i + 1).is_some_and(|n| n.0 == t) {
                continue;
            }
            fresh.push(arena, t, v);
        }
        fresh.close_chunk(arena);
        fresh.chunks
    }
}

/// The one shared copy of `s`.
pub(crate) fn intern(strings: &mut HashSet<Str>, s: &str) -> Str {
    if let Some(x) = strings.get(s) {
        return x.clone();
    }
    let x: Str = s.into();
    strings.insert(x.clone());
    x
}

/// The label set of metric `name` with `labels` (any order; empty values ignored), interned.
pub(crate) fn series_labels<'a>(
    strings: &mut HashSet<Str>,
    name: &str,
    labels: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Labels {
    let mut pairs: Vec<(Str, Str)> = Vec::new();
    if !name.is_empty() {
        pairs.push((intern(strings, METRIC_NAME), intern(strings, name)));
    }
    for (k, v) in labels {
        if k != METRIC_NAME && !v.is_empty() {
            pairs.push((intern(strings, k), intern(strings, v)));
        }
    }
    Labels::new(pairs)
}

/// Records type/help/unit of a metric family once.
pub(crate) fn add_metadata(
    metadata: &mut BTreeMap<String, Vec<MetricMetadata>>,
    metric: &str,
    kind: &str,
    help: &str,
    unit: &str,
) {
    let md = MetricMetadata {
        kind: kind.into(),
        help: help.into(),
        unit: unit.into(),
    };
    let e = metadata.entry(metric.to_string()).or_default();
    if !e.contains(&md) {
        e.push(md);
    }
}

/// Collects samples in any order and builds a [`MemStorage`].
#[derive(Default)]
pub struct StorageBuilder {
    strings: HashSet<Str>,
    ids: HashMap<Labels, usize>,
    series: Vec<(Labels, PendingSeries)>,
    arena: Arena,
    metadata: BTreeMap<String, Vec<MetricMetadata>>,
}

impl StorageBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    fn intern(&mut self, s: &str) -> Str {
        intern(&mut self.strings, s)
    }

    /// The series for metric `name` with `labels` (any order; empty values ignored).
    pub fn series<'a>(
        &mut self,
        name: &str,
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> SeriesHandle {
        let labels = series_labels(&mut self.strings, name, labels);
        self.series_for_labels(labels)
    }

    /// The series with exactly this label set (including `__name__` if any).
    pub fn series_for_labels(&mut self, labels: Labels) -> SeriesHandle {
        if let Some(&i) = self.ids.get(&labels) {
            return SeriesHandle(i);
        }
        let interned = Labels::from_sorted(
            labels
                .pairs()
                .iter()
                .map(|(k, v)| (self.intern(k), self.intern(v)))
                .collect(),
        );
        let i = self.series.len();
        self.ids.insert(interned.clone(), i);
        self.series.push((interned, PendingSeries::default()));
        SeriesHandle(i)
    }

    /// Adds one sample (time in ms since the epoch). A later sample at the same time replaces an
    /// earlier one. Samples in time order per series are cheapest.
    pub fn push(&mut self, series: SeriesHandle, t_ms: i64, value: f64) {
        self.series[series.0].1.push(&mut self.arena, t_ms, value);
    }

    /// Convenience: `series(name, labels)` then `push`.
    pub fn add_sample<'a>(
        &mut self,
        name: &str,
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
        t_ms: i64,
        value: f64,
    ) {
        let h = self.series(name, labels);
        self.push(h, t_ms, value);
    }

    /// Records type/help/unit of a metric family (as scraped metadata would).
    pub fn set_metadata(&mut self, metric: &str, kind: &str, help: &str, unit: &str) {
        add_metadata(&mut self.metadata, metric, kind, help, unit);
    }

    pub fn build(self) -> MemStorage {
        let mut series = self.series;
        let mut arena = self.arena;
        series.sort_by(|a, b| a.0.cmp(&b.0));
        let mut st = MemStorage {
            series: Vec::with_capacity(series.len()),
            chunks: Vec::new(),
            bytes: Arena::default(),
            index: BTreeMap::new(),
            metadata: self.metadata,
        };
        for (id, (labels, pending)) in series.into_iter().enumerate() {
            let chunks = pending.finish(&mut arena);
            let first_chunk = st.chunks.len() as u32;
            st.chunks.extend_from_slice(&chunks);
            for (k, v) in labels.pairs() {
                st.index
                    .entry(k.clone())
                    .or_default()
                    .entry(v.clone())
                    .or_default()
                    .push(id as SeriesId);
            }
            st.series.push(SeriesEntry {
                labels,
                first_chunk,
                num_chunks: chunks.len() as u32,
            });
        }
        st.bytes = arena;
        st.chunks.shrink_to_fit();
        st
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> MemStorage {
        let mut b = StorageBuilder::new();
        b.add_sample("up", [("job", "api"), ("instance", "a")], 2000, 1.0);
        b.add_sample("up", [("job", "api"), ("instance", "a")], 1000, 0.0);
        b.add_sample("up", [("job", "api"), ("instance", "a")], 2000, 5.0);
        b.add_sample("up", [("job", "db"), ("instance", "b")], 1000, 1.0);
        b.add_sample("req_total", [("job", "api")], 1000, 3.0);
        b.build()
    }

    fn names(s: &MemStorage, ids: &[SeriesId]) -> Vec<String> {
        ids.iter()
            .map(|&i| s.series_labels(i).to_string())
            .collect()
    }

    #[test]
    fn samples_are_sorted_and_last_write_wins() {
        let s = store();
        let ids = s.select(&[LabelMatcher::equal("instance", "a")]);
        assert_eq!(ids.len(), 1);
        let mut buf = SampleBuf::default();
        s.read_samples(ids[0], i64::MIN, i64::MAX, &mut buf);
        assert_eq!(buf.ts, [1000, 2000]);
        assert_eq!(buf.vals, [0.0, 5.0]);
        assert_eq!(s.time_bounds(ids[0]), Some((1000, 2000)));
    }

    #[test]
    fn matchers_use_index_and_treat_missing_as_empty() {
        let s = store();
        let ids = s.select(&[LabelMatcher::regex("job", "api|db").unwrap()]);
        assert_eq!(ids.len(), 3);
        let ids = s.select(&[LabelMatcher::equal("instance", "")]);
        assert_eq!(
            names(&s, &ids),
            vec![r#"{__name__="req_total", job="api"}"#]
        );
        let ids = s.select(&[
            LabelMatcher::equal(METRIC_NAME, "up"),
            LabelMatcher {
                name: "job".into(),
                value: "api".into(),
                kind: MatchKind::NotEqual,
            },
        ]);
        assert_eq!(
            names(&s, &ids),
            vec![r#"{__name__="up", instance="b", job="db"}"#]
        );
        // Regexes are anchored: "ap" must not match "api".
        assert!(
            s.select(&[LabelMatcher::regex("job", "ap").unwrap()])
                .is_empty()
        );
    }

    #[test]
    fn long_series_span_chunks_and_read_by_time() {
        let mut b = StorageBuilder::new();
        let h = b.series("m", []);
        for k in (0..1000).rev() {
            b.push(h, k * 1000, k as f64);
        }
        for k in 0..1000 {
            b.push(h, k * 1000 + 500, -1.0);
        }
        let s = b.build();
        assert_eq!(s.num_samples(), 2000);
        let mut buf = SampleBuf::default();
        s.read_samples(0, 400_000, 401_000, &mut buf);
        // Whole chunks come back: a superset of the window, in order.
        assert!(buf.ts.len() < 500 && buf.ts.windows(2).all(|w| w[0] < w[1]));
        let i = buf.ts.iter().position(|&t| t == 400_500).unwrap();
        assert_eq!(
            (buf.vals[i - 1], buf.vals[i], buf.vals[i + 1]),
            (400.0, -1.0, 401.0)
        );
    }

    #[test]
    fn label_names_and_values_are_sorted() {
        let s = store();
        let n: Vec<String> = s.label_names().iter().map(|x| x.to_string()).collect();
        assert_eq!(n, ["__name__", "instance", "job"]);
        let v: Vec<String> = s
            .label_values("job")
            .iter()
            .map(|x| x.to_string())
            .collect();
        assert_eq!(v, ["api", "db"]);
    }
}
