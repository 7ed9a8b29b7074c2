//! The Python `dict` repr ITBench's snapshots write map columns in (`{'k8s.pod.name': 'cart-1'}`,
//! pandas' `str()` of a ClickHouse map): read into sorted string labels, written back the same
//! way. JSON objects are read too (a subset of the syntax).
//!
//! Values that are not strings become text: numbers as written, `True`/`False` as `true`/`false`,
//! lists and nested dicts as JSON; a `None` value leaves its key out.

use schemas::tables::Labels;
use serde_json::Value;

/// Parses a dict repr (or JSON object); an empty or blank text is an empty map.
pub fn parse(text: &str) -> Result<Labels, String> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(Labels::new());
    }
    let mut p = Parser {
        s: t.as_bytes(),
        text: t,
        at: 0,
    };
    let v = p.value()?;
    p.space();
    if p.at != p.s.len() {
        return Err(format!("unexpected text after the dict at byte {}", p.at));
    }
    match v {
        Value::Object(map) => Ok(map
            .into_iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| {
                let s = match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                (k, s)
            })
            .collect()),
        _ => Err("expected a dict".into()),
    }
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn space(&mut self) {
        while self.at < self.s.len() && self.s[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        self.space();
        if self.s.get(self.at) == Some(&b) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, b: u8) -> Result<(), String> {
        if self.eat(b) {
            Ok(())
        } else {
            Err(format!("expected `{}` at byte {}", b as char, self.at))
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        self.space();
        match self.s.get(self.at) {
            Some(b'{') => {
                self.at += 1;
                let mut map = serde_json::Map::new();
                if self.eat(b'}') {
                    return Ok(Value::Object(map));
                }
                loop {
                    let key = match self.value()? {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    self.expect(b':')?;
                    let v = self.value()?;
                    map.insert(key, v);
                    if self.eat(b'}') {
                        return Ok(Value::Object(map));
                    }
                    self.expect(b',')?;
                    if self.eat(b'}') {
                        return Ok(Value::Object(map));
                    }
                }
            }
            Some(b'[') | Some(b'(') => {
                let close = if self.s[self.at] == b'[' { b']' } else { b')' };
                self.at += 1;
                let mut items = Vec::new();
                if self.eat(close) {
                    return Ok(Value::Array(items));
                }
                loop {
                    items.push(self.value()?);
                    if self.eat(close) {
                        return Ok(Value::Array(items));
                    }
                    self.expect(b',')?;
                    if self.eat(close) {
                        return Ok(Value::Array(items));
                    }
                }
            }
            Some(b'\'') | Some(b'"') => self.string().map(Value::String),
            Some(_) => {
                let start = self.at;
                while self.at < self.s.len() && !b",:}])".contains(&self.s[self.at]) {
                    self.at += 1;
                }
                let word = self.text[start..self.at].trim();
                Ok(match word {
                    "None" | "null" => Value::Null,
                    "True" | "true" => Value::Bool(true),
                    "False" | "false" => Value::Bool(false),
                    _ if word.is_empty() => {
                        return Err(format!("expected a value at byte {start}"));
                    }
                    _ => serde_json::from_str::<serde_json::Number>(word)
                        .map(Value::Number)
                        .unwrap_or_else(|_| Value::String(word.to_string())),
                })
            }
            None => Err("unexpected end".into()),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        let quote = self.s[self.at];
        self.at += 1;
        let mut out = String::new();
        let mut chars = self.text[self.at..].char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                c if c as u32 == u32::from(quote) => {
                    self.at += i + 1;
                    return Ok(out);
                }
                '\\' => {
                    let (_, e) = chars.next().ok_or("unterminated escape")?;
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        '0' => out.push('\0'),
                        'a' => out.push('\x07'),
                        'b' => out.push('\x08'),
                        'f' => out.push('\x0c'),
                        'v' => out.push('\x0b'),
                        'x' | 'u' | 'U' => {
                            let n = match e {
                                'x' => 2,
                                'u' => 4,
                                _ => 8,
                            };
                            let hex: String =
                                (0..n).filter_map(|_| chars.next().map(|c| c.1)).collect();
                            let code = u32::from_str_radix(&hex, 16)
                                .map_err(|_| format!("bad escape \\{e}{hex}"))?;
                            out.push(
                                char::from_u32(code)
                                    .ok_or_else(|| format!("bad code point {hex}"))?,
                            );
                        }
                        other => out.push(other),
                    }
                }
                c => out.push(c),
            }
        }
        Err("unterminated string".into())
    }
}

/// A Python string repr: single-quoted, with backslash escapes.
fn quote(s: &str, out: &mut String) {
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('\'');
}

/// Writes labels as a Python dict repr, keys in order.
pub fn write(labels: &Labels) -> String {
    let mut out = String::from("{");
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        quote(k, &mut out);
        out.push_str(": ");
        quote(v, &mut out);
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_pandas_writes() {
        let l = parse(
            "{'k8s.namespace.name': 'otel-demo', 'n': 4, 'ok': True, 'x': None, 'q': \"it's\"}",
        )
        .unwrap();
        assert_eq!(l["k8s.namespace.name"], "otel-demo");
        assert_eq!(l["n"], "4");
        assert_eq!(l["ok"], "true");
        assert_eq!(l["q"], "it's");
        assert!(!l.contains_key("x"));
        assert!(parse("").unwrap().is_empty());
        assert!(parse("{}").unwrap().is_empty());
        assert_eq!(parse(r#"{"a": "b"}"#).unwrap()["a"], "b");
        assert!(parse("{'a': 'b'").is_err());
    }

    #[test]
    fn what_is_written_reads_back() {
        let mut l = Labels::new();
        l.insert("a'b".into(), "line\nnext\\ \t tab é".into());
        l.insert("le".into(), "+Inf".into());
        let text = write(&l);
        assert_eq!(parse(&text).unwrap(), l);
        assert!(text.starts_with("{'a\\'b': "));
    }
}
