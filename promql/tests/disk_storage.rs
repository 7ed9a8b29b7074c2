//! The disk-backed store answers exactly as the in-memory store built from the same samples:
//! series, label names and values, time bounds, samples over any window, and query results,
//! with files cut into row groups and pages small enough that reads really skip, and a cache
//! small enough to evict.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use promql::labels::METRIC_NAME;
use promql::storage::{MatchKind, SampleBuf};
use promql::{
    DiskConfig, DiskStorage, Engine, LabelMatcher, MemStorage, Storage, StorageBuilder, parse,
};

const S: i64 = 1_000_000_000; // ns per second

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Samples with every shape the discovery must get right.
fn edge_rows() -> Vec<SampleRow> {
    let mut rows = Vec::new();
    let mut push = |metric: &str, l: &[(&str, &str)], times: &mut dyn Iterator<Item = i64>| {
        for t in times {
            rows.push((metric.to_string(), labels(l), t, (t / S) as f64 * 0.5));
        }
    };
    // Plain series, all over the window.
    for i in ["a", "b", "c"] {
        push(
            "req_total",
            &[("job", "api"), ("instance", i)],
            &mut (0..300).map(|k| k * 15 * S),
        );
    }
    // One pod replaced by another: the second starts after the first ends, so time never
    // drops between them (only labels tell them apart).
    push(
        "mem_bytes",
        &[("pod", "p1")],
        &mut (0..100).map(|k| k * 15 * S),
    );
    push(
        "mem_bytes",
        &[("pod", "p2")],
        &mut (100..300).map(|k| k * 15 * S),
    );
    push(
        "mem_bytes",
        &[("pod", "p3")],
        &mut (300..310).map(|k| k * 15 * S),
    );
    // Label sets equal but for empty values are one series; and two samples in one millisecond.
    push(
        "gauge",
        &[("x", ""), ("y", "1")],
        &mut (0..50).map(|k| k * 30 * S),
    );
    push(
        "gauge",
        &[("x", ""), ("y", "2")],
        &mut (0..50).map(|k| k * 30 * S),
    );
    push(
        "gauge",
        &[("y", "1")],
        &mut (0..50).map(|k| k * 30 * S + 7 * S),
    );
    push(
        "gauge",
        &[("y", "3")],
        &mut [10 * S + 100, 10 * S + 900, 20 * S].into_iter(),
    );
    // A series recorded only after the visible end, and one straddling it.
    push(
        "late",
        &[("k", "v")],
        &mut (0..10).map(|k| 5000 * S + k * S),
    );
    push(
        "late",
        &[("k", "w")],
        &mut (0..20).map(|k| 4200 * S + k * 60 * S),
    );
    // Many short series of one metric, so row groups and pages hold several series each.
    for i in 0..40 {
        let name = format!("s{i:02}");
        push(
            "many",
            &[
                ("id", name.as_str()),
                ("zone", if i % 2 == 0 { "x" } else { "y" }),
            ],
            &mut (0..(i + 3)).map(move |k| (i * 10 + k) * 15 * S),
        );
    }
    rows
}

/// Series only the overlay has, and one it shares with the file (its samples win on equal times).
fn overlay_rows() -> Vec<SampleRow> {
    let mut rows = Vec::new();
    for k in 0..20 {
        rows.push((
            "ALERTS".to_string(),
            labels(&[("alertname", "High"), ("alertstate", "firing")]),
            k * 60 * S,
            1.0,
        ));
        rows.push(("gauge".to_string(), labels(&[("y", "1")]), k * 30 * S, -1.0));
    }
    rows
}

