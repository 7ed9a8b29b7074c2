//! What one query may cost: its length and nesting, checked before the parser sees it, and the
//! work its evaluation may do (deadline, samples, cancellation), checked while it runs.
//!
//! promql-parser builds its syntax tree recursively and the evaluator walks it recursively, so
//! a query nested a few thousand levels deep (`sum(` ×500, `(` ×2000, `-(` ×5000) overflows the
//! stack and aborts the whole process. [`check_shape`] bounds the depth with one iterative pass
//! over the text: it never recurses, whatever the input.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Longest query text accepted (bytes).
pub const DEFAULT_MAX_QUERY_LENGTH: usize = 64 * 1024;
/// Deepest nesting accepted (see [`nesting_depth`]).
pub const DEFAULT_MAX_DEPTH: usize = 128;

/// Deepest nesting a server may be configured to admit: the evaluation stack grows with it.
pub const MAX_MAX_DEPTH: usize = 4096;

/// Stack for a thread that parses and evaluates queries nested up to `max_depth` levels:
/// promql-parser and the evaluator recurse once or a few times per level (a few KiB per frame in
/// an unoptimised build), so a fixed base plus a generous amount per level.
pub fn eval_stack_bytes(max_depth: usize) -> usize {
    (8 << 20) + max_depth.min(MAX_MAX_DEPTH) * (64 << 10)
}

/// Why a query's text is refused before parsing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("query is {len} bytes long, longer than the limit of {max} bytes")]
    TooLong { len: usize, max: usize },
    #[error(
        "query nests deeper than the limit of {max} levels (brackets and chained operators) at byte {at}"
    )]
    TooDeep { at: usize, max: usize },
}

/// Refuses a query longer than `max_len` bytes or nested deeper than `max_depth`.
pub fn check_shape(query: &str, max_len: usize, max_depth: usize) -> Result<(), ShapeError> {
    if query.len() > max_len {
        return Err(ShapeError::TooLong {
            len: query.len(),
            max: max_len,
        });
    }
    match nesting_depth(query, max_depth) {
        Some(at) => Err(ShapeError::TooDeep { at, max: max_depth }),
        None => Ok(()),
    }
}

/// An upper bound of the depth of the syntax tree `query` parses to, found in one pass; returns
/// the byte offset where it first exceeds `max`, or `None`.
///
/// Every open bracket (`(`, `[`, `{`) adds a level, and so does every operator token (binary or
/// unary: `+ - * / % ^`, comparisons, `and`, `or`, `unless`, `atan2`) and every range or subquery
/// bracket at the same level: `1+1+1+…` parses to a tree as deep as it is long, like `-(-(-(…`.
/// Counting every operator over-estimates balanced expressions, which is the safe side: a
/// dashboard query chains a few dozen operators at most. String literals and comments are
/// skipped, so a label value may hold any characters.
pub fn nesting_depth(query: &str, max: usize) -> Option<usize> {
    let b = query.as_bytes();
    // Each open level: its bracket and the operators seen on it. The depth is the levels plus
    // every operator on them.
    let mut levels: Vec<(u8, usize)> = vec![(0, 0)];
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        i += 1;
        // Inside `{…}` operator characters belong to label matchers (`=~`, `!=`): no nodes.
        let in_braces = levels.last().is_some_and(|l| l.0 == b'{');
        let grew = match c {
            b'"' | b'\'' | b'`' => {
                // A string literal: skip to its unescaped closing quote (raw for backticks).
                while i < b.len() && b[i] != c {
                    i += if c != b'`' && b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                false
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                false
            }
            b'(' | b'[' | b'{' => {
                levels.push((c, 0));
                depth += 1;
                true
            }
            b')' | b']' | b'}' => {
                if levels.len() > 1
                    && let Some((_, ops)) = levels.pop()
                {
                    depth -= 1 + ops;
                }
                // A range or subquery bracket wraps what precedes it in one more node.
                c == b']' && bump(&mut levels, &mut depth)
            }
            _ if in_braces => false,
            b'+' | b'-' | b'*' | b'/' | b'%' | b'^' | b'<' | b'>' => {
                // Two-character comparisons count once.
                if b.get(i) == Some(&b'=') {
                    i += 1;
                }
                bump(&mut levels, &mut depth)
            }
            b'=' | b'!' if b.get(i) == Some(&b'=') => {
                i += 1;
                bump(&mut levels, &mut depth)
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b':')
                {
                    i += 1;
                }
                let word = &query[start..i];
                ["and", "or", "unless", "atan2"]
                    .iter()
                    .any(|op| word.eq_ignore_ascii_case(op))
                    && bump(&mut levels, &mut depth)
            }
            _ => false,
        };
        if grew && depth > max {
            return Some(start);
        }
    }
    None
}

