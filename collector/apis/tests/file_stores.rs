//! The file-backed span and log sources answer exactly as the in-memory ones on the same rows,
//! over files written with tiny row groups so that statistics and bloom filters really prune.

use std::path::Path;

use datasets::encode::{cmp_rows, encode};
use datasets::in_place::{Pred, TableFile};
use datasets::{TableFileWriter, WriteOptions};
use schemas::tables::{LogRow, Row, SpanRow, Table, columns};

use logql::{Expr, parse};
use stores::logql::{self as eval, StreamIndex};
use stores::logs::{LineRange, LogQuery, LogStore, MemLogs};
use stores::logs_file::FileLogs;
use stores::spans::{DerivedTags, MemSpans, SpanStore, TraceQuery, trace_key};
use stores::spans_file::FileSpans;

const S: i64 = 1_000_000_000;
const T0: i64 = 1_767_225_600 * S;

/// A small deterministic generator (the same rows on every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// Writes rows (sorted as the dataset writer sorts them) with `row_group_rows` rows per group;
/// returns them in file order.
fn write(path: &Path, table: Table, mut rows: Vec<Row>, row_group_rows: usize) -> Vec<Row> {
    rows.sort_by(cmp_rows);
    let opts = WriteOptions {
        row_group_rows,
        ..WriteOptions::default()
    };
    let mut w = TableFileWriter::create(path, table, opts).unwrap();
    for chunk in rows.chunks(50) {
        w.write(&encode(table, chunk).unwrap()).unwrap();
    }
    w.finish().unwrap();
    rows
}

const SERVICES: [&str; 4] = ["cart", "checkout", "currency", "frontend"];
const OPS: [&str; 3] = ["GET /", "POST /api/cart", "oteldemo.Convert"];

fn spans(n_traces: usize) -> Vec<Row> {
    let mut g = Lcg(7);
    let mut rows = Vec::new();
    for t in 0..n_traces {
        // Some ids spelled as 64-bit ids padded to 32 digits.
        let trace = if t % 5 == 0 {
            format!("{:032x}", 0xfeed_0000 + t)
        } else {
            format!("{:016x}{:016x}", 0xabcdef01_u64 + t as u64, g.next(1 << 30))
        };
        let root_start = T0 + (t as i64) * 7 * S + g.next(1000) as i64 * 1_000_000;
        let children = 1 + g.next(6) as usize;
        let mut ids: Vec<String> = Vec::new();
        for c in 0..=children {
            let id = format!("{:016x}", (t * 16 + c) as u64 * 0x9e37_79b9 + 1);
            let parent = (c > 0).then(|| ids[g.next(c as u64) as usize].clone());
            let service = if c == 0 {
                "frontend"
            } else {
                SERVICES[g.next(4) as usize]
            };
            // A few traces go on for a long time; some spans share a start.
            let start = if c == 0 {
                root_start
            } else if t % 9 == 0 && c == children {
                root_start + 2_000 * S
            } else {
                root_start + (g.next(5) as i64) * 1_000_000
            };
            let error = g.next(6) == 0;
            rows.push(Row::Span(SpanRow {
                trace_id: trace.clone(),
                span_id: id.clone(),
                parent_span_id: parent,
                service: service.into(),
                name: OPS[g.next(3) as usize].into(),
                kind: ["server", "client", "internal"][g.next(3) as usize].into(),
                start_ns: start,
                duration_ns: (1 + g.next(400) as i64) * 1_000_000,
                status_code: if error { "error" } else { "unset" }.into(),
                status_message: error.then(|| "connection refused".to_string()),
                resource_attributes: [
                    ("service.name".to_string(), service.to_string()),
                    (
                        "k8s.pod.name".to_string(),
                        format!("{service}-{}", g.next(2)),
                    ),
                ]
                .into(),
                attributes: [(
                    "http.status_code".to_string(),
                    ["200", "500", "404"][g.next(3) as usize].to_string(),
                )]
                .into(),
            }));
            ids.push(id);
        }
    }
    rows
}