fn add(b: &mut StorageBuilder, rows: &[SampleRow], until_ns: i64) {
    for (metric, l, t, v) in rows.iter().filter(|r| r.2 <= until_ns) {
        let h = b.series(metric, l.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        b.push(h, t.div_euclid(1_000_000), *v);
    }
}

/// The in-memory reference: the file's rows in file order up to `until_ns`, then the overlay.
fn memory(rows: &[SampleRow], overlay: &[SampleRow], until_ns: i64) -> MemStorage {
    let mut sorted = rows.to_vec();
    sorted.sort_by(|a, b| (&a.0, &a.1, a.2).cmp(&(&b.0, &b.1, b.2)));
    let mut b = StorageBuilder::new();
    add(&mut b, &sorted, until_ns);
    add(&mut b, overlay, i64::MAX);
    b.set_metadata("req_total", "counter", "Requests.", "");
    b.build()
}

fn disk(
    path: &Path,
    overlay: &[SampleRow],
    until_ns: i64,
    config: DiskConfig,
    metadata: &MemStorage,
) -> DiskStorage {
    let mut b = StorageBuilder::new();
    add(&mut b, overlay, i64::MAX);
    DiskStorage::new(
        path,
        until_ns,
        b.build(),
        metadata.metadata().clone(),
        config,
    )
}

fn names(st: &dyn Storage, ids: &[u32]) -> Vec<String> {
    ids.iter()
        .map(|&i| st.series_labels(i).to_string())
        .collect()
}

fn samples(st: &dyn Storage, id: u32, lo: i64, hi: i64) -> Vec<(i64, u64)> {
    let mut buf = SampleBuf::default();
    st.read_samples(id, lo, hi, &mut buf);
    assert!(
        buf.ts.windows(2).all(|w| w[0] < w[1]),
        "times in order, unique"
    );
    buf.ts
        .iter()
        .zip(&buf.vals)
        .filter(|(t, _)| (lo..=hi).contains(*t))
        .map(|(&t, v)| (t, v.to_bits()))
        .collect()
}

fn matcher(name: &str, kind: MatchKind, value: &str) -> LabelMatcher {
    LabelMatcher {
        name: name.into(),
        value: value.into(),
        kind,
    }
}

/// Compares everything a store answers; `windows` are sample windows in ms.
fn assert_same(mem: &dyn Storage, disk: &dyn Storage, windows: &[(i64, i64)], queries: &[&str]) {
    let selections: Vec<Vec<LabelMatcher>> = vec![
        vec![],
        vec![LabelMatcher::equal(METRIC_NAME, "mem_bytes")],
        vec![LabelMatcher::equal(METRIC_NAME, "gauge")],
        vec![LabelMatcher::equal(METRIC_NAME, "nothing")],
        vec![LabelMatcher::regex(METRIC_NAME, "m.*|late").unwrap()],
        vec![LabelMatcher::equal("zone", "x")],
        vec![
            LabelMatcher::equal(METRIC_NAME, "req_total"),
            matcher("instance", MatchKind::NotEqual, "b"),
        ],
        vec![LabelMatcher::equal("x", "")],
        vec![LabelMatcher::regex("pod", "p[23]").unwrap()],
        vec![matcher(METRIC_NAME, MatchKind::NotEqual, "many")],
    ];
    for sel in &selections {
        let (a, b) = (mem.select(sel), disk.select(sel));
        assert_eq!(names(mem, &a), names(disk, &b), "select {sel:?}");
    }
    assert_eq!(mem.label_names(), disk.label_names());
    for n in mem.label_names() {
        assert_eq!(mem.label_values(&n), disk.label_values(&n), "values of {n}");
    }
    assert!(disk.label_values("absent").is_empty());
    let (all_m, all_d) = (mem.select(&[]), disk.select(&[]));
    assert!(!all_m.is_empty());
    for (&m, &d) in all_m.iter().zip(&all_d) {
        let name = mem.series_labels(m).to_string();
        assert_eq!(mem.time_bounds(m), disk.time_bounds(d), "bounds of {name}");
        for &(lo, hi) in windows {
            assert_eq!(
                samples(mem, m, lo, hi),
                samples(disk, d, lo, hi),
                "samples of {name} in [{lo}, {hi}]"
            );
        }
    }
    let engine = Engine::default();
    for q in queries {
        let e = parse(q).unwrap();
        for t in [60_000, 1_500_000, 4_000_000, 4_400_000] {
            let (a, b) = (engine.instant(mem, &e, t), engine.instant(disk, &e, t));
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{q} at {t}");
        }
        let (a, b) = (
            engine.range(mem, &e, 0, 4_600_000, 60_000),
            engine.range(disk, &e, 0, 4_600_000, 60_000),
        );
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "{q} over the range");
    }
}

