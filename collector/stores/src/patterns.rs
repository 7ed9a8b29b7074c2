//! Log patterns as Loki's pattern ingester reports them: lines of the same shape share one
//! pattern in which the parts that vary are `<_>`, counted per time bucket and detected level.
//! Loki mines them with Drain; here a token varies when it carries a number or an identifier (a
//! digit), which is what sets lines of one statement apart in the apps' logs. IO-free.

use std::collections::BTreeMap;

/// What Loki prints for a part of the line that varies.
pub const VARIES: &str = "<_>";

/// A line's pattern: whitespace-separated tokens, those holding a digit replaced by `<_>`
/// (a `key=value` token keeps its key), runs of `<_>` made one.
pub fn pattern(line: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for token in line.split_whitespace() {
        let masked = if !token.bytes().any(|b| b.is_ascii_digit()) {
            token.to_string()
        } else {
            match token.split_once('=') {
                Some((key, _)) if !key.is_empty() && !key.bytes().any(|b| b.is_ascii_digit()) => {
                    format!("{key}={VARIES}")
                }
                _ => VARIES.to_string(),
            }
        };
        if masked == VARIES && out.last().is_some_and(|l| l == VARIES) {
            continue;
        }
        out.push(masked);
    }
    out.join(" ")
}

/// The level Loki detects in a line: a `level`/`lvl`/`severity` field (logfmt or JSON), else the
/// first level word, else `unknown`.
pub fn level(line: &str) -> &'static str {
    let lower = line.to_ascii_lowercase();
    for key in ["level", "lvl", "severity"] {
        for sep in ["=", "\":\"", "\": \""] {
            let prefix = format!("{key}{sep}");
            if let Some(at) = lower.find(&prefix) {
                let value: String = lower[at + prefix.len()..]
                    .trim_start_matches('"')
                    .chars()
                    .take_while(|c| c.is_ascii_alphabetic())
                    .collect();
                if let Some(l) = normalise(&value) {
                    return l;
                }
            }
        }
    }
    lower
        .split(|c: char| !c.is_ascii_alphabetic())
        .find_map(normalise)
        .unwrap_or("unknown")
}

fn normalise(word: &str) -> Option<&'static str> {
    Some(match word {
        "critical" | "crit" | "fatal" | "panic" => "critical",
        "error" | "err" | "eror" => "error",
        "warn" | "warning" | "wrn" => "warn",
        "info" | "inf" => "info",
        "debug" | "dbg" => "debug",
        "trace" => "trace",
        _ => return None,
    })
}

/// Patterns counted per bucket of `step_ns`.
#[derive(Debug)]
pub struct Miner {
    step_ns: i64,
    /// (level, pattern) → bucket start → lines.
    counts: BTreeMap<(&'static str, String), BTreeMap<i64, u64>>,
}

/// One pattern with its level and its count per bucket (bucket start in ns, lines).
#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    pub pattern: String,
    pub level: &'static str,
    pub samples: Vec<(i64, u64)>,
}

impl Miner {
    pub fn new(step_ns: i64) -> Self {
        Miner {
            step_ns: step_ns.max(1),
            counts: BTreeMap::new(),
        }
    }

    pub fn add(&mut self, time_ns: i64, line: &str) {
        let bucket = time_ns - time_ns.rem_euclid(self.step_ns);
        *self
            .counts
            .entry((level(line), pattern(line)))
            .or_default()
            .entry(bucket)
            .or_default() += 1;
    }

    /// The patterns, most lines first (ties by pattern), at most `limit` of them.
    pub fn patterns(self, limit: usize) -> Vec<Pattern> {
        let mut out: Vec<(u64, Pattern)> = self
            .counts
            .into_iter()
            .map(|((level, pattern), buckets)| {
                let total = buckets.values().sum();
                let samples = buckets.into_iter().collect();
                (
                    total,
                    Pattern {
                        pattern,
                        level,
                        samples,
                    },
                )
            })
            .collect();
        out.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.pattern.cmp(&b.1.pattern)));
        out.into_iter().take(limit).map(|(_, p)| p).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_one_statement_share_a_pattern() {
        let a = "2026-01-01T00:00:01Z INF geo: dial tcp 10.96.0.12:8083: connect: connection refused retry=3";
        let b = "2026-01-01T00:00:09Z INF geo: dial tcp 10.96.0.12:8083: connect: connection refused retry=4";
        assert_eq!(pattern(a), pattern(b));
        assert_eq!(
            pattern(a),
            "<_> INF geo: dial tcp <_> connect: connection refused retry=<_>"
        );
        assert_ne!(pattern(a), pattern("GET /hotels 200"));
    }

    #[test]
    fn levels_read_as_loki_detects_them() {
        assert_eq!(level("ts=1 level=error msg=\"boom\""), "error");
        assert_eq!(level(r#"{"level":"warn","msg":"slow"}"#), "warn");
        assert_eq!(level("2026/01/01 ERROR: cannot connect"), "error");
        assert_eq!(level("GET /hotels 200"), "unknown");
    }

    #[test]
    fn counts_per_bucket_most_frequent_first() {
        let mut m = Miner::new(10);
        for t in [1, 2, 11] {
            m.add(t, &format!("level=info served request id={t}"));
        }
        m.add(5, "level=error database unreachable");
        let p = m.patterns(10);
        assert_eq!(p[0].pattern, "level=info served request id=<_>");
        assert_eq!(p[0].level, "info");
        assert_eq!(p[0].samples, vec![(0, 2), (10, 1)]);
        assert_eq!(p[1].level, "error");
        assert_eq!(Miner::new(10).patterns(10), vec![]);
    }
}