fn span_rows(rows: &[Row]) -> Vec<SpanRow> {
    rows.iter()
        .filter_map(|r| match r {
            Row::Span(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn file_spans_answer_as_memory_spans() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("spans.parquet");
    let rows = span_rows(&write(&path, Table::Spans, spans(120), 16));
    // The file really is pruned: statistics keep a service's row groups, bloom filters a trace's.
    let table = TableFile::open(&path, Table::Spans).unwrap();
    let groups = table.num_row_groups();
    let units = table
        .prune(&[Pred::StrEq(columns::spans::SERVICE, "cart")])
        .unwrap();
    let mut kept: Vec<usize> = units.iter().map(|u| u.row_group).collect();
    kept.dedup();
    assert!(
        groups > 20 && kept.len() < groups / 2,
        "{} of {groups}",
        kept.len()
    );
    let probe = &rows[rows.len() / 2].trace_id;
    let maybe = (0..groups)
        .filter(|&rg| {
            table
                .bloom_filter(rg, "trace_id")
                .unwrap()
                .unwrap()
                .check(probe.as_str())
        })
        .count();
    assert!(maybe < groups / 4, "{maybe} of {groups}");

    let file = FileSpans::open(&path).unwrap();
    let mem = MemSpans::new(rows.clone());
    let (file, mem): (&SpanStore, &SpanStore) = (&file, &mem);
    let last = rows.iter().map(|s| s.start_ns).max().unwrap();
    let nows = [T0 - S, T0 + 100 * S, T0 + 500 * S, last];
    let derived: DerivedTags = apis::jaeger::derived_tags;

    for &now in &nows {
        assert_eq!(file.services(now).unwrap(), mem.services(now).unwrap());
        for svc in SERVICES {
            for kind in [None, Some("server")] {
                assert_eq!(
                    file.operations(svc, kind, now).unwrap(),
                    mem.operations(svc, kind, now).unwrap()
                );
            }
        }
        let mut ids: Vec<String> = rows.iter().map(|s| trace_key(&s.trace_id)).collect();
        ids.dedup();
        ids.push(trace_key("123"));
        assert_eq!(
            file.traces(&ids, now).unwrap(),
            mem.traces(&ids, now).unwrap()
        );
        for id in ids.iter().step_by(7) {
            assert_eq!(file.trace(id, now).unwrap(), mem.trace(id, now).unwrap());
        }
        for (from, to) in [(T0, last), (T0 + 200 * S, T0 + 300 * S), (last, last)] {
            assert_eq!(
                file.dependencies(from, to, now).unwrap(),
                mem.dependencies(from, to, now).unwrap(),
                "dependencies in [{from}, {to}] at {now}"
            );
        }
    }
    let non_empty = mem.dependencies(T0, last, last).unwrap();
    assert!(non_empty.len() > 3, "{non_empty:?}");

    // Once warm, traces are read through their time windows: the same answers.
    file.warm().unwrap();
    for &now in &nows {
        let mut ids: Vec<String> = rows.iter().map(|s| trace_key(&s.trace_id)).collect();
        ids.sort();
        ids.dedup();
        ids.push(trace_key("123"));
        assert_eq!(
            file.traces(&ids, now).unwrap(),
            mem.traces(&ids, now).unwrap()
        );
    }

    let mut searches = 0;
    for service in [None, Some("frontend"), Some("cart"), Some("nope")] {
        for operation in [None, Some("GET /")] {
            for (min, max) in [(T0, last), (T0 + 150 * S, T0 + 420 * S)] {
                for limit in [1, 4, 20, 1000] {
                    for (dmin, dmax) in [(None, None), (Some(200_000_000), None)] {
                        for tags in [
                            vec![],
                            vec![("error", "true")],
                            vec![("http.status_code", "500")],
                        ] {
                            let q = TraceQuery {
                                service: service.map(str::to_string),
                                operation: operation.map(str::to_string),
                                tags: tags
                                    .iter()
                                    .map(|(k, v)| (k.to_string(), v.to_string()))
                                    .collect(),
                                start_min_ns: min,
                                start_max_ns: max,
                                duration_min_ns: dmin,
                                duration_max_ns: dmax,
                                limit,
                            };
                            for now in [T0 + 500 * S, last] {
                                let want = mem.find_traces(&q, now, derived).unwrap();
                                assert_eq!(
                                    file.find_traces(&q, now, derived).unwrap(),
                                    want,
                                    "{q:?} at {now}"
                                );
                                searches += usize::from(!want.is_empty());
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(searches > 100, "most searches find something: {searches}");
}

#[test]
fn file_spans_serve_concurrent_readers() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("spans.parquet");
    let rows = span_rows(&write(&path, Table::Spans, spans(60), 16));
    let file = FileSpans::open(&path).unwrap();
    let mem = MemSpans::new(rows.clone());
    let (file, mem): (&SpanStore, &SpanStore) = (&file, &mem);
    let mut ids: Vec<String> = rows.iter().map(|s| trace_key(&s.trace_id)).collect();
    ids.sort();
    ids.dedup();
    let now = i64::MAX;
    let want = mem.traces(&ids, now).unwrap();
    // Requests read while the background indexing reads the same file.
    std::thread::scope(|scope| {
        scope.spawn(|| file.warm().unwrap());
        for _ in 0..3 {
            scope.spawn(|| {
                for _ in 0..5 {
                    assert_eq!(file.traces(&ids, now).unwrap(), want);
                }
            });
        }
    });
}

fn log_rows() -> Vec<Row> {
    let mut g = Lcg(11);
    let mut rows = Vec::new();
    for ns in ["shop", "kube-system"] {
        for pod in ["cart-7f9c-abcde", "checkout-5d4b-fghij", "proxy-1"] {
            for container in ["app", "istio-proxy"] {
                let restarts = g.next(3) as i32;
                let mut t = T0 + g.next(100) as i64 * S;
                for restart in 0..=restarts {
                    for i in 0..(20 + g.next(60)) {
                        // Equal times happen (several lines in one instant).
                        t += g.next(3) as i64 * S / 2;
                        let stream = if g.next(4) == 0 { "stderr" } else { "stdout" };
                        let line = match g.next(3) {
                            0 => format!(r#"{{"level":"error","msg":"payment failed","n":{i}}}"#),
                            1 => format!(
                                "level=info msg=\"served\" status={} n={i}",
                                200 + g.next(4) * 100
                            ),
                            _ => format!("plain line {i} of {pod}"),
                        };
                        rows.push(Row::Log(LogRow {
                            time_ns: t,
                            namespace: ns.into(),
                            pod: pod.into(),
                            container: container.into(),
                            restart,
                            stream: stream.into(),
                            line,
                        }));
                    }
                }
            }
        }
    }
    rows
}

#[test]
fn file_logs_answer_as_memory_logs() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("logs.parquet");
    let rows = write(&path, Table::Logs, log_rows(), 23);
    let logs: Vec<LogRow> = rows
        .iter()
        .filter_map(|r| match r {
            Row::Log(l) => Some(l.clone()),
            _ => None,
        })
        .collect();
    let last = logs.iter().map(|l| l.time_ns).max().unwrap();
    let table = TableFile::open(&path, Table::Logs).unwrap();
    let units = table
        .prune(&[
            Pred::StrEq(columns::logs::POD, "proxy-1"),
            Pred::I32Eq(columns::logs::RESTART, 0),
        ])
        .unwrap();
    let rows_kept: usize = units.iter().map(|u| u.rows.len()).sum();
    assert!(rows_kept < logs.len() / 3, "{rows_kept} of {}", logs.len());

    let file = FileLogs::open(&path).unwrap();
    let mem = MemLogs::new(logs.clone());
    let (file, mem): (&LogStore, &LogStore) = (&file, &mem);
    let catalog = mem.catalog().unwrap();
    assert_eq!(*file.catalog().unwrap(), *catalog);
    assert!(catalog.streams.len() > 20);

    let mid = T0 + 60 * S;
    for info in &catalog.streams {
        let (ns, pod, c) = (&info.key.0, &info.key.1, &info.key.2);
        for t in [T0, mid, last] {
            assert_eq!(
                file.latest_restart(ns, pod, c, t).unwrap(),
                mem.latest_restart(ns, pod, c, t).unwrap()
            );
        }
        for restart in 0..3 {
            for since in [None, Some(mid)] {
                for tail in [None, Some(0), Some(1), Some(7), Some(500)] {
                    let q = LogQuery {
                        restart,
                        since_ns: since,
                        until_ns: last - 10 * S,
                        tail_lines: tail,
                    };
                    assert_eq!(
                        file.query(ns, pod, c, &q).unwrap(),
                        mem.query(ns, pod, c, &q).unwrap(),
                        "{:?} {q:?}",
                        info.key
                    );
                }
            }
        }
        let range = LineRange::stream(&info.stream, mid, last);
        assert_eq!(
            file.lines(&info.key, &range).unwrap(),
            mem.lines(&info.key, &range).unwrap()
        );
    }

    // Loki over both: log queries both ways with limits, and metric queries.
    let index = |src: &LogStore| {
        StreamIndex::build(&src.catalog().unwrap(), |_, pod| {
            pod.starts_with("cart").then(|| "cart".to_string())
        })
    };
    let (fi, mi) = (index(file), index(mem));
    let queries = [
        r#"{namespace="shop"}"#,
        r#"{namespace="shop", container="app"} |= "payment""#,
        r#"{pod=~"c.*"} | json | level="error""#,
        r#"{service_name="cart"} | logfmt | status >= 400"#,
        r#"{stream="stderr"} != "plain""#,
    ];
    for q in queries {
        let Expr::Log(expr) = parse(q).unwrap() else {
            panic!("{q}")
        };
        for (start, end) in [(T0, last + 1), (mid, mid + 90 * S)] {
            for limit in [1, 10, 5000] {
                for backward in [true, false] {
                    let want =
                        eval::log_query(&mi, mem, &expr, start, end, limit, backward).unwrap();
                    let got =
                        eval::log_query(&fi, file, &expr, start, end, limit, backward).unwrap();
                    assert_eq!(got.0, want.0, "{q} limit {limit} backward {backward}");
                }
            }
        }
        let metric = format!("sum by (pod, stream) (count_over_time({q} [1m]))");
        let Expr::Metric(m) = parse(&metric).unwrap() else {
            panic!("{metric}")
        };
        let steps: Vec<i64> = (0..40).map(|i| T0 + i * 15 * S).collect();
        let want = eval::metric_query(&mi, mem, &m, &steps, last).unwrap().0;
        assert_eq!(
            eval::metric_query(&fi, file, &m, &steps, last).unwrap().0,
            want,
            "{metric}"
        );
    }
    for s in fi.streams.iter().zip(&mi.streams) {
        assert_eq!(s.0.labels, s.1.labels);
        for (from, to) in [(T0, mid), (mid, mid + S), (last, last + S)] {
            assert_eq!(
                s.0.has_lines_in(file, from, to).unwrap(),
                s.1.has_lines_in(mem, from, to).unwrap()
            );
        }
    }
}

/// Times the file-backed sources on a real dataset: `FAULTLINE_STORE_DATASET=DIR cargo test -p
/// apis --test file_stores timings -- --ignored --nocapture`.
#[test]
#[ignore = "needs a dataset (FAULTLINE_STORE_DATASET)"]
fn timings() {
    let Ok(dir) = std::env::var("FAULTLINE_STORE_DATASET") else {
        return;
    };
    let dir = Path::new(&dir);
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(std::io::stderr)
        .try_init();
    let rss = || {
        std::fs::read_to_string("/proc/self/status")
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with("VmRSS"))
            .unwrap_or_default()
            .to_string()
    };
    let time = |what: &str, f: &mut dyn FnMut() -> String| {
        let t = std::time::Instant::now();
        let out = f();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        eprintln!("{what}: {ms:.1} ms {out} ({})", rss());
    };
    let spans = FileSpans::open(&dir.join("spans.parquet")).unwrap();
    let spans: &SpanStore = &spans;
    let now = i64::MAX;
    time("catalog", &mut || {
        format!("{:?}", spans.services(now).unwrap())
    });
    let q = TraceQuery {
        service: Some("frontend".into()),
        start_max_ns: i64::MAX,
        limit: 20,
        ..Default::default()
    };
    let derived: DerivedTags = apis::jaeger::derived_tags;
    let mut ids = Vec::new();
    time("search", &mut || {
        ids = spans.find_traces(&q, now, derived).unwrap();
        format!("{} ids", ids.len())
    });
    time("traces", &mut || {
        format!("{}", spans.traces(&ids, now).unwrap().len())
    });
    let tagged = TraceQuery {
        tags: [("error".to_string(), "true".to_string())].into(),
        ..q.clone()
    };
    time("tagged search", &mut || {
        ids = spans.find_traces(&tagged, now, derived).unwrap();
        format!("{} ids", ids.len())
    });
    time("tagged traces", &mut || {
        format!("{}", spans.traces(&ids, now).unwrap().len())
    });
    time("trace", &mut || {
        format!("{}", spans.trace(&ids[0], now).unwrap().unwrap().len())
    });
    time("warm (catalog, trace windows)", &mut || {
        format!("{:?}", spans.warm().unwrap())
    });
    time("trace, warm", &mut || {
        format!("{}", spans.trace(&ids[1], now).unwrap().unwrap().len())
    });
    time("traces, warm", &mut || {
        format!("{}", spans.traces(&ids, now).unwrap().len())
    });
    time("dependencies", &mut || {
        format!("{}", spans.dependencies(i64::MIN, now, now).unwrap().len())
    });
    let logs = FileLogs::open(&dir.join("logs.parquet")).unwrap();
    let logs: &LogStore = &logs;
    let mut key = None;
    time("log catalog", &mut || {
        let c = logs.catalog().unwrap();
        key = Some(c.streams[c.streams.len() / 2].key.clone());
        format!("{} streams", c.streams.len())
    });
    let key = key.unwrap();
    time("tail 100", &mut || {
        let q = LogQuery {
            restart: 0,
            since_ns: None,
            until_ns: i64::MAX,
            tail_lines: Some(100),
        };
        format!("{}", logs.query(&key.0, &key.1, &key.2, &q).unwrap().len())
    });
}
