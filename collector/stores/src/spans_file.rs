//! Spans served from a dataset's spans file without loading it: the file is sorted by (service,
//! name, start, span_id) with a bloom filter on trace_id in every row group, so a trace is read
//! from the row groups whose filter may hold it, and a search from the pages whose service, name
//! and start statistics may match, newest pages first, until no older page can change the answer.
//! The catalog (services, operations) and dependencies are computed on first use and cached.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::path::Path;
use std::sync::{Arc, Mutex};

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, StringArray};
use arrow_schema::ArrowError;
use datasets::in_place::{Pred, TableFile, Unit, dictionary, int64s, maps, strings, times, word};
use parquet::arrow::arrow_reader::{ArrowPredicate, ArrowPredicateFn, RowFilter};
use schemas::tables::columns::spans as col;
use schemas::tables::{Row, SpanRow, Table};

use super::Cached;
use super::spans::{
    Catalog, DerivedTags, Links, Newest, SpanSource, TraceQuery, add_links, trace_key,
    visible_in_order,
};

/// Rows decoded per round of a search before checking whether older pages still matter.
const SEARCH_ROUND_ROWS: usize = 128 * 1024;
/// Spans grouped in memory at once when deriving dependencies (the table is read in as many
/// passes, each taking a share of the traces).
const DEPENDENCY_PASS_ROWS: u64 = 1 << 20;
/// Dependency answers kept (they depend only on the window and the virtual now).
const DEPENDENCY_CACHE: usize = 16;

pub struct FileSpans {
    file: TableFile,
    catalog: Cached<Catalog>,
    /// Built in the background after start; until then traces are read without it.
    trace_times: Cached<TraceTimes>,
    dependencies: Mutex<HashMap<(i64, i64, i64), Arc<Links>>>,
}

/// Where in time each trace's spans lie, to read only the pages of a trace's time in the row groups
/// its bloom filter names (every span of a trace starts within its window: a window only ever
/// widens, as seconds are rounded outwards and traces whose hashes collide share one).
struct TraceTimes {
    base_ns: i64,
    /// (hash of the trace key, first start, last start in whole seconds after `base_ns`), by hash.
    windows: Vec<(u64, u32, u32)>,
}

impl TraceTimes {
    fn hash(key: &str) -> u64 {
        BuildHasherDefault::<DefaultHasher>::default().hash_one(key)
    }

    /// The recorded-time window of a trace's spans; `None` when the file has no such trace.
    fn window(&self, key: &str) -> Option<(i64, i64)> {
        let h = Self::hash(key);
        let i = self.windows.partition_point(|w| w.0 < h);
        let &(found, lo, hi) = self.windows.get(i)?;
        let at = |s: u32| self.base_ns.saturating_add(i64::from(s) * 1_000_000_000);
        (found == h).then(|| (at(lo), at(hi)))
    }
}

