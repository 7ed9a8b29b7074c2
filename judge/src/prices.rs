//! Token prices per model, to put a cost on every verdict.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use serde::Deserialize;

const BUILT_IN: &str = include_str!("../data/prices.yaml");

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Dollars per million prompt tokens.
    pub input: f64,
    /// Dollars per million completion tokens.
    pub output: f64,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct PriceTable(BTreeMap<String, Price>);

impl PriceTable {
    pub fn built_in() -> Self {
        Self(serde_norway::from_str(BUILT_IN).expect("the built-in price table is valid"))
    }

    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read price table {}", path.display()))?;
        let map = serde_norway::from_str(&text).with_context(|| {
            format!(
                "{}: expected `model: {{input: <$/Mtok>, output: <$/Mtok>}}` entries",
                path.display()
            )
        })?;
        Ok(Self(map))
    }

    /// Cost of one call; the model is looked up as given, then without a `provider/` prefix.
    pub fn cost(&self, model: &str, prompt_tokens: u64, completion_tokens: u64) -> Option<f64> {
        let p = self
            .0
            .get(model)
            .or_else(|| model.rsplit_once('/').and_then(|(_, m)| self.0.get(m)))?;
        Some((prompt_tokens as f64 * p.input + completion_tokens as f64 * p.output) / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_known_models_only() {
        let t = PriceTable::built_in();
        let c = t.cost("openai/gpt-4o-mini", 1_000_000, 1_000_000).unwrap();
        assert!((c - 0.75).abs() < 1e-12);
        assert_eq!(t.cost("my-local-model", 10, 10), None);
    }
}