const QUERIES: &[&str] = &[
    "req_total",
    "rate(req_total[5m])",
    "sum by (pod) (mem_bytes)",
    "gauge",
    "last_over_time(gauge[10m])",
    "count({zone=~\"x|y\"})",
    "{__name__=~\"late|ALERTS\"}",
    "max_over_time(many[30m])",
    "mem_bytes or {pod=\"p1\"}",
];

#[test]
fn edge_cases_match_the_memory_store() {
    let rows = edge_rows();
    let overlay = overlay_rows();
    let windows = [
        (i64::MIN, i64::MAX),
        (0, 0),
        (1_000, 1_499_000),
        (1_499_999, 1_500_001),
        (10_000, 10_500),
        (2_999_000, 3_600_000),
        (4_400_000, 5_000_000),
    ];
    let tmp = tempfile::tempdir().unwrap();
    // (rows per row group, rows per page, block ms, cache bytes)
    let layouts = [
        (7, 3, 60_000, 512),
        (64, 16, 600_000, 4096),
        (100_000, 20_000, 3_600_000, 64 << 20),
    ];
    for until in [i64::MAX, 4500 * S] {
        let mem = memory(&rows, &overlay, until);
        for (k, &(group, page, block_ms, cache)) in layouts.iter().enumerate() {
            let path = tmp.path().join(format!("m{k}-{until}.parquet"));
            write_samples(&path, &rows, group, page);
            let config = DiskConfig {
                block_ms,
                cache_bytes: cache,
                batch_rows: 5,
            };
            let st = disk(&path, &overlay, until, config, &mem);
            st.open().unwrap();
            assert_same(&mem, &st, &windows, QUERIES);
            assert!(st.cached_bytes() <= cache.max(1 << 16), "cache bounded");
            assert_eq!(mem.metadata(), st.metadata());
        }
    }
}

#[test]
fn generated_mix_matches_the_memory_store() {
    let fams = generate();
    let mem = build_storage(&fams);
    let tmp = tempfile::tempdir().unwrap();
    let config = DiskConfig {
        block_ms: 7 * 60_000,
        cache_bytes: 128 << 10,
        batch_rows: 777,
    };
    let st = build_disk_storage(&fams, tmp.path(), SMALL_LAYOUT, config);
    let engine = Engine::default();
    for q in query_mix() {
        let e = parse(&q).unwrap();
        let (a, b) = (
            engine.instant(&mem, &e, EVAL_MS),
            engine.instant(&st, &e, EVAL_MS),
        );
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "{q}");
    }
    for q in range_mix() {
        let e = parse(&q).unwrap();
        let (a, b) = (
            engine.range(&mem, &e, RANGE.0, RANGE.1, RANGE.2),
            engine.range(&st, &e, RANGE.0, RANGE.1, RANGE.2),
        );
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "{q} over the range");
    }
    assert_eq!(mem.label_names(), st.label_names());
    assert_eq!(mem.label_values("pod"), st.label_values("pod"));
}

#[test]
fn a_file_that_is_not_a_sample_table_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("x.parquet");
    std::fs::write(&path, b"not parquet").unwrap();
    let st = DiskStorage::new(
        &path,
        i64::MAX,
        MemStorage::default(),
        BTreeMap::new(),
        DiskConfig::default(),
    );
    let err = st.open().unwrap_err();
    assert!(err.contains("x.parquet"), "{err}");
}
