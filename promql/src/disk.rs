//! A series store served from a Parquet file of samples, read on demand.
//!
//! The file holds one row per sample with the columns `metric` (string), `labels` (map of string
//! to string), `time` (timestamp, ns) and `value` (float64), sorted by metric, then labels, then
//! time, with page statistics (faultline's `metrics` table), read in place through
//! [`datasets::in_place`]. Nothing is read when the store is made; each step reads only what it
//! needs and keeps it:
//!
//! 1. The metric directory (first query): every metric name and its row range, from the page
//!    statistics of the `metric` column; only pages holding more than one name are decoded.
//! 2. A metric's series (first query naming it): its `time` column is decoded once. Times only
//!    grow within a series, so each drop in time starts a new series; since rows are sorted by
//!    labels, a run whose first and last rows carry the same labels is one series, and runs
//!    whose ends differ are bisected with a few label reads. Labels are decoded for a handful of
//!    rows per series, never for the whole run.
//! 3. Samples (queries): per metric and time block, the `time` and `value` pages that overlap
//!    the block are decoded for every series of the metric at once, and kept in a cache of
//!    bounded size (least recently used blocks go first).
//!
//! Label names and values without a metric name need every metric's series: they are computed
//! on first use and kept. A second, in-memory store may be laid over the file (series the file
//! does not have, such as `ALERTS`); a series in both is merged, the overlay winning on equal
//! times, as if its samples had been added after the file's.
//!
//! Read errors (a file changed or damaged under a running server) cannot be answered as data:
//! they panic with the file and the cause, which the HTTP API reports as an internal error.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use arrow_array::cast::AsArray;
use arrow_array::{Array, MapArray};
use arrow_schema::ArrowError;
use datasets::in_place::{Bound, TableFile, float64s, maps, strings, times};
use datasets::{DatasetError, Result};
use parquet::arrow::ProjectionMask;
use schemas::tables::Table;
use schemas::tables::columns::metrics as col;

use crate::labels::{Labels, METRIC_NAME, Str};
use crate::storage::{LabelMatcher, MemStorage, MetricMetadata, SampleBuf, SeriesId, Storage};

const NS_PER_MS: i64 = 1_000_000;

/// Tuning of a [`DiskStorage`].
#[derive(Clone, Copy, Debug)]
pub struct DiskConfig {
    /// Length of the time blocks samples are decoded and cached in (ms).
    pub block_ms: i64,
    /// Bytes of decoded samples kept at most.
    pub cache_bytes: usize,
    /// Rows per decoded batch.
    pub batch_rows: usize,
}

impl Default for DiskConfig {
    fn default() -> Self {
        DiskConfig {
            block_ms: 3_600_000,
            cache_bytes: 64 << 20,
            batch_rows: 64 * 1024,
        }
    }
}

/// A [`Storage`] over a sorted Parquet file of samples; see the module documentation.
pub struct DiskStorage {
    path: PathBuf,
    /// Samples after this time (ns) are hidden, as if not recorded yet.
    until_ns: i64,
    metadata: BTreeMap<String, Vec<MetricMetadata>>,
    overlay: MemStorage,
    config: DiskConfig,
    file: OnceLock<std::result::Result<FileIndex, String>>,
    /// Series id → (metric index, series index within the metric), in order of discovery.
    ids: RwLock<Vec<(u32, u32)>>,
    cache: Mutex<BlockCache>,
    all_labels: OnceLock<BTreeMap<Str, BTreeSet<Str>>>,
}

/// What the file's footer and metric column tell: where each metric's rows are.
struct FileIndex {
    /// The file, its footer and page index read.
    file: TableFile,
    projection: Projections,
    /// Every metric, sorted by name: the file's and the overlay's.
    metrics: Vec<MetricEntry>,
}

struct Projections {
    metric: ProjectionMask,
    time: ProjectionMask,
    time_value: ProjectionMask,
    labels_time: ProjectionMask,
}

