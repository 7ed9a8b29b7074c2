//! A series store that grows while it is read: a live environment appends each scrape, the API
//! reads it under a lock ([`StorageSource`] for `RwLock<LiveStorage>`).
//!
//! Samples are kept uncompressed (16 bytes each): a live session is minutes to hours of one
//! application, far less than the recordings [`crate::MemStorage`] packs into chunks.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::RwLock;

use crate::labels::{Labels, Str};
use crate::storage::{
    LabelMatcher, MetricMetadata, Postings, SampleBuf, SeriesId, Storage, StorageGuard,
    StorageSource, add_metadata, posted_names, posted_values, select_indexed, series_labels,
};

#[derive(Debug, Default)]
struct Series {
    labels: Labels,
    ts: Vec<i64>,
    vals: Vec<f64>,
}

/// Series added in any order, samples appended in time order per series.
#[derive(Debug, Default)]
pub struct LiveStorage {
    series: Vec<Series>,
    ids: HashMap<Labels, SeriesId>,
    strings: HashSet<Str>,
    index: Postings,
    metadata: BTreeMap<String, Vec<MetricMetadata>>,
}

impl LiveStorage {
    /// The series for metric `name` with `labels` (any order; empty values ignored), added if new.
    pub fn series<'a>(
        &mut self,
        name: &str,
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> SeriesId {
        let labels = series_labels(&mut self.strings, name, labels);
        if let Some(&id) = self.ids.get(&labels) {
            return id;
        }
        let id = self.series.len() as SeriesId;
        for (k, v) in labels.pairs() {
            // Ids only grow, so every postings list stays ascending.
            self.index
                .entry(k.clone())
                .or_default()
                .entry(v.clone())
                .or_default()
                .push(id);
        }
        self.ids.insert(labels.clone(), id);
        self.series.push(Series {
            labels,
            ..Series::default()
        });
        id
    }

    /// Appends a sample (ms since the epoch). A sample at the time of the last one replaces it;
    /// an older one is dropped, as Prometheus drops out-of-order samples.
    pub fn push(&mut self, id: SeriesId, t_ms: i64, value: f64) {
        let Some(s) = self.series.get_mut(id as usize) else {
            return;
        };
        match s.ts.last() {
            Some(&last) if t_ms < last => {}
            Some(&last) if t_ms == last => {
                if let Some(v) = s.vals.last_mut() {
                    *v = value;
                }
            }
            _ => {
                s.ts.push(t_ms);
                s.vals.push(value);
            }
        }
    }

    /// Records type/help/unit of a metric family.
    pub fn set_metadata(&mut self, metric: &str, kind: &str, help: &str, unit: &str) {
        add_metadata(&mut self.metadata, metric, kind, help, unit);
    }

    pub fn num_series(&self) -> usize {
        self.series.len()
    }
}

impl Storage for LiveStorage {
    fn select(&self, matchers: &[LabelMatcher]) -> Vec<SeriesId> {
        let mut ids = select_indexed(
            &self.index,
            self.series.len(),
            |id| &self.series[id as usize].labels,
            matchers,
        );
        // Ids are in the order series appeared; the evaluator wants label order.
        ids.sort_by(|a, b| {
            self.series[*a as usize]
                .labels
                .cmp(&self.series[*b as usize].labels)
        });
        ids
    }

    fn series_labels(&self, id: SeriesId) -> &Labels {
        &self.series[id as usize].labels
    }

    fn read_samples(&self, id: SeriesId, mint: i64, maxt: i64, out: &mut SampleBuf) {
        let Some(s) = self.series.get(id as usize) else {
            return;
        };
        let lo = s.ts.partition_point(|&t| t < mint);
        let hi = s.ts.partition_point(|&t| t <= maxt);
        out.ts.extend_from_slice(&s.ts[lo..hi.max(lo)]);
        out.vals.extend_from_slice(&s.vals[lo..hi.max(lo)]);
    }

    fn time_bounds(&self, id: SeriesId) -> Option<(i64, i64)> {
        let s = self.series.get(id as usize)?;
        Some((*s.ts.first()?, *s.ts.last()?))
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

struct Locked<'a>(std::sync::RwLockReadGuard<'a, LiveStorage>);

impl<'a> std::ops::Deref for Locked<'a> {
    type Target = dyn Storage + 'a;
    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl StorageSource for RwLock<LiveStorage> {
    fn read(&self) -> StorageGuard<'_> {
        // A writer that panicked left whole samples behind: keep serving.
        Box::new(Locked(self.read().unwrap_or_else(|e| e.into_inner())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Engine, MemStorage, StorageBuilder, Value, parse};

    /// The same samples, appended scrape by scrape or built at once, answer queries alike.
    #[test]
    fn answers_as_a_store_built_at_once() {
        let mut live = LiveStorage::default();
        let mut b = StorageBuilder::new();
        for k in 0..40i64 {
            for (code, pod) in [("500", "b"), ("200", "a"), ("200", "c")] {
                if code == "500" && k < 10 {
                    continue; // a series that appears later gets a later id
                }
                let labels = [("code", code), ("pod", pod)];
                let id = live.series("http_requests_total", labels);
                live.push(id, k * 15_000, (k * 3) as f64);
                b.add_sample("http_requests_total", labels, k * 15_000, (k * 3) as f64);
            }
        }
        let built: MemStorage = b.build();
        for q in [
            "http_requests_total",
            "sum by (code) (rate(http_requests_total[1m]))",
            "http_requests_total{code=~\"5..\"}",
            "topk(1, http_requests_total)",
        ] {
            let expr = parse(q).unwrap();
            let a = Engine::default().instant(&live, &expr, 585_000).unwrap();
            let e = Engine::default().instant(&built, &expr, 585_000).unwrap();
            assert_eq!(format!("{a:?}"), format!("{e:?}"), "{q}");
            assert!(matches!(a, Value::Vector(ref v) if !v.is_empty()), "{q}");
        }
        assert_eq!(live.label_values("pod").len(), 3);
    }

    #[test]
    fn keeps_samples_in_order() {
        let mut live = LiveStorage::default();
        let id = live.series("up", [("job", "x")]);
        live.push(id, 2000, 1.0);
        live.push(id, 1000, 5.0); // out of order: dropped
        live.push(id, 2000, 2.0); // same time: replaces
        live.push(id, 3000, 3.0);
        let mut buf = SampleBuf::default();
        live.read_samples(id, 0, 10_000, &mut buf);
        assert_eq!(buf.ts, [2000, 3000]);
        assert_eq!(buf.vals, [2.0, 3.0]);
        live.push(99, 1, 1.0); // an unknown id is ignored, not a panic
    }
}
