//! Mutations: what turns a well-formed corpus entry into hostile input. Text-minded (every target
//! reads text), with the target's dictionary so mutations stay near its grammar, and with the
//! repeats that make nesting bombs and oversized values.

use rand::Rng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;

/// Largest input made: past the APIs' own size limits, so those are exercised too.
pub const MAX_INPUT: usize = 256 * 1024;

/// Values that break numeric code: edges of integer types, floats that are not finite, huge
/// exponents, durations and times far away.
const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "-1",
    "1",
    "65535",
    "65536",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    "1e300",
    "-1e300",
    "1e-300",
    "NaN",
    "nan",
    "Inf",
    "-Inf",
    "inf",
    "0x7fffffff",
    "1ms",
    "0s",
    "100y",
    "9999999999h",
    "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00Z",
];

/// Characters that open, close, quote or escape something.
const SPECIALS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "\"",
    "'",
    "`",
    "\\",
    ",",
    ":",
    "=",
    "!",
    "~",
    "|",
    "/",
    "..",
    "\n",
    "\0",
    "#",
    "%",
    "&",
    "\u{feff}",
    "\u{10ffff}",
    "é",
];

/// One input: a corpus entry (or nothing) with one to four mutations.
pub fn generate(rng: &mut ChaCha8Rng, corpus: &[Vec<u8>], dict: &[&str]) -> Vec<u8> {
    let mut out = corpus.choose(rng).cloned().unwrap_or_default();
    let n = rng.random_range(1..=4);
    for _ in 0..n {
        mutate(rng, &mut out, corpus, dict);
    }
    out.truncate(MAX_INPUT);
    out
}

fn token<'a>(rng: &mut ChaCha8Rng, dict: &[&'a str]) -> &'a str {
    match rng.random_range(0..10) {
        0..=5 if !dict.is_empty() => dict.choose(rng).copied().unwrap_or(""),
        6..=7 => NUMBERS.choose(rng).copied().unwrap_or("0"),
        _ => SPECIALS.choose(rng).copied().unwrap_or("("),
    }
}

/// A position in `v` on a character boundary when `v` is text (mutations keep text text, mostly).
fn pos(rng: &mut ChaCha8Rng, v: &[u8]) -> usize {
    let mut p = rng.random_range(0..=v.len());
    while p < v.len() && p > 0 && (v[p] & 0xC0) == 0x80 {
        p -= 1;
    }
    p
}

fn range(rng: &mut ChaCha8Rng, v: &[u8]) -> (usize, usize) {
    let a = pos(rng, v);
    let b = pos(rng, v);
    (a.min(b), a.max(b))
}

fn mutate(rng: &mut ChaCha8Rng, v: &mut Vec<u8>, corpus: &[Vec<u8>], dict: &[&str]) {
    match rng.random_range(0..12) {
        // Insert a token.
        0..=2 => {
            let p = pos(rng, v);
            let t = token(rng, dict);
            v.splice(p..p, t.bytes());
        }
        // Replace a span with a token.
        3..=4 => {
            let (a, b) = range(rng, v);
            let t = token(rng, dict);
            v.splice(a..b, t.bytes());
        }
        // Delete a span.
        5 => {
            let (a, b) = range(rng, v);
            v.drain(a..b);
        }
        // Repeat a span, a few times or thousands (nesting bombs, huge lists).
        6 => {
            let (a, b) = range(rng, v);
            let times = if rng.random_bool(0.2) {
                rng.random_range(100..5000)
            } else {
                rng.random_range(1..8)
            };
            let span = v[a..b].to_vec();
            let extra = span.len().saturating_mul(times).min(MAX_INPUT);
            let mut rep = Vec::with_capacity(extra);
            while rep.len() + span.len() <= extra && !span.is_empty() {
                rep.extend_from_slice(&span);
            }
            v.splice(b..b, rep);
        }
        // Wrap the whole input in a token pair many times: `f(f(f(…)))`.
        7 => {
            let open = token(rng, dict);
            let close = match open.chars().last() {
                Some('(') => ")",
                Some('[') => "]",
                Some('{') => "}",
                _ => "",
            };
            let times = rng.random_range(1..3000);
            let mut w = Vec::with_capacity(v.len() + times * (open.len() + close.len()));
            for _ in 0..times {
                w.extend_from_slice(open.as_bytes());
            }
            w.extend_from_slice(v);
            for _ in 0..times {
                w.extend_from_slice(close.as_bytes());
            }
            *v = w;
        }
        // Change one byte.
        8 => {
            if !v.is_empty() {
                let p = rng.random_range(0..v.len());
                v[p] = if rng.random_bool(0.8) {
                    rng.random_range(0x20..0x7f)
                } else {
                    rng.random()
                };
            }
        }
        // Splice with another corpus entry.
        9 => {
            if let Some(other) = corpus.choose(rng) {
                let a = pos(rng, v);
                let b = pos(rng, other);
                v.truncate(a);
                v.extend_from_slice(&other[b..]);
            }
        }
        // Cut the end off (a truncated file, a half-sent request).
        10 => {
            let p = pos(rng, v);
            v.truncate(p);
        }
        // A number where a number was.
        _ => {
            if let Some(start) = v.iter().position(|c| c.is_ascii_digit()) {
                let end = v[start..]
                    .iter()
                    .position(|c| !(c.is_ascii_alphanumeric() || *c == b'.'))
                    .map_or(v.len(), |e| start + e);
                let n = NUMBERS.choose(rng).copied().unwrap_or("0");
                v.splice(start..end, n.bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn generation_is_deterministic_and_bounded() {
        let corpus = vec![b"sum(rate(x[5m]))".to_vec()];
        let gen_at = |i| {
            let mut rng = ChaCha8Rng::seed_from_u64(7);
            rng.set_stream(i);
            generate(&mut rng, &corpus, &["sum(", "abs("])
        };
        for i in 0..2000 {
            let a = gen_at(i);
            assert_eq!(a, gen_at(i));
            assert!(a.len() <= MAX_INPUT);
        }
        // Some inputs are bombs: deep or long.
        assert!((0..2000).any(|i| gen_at(i).len() > 5000));
    }
}
