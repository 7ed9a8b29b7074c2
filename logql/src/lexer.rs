//! LogQL's tokens: identifiers, strings, numbers, durations (`5m`, `1.5h`, `1d`), byte sizes
//! (`10KiB`) and symbols, each with its byte offset for error messages.

use schemas::time::duration;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Ident(String),
    Str(String),
    Number(f64),
    /// A number with a duration unit; the text is kept for the error messages.
    Duration(i64, String),
    Bytes(u64, String),
    Sym(&'static str),
}

impl Tok {
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Str(s) => format!("string \"{s}\""),
            Tok::Number(n) => format!("number {n}"),
            Tok::Duration(_, s) | Tok::Bytes(_, s) => format!("`{s}`"),
            Tok::Sym(s) => format!("`{s}`"),
        }
    }
}

const SYMBOLS: &[&str] = &[
    "|=", "|~", "|>", "!=", "!~", "!>", "=~", "==", ">=", "<=", "=", "|", "{", "}", "(", ")", "[",
    "]", ",", "+", "-", "*", "/", "%", "^",
];

pub fn bytes_unit(u: &str) -> Option<u64> {
    let k: u64 = 1000;
    let ki: u64 = 1024;
    Some(match u.to_ascii_lowercase().as_str() {
        "b" => 1,
        "kb" => k,
        "kib" => ki,
        "mb" => k.pow(2),
        "mib" => ki.pow(2),
        "gb" => k.pow(3),
        "gib" => ki.pow(3),
        "tb" => k.pow(4),
        "tib" => ki.pow(4),
        _ => return None,
    })
}

/// Parsing recurses into brackets; this bounds the depth a query can make it go.
const MAX_NESTING: usize = 64;

pub(crate) fn lex(src: &str) -> Result<Vec<(usize, Tok)>, String> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let b = src.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let at = i;
        if c == '"' {
            let mut s = String::new();
            let mut chars = src[i + 1..].char_indices();
            let mut closed = None;
            while let Some((j, ch)) = chars.next() {
                match ch {
                    '"' => {
                        closed = Some(i + 1 + j + 1);
                        break;
                    }
                    '\\' => match chars.next().map(|(_, e)| e) {
                        Some('n') => s.push('\n'),
                        Some('t') => s.push('\t'),
                        Some('r') => s.push('\r'),
                        Some(e @ ('"' | '\\' | '\'')) => s.push(e),
                        Some(e) => {
                            // Go keeps unknown escapes an error; regexes use `\\d` here.
                            return Err(format!(
                                "invalid escape `\\{e}` in string at col {}",
                                at + 1
                            ));
                        }
                        None => break,
                    },
                    ch => s.push(ch),
                }
            }
            i = closed.ok_or_else(|| format!("unterminated string at col {}", at + 1))?;
            out.push((at, Tok::Str(s)));
            continue;
        }
        if c == '`' {
            let end = src[i + 1..]
                .find('`')
                .ok_or_else(|| format!("unterminated raw string at col {}", at + 1))?;
            out.push((at, Tok::Str(src[i + 1..i + 1 + end].to_string())));
            i += end + 2;
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let mut j = i;
            loop {
                if j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'.') {
                    j += 1;
                } else if src[j..].starts_with('µ') {
                    j += 'µ'.len_utf8();
                } else {
                    break;
                }
            }
            let text = &src[i..j];
            let num_end = text
                .find(|ch: char| !(ch.is_ascii_digit() || ch == '.'))
                .unwrap_or(text.len());
            let tok = if num_end == text.len() {
                Tok::Number(
                    text.parse()
                        .map_err(|_| format!("invalid number `{text}`"))?,
                )
            } else if let Some(unit) = bytes_unit(&text[num_end..]) {
                let n: f64 = text[..num_end]
                    .parse()
                    .map_err(|_| format!("invalid number `{text}`"))?;
                Tok::Bytes((n * unit as f64) as u64, text.to_string())
            } else {
                let ns =
                    duration::parse_loki(text).map_err(|e| format!("at col {}: {e}", at + 1))?;
                Tok::Duration(ns, text.to_string())
            };
            out.push((at, tok));
            i = j;
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let mut j = i;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            out.push((at, Tok::Ident(src[i..j].to_string())));
            i = j;
            continue;
        }
        if c == '-' && src[i..].starts_with("--") {
            // logfmt flags: --strict, --keep-empty
            let mut j = i + 2;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'-') {
                j += 1;
            }
            out.push((at, Tok::Ident(src[i..j].to_string())));
            i = j;
            continue;
        }
        if c == '>' || c == '<' {
            let sym = if b.get(i + 1) == Some(&b'=') {
                if c == '>' { ">=" } else { "<=" }
            } else if c == '>' {
                ">"
            } else {
                "<"
            };
            out.push((at, Tok::Sym(sym)));
            i += sym.len();
            continue;
        }
        match SYMBOLS.iter().find(|s| src[i..].starts_with(**s)) {
            Some(s) => {
                match *s {
                    "(" | "{" | "[" => {
                        depth += 1;
                        if depth > MAX_NESTING {
                            return Err(format!(
                                "more than {MAX_NESTING} nested brackets at col {}",
                                at + 1
                            ));
                        }
                    }
                    ")" | "}" | "]" => depth = depth.saturating_sub(1),
                    _ => {}
                }
                out.push((at, Tok::Sym(s)));
                i += s.len();
            }
            None => {
                return Err(format!("unexpected character `{c}` at col {}", at + 1));
            }
        }
    }
    Ok(out)
}