impl FileSpans {
    /// Opens a spans file: reads its footer and page index only.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        Ok(FileSpans {
            file: TableFile::open(path, Table::Spans)?,
            catalog: Cached::default(),
            trace_times: Cached::default(),
            dependencies: Mutex::default(),
        })
    }

    fn decode(&self, batches: &[RecordBatch]) -> anyhow::Result<Vec<SpanRow>> {
        let mut rows = Vec::new();
        for b in batches {
            let decoded = datasets::encode::decode(Table::Spans, b)
                .map_err(|e| anyhow::anyhow!("{}: {e}", self.file.path().display()))?;
            rows.extend(decoded.into_iter().filter_map(|r| match r {
                Row::Span(s) => Some(s),
                _ => None,
            }));
        }
        Ok(rows)
    }

    /// Row groups whose trace_id bloom filter may hold one of the ids.
    fn row_groups_of(&self, keys: &HashSet<String>) -> anyhow::Result<Vec<usize>> {
        let mut out = Vec::new();
        for rg in 0..self.file.num_row_groups() {
            let hit = match self.file.bloom_filter(rg, col::TRACE_ID)? {
                None => true,
                Some(bloom) => keys
                    .iter()
                    .any(|k| stored_forms(k).iter().any(|f| bloom.check(f.as_str()))),
            };
            if hit {
                out.push(rg);
            }
        }
        Ok(out)
    }

    /// A row filter keeping spans whose trace is one of `keys`.
    fn trace_filter(&self, keys: Arc<HashSet<String>>) -> anyhow::Result<RowFilter> {
        let mask = self.file.projection(&[col::TRACE_ID])?;
        let predicate = ArrowPredicateFn::new(mask, move |batch: RecordBatch| {
            Ok(strings(&batch, col::TRACE_ID)?
                .iter()
                .map(|v| Some(v.is_some_and(|v| is_one_of(&keys, v))))
                .collect::<BooleanArray>())
        });
        Ok(RowFilter::new(vec![Box::new(predicate)]))
    }

    /// A row filter keeping the spans a search matches: first those of its service and operation
    /// that started in its window and last as long as it asks (decoding only those four columns
    /// for every row), then, of these, those with its tags: the columnar form of
    /// [`super::spans::span_matches`], which the file tests hold it equal to.
    fn search_filter(
        &self,
        q: &TraceQuery,
        upto: i64,
        derived: DerivedTags,
    ) -> anyhow::Result<RowFilter> {
        let mask = self
            .file
            .projection(&[col::SERVICE, col::NAME, col::START, col::DURATION])?;
        let (service, operation) = (q.service.clone(), q.operation.clone());
        let (from, dmin, dmax) = (q.start_min_ns, q.duration_min_ns, q.duration_max_ns);
        let predicate = ArrowPredicateFn::new(mask, move |b: RecordBatch| {
            let (svc, name) = (strings(&b, col::SERVICE)?, strings(&b, col::NAME)?);
            let (start, duration) = (times(&b, col::START)?, int64s(&b, col::DURATION)?);
            Ok((0..b.num_rows())
                .map(|i| {
                    let (t, d) = (start.value(i), duration.value(i));
                    Some(
                        from <= t
                            && t <= upto
                            && service.as_deref().is_none_or(|s| s == svc.value(i))
                            && operation.as_deref().is_none_or(|o| o == name.value(i))
                            && dmin.is_none_or(|m| d >= m)
                            && dmax.is_none_or(|m| d <= m),
                    )
                })
                .collect::<BooleanArray>())
        });
        let mut predicates: Vec<Box<dyn ArrowPredicate>> = vec![Box::new(predicate)];
        if !q.tags.is_empty() {
            predicates.push(Box::new(self.tags_predicate(q, derived)?));
        }
        Ok(RowFilter::new(predicates))
    }

    /// Keeps spans that carry every tag of a search in their attributes, their resource's, or the
    /// tags derived from their kind and status.
    fn tags_predicate(
        &self,
        q: &TraceQuery,
        derived: DerivedTags,
    ) -> anyhow::Result<impl ArrowPredicate + use<>> {
        let columns = [
            col::KIND,
            col::STATUS_CODE,
            col::STATUS_MESSAGE,
            col::RESOURCE_ATTRIBUTES,
            col::ATTRIBUTES,
        ];
        let mask = self.file.projection(&columns)?;
        let tags: Vec<(String, String)> = q.tags.clone().into_iter().collect();
        Ok(ArrowPredicateFn::new(mask, move |b: RecordBatch| {
            let (kind, code) = (strings(&b, col::KIND)?, strings(&b, col::STATUS_CODE)?);
            let message = strings(&b, col::STATUS_MESSAGE)?;
            let resource = Attributes::of(&b, col::RESOURCE_ATTRIBUTES)?;
            let attributes = Attributes::of(&b, col::ATTRIBUTES)?;
            Ok((0..b.num_rows())
                .map(|i| {
                    // The derived tags read kind and status only.
                    let extra = derived(&SpanRow {
                        trace_id: String::new(),
                        span_id: String::new(),
                        parent_span_id: None,
                        service: String::new(),
                        name: String::new(),
                        kind: kind.value(i).to_string(),
                        start_ns: 0,
                        duration_ns: 0,
                        status_code: code.value(i).to_string(),
                        status_message: (!message.is_null(i)).then(|| message.value(i).to_string()),
                        resource_attributes: Default::default(),
                        attributes: Default::default(),
                    });
                    Some(tags.iter().all(|(key, v)| {
                        attributes.has(i, key, v)
                            || resource.has(i, key, v)
                            || extra.iter().any(|(dk, dv)| dk == key && dv == v)
                    }))
                })
                .collect::<BooleanArray>())
        }))
    }

    fn scan_trace_times(&self) -> anyhow::Result<TraceTimes> {
        let base_ns = self.file.time_bounds().0;
        anyhow::ensure!(
            base_ns != i64::MIN,
            "{}: no start statistics to place traces by",
            self.file.path().display()
        );
        let seconds = |t: i64| t.saturating_sub(base_ns) / 1_000_000_000;
        let mut windows: HashMap<u64, (u32, u32)> = HashMap::new();
        self.file
            .scan(&[col::TRACE_ID, col::START], |b| -> anyhow::Result<()> {
                let (ids, start) = (strings(b, col::TRACE_ID)?, times(b, col::START)?);
                for i in 0..b.num_rows() {
                    let id = ids.value(i);
                    let h = if id.len() == 32 && !id.bytes().any(|c| c.is_ascii_uppercase()) {
                        TraceTimes::hash(id)
                    } else {
                        TraceTimes::hash(&trace_key(id))
                    };
                    // Floor and ceiling: the window holds the span's start.
                    let s = seconds(start.value(i));
                    let (Ok(lo), Ok(hi)) = (u32::try_from(s), u32::try_from(s + 1)) else {
                        anyhow::bail!(
                            "spans more than 136 years apart: traces are read without windows"
                        );
                    };
                    windows
                        .entry(h)
                        .and_modify(|w| *w = (w.0.min(lo), w.1.max(hi)))
                        .or_insert((lo, hi));
                }
                Ok(())
            })?;
        let mut windows: Vec<(u64, u32, u32)> = windows
            .into_iter()
            .map(|(h, (lo, hi))| (h, lo, hi))
            .collect();
        windows.sort_unstable();
        Ok(TraceTimes { base_ns, windows })
    }

    fn scan_catalog(&self) -> anyhow::Result<Catalog> {
        let mut catalog = Catalog::default();
        let columns = [col::SERVICE, col::NAME, col::KIND, col::START];
        self.file
            .scan_dictionary(&columns, &columns[..3], |b| -> anyhow::Result<()> {
                let (svc, names, kinds) = (
                    dictionary(b, col::SERVICE)?,
                    dictionary(b, col::NAME)?,
                    dictionary(b, col::KIND)?,
                );
                let start = times(b, col::START)?;
                // One entry per distinct operation of the batch, by dictionary keys.
                let mut first: HashMap<(i32, i32, i32), i64> = HashMap::new();
                for i in 0..b.num_rows() {
                    let t = start.value(i);
                    first
                        .entry((svc.0[i], names.0[i], kinds.0[i]))
                        .and_modify(|f| *f = (*f).min(t))
                        .or_insert(t);
                }
                for ((s, n, k), t) in first {
                    catalog.add(word(svc, s), word(names, n), word(kinds, k), t);
                }
                Ok(())
            })
            .map(|()| catalog)
    }

    fn compute_dependencies(&self, from: i64, upto: i64, now: i64) -> anyhow::Result<Links> {
        let passes = self.file.num_rows().div_ceil(DEPENDENCY_PASS_ROWS).max(1);
        let all = self
            .file
            .row_groups(&(0..self.file.num_row_groups()).collect::<Vec<_>>());
        let mut links = Links::new();
        for pass in 0..passes {
            let mask = self.file.projection(&[col::TRACE_ID, col::START])?;
            let predicate = ArrowPredicateFn::new(mask, move |batch: RecordBatch| {
                let (ids, start) = (strings(&batch, col::TRACE_ID)?, times(&batch, col::START)?);
                Ok((0..batch.num_rows())
                    .map(|i| {
                        Some(
                            start.value(i) <= now
                                && (passes == 1 || share(&trace_key(ids.value(i)), passes) == pass),
                        )
                    })
                    .collect::<BooleanArray>())
            });
            let batches = self.file.read_filtered(
                &all,
                &[
                    col::TRACE_ID,
                    col::SPAN_ID,
                    col::PARENT_SPAN_ID,
                    col::SERVICE,
                    col::START,
                ],
                Some(RowFilter::new(vec![Box::new(predicate)])),
            )?;
            // (start, span id, parent, service) per trace, in file order.
            type Lite = (i64, String, Option<String>, String);
            let mut traces: HashMap<String, Vec<Lite>> = HashMap::new();
            for b in &batches {
                let (ids, spans, parents, services, start) = (
                    strings(b, col::TRACE_ID)?,
                    strings(b, col::SPAN_ID)?,
                    strings(b, col::PARENT_SPAN_ID)?,
                    strings(b, col::SERVICE)?,
                    times(b, col::START)?,
                );
                for i in 0..b.num_rows() {
                    traces.entry(trace_key(ids.value(i))).or_default().push((
                        start.value(i),
                        spans.value(i).to_string(),
                        (!parents.is_null(i)).then(|| parents.value(i).to_string()),
                        services.value(i).to_string(),
                    ));
                }
            }
            for mut spans in traces.into_values() {
                if !spans.iter().any(|s| from <= s.0 && s.0 <= upto) {
                    continue;
                }
                spans.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
                add_links(
                    &mut links,
                    spans
                        .iter()
                        .map(|s| (s.1.as_str(), s.2.as_deref(), s.3.as_str())),
                );
            }
        }
        Ok(links)
    }
}

