//! Log lines served from a dataset's logs file without loading it: the file is sorted by
//! (namespace, pod, container, restart, time), so a container's lines in a window are a few pages
//! that the statistics find, and the last lines of a container are read from its last pages
//! backwards. The catalog of streams comes from one scan of the key columns, on first use.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{Array, RecordBatch};
use datasets::in_place::{Pred, TableFile, Unit, dictionary, int32s, strings, times, word};
use schemas::tables::Table;
use schemas::tables::columns::logs as col;

use super::Cached;
use super::logs::{CatalogBuilder, ContainerKey, Line, LineRange, LogCatalog, LogSource};

/// Rows read per step when looking for a container's last lines.
const TAIL_STEP_ROWS: usize = 16 * 1024;

const COLUMNS: &[&str] = &[
    col::TIME,
    col::NAMESPACE,
    col::POD,
    col::CONTAINER,
    col::RESTART,
    col::STREAM,
    col::LINE,
];

pub struct FileLogs {
    file: TableFile,
    catalog: Cached<LogCatalog>,
}

impl FileLogs {
    /// Opens a logs file: reads its footer and page index only.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        Ok(FileLogs {
            file: TableFile::open(path, Table::Logs)?,
            catalog: Cached::default(),
        })
    }

    /// The selected lines of one container in the rows of `units`, in file order.
    fn read(
        &self,
        units: &[Unit],
        key: &ContainerKey,
        range: &LineRange,
    ) -> anyhow::Result<Vec<Line>> {
        let mut out = [Vec::new()];
        let mine = |k: (&str, &str, &str)| (k == (&key.0, &key.1, &key.2)).then_some(0);
        for b in self.file.read(units, COLUMNS)? {
            collect_lines(&b, mine, range, &mut out)?;
        }
        let [lines] = out;
        Ok(lines)
    }

    fn scan_catalog(&self) -> anyhow::Result<LogCatalog> {
        let mut catalog = CatalogBuilder::default();
        let keys = [col::NAMESPACE, col::POD, col::CONTAINER, col::STREAM];
        let columns = [
            col::TIME,
            col::NAMESPACE,
            col::POD,
            col::CONTAINER,
            col::RESTART,
            col::STREAM,
        ];
        self.file
            .scan_dictionary(&columns, &keys, |b| -> anyhow::Result<()> {
                let (time, restart) = (times(b, col::TIME)?, int32s(b, col::RESTART)?);
                let (ns, pod, container, stream) = (
                    dictionary(b, col::NAMESPACE)?,
                    dictionary(b, col::POD)?,
                    dictionary(b, col::CONTAINER)?,
                    dictionary(b, col::STREAM)?,
                );
                // One catalog update per distinct stream of the batch, by dictionary keys.
                // (namespace, pod, container, restart, stream) → (first, last)
                type Key = (i32, i32, i32, i32, i32);
                let mut spans: HashMap<Key, (i64, i64)> = HashMap::new();
                for i in 0..b.num_rows() {
                    let t = time.value(i);
                    let k = (
                        ns.0[i],
                        pod.0[i],
                        container.0[i],
                        restart.value(i),
                        stream.0[i],
                    );
                    spans
                        .entry(k)
                        .and_modify(|s| *s = (s.0.min(t), s.1.max(t)))
                        .or_insert((t, t));
                }

                for ((n, p, c, r, s), (first, last)) in spans {
                    catalog.add(
                        (word(ns, n), word(pod, p), word(container, c)),
                        r,
                        word(stream, s),
                        first,
                        last,
                    );
                }
                Ok(())
            })?;
        Ok(catalog.build())
    }
}