struct MetricEntry {
    name: Str,
    /// Rows of the file (empty when only the overlay has the metric).
    rows: Range<u64>,
    series: OnceLock<MetricSeries>,
}

/// The series of one metric, sorted by labels.
struct MetricSeries {
    series: Vec<SeriesInfo>,
    /// Every run of rows of one label set, in row order, with the series it belongs to.
    runs: Vec<Run>,
}

/// A run found in the file: its labels, rows, and first and last time (ms).
type FoundRun = (Labels, Run, (i64, i64));

#[derive(Clone, Copy)]
struct Run {
    /// Visible rows (those at or before `until_ns`).
    rows: (u64, u64),
    series: u32,
}

struct SeriesInfo {
    id: SeriesId,
    labels: Labels,
    /// Indices into `MetricSeries::runs`, in row order (usually one).
    runs: Vec<u32>,
    overlay: Option<SeriesId>,
    /// First and last visible sample time (ms).
    bounds: (i64, i64),
}

/// Decoded samples of every run of one metric within one time block.
struct Block {
    /// Per run: the range of `ts`/`vals` holding its samples.
    offsets: Vec<u32>,
    ts: Vec<i64>,
    vals: Vec<f64>,
}

impl Block {
    fn bytes(&self) -> usize {
        self.offsets.len() * 4 + self.ts.len() * 16
    }
}

#[derive(Default)]
struct BlockCache {
    blocks: HashMap<(u32, i64), (Arc<Block>, u64)>,
    bytes: usize,
    tick: u64,
}

impl BlockCache {
    fn get(&mut self, key: (u32, i64)) -> Option<Arc<Block>> {
        self.tick += 1;
        let tick = self.tick;
        self.blocks.get_mut(&key).map(|(b, used)| {
            *used = tick;
            b.clone()
        })
    }

    fn put(&mut self, key: (u32, i64), block: Arc<Block>, budget: usize) {
        self.tick += 1;
        self.bytes += block.bytes();
        if let Some((old, _)) = self.blocks.insert(key, (block, self.tick)) {
            self.bytes -= old.bytes();
        }
        while self.bytes > budget && self.blocks.len() > 1 {
            let Some((&oldest, _)) = self.blocks.iter().min_by_key(|(_, (_, used))| *used) else {
                break;
            };
            if let Some((b, _)) = self.blocks.remove(&oldest) {
                self.bytes -= b.bytes();
            }
        }
    }
}

impl DiskStorage {
    /// A store over `path` showing samples up to `until_ns`, with `overlay`'s series added and
    /// `metadata` served as is. Nothing is read until the first query; [`DiskStorage::open`]
    /// reads the footer at once.
    pub fn new(
        path: &Path,
        until_ns: i64,
        overlay: MemStorage,
        metadata: BTreeMap<String, Vec<MetricMetadata>>,
        config: DiskConfig,
    ) -> Self {
        DiskStorage {
            path: path.to_path_buf(),
            until_ns,
            metadata,
            overlay,
            config,
            file: OnceLock::new(),
            ids: RwLock::new(Vec::new()),
            cache: Mutex::new(BlockCache::default()),
            all_labels: OnceLock::new(),
        }
    }

    /// Reads the footer and the metric directory now, reporting a file that is not a sorted
    /// sample table as an error instead of at the first query.
    pub fn open(&self) -> std::result::Result<(), String> {
        self.index_result().map(|_| ())
    }

    /// Bytes of samples held in the cache.
    pub fn cached_bytes(&self) -> usize {
        self.cache.lock().expect("cache lock").bytes
    }

