//! What the tools derive from a source's tables (the objects' owners, the topology, the metric
//! series, the flat event and alert frames), kept across tool calls while the tables it was
//! derived from are unchanged. An agent asks many questions of the same data, and reading and
//! reshaping the tables is most of what a call costs; the questions themselves are cheap. A value
//! is derived again when a table it comes from has a new version (a live session's recording
//! that took rows since).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use schemas::tables::Table;

use crate::{Result, Source};

/// A value derived from some of a source's tables.
pub(crate) trait Derived: Any + Send + Sync + Sized {
    /// The tables it is derived from.
    const TABLES: &'static [Table];
    fn derive(source: &Source) -> Result<Self>;
}

/// One derived value and the versions of the tables it was derived from.
struct Slot {
    versions: Vec<u64>,
    value: Arc<dyn Any + Send + Sync>,
}

/// One slot per derived type. Each slot has its own lock, so that deriving one value may ask for
/// another, and two calls wanting the same value derive it once.
#[derive(Default)]
pub(crate) struct Cache {
    slots: Mutex<HashMap<TypeId, Arc<Mutex<Option<Slot>>>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Cache {
    /// The value of type `T` derived from tables at `versions`, derived now if the kept one is
    /// of other versions (or there is none).
    pub fn get<T: Derived>(&self, source: &Source, versions: Vec<u64>) -> Result<Arc<T>> {
        let slot = lock(&self.slots)
            .entry(TypeId::of::<T>())
            .or_default()
            .clone();
        let mut slot = lock(&slot);
        if let Some(kept) = slot.as_ref().filter(|s| s.versions == versions)
            && let Ok(value) = kept.value.clone().downcast::<T>()
        {
            return Ok(value);
        }
        // The stale value goes before the new one is derived, so the two are never both held.
        *slot = None;
        let value = Arc::new(T::derive(source)?);
        *slot = Some(Slot {
            versions,
            value: value.clone(),
        });
        Ok(value)
    }
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("values", &lock(&self.slots).len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datasets::Recording;
    use schemas::tables::{ChangeType, EventRow, Labels, MetricSample, ObjectRow, Row};
    use schemas::time::Clock;
    use serde_json::{Value, json};

    use crate::owners::Owners;
    use crate::{Source, run};

    const S: i64 = 1_000_000_000;

    fn event(i: i64) -> Row {
        Row::Event(EventRow {
            time_ns: i * S,
            namespace: "ns".into(),
            name: format!("web-1.{i}"),
            uid: format!("e{i}"),
            event_type: "Warning".into(),
            reason: "BackOff".into(),
            count: 1,
            involved_kind: "Pod".into(),
            involved_name: "web-1".into(),
            ..Default::default()
        })
    }

    fn pod(name: &str) -> Row {
        Row::Object(ObjectRow {
            observed_ns: S,
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: Some("ns".into()),
            name: name.into(),
            uid: name.into(),
            resource_version: "1".into(),
            change: ChangeType::Added,
            object: json!({"metadata": {"name": name, "namespace": "ns"}}).to_string(),
        })
    }

    fn sample(t: i64) -> Row {
        Row::Metric(MetricSample {
            metric: "memory_bytes".into(),
            labels: Labels::from([("pod".to_string(), "web-1".to_string())]),
            time_ns: t * S,
            value: t as f64,
        })
    }

    fn ask(source: &Source, tool: &str, args: Value) -> Value {
        run(source, tool, args).unwrap_or_else(|e| panic!("{tool}: {e}"))
    }

    #[test]
    fn what_is_derived_is_kept_until_its_tables_change() {
        let tmp = tempfile::tempdir().unwrap();
        let rec = Arc::new(Recording::create(&tmp.path().join("rec")).unwrap());
        let source = Source::new(rec.clone(), Clock::frozen(3600 * S));
        rec.push(&[pod("web-1")]).unwrap();
        let first = Owners::load(&source).unwrap();
        assert!(
            Arc::ptr_eq(&first, &Owners::load(&source).unwrap()),
            "nothing changed"
        );
        rec.push(&[event(1)]).unwrap();
        assert!(
            Arc::ptr_eq(&first, &Owners::load(&source).unwrap()),
            "only the events changed"
        );
        rec.push(&[pod("web-2")]).unwrap();
        assert!(
            !Arc::ptr_eq(&first, &Owners::load(&source).unwrap()),
            "the objects changed"
        );
    }

    #[test]
    fn answers_follow_a_recording_as_it_grows() {
        let tmp = tempfile::tempdir().unwrap();
        let rec = Arc::new(Recording::create(&tmp.path().join("rec")).unwrap());
        let source = Source::new(rec.clone(), Clock::frozen(3600 * S));
        rec.push(&[pod("web-1"), event(1), sample(1)]).unwrap();

        let events = |s: &Source| ask(s, "event_analysis", json!({}))["total_count"].clone();
        let nodes = |s: &Source| ask(s, "build_topology", json!({}))["nodes"].clone();
        let points = |s: &Source| {
            ask(s, "metric_analysis", json!({"k8_object_name": "pod/web-1"}))[0]["count"].clone()
        };
        let before = (events(&source), nodes(&source), points(&source));
        assert_eq!(
            before,
            (json!(1), json!(2), json!(1)),
            "nodes: the Namespace and the Pod"
        );
        assert_eq!((events(&source), nodes(&source), points(&source)), before);

        rec.push(&[event(2), sample(2), sample(3)]).unwrap();
        assert_eq!(events(&source), json!(2));
        assert_eq!(points(&source), json!(3));
        assert_eq!(nodes(&source), before.1, "no new object");
        rec.push(&[pod("web-2")]).unwrap();
        assert_eq!(nodes(&source), json!(3));
        // A clone shares what was derived, and sees the same rows.
        assert_eq!(events(&source.clone()), json!(2));
    }
}