/// Appends the rows of a batch that `place` puts somewhere (the index of a list in `out`) and the
/// range admits.
fn collect_lines(
    b: &RecordBatch,
    place: impl Fn((&str, &str, &str)) -> Option<usize>,
    range: &LineRange,
    out: &mut [Vec<Line>],
) -> anyhow::Result<()> {
    let (time, restart) = (times(b, col::TIME)?, int32s(b, col::RESTART)?);
    let (ns, pod, container) = (
        strings(b, col::NAMESPACE)?,
        strings(b, col::POD)?,
        strings(b, col::CONTAINER)?,
    );
    let (stream, line) = (strings(b, col::STREAM)?, strings(b, col::LINE)?);
    for i in 0..b.num_rows() {
        let (t, r, s) = (time.value(i), restart.value(i), stream.value(i));
        if !range.admits(r, s, t) {
            continue;
        }
        let Some(at) = place((ns.value(i), pod.value(i), container.value(i))) else {
            continue;
        };
        out[at].push(Line {
            time_ns: t,
            restart: r,
            stream: s.to_string(),
            text: if line.is_null(i) {
                String::new()
            } else {
                line.value(i).to_string()
            },
        });
    }
    Ok(())
}

/// The conditions that find a container's rows.
fn container_preds(key: &ContainerKey, from: i64, to: i64) -> Vec<Pred<'_>> {
    vec![
        Pred::StrEq(col::NAMESPACE, &key.0),
        Pred::StrEq(col::POD, &key.1),
        Pred::StrEq(col::CONTAINER, &key.2),
        Pred::I64Between(col::TIME, from, to),
    ]
}

impl LogSource for FileLogs {
    fn catalog(&self) -> anyhow::Result<Arc<LogCatalog>> {
        self.catalog.get_or_try(|| self.scan_catalog())
    }

    fn lines(&self, key: &ContainerKey, range: &LineRange) -> anyhow::Result<Vec<Line>> {
        if range.from_ns > range.to_ns {
            return Ok(Vec::new());
        }
        let mut preds = container_preds(key, range.from_ns, range.to_ns);
        if let Some(r) = range.restart {
            preds.push(Pred::I32Eq(col::RESTART, r));
        }
        let units = self.file.prune(&preds)?;
        let Some(want) = range.last else {
            return self.read(&units, key, range);
        };
        // The last lines: steps of units from the end until enough lines are in. The first step
        // is sized to the lines wanted (`--tail=100` of a busy container decodes a page or two,
        // not its whole log); each further step doubles, up to TAIL_STEP_ROWS.
        let mut parts: Vec<Vec<Line>> = Vec::new();
        let (mut end, mut found) = (units.len(), 0);
        let mut step = want.saturating_mul(2).clamp(1024, TAIL_STEP_ROWS);
        while end > 0 && found < want {
            let mut start = end;
            let mut rows = 0;
            while start > 0 && rows < step {
                start -= 1;
                rows += units[start].rows.len();
            }
            let part = self.read(&units[start..end], key, range)?;
            found += part.len();
            parts.push(part);
            end = start;
            step = step.saturating_mul(2).min(TAIL_STEP_ROWS);
        }
        let lines: Vec<Line> = parts.into_iter().rev().flatten().collect();
        Ok(range.cut(lines))
    }

    fn lines_of(
        &self,
        keys: &[ContainerKey],
        from_ns: i64,
        to_ns: i64,
    ) -> anyhow::Result<Vec<Vec<Line>>> {
        let mut out = vec![Vec::new(); keys.len()];
        if from_ns > to_ns {
            return Ok(out);
        }
        let mut units = Vec::new();
        for k in keys {
            units.extend(self.file.prune(&container_preds(k, from_ns, to_ns))?);
        }
        let at: HashMap<(&str, &str, &str), usize> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| ((k.0.as_str(), k.1.as_str(), k.2.as_str()), i))
            .collect();
        let range = LineRange::window(from_ns, to_ns);
        for b in self.file.read(&units, COLUMNS)? {
            collect_lines(&b, |k| at.get(&k).copied(), &range, &mut out)?;
        }
        Ok(out)
    }
}
