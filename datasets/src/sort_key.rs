//! Each table's sort key as order-preserving bytes: comparing two rows' keys bytewise orders them
//! exactly as [`crate::encode::cmp_rows`] does. The writer sorts and merges by these bytes, a
//! `memcmp`, instead of walking label maps and strings field by field for every comparison.
//!
//! The encoding is prefix-free per field, so a tuple's fields compare one after another:
//! - a string is its bytes with each 0 written as `0 0xFF`, closed by `0 1` (a proper prefix
//!   closes with `0 1`, below any byte or escaped 0 that continues the longer string);
//! - an optional string is `0` for none, `1` and the string for some (none sorts first);
//! - a label map is `1 key value` per entry in key order, closed by `0` (a map that ends first
//!   sorts first, as `BTreeMap`'s ordering has it);
//! - an integer is big-endian with its sign bit flipped.

use schemas::tables::{Labels, Row};

/// Appends the sort key of `row` in two parts: its group (the leading fields many rows share: a
/// series, a container, an object) to `group`, and the rest (time, and a tie-breaking id) to
/// `tail`. The key is the group followed by the tail; the group's encoding is prefix-free, so
/// rows order by group first, then by tail.
pub fn split_sort_key(row: &Row, group: &mut Vec<u8>, tail: &mut Vec<u8>) {
    match row {
        Row::Object(r) => {
            string(group, &r.kind);
            opt_string(group, r.namespace.as_deref());
            string(group, &r.name);
            int64(tail, r.observed_ns);
        }
        Row::Event(r) => {
            string(group, &r.namespace);
            int64(tail, r.time_ns);
            string(tail, &r.name);
        }
        Row::Log(r) => {
            string(group, &r.namespace);
            string(group, &r.pod);
            string(group, &r.container);
            int32(group, r.restart);
            int64(tail, r.time_ns);
        }
        Row::Metric(r) => series(group, tail, &r.metric, &r.labels, r.time_ns),
        Row::MetricMeta(r) => string(group, &r.metric),
        Row::Span(r) => {
            string(group, &r.service);
            string(group, &r.name);
            int64(tail, r.start_ns);
            string(tail, &r.span_id);
        }
        Row::Alert(r) => series(group, tail, &r.alertname, &r.labels, r.time_ns),
        Row::Audit(r) => {
            int64(tail, r.time_ns);
            string(tail, &r.audit_id);
        }
    }
}

/// A sample of a series: the name and labels group, the time is the tail.
fn series(group: &mut Vec<u8>, tail: &mut Vec<u8>, name: &str, l: &Labels, time_ns: i64) {
    string(group, name);
    labels(group, l);
    int64(tail, time_ns);
}

fn string(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    if bytes.contains(&0) {
        for &b in bytes {
            if b == 0 {
                out.extend_from_slice(&[0, 0xFF]);
            } else {
                out.push(b);
            }
        }
    } else {
        out.extend_from_slice(bytes);
    }
    out.extend_from_slice(&[0, 1]);
}

fn opt_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => out.push(0),
        Some(s) => {
            out.push(1);
            string(out, s);
        }
    }
}

fn labels(out: &mut Vec<u8>, labels: &Labels) {
    for (k, v) in labels {
        out.push(1);
        string(out, k);
        string(out, v);
    }
    out.push(0);
}

fn int64(out: &mut Vec<u8>, x: i64) {
    out.extend_from_slice(&((x as u64) ^ (1 << 63)).to_be_bytes());
}

fn int32(out: &mut Vec<u8>, x: i32) {
    out.extend_from_slice(&((x as u32) ^ (1 << 31)).to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::cmp_rows;
    use schemas::tables::{ChangeType, LogRow, MetricSample, ObjectRow};

    /// The whole key: the group, then the tail.
    fn key(row: &Row) -> Vec<u8> {
        let (mut group, mut tail) = (Vec::new(), Vec::new());
        split_sort_key(row, &mut group, &mut tail);
        group.extend_from_slice(&tail);
        group
    }

    /// Every pair of rows built from awkward strings, label maps and integers orders the same by
    /// key bytes as by `cmp_rows`.
    #[test]
    fn key_bytes_order_rows_as_cmp_rows_does() {
        let strings = ["", "a", "a\0", "a\0b", "ab", "b", "\u{ff}", "a\u{1}"];
        let ints = [i64::MIN, -1, 0, 1, i64::MAX];
        let maps: Vec<Labels> = vec![
            Labels::new(),
            [("a", "")]
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            [("a", "x")]
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            [("a", "x"), ("b", "")]
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            [("a\0", "x")]
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            [("ab", "")]
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        ];
        let mut rows = vec![];
        for s in strings {
            for t in [ints[0], ints[2], ints[4]] {
                for m in &maps {
                    rows.push(Row::Metric(MetricSample {
                        metric: s.into(),
                        labels: m.clone(),
                        time_ns: t,
                        value: 0.0,
                    }));
                }
            }
            for t in ints {
                for ns in [None, Some(""), Some("a")] {
                    rows.push(Row::Object(ObjectRow {
                        kind: "Pod".into(),
                        namespace: ns.map(String::from),
                        name: s.into(),
                        observed_ns: t,
                        api_version: "v1".into(),
                        uid: String::new(),
                        resource_version: String::new(),
                        change: ChangeType::Added,
                        object: String::new(),
                    }));
                }
                for restart in [i32::MIN, -1, 0, 7] {
                    rows.push(Row::Log(LogRow {
                        namespace: "n".into(),
                        pod: s.into(),
                        restart,
                        time_ns: t,
                        container: "c".into(),
                        stream: "stdout".into(),
                        line: String::new(),
                    }));
                }
            }
        }
        let keys: Vec<Vec<u8>> = rows.iter().map(key).collect();
        for (a, ka) in rows.iter().zip(&keys) {
            for (b, kb) in rows.iter().zip(&keys) {
                if a.table() == b.table() {
                    assert_eq!(ka.cmp(kb), cmp_rows(a, b), "{a:?} vs {b:?}");
                }
            }
        }
    }
}
