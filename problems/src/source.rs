//! Where things are in spec files: diagnostics that name the file, the line and column and the
//! field, and the lookup from a field path (`faults[0].service`) to its place in the TOML text.

use std::fmt;
use std::ops::Range;

use serde::Serialize;
use toml::de::{DeTable, DeValue};

/// A spec file's text and the path it is reported under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    pub path: String,
    pub text: String,
}

/// One problem found in a spec file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub file: String,
    /// 1-based line and column, when the place is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    /// Field path (`faults[0].target_port`), empty for the whole file.
    pub field: String,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
        }
        if !self.field.is_empty() {
            write!(f, ": field `{}`", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl SourceFile {
    /// A diagnostic at a byte span of this file.
    pub fn at_span(
        &self,
        span: Option<Range<usize>>,
        field: &str,
        message: impl Into<String>,
    ) -> Diagnostic {
        let (line, column) = match span {
            Some(s) => {
                let (l, c) = line_col(&self.text, s.start);
                (Some(l), Some(c))
            }
            None => (None, None),
        };
        Diagnostic {
            file: self.path.clone(),
            line,
            column,
            field: field.to_string(),
            message: message.into(),
        }
    }

    /// A diagnostic at a field path; when the field is absent, at its nearest present ancestor.
    pub fn at_field(&self, field: &str, message: impl Into<String>) -> Diagnostic {
        self.at_span(locate(&self.text, field), field, message)
    }

    /// A diagnostic for a TOML syntax or type error, with toml's own message and span.
    pub fn from_toml_error(&self, err: &toml::de::Error) -> Diagnostic {
        let message = err.message().trim().to_string();
        self.at_span(err.span(), "", message)
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..text.floor_char_boundary(offset)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

fn segments(path: &str) -> Vec<Seg<'_>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, mut rest) = part.split_once('[').map_or((part, ""), |(k, r)| (k, r));
        if !key.is_empty() {
            out.push(Seg::Key(key));
        }
        while let Some((idx, after)) = rest.split_once(']') {
            if let Ok(i) = idx.parse() {
                out.push(Seg::Index(i));
            }
            rest = after.strip_prefix('[').unwrap_or(after);
        }
    }
    out
}

/// Byte span of the value at `path` (`a.b[2].c`) in a TOML document, or of the deepest ancestor
/// that exists. `None` when the text does not parse.
pub fn locate(text: &str, path: &str) -> Option<Range<usize>> {
    let root = DeTable::parse(text).ok()?;
    let mut span = None;
    let mut table: Option<&DeTable<'_>> = Some(root.get_ref());
    let mut array: Option<&[toml::Spanned<DeValue<'_>>]> = None;
    for seg in segments(path) {
        let value = match seg {
            Seg::Key(k) => table.and_then(|t| t.get_key_value(k)).map(|(key, v)| {
                // Point at the key for tables (their own span may start far away), the value otherwise.
                if v.get_ref().is_table() {
                    (key.span(), v)
                } else {
                    (v.span(), v)
                }
            }),
            Seg::Index(i) => array.and_then(|a| a.get(i)).map(|v| (v.span(), v)),
        };
        let Some((s, v)) = value else { break };
        span = Some(s);
        table = v.get_ref().as_table();
        array = v.get_ref().as_array().map(|a| &a[..]);
    }
    span
}

/// Byte spans of the items of the top-level array `key` (`[[faults]]` tables), in order; empty
/// when the text does not parse or has no such array.
pub fn item_spans(text: &str, key: &str) -> Vec<Range<usize>> {
    let Ok(root) = DeTable::parse(text) else {
        return Vec::new();
    };
    root.get_ref()
        .get(key)
        .and_then(|v| v.get_ref().as_array())
        .map(|items| items.iter().map(|v| v.span()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "id = \"x\"\n\n[[faults]]\nprimitive = \"scale\"\nservice = \"geo\"\n\n[[faults]]\nservice = \"rate\"\n[oracle]\nstate = []\n";

    #[test]
    fn locates_fields_by_path() {
        let at = |p: &str| locate(DOC, p).map(|s| line_col(DOC, s.start));
        assert_eq!(at("id"), Some((1, 6)));
        assert_eq!(at("faults[0].service"), Some((5, 11)));
        assert_eq!(at("faults[1].service"), Some((8, 11)));
        // Missing field: the nearest ancestor.
        assert_eq!(at("faults[1].replicas").map(|p| p.0), Some(7));
        assert_eq!(at("oracle.state"), Some((10, 9)));
        assert_eq!(at("nothing"), None);
    }

    #[test]
    fn diagnostics_read_like_compiler_messages() {
        let f = SourceFile {
            path: "p.toml".into(),
            text: DOC.into(),
        };
        let d = f.at_field("faults[0].service", "no service `geo` in app `x`");
        assert_eq!(
            d.to_string(),
            "p.toml:5:11: field `faults[0].service`: no service `geo` in app `x`"
        );
    }
}

/// A spec with the file it came from.
#[derive(Debug, Clone)]
pub struct Located<T> {
    pub spec: T,
    pub file: SourceFile,
}