/// A map column of a batch (span or resource attributes), looked up without building maps.
struct Attributes<'a> {
    offsets: &'a [i32],
    keys: &'a StringArray,
    values: &'a StringArray,
}

impl<'a> Attributes<'a> {
    fn of(b: &'a RecordBatch, name: &str) -> Result<Self, ArrowError> {
        let map = maps(b, name)?;
        let strs = |a: &'a ArrayRef| {
            a.as_string_opt::<i32>()
                .ok_or_else(|| ArrowError::SchemaError(format!("`{name}` is not a string map")))
        };
        Ok(Attributes {
            offsets: map.value_offsets(),
            keys: strs(map.keys())?,
            values: strs(map.values())?,
        })
    }

    /// Whether row `i` maps `key` to `value` (a null value reads as empty, as rows decode it).
    fn has(&self, i: usize, key: &str, value: &str) -> bool {
        (self.offsets[i] as usize..self.offsets[i + 1] as usize).any(|j| {
            self.keys.value(j) == key
                && if self.values.is_null(j) {
                    value.is_empty()
                } else {
                    self.values.value(j) == value
                }
        })
    }
}

/// Which of `n` passes a trace belongs to (a fixed hash: the same in every pass).
fn share(key: &str, n: u64) -> u64 {
    BuildHasherDefault::<DefaultHasher>::default().hash_one(key) % n
}