    fn index_result(&self) -> std::result::Result<&FileIndex, String> {
        self.file
            .get_or_init(|| {
                let started = std::time::Instant::now();
                // The error names the file.
                let index = FileIndex::load(&self.path, &self.overlay, self.config.batch_rows)
                    .map_err(|e| e.to_string());
                tracing::debug!(
                    file = %self.path.display(),
                    metrics = index.as_ref().map_or(0, |i| i.metrics.len()),
                    took_ms = started.elapsed().as_millis() as u64,
                    "metric directory read"
                );
                index
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    fn index(&self) -> &FileIndex {
        self.index_result().unwrap_or_else(|e| panic!("{e}"))
    }

    /// The series of metric `m`, discovered on first use.
    fn series_of(&self, m: usize) -> &MetricSeries {
        let index = self.index();
        let entry = &index.metrics[m];
        entry.series.get_or_init(|| {
            let started = std::time::Instant::now();
            let runs = index
                .discover(entry, self.until_ns, self.config.batch_rows)
                .unwrap_or_else(|e| panic!("metric {}: {e}", entry.name));
            let series = self.group_series(m, &entry.name, runs);
            tracing::debug!(
                metric = %entry.name,
                rows = entry.rows.end - entry.rows.start,
                series = series.series.len(),
                took_ms = started.elapsed().as_millis() as u64,
                "series found"
            );
            series
        })
    }

    /// Groups runs by their label set (runs whose labels differ only by empty values are one
    /// series), adds the overlay's series, sorts by labels and hands out ids.
    fn group_series(&self, m: usize, name: &str, found: Vec<FoundRun>) -> MetricSeries {
        let mut by_labels: BTreeMap<Labels, SeriesInfo> = BTreeMap::new();
        let mut runs = Vec::with_capacity(found.len());
        for (labels, run, bounds) in found {
            let r = runs.len() as u32;
            runs.push(run);
            series_covering(&mut by_labels, labels, bounds).runs.push(r);
        }
        if !name.is_empty() {
            for oid in self
                .overlay
                .select(&[LabelMatcher::equal(METRIC_NAME, name)])
            {
                let Some(bounds) = self.overlay.time_bounds(oid) else {
                    continue;
                };
                let labels = self.overlay.series_labels(oid).clone();
                series_covering(&mut by_labels, labels, bounds).overlay = Some(oid);
            }
        }
        let mut series: Vec<SeriesInfo> = by_labels.into_values().collect();
        let mut ids = self.ids.write().expect("ids lock");
        for (i, s) in series.iter_mut().enumerate() {
            s.id = ids.len() as SeriesId;
            ids.push((m as u32, i as u32));
            for &r in &s.runs {
                runs[r as usize].series = i as u32;
            }
        }
        MetricSeries { series, runs }
    }

    fn info(&self, id: SeriesId) -> (usize, &SeriesInfo) {
        let (m, i) = self.ids.read().expect("ids lock")[id as usize];
        let m = m as usize;
        (m, &self.series_of(m).series[i as usize])
    }

    /// Indices of the metrics whose name satisfies every `__name__` matcher.
    fn metrics_matching(&self, matchers: &[LabelMatcher]) -> Vec<usize> {
        let metrics = &self.index().metrics;
        let by_name: Vec<&LabelMatcher> =
            matchers.iter().filter(|m| m.name == METRIC_NAME).collect();
        if let Some(eq) = by_name
            .iter()
            .find(|m| matches!(m.kind, crate::storage::MatchKind::Equal))
        {
            return metrics
                .binary_search_by(|e| (*e.name).cmp(eq.value.as_str()))
                .ok()
                .filter(|&i| by_name.iter().all(|m| m.matches(&metrics[i].name)))
                .into_iter()
                .collect();
        }
        (0..metrics.len())
            .filter(|&i| by_name.iter().all(|m| m.matches(&metrics[i].name)))
            .collect()
    }

    /// The decoded blocks `b0..=b1` of metric `m`, from the cache or, for those missing, from
    /// one read of the file.
    fn blocks(&self, m: usize, b0: i64, b1: i64) -> Vec<Arc<Block>> {
        let mut found: Vec<Option<Arc<Block>>> = {
            let mut cache = self.cache.lock().expect("cache lock");
            (b0..=b1).map(|b| cache.get((m as u32, b))).collect()
        };
        let missing: Vec<i64> = (b0..=b1)
            .zip(&found)
            .filter(|(_, f)| f.is_none())
            .map(|(b, _)| b)
            .collect();
        if let (Some(&lo), Some(&hi)) = (missing.first(), missing.last()) {
            let started = std::time::Instant::now();
            let index = self.index();
            let read = index
                .read_blocks(
                    self.series_of(m),
                    lo,
                    hi,
                    self.config.block_ms,
                    self.config.batch_rows,
                )
                .unwrap_or_else(|e| panic!("metric {}: {e}", index.metrics[m].name));
            tracing::debug!(
                metric = %index.metrics[m].name,
                blocks = hi - lo + 1,
                samples = read.iter().map(|b| b.ts.len()).sum::<usize>(),
                took_ms = started.elapsed().as_millis() as u64,
                "samples decoded"
            );
            let mut cache = self.cache.lock().expect("cache lock");
            for (b, block) in (lo..=hi).zip(read) {
                let block = Arc::new(block);
                let slot = &mut found[(b - b0) as usize];
                if slot.is_none() {
                    *slot = Some(block.clone());
                    cache.put((m as u32, b), block, self.config.cache_bytes);
                }
            }
        }
        found.into_iter().flatten().collect()
    }

    fn all_labels(&self) -> &BTreeMap<Str, BTreeSet<Str>> {
        self.all_labels.get_or_init(|| {
            let mut all: BTreeMap<Str, BTreeSet<Str>> = BTreeMap::new();
            for m in 0..self.index().metrics.len() {
                for s in &self.series_of(m).series {
                    for (k, v) in s.labels.pairs() {
                        all.entry(k.clone()).or_default().insert(v.clone());
                    }
                }
            }
            all
        })
    }
}

impl Storage for DiskStorage {
    fn select(&self, matchers: &[LabelMatcher]) -> Vec<SeriesId> {
        let rest: Vec<&LabelMatcher> = matchers.iter().filter(|m| m.name != METRIC_NAME).collect();
        let mut out: Vec<(&Labels, SeriesId)> = Vec::new();
        for m in self.metrics_matching(matchers) {
            for s in &self.series_of(m).series {
                if rest.iter().all(|x| x.matches(s.labels.get(&x.name))) {
                    out.push((&s.labels, s.id));
                }
            }
        }
        // Metrics are in name order, but a label name sorting before `__name__` would order
        // label sets differently: sort as the in-memory store does.
        out.sort_unstable();
        out.into_iter().map(|(_, id)| id).collect()
    }

    fn series_labels(&self, id: SeriesId) -> &Labels {
        &self.info(id).1.labels
    }

    fn read_samples(&self, id: SeriesId, mint: i64, maxt: i64, out: &mut SampleBuf) {
        let (m, info) = self.info(id);
        let (lo, hi) = (mint.max(info.bounds.0), maxt.min(info.bounds.1));
        let from = out.ts.len();
        let merge = info.runs.len() + usize::from(info.overlay.is_some()) > 1;
        let mut parts: Vec<SampleBuf> = Vec::new();
        if lo <= hi && !info.runs.is_empty() {
            let mut per_run: Vec<SampleBuf> = vec![SampleBuf::default(); info.runs.len()];
            let (b0, b1) = (
                lo.div_euclid(self.config.block_ms),
                hi.div_euclid(self.config.block_ms),
            );
            for block in self.blocks(m, b0, b1) {
                for (k, &r) in info.runs.iter().enumerate() {
                    let (a, z) = (
                        block.offsets[r as usize] as usize,
                        block.offsets[r as usize + 1] as usize,
                    );
                    let ts = &block.ts[a..z];
                    let (i, j) = (
                        ts.partition_point(|&t| t < lo),
                        ts.partition_point(|&t| t <= hi),
                    );
                    per_run[k].ts.extend_from_slice(&ts[i..j]);
                    per_run[k].vals.extend_from_slice(&block.vals[a + i..a + j]);
                }
            }
            parts = per_run;
        }
        if let Some(oid) = info.overlay {
            let mut o = SampleBuf::default();
            self.overlay.read_samples(oid, mint, maxt, &mut o);
            parts.push(o);
        }
        if !merge {
            for p in parts {
                out.ts.extend_from_slice(&p.ts);
                out.vals.extend_from_slice(&p.vals);
            }
        } else {
            // Later sources win on equal times, as later writes do in the in-memory store.
            let mut all: Vec<(i64, usize, f64)> = parts
                .iter()
                .enumerate()
                .flat_map(|(k, p)| p.ts.iter().zip(&p.vals).map(move |(&t, &v)| (t, k, v)))
                .collect();
            all.sort_by_key(|&(t, k, _)| (t, k));
            for (t, _, v) in all {
                out.ts.push(t);
                out.vals.push(v);
            }
        }
        dedup_last(out, from);
    }

    fn time_bounds(&self, id: SeriesId) -> Option<(i64, i64)> {
        Some(self.info(id).1.bounds)
    }

    fn label_names(&self) -> Vec<Str> {
        self.all_labels().keys().cloned().collect()
    }

    fn label_values(&self, name: &str) -> Vec<Str> {
        self.all_labels()
            .get(name)
            .map(|v| v.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn metadata(&self) -> &BTreeMap<String, Vec<MetricMetadata>> {
        &self.metadata
    }
}

/// Keeps the last of samples sharing a time (two samples in one millisecond, or a sample in
/// both the file and the overlay), from `from` on.
fn dedup_last(out: &mut SampleBuf, from: usize) {
    let n = out.ts.len();
    if n - from < 2 || out.ts[from..].windows(2).all(|w| w[0] < w[1]) {
        return;
    }
    let mut w = from;
    for i in from..n {
        if i + 1 < n && out.ts[i + 1] == out.ts[i] {
            continue;
        }
        out.ts[w] = out.ts[i];
        out.vals[w] = out.vals[i];
        w += 1;
    }
    out.ts.truncate(w);
    out.vals.truncate(w);
}

/// A map column's entries at one row as labels (`__name__` and empty values left out).
fn labels_at(map: &MapArray, row: usize, metric: &str) -> Labels {
    let offsets = map.value_offsets();
    let keys = map.keys().as_string::<i32>();
    let values = map.values().as_string::<i32>();
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    if !metric.is_empty() {
        pairs.push((METRIC_NAME, metric));
    }
    for j in offsets[row] as usize..offsets[row + 1] as usize {
        let k = keys.value(j);
        if k != METRIC_NAME && !values.is_null(j) && !values.value(j).is_empty() {
            pairs.push((k, values.value(j)));
        }
    }
    Labels::new(pairs)
}

/// The raw entries of a map at one row, for comparing rows exactly as the file's sort does.
fn raw_entries(map: &MapArray, row: usize) -> Vec<(String, Option<String>)> {
    let offsets = map.value_offsets();
    let keys = map.keys().as_string::<i32>();
    let values = map.values().as_string::<i32>();
    (offsets[row] as usize..offsets[row + 1] as usize)
        .map(|j| {
            (
                keys.value(j).to_string(),
                (!values.is_null(j)).then(|| values.value(j).to_string()),
            )
        })
        .collect()
}

/// The series with `labels`, created if new, its time bounds widened to cover `bounds`.
fn series_covering(
    by_labels: &mut BTreeMap<Labels, SeriesInfo>,
    labels: Labels,
    bounds: (i64, i64),
) -> &mut SeriesInfo {
    let s = by_labels.entry(labels.clone()).or_insert(SeriesInfo {
        id: 0,
        labels,
        runs: Vec::new(),
        overlay: None,
        bounds,
    });
    s.bounds = (s.bounds.0.min(bounds.0), s.bounds.1.max(bounds.1));
    s
}

/// What one probe of a row tells: its raw label entries, labels and time.
#[derive(Clone)]
struct Probe {
    raw: Vec<(String, Option<String>)>,
    labels: Labels,
    time: i64,
}

impl FileIndex {
    fn load(path: &Path, overlay: &MemStorage, batch_rows: usize) -> Result<FileIndex> {
        let file = TableFile::open(path, Table::Metrics)?;
        // Made once: each also checks that the file has the column.
        let projection = Projections {
            metric: file.projection(&[col::METRIC])?,
            time: file.projection(&[col::TIME])?,
            time_value: file.projection(&[col::TIME, col::VALUE])?,
            labels_time: file.projection(&[col::LABELS, col::TIME])?,
        };
        let mut index = FileIndex {
            file,
            projection,
            metrics: Vec::new(),
        };
        let mut names = index.metric_directory(batch_rows)?;
        // Metrics only the overlay has.
        for name in overlay.label_values(METRIC_NAME) {
            if let Err(i) = names.binary_search_by(|(n, _)| (**n).cmp(&*name)) {
                names.insert(i, (name, 0..0));
            }
        }
        index.metrics = names
            .into_iter()
            .map(|(name, rows)| MetricEntry {
                name,
                rows,
                series: OnceLock::new(),
            })
            .collect();
        Ok(index)
    }

    /// An error about the file's contents.
    fn invalid(&self, message: String) -> DatasetError {
        DatasetError::invalid(self.file.path(), message)
    }

    /// A column of a decoded batch that is missing or of another type.
    fn arrow(&self) -> impl Fn(ArrowError) -> DatasetError + Copy + '_ {
        |e| DatasetError::arrow(self.file.path(), e)
    }

    /// Every metric name with its rows. A page whose statistics give one name is that name's;
    /// the others are decoded.
    fn metric_directory(&self, batch_rows: usize) -> Result<Vec<(Str, Range<u64>)>> {
        // (rows, Some(name)) when the statistics tell, (rows, None) when the page must be read.
        let mut pages: Vec<(Range<u64>, Option<String>)> = self
            .file
            .pages(col::METRIC, 0..self.file.num_rows())?
            .map(|page| {
                let name = match page.bounds {
                    Some((Bound::Bytes(lo), Bound::Bytes(hi))) if lo == hi => {
                        std::str::from_utf8(lo).ok().map(String::from)
                    }
                    _ => None,
                };
                (page.rows, name)
            })
            .collect();
        let unknown: Vec<Range<u64>> = pages
            .iter()
            .filter(|(_, n)| n.is_none())
            .map(|(r, _)| r.clone())
            .collect();
        // Runs of one name among the decoded rows (rows arrive in ascending order).
        let mut runs: Vec<(Range<u64>, String)> = Vec::new();
        let arrow = self.arrow();
        self.file.read_ranges(
            &unknown,
            &self.projection.metric,
            batch_rows,
            |rows, batch| -> Result<()> {
                let names = strings(batch, col::METRIC).map_err(arrow)?;
                for (i, &row) in rows.iter().enumerate() {
                    let name = names.value(i);
                    match runs.last_mut() {
                        Some((r, n)) if r.end == row && n == name => r.end += 1,
                        _ => runs.push((row..row + 1, name.to_string())),
                    }
                }
                Ok(())
            },
        )?;
        pages.extend(runs.into_iter().map(|(r, n)| (r, Some(n))));
        pages.retain(|(_, n)| n.is_some());
        pages.sort_by_key(|(r, _)| r.start);
        let mut out: Vec<(Str, Range<u64>)> = Vec::new();
        for (rows, name) in pages {
            let name = name.unwrap_or_default();
            match out.last_mut() {
                Some((n, r)) if **n == *name && r.end == rows.start => r.end = rows.end,
                Some((n, _)) if **n >= *name => {
                    return Err(self.invalid(format!(
                        "rows are not sorted by metric (`{name}` at row {} after `{n}`)",
                        rows.start
                    )));
                }
                _ => out.push((name.as_str().into(), rows)),
            }
        }
        let covered: u64 = out.iter().map(|(_, r)| r.end - r.start).sum();
        if covered != self.file.num_rows() {
            return Err(self.invalid(format!(
                "the metric directory covers {covered} of {} rows",
                self.file.num_rows()
            )));
        }
        Ok(out)
    }

    /// The runs of rows of one label set within a metric's rows, visible rows only, with their
    /// labels and first and last times (ms).
    fn discover(
        &self,
        entry: &MetricEntry,
        until_ns: i64,
        batch_rows: usize,
    ) -> Result<Vec<FoundRun>> {
        if entry.rows.is_empty() {
            return Ok(Vec::new());
        }
        // Stretches where time never decreases: a decrease always starts a new series. Within a
        // stretch times grow, so its visible rows are a prefix.
        let mut stretches: Vec<Range<u64>> = Vec::new();
        let (mut start, mut visible_end, mut prev) = (entry.rows.start, entry.rows.start, i64::MIN);
        let arrow = self.arrow();
        self.file.read_ranges(
            std::slice::from_ref(&entry.rows),
            &self.projection.time,
            batch_rows,
            |rows, batch| -> Result<()> {
                let times = times(batch, col::TIME).map_err(arrow)?;
                for (&row, &t) in rows.iter().zip(times.values().iter()) {
                    if t < prev {
                        stretches.push(start..visible_end);
                        (start, visible_end) = (row, row);
                    }
                    if t <= until_ns {
                        visible_end = row + 1;
                    }
                    prev = t;
                }
                Ok(())
            },
        )?;
        stretches.push(start..visible_end);
        stretches.retain(|r| r.start < r.end);

        // Rows are sorted by labels: equal labels at both ends of a stretch make it one series;
        // otherwise bisect until each change of labels is between two adjacent rows.
        let mut probes: HashMap<u64, Probe> = HashMap::new();
        let mut want: Vec<u64> = stretches
            .iter()
            .flat_map(|r| [r.start, r.end - 1])
            .collect();
        let mut starts: Vec<u64> = stretches.iter().map(|r| r.start).collect();
        let mut pending: Vec<(u64, u64)> = stretches.iter().map(|r| (r.start, r.end - 1)).collect();
        while !want.is_empty() {
            self.probe(&mut want, &mut probes, &entry.name, batch_rows)?;
            let mut next = Vec::new();
            for (lo, hi) in pending {
                if probes[&lo].raw == probes[&hi].raw {
                    continue;
                }
                if hi == lo + 1 {
                    starts.push(hi);
                    continue;
                }
                let mid = lo + (hi - lo) / 2;
                want.push(mid);
                next.push((lo, mid));
                next.push((mid, hi));
            }
            pending = next;
        }
        starts.sort_unstable();
        let mut out = Vec::with_capacity(starts.len());
        for r in &stretches {
            let first = starts.partition_point(|&s| s < r.start);
            let last = starts.partition_point(|&s| s < r.end);
            for k in first..last {
                let (s, e) = (
                    starts[k],
                    starts.get(k + 1).copied().unwrap_or(r.end).min(r.end),
                );
                let (a, z) = (&probes[&s], &probes[&(e - 1)]);
                out.push((
                    a.labels.clone(),
                    Run {
                        rows: (s, e),
                        series: 0,
                    },
                    (a.time.div_euclid(NS_PER_MS), z.time.div_euclid(NS_PER_MS)),
                ));
            }
        }
        Ok(out)
    }

    /// Reads labels and time at each row of `want` not probed yet; empties `want`.
    fn probe(
        &self,
        want: &mut Vec<u64>,
        probes: &mut HashMap<u64, Probe>,
        metric: &str,
        batch_rows: usize,
    ) -> Result<()> {
        want.sort_unstable();
        want.dedup();
        want.retain(|r| !probes.contains_key(r));
        let ranges: Vec<Range<u64>> = want.drain(..).map(|r| r..r + 1).collect();
        let arrow = self.arrow();
        self.file.read_ranges(
            &ranges,
            &self.projection.labels_time,
            batch_rows,
            |rows, batch| -> Result<()> {
                let labels = maps(batch, col::LABELS).map_err(arrow)?;
                let times = times(batch, col::TIME).map_err(arrow)?;
                for (i, &row) in rows.iter().enumerate() {
                    probes.insert(
                        row,
                        Probe {
                            raw: raw_entries(labels, i),
                            labels: labels_at(labels, i, metric),
                            time: times.value(i),
                        },
                    );
                }
                Ok(())
            },
        )
    }

    /// Rows of `span` on pages of the time column that may hold a time in `[lo, hi)` (ns).
    fn time_pages(&self, span: Range<u64>, lo: i64, hi: i64) -> Result<Vec<Range<u64>>> {
        let mut out: Vec<Range<u64>> = Vec::new();
        for page in self.file.pages(col::TIME, span.clone())? {
            let overlaps = match page.bounds {
                Some((Bound::I64(min), Bound::I64(max))) => min < hi && max >= lo,
                _ => true,
            };
            let r = page.rows.start.max(span.start)..page.rows.end.min(span.end);
            if !overlaps || r.start >= r.end {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.end >= r.start => last.end = last.end.max(r.end),
                _ => out.push(r),
            }
        }
        Ok(out)
    }

    /// Decodes the samples of every run of a metric in blocks `b0..=b1` of `block_ms`.
    fn read_blocks(
        &self,
        series: &MetricSeries,
        b0: i64,
        b1: i64,
        block_ms: i64,
        batch_rows: usize,
    ) -> Result<Vec<Block>> {
        let ns = |b: i64| b.saturating_mul(block_ms).saturating_mul(NS_PER_MS);
        let (lo, hi) = (ns(b0), ns(b1.saturating_add(1)));
        let mut per_run: Vec<SampleBuf> = vec![SampleBuf::default(); series.runs.len()];
        if let (Some(first), Some(last)) = (series.runs.first(), series.runs.last()) {
            let pages = self.time_pages(first.rows.0..last.rows.1, lo, hi)?;
            // The runs' rows on those pages (both lists are sorted).
            let mut ranges: Vec<Range<u64>> = Vec::new();
            let mut p = 0;
            for run in &series.runs {
                while p < pages.len() && pages[p].end <= run.rows.0 {
                    p += 1;
                }
                let mut q = p;
                while q < pages.len() && pages[q].start < run.rows.1 {
                    let r = pages[q].start.max(run.rows.0)..pages[q].end.min(run.rows.1);
                    if r.start < r.end {
                        ranges.push(r);
                    }
                    q += 1;
                }
            }
            let mut run = 0usize;
            let arrow = self.arrow();
            self.file.read_ranges(
                &ranges,
                &self.projection.time_value,
                batch_rows,
                |rows, batch| -> Result<()> {
                    let times = times(batch, col::TIME).map_err(arrow)?;
                    let values = float64s(batch, col::VALUE).map_err(arrow)?;
                    for (i, &row) in rows.iter().enumerate() {
                        while series.runs[run].rows.1 <= row {
                            run += 1;
                        }
                        let t = times.value(i);
                        if t >= lo && t < hi {
                            per_run[run].ts.push(t.div_euclid(NS_PER_MS));
                            per_run[run].vals.push(values.value(i));
                        }
                    }
                    Ok(())
                },
            )?;
        }
        let mut blocks = Vec::new();
        for b in b0..=b1 {
            let (from, to) = (
                b.saturating_mul(block_ms),
                b.saturating_add(1).saturating_mul(block_ms),
            );
            let mut block = Block {
                offsets: vec![0],
                ts: Vec::new(),
                vals: Vec::new(),
            };
            for s in &per_run {
                let (i, j) = (
                    s.ts.partition_point(|&t| t < from),
                    s.ts.partition_point(|&t| t < to),
                );
                block.ts.extend_from_slice(&s.ts[i..j]);
                block.vals.extend_from_slice(&s.vals[i..j]);
                block.offsets.push(block.ts.len() as u32);
            }
            block.ts.shrink_to_fit();
            block.vals.shrink_to_fit();
            blocks.push(block);
        }
        Ok(blocks)
    }
}