/// One more node on the current level; always true (it grew).
fn bump(levels: &mut [(u8, usize)], depth: &mut usize) -> bool {
    if let Some(top) = levels.last_mut() {
        top.1 += 1;
        *depth += 1;
    }
    true
}

/// A flag that tells a running evaluation to stop: set when the client that asked has gone, or
/// when the server shuts down. Clones share the flag.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn new() -> Self {
        Cancel::default()
    }

    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// A guard that cancels when dropped unless [`CancelOnDrop::disarm`]ed: held by a request
    /// handler, whose future is dropped when its client disconnects.
    pub fn on_drop(&self) -> CancelOnDrop {
        CancelOnDrop(Some(self.clone()))
    }
}

/// Cancels its flag when dropped (see [`Cancel::on_drop`]).
#[derive(Debug)]
pub struct CancelOnDrop(Option<Cancel>);

impl CancelOnDrop {
    /// The work finished: dropping no longer cancels.
    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            c.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::Engine;
    use crate::storage::StorageBuilder;

    /// `prefix` ×k + `inner` + `suffix` ×k for the largest k the default depth admits.
    fn deepest(prefix: &str, inner: &str, suffix: &str) -> String {
        let at = |k: usize| format!("{}{inner}{}", prefix.repeat(k), suffix.repeat(k));
        let k = (1..10_000)
            .find(|&k| nesting_depth(&at(k), DEFAULT_MAX_DEPTH).is_some())
            .expect("a depth past the limit")
            - 1;
        assert!(k > 20, "{prefix}: only {k} levels admitted");
        at(k)
    }

    #[test]
    fn the_deepest_admitted_queries_evaluate_within_the_eval_stack() {
        let queries = [
            deepest("sum(", "up", ")"),
            deepest("(", "up", ")"),
            deepest("-(", "up", ")"),
            deepest("abs(", "up", ")"),
            deepest("max_over_time(", "up", "[1m:])"),
            deepest("1+", "1", ""),
            deepest("-", "up", ""),
            deepest("up and ", "up", ""),
            deepest("sum by (a) (max_over_time(", "up", "[1m:]))"),
        ];
        let mut b = StorageBuilder::new();
        for k in 0..100 {
            b.add_sample("up", [("a", "1")], k * 15_000, 1.0);
        }
        let st = b.build();
        std::thread::Builder::new()
            .stack_size(eval_stack_bytes(DEFAULT_MAX_DEPTH))
            .spawn(move || {
                let engine = Engine::default();
                for q in &queries {
                    let e = engine.parse(q).unwrap_or_else(|e| panic!("{q}: {e}"));
                    let _ = e.prettify();
                    let _ = engine.instant(&st, &e, 1_000_000);
                    let _ = engine.range(&st, &e, 900_000, 1_000_000, 15_000);
                }
            })
            .expect("a thread")
            .join()
            .expect("no overflow, no panic");
    }

    fn depth(q: &str) -> usize {
        (0..10_000)
            .find(|&m| nesting_depth(q, m).is_none())
            .unwrap()
    }

    #[test]
    fn depth_counts_brackets_and_operator_chains() {
        assert_eq!(depth("up"), 0);
        assert_eq!(depth("sum(rate(x[5m]))"), 3);
        assert_eq!(depth("a + b + c"), 2);
        assert_eq!(depth("a and b or c"), 2);
        assert_eq!(depth("-(-(x))"), 4);
        assert_eq!(depth("max_over_time(x[1h:1m])"), 2);
        // Matchers and strings nest nothing, whatever characters they hold.
        assert_eq!(depth(r#"x{a!="((((", b=~"-+-+", c="}"}"#), 1);
        assert_eq!(depth("x # ((((((\n"), 0);
        assert_eq!(depth("a >= b != c <= d"), 3);
    }

    #[test]
    fn hostile_nesting_is_refused_without_recursion() {
        let deep = format!("{}up{}", "sum(".repeat(500), ")".repeat(500));
        assert!(matches!(
            check_shape(&deep, usize::MAX, DEFAULT_MAX_DEPTH),
            Err(ShapeError::TooDeep { .. })
        ));
        let chain = "1+".repeat(100_000) + "1";
        assert!(check_shape(&chain, usize::MAX, DEFAULT_MAX_DEPTH).is_err());
        // Unbalanced closers never underflow.
        assert_eq!(nesting_depth(")))}}}", 0), None);
        assert_eq!(
            check_shape(&"x".repeat(70_000), DEFAULT_MAX_QUERY_LENGTH, 128),
            Err(ShapeError::TooLong {
                len: 70_000,
                max: DEFAULT_MAX_QUERY_LENGTH
            })
        );
    }
}