/// Whether a stored trace id is one of the looked-up keys (stored ids are normally already in
/// key form: 32 lower-case hex digits).
fn is_one_of(keys: &HashSet<String>, stored: &str) -> bool {
    if stored.len() == 32 && !stored.bytes().any(|b| b.is_ascii_uppercase()) {
        keys.contains(stored)
    } else {
        keys.contains(&trace_key(stored))
    }
}

/// The spellings a trace id may be stored in, for the bloom filters (which see exact bytes): the
/// 32-digit key, the 16-digit form of a 64-bit id, and the id without leading zeros.
fn stored_forms(key: &str) -> Vec<String> {
    let mut forms = vec![key.to_string()];
    if let Some(short) = key.strip_prefix("0000000000000000") {
        forms.push(short.to_string());
    }
    let bare = key.trim_start_matches('0');
    let bare = if bare.is_empty() { "0" } else { bare };
    if !forms.iter().any(|f| f == bare) {
        forms.push(bare.to_string());
    }
    forms
}

const ALL_COLUMNS: &[&str] = &[
    col::TRACE_ID,
    col::SPAN_ID,
    col::PARENT_SPAN_ID,
    col::SERVICE,
    col::NAME,
    col::KIND,
    col::START,
    col::DURATION,
    col::STATUS_CODE,
    col::STATUS_MESSAGE,
    col::RESOURCE_ATTRIBUTES,
    col::ATTRIBUTES,
];

impl SpanSource for FileSpans {
    fn catalog(&self) -> anyhow::Result<Arc<Catalog>> {
        self.catalog.get_or_try(|| self.scan_catalog())
    }

    fn warm(&self) -> anyhow::Result<()> {
        self.catalog()?;
        self.trace_times.get_or_try(|| self.scan_trace_times())?;
        Ok(())
    }

