//! Label sets: sorted (name, value) pairs sharing interned strings with the store.

use std::fmt;
use std::sync::Arc;

/// An interned string; cloning is a reference-count bump.
pub type Str = Arc<str>;

/// The label that carries the metric name.
pub const METRIC_NAME: &str = "__name__";

/// A label set sorted by name, names unique. Shared: cloning is a reference-count bump, and a
/// change copies only a set that is shared.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Labels(Arc<Vec<(Str, Str)>>);

impl Labels {
    /// Builds a label set from pairs in any order; empty values are dropped (Prometheus treats a
    /// label with an empty value as absent). A later duplicate name wins.
    pub fn new<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<Str>,
        V: Into<Str>,
    {
        let mut v: Vec<(Str, Str)> = pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .filter(|(_, v)| !v.is_empty())
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(Str, Str)> = Vec::with_capacity(v.len());
        for p in v {
            match out.last_mut() {
                Some(last) if last.0 == p.0 => *last = p,
                _ => out.push(p),
            }
        }
        Labels(Arc::new(out))
    }

    /// Wraps pairs already sorted by unique name with non-empty values.
    pub(crate) fn from_sorted(v: Vec<(Str, Str)>) -> Self {
        Labels(Arc::new(v))
    }

    pub fn empty() -> Self {
        Labels::default()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }

    pub(crate) fn pairs(&self) -> &[(Str, Str)] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of `name`, or "" when absent (PromQL's view of a missing label).
    pub fn get(&self, name: &str) -> &str {
        match self.0.binary_search_by(|(k, _)| (**k).cmp(name)) {
            Ok(i) => &self.0[i].1,
            Err(_) => "",
        }
    }

    pub fn has(&self, name: &str) -> bool {
        self.0.binary_search_by(|(k, _)| (**k).cmp(name)).is_ok()
    }

    pub fn metric_name(&self) -> &str {
        self.get(METRIC_NAME)
    }

    /// Sets `name` to `value`; an empty value removes the label.
    pub fn set(&mut self, name: &str, value: &str) {
        match self.0.binary_search_by(|(k, _)| (**k).cmp(name)) {
            Ok(i) if value.is_empty() => {
                Arc::make_mut(&mut self.0).remove(i);
            }
            Ok(i) if &*self.0[i].1 == value => {}
            Ok(i) => Arc::make_mut(&mut self.0)[i].1 = value.into(),
            Err(_) if value.is_empty() => {}
            Err(i) => Arc::make_mut(&mut self.0).insert(i, (name.into(), value.into())),
        }
    }

    pub fn remove(&mut self, name: &str) {
        if let Ok(i) = self.0.binary_search_by(|(k, _)| (**k).cmp(name)) {
            Arc::make_mut(&mut self.0).remove(i);
        }
    }

    pub fn without_name(mut self) -> Self {
        self.remove(METRIC_NAME);
        self
    }

    /// Only the labels named in `names`.
    pub fn keep(&self, names: &[String]) -> Self {
        Labels::from_sorted(
            self.0
                .iter()
                .filter(|(k, _)| names.iter().any(|n| **n == **k))
                .cloned()
                .collect(),
        )
    }

    /// All labels except those named in `names` (and the metric name when `drop_name`).
    pub fn drop(&self, names: &[String], drop_name: bool) -> Self {
        Labels::from_sorted(
            self.0
                .iter()
                .filter(|(k, _)| {
                    !(names.iter().any(|n| **n == **k) || drop_name && &**k == METRIC_NAME)
                })
                .cloned()
                .collect(),
        )
    }
}

impl fmt::Display for Labels {
    /// Prometheus' `{a="b", c="d"}` rendering, used in error messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{k}={v:?}")?;
        }
        f.write_str("}")
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Whether `name` is a valid Prometheus label name (`[a-zA-Z_][a-zA-Z0-9_]*`).
pub fn is_valid_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_sorts_dedups_and_drops_empty_values() {
        let l = Labels::new([("b", "2"), ("a", "1"), ("c", ""), ("a", "3")]);
        assert_eq!(l.to_string(), r#"{a="3", b="2"}"#);
        assert_eq!(l.get("c"), "");
    }

    #[test]
    fn set_and_remove_keep_order() {
        let mut l = Labels::new([("b", "2")]);
        l.set("a", "1");
        l.set("c", "3");
        l.set("b", "");
        assert_eq!(l.to_string(), r#"{a="1", c="3"}"#);
    }

    #[test]
    fn label_name_validity() {
        assert!(is_valid_label_name("le"));
        assert!(is_valid_label_name("_x9"));
        assert!(!is_valid_label_name("9x"));
        assert!(!is_valid_label_name("a-b"));
        assert!(!is_valid_label_name(""));
    }
}