    fn traces(&self, ids: &[String], now: i64) -> anyhow::Result<Vec<Vec<SpanRow>>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let times = self.trace_times.ready();
        // Traces the file does not have need no reading at all.
        let keys: Arc<HashSet<String>> = Arc::new(
            ids.iter()
                .filter(|id| times.as_ref().is_none_or(|t| t.window(id).is_some()))
                .cloned()
                .collect(),
        );
        let rgs = self.row_groups_of(&keys)?;
        let units = match &times {
            // Only the pages of each trace's time, in the row groups its bloom filter names.
            Some(t) => {
                let mut units = Vec::new();
                for (lo, hi) in keys.iter().filter_map(|k| t.window(k)) {
                    units.extend(
                        self.file
                            .prune(&[Pred::I64Between(col::START, lo, hi)])?
                            .into_iter()
                            .filter(|u| rgs.binary_search(&u.row_group).is_ok()),
                    );
                }
                units
            }
            None => self.file.row_groups(&rgs),
        };
        tracing::debug!(
            traces = keys.len(),
            row_groups = rgs.len(),
            rows = units.iter().map(|u| u.rows.len()).sum::<usize>(),
            windows = times.is_some(),
            "reading traces"
        );
        let batches = if keys.is_empty() {
            Vec::new()
        } else {
            self.file
                .read_filtered(&units, ALL_COLUMNS, Some(self.trace_filter(keys)?))?
        };
        let mut by_trace: HashMap<String, Vec<SpanRow>> = HashMap::new();
        for s in self.decode(&batches)? {
            by_trace.entry(trace_key(&s.trace_id)).or_default().push(s);
        }
        Ok(ids
            .iter()
            .map(|id| visible_in_order(by_trace.get(id).cloned().unwrap_or_default(), now))
            .collect())
    }

    fn find_traces(
        &self,
        q: &TraceQuery,
        now: i64,
        derived: DerivedTags,
    ) -> anyhow::Result<Vec<String>> {
        let upto = q.start_max_ns.min(now);
        if upto < q.start_min_ns {
            return Ok(Vec::new());
        }
        let mut preds = vec![Pred::I64Between(col::START, q.start_min_ns, upto)];
        if let Some(svc) = &q.service {
            preds.push(Pred::StrEq(col::SERVICE, svc));
        }
        if let Some(op) = &q.operation {
            preds.push(Pred::StrEq(col::NAME, op));
        }
        let mut units = self.file.prune(&preds)?;
        // Newest pages first: a round's matches can only be outranked by newer spans.
        units.sort_by_key(|u| std::cmp::Reverse(u.time.1));
        let mut newest = Newest::default();
        let mut rest: &[Unit] = &units;
        while !rest.is_empty() {
            let mut n = 0;
            let mut rows = 0;
            while n < rest.len() && rows < SEARCH_ROUND_ROWS {
                rows += rest[n].rows.len();
                n += 1;
            }
            let (round, later) = rest.split_at(n);
            rest = later;
            let filter = Some(self.search_filter(q, upto, derived)?);
            for b in self
                .file
                .read_filtered(round, &[col::TRACE_ID, col::START], filter)?
            {
                let (ids, start) = (strings(&b, col::TRACE_ID)?, times(&b, col::START)?);
                for i in 0..b.num_rows() {
                    newest.add(ids.value(i), start.value(i));
                }
            }
            if let Some(next) = rest.first()
                && newest.settled_above(q.limit, next.time.1)
            {
                break;
            }
        }
        Ok(newest.ids(q.limit))
    }

    fn dependencies(&self, from: i64, to: i64, now: i64) -> anyhow::Result<Links> {
        let upto = to.min(now);
        let key = (from, upto, now);
        if let Some(hit) = self.dependencies.lock().expect("cache lock").get(&key) {
            return Ok((**hit).clone());
        }
        let links = self.compute_dependencies(from, upto, now)?;
        let mut cache = self.dependencies.lock().expect("cache lock");
        if cache.len() >= DEPENDENCY_CACHE {
            cache.clear();
        }
        cache.insert(key, Arc::new(links.clone()));
        Ok(links)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_ids_are_probed_in_their_stored_spellings() {
        let key = trace_key("00000000000000000000000000abc123");
        let forms = stored_forms(&key);
        assert!(forms.contains(&"0000000000abc123".to_string()));
        assert!(forms.contains(&"abc123".to_string()));
        let keys: HashSet<String> = [key].into();
        assert!(is_one_of(&keys, "ABC123"));
        assert!(!is_one_of(&keys, "abc124"));
    }
}
