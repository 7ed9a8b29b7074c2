//! The plan of a sweep or an evaluation: its kind, the settings that make its runs comparable, and
//! its work list (one key per run, a relative path such as `agent/problem/noise-1`). The first
//! shard to start writes it into the store; every other shard checks that it would do the same
//! work, and the board and merge read it to know which runs are still missing. IO-free.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a store's runs were made by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// `sweep` or `eval`.
    pub kind: String,
    /// What the runs depend on beyond their key (durations, noise, agents' commands); never
    /// secrets (an agent's env is left out).
    pub settings: Value,
    /// Every run's key, in the order the shards split it.
    pub work: Vec<String>,
}

impl Plan {
    /// Why `other` (another shard's plan) is not this one, if it is not.
    pub fn differs_from(&self, other: &Plan) -> Option<String> {
        if self.kind != other.kind {
            return Some(format!(
                "it holds a {} where this is a {}",
                other.kind, self.kind
            ));
        }
        if self.settings != other.settings {
            return Some(format!(
                "its settings are {} where this command's are {}",
                other.settings, self.settings
            ));
        }
        if self.work != other.work {
            let extra = self.work.iter().find(|k| !other.work.contains(k));
            let gone = other.work.iter().find(|k| !self.work.contains(k));
            return Some(match (extra, gone) {
                (Some(k), _) => format!("its work list has no run `{k}`"),
                (None, Some(k)) => {
                    format!("its work list has a run `{k}` this command would not do")
                }
                (None, None) => "its work list is in another order".into(),
            });
        }
        None
    }
}

/// Checks a run key: a relative path of plain components (`a/b/c`), as the layout of a results
/// directory and the names of objects both need.
pub fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("a run key is empty".into());
    }
    for part in key.split('/') {
        let plain = !part.is_empty()
            && part != "."
            && part != ".."
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !plain {
            return Err(format!(
                "run key `{key}`: expected `/`-separated names of letters, digits, `-`, `_` and `.`"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan(work: &[&str]) -> Plan {
        Plan {
            kind: "eval".into(),
            settings: json!({"runs": 2}),
            work: work.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_differing_plan_says_how() {
        let a = plan(&["x/1", "x/2"]);
        assert_eq!(a.differs_from(&a.clone()), None);
        assert!(
            a.differs_from(&plan(&["x/1"]))
                .unwrap()
                .contains("no run `x/2`")
        );
        assert!(
            a.differs_from(&plan(&["x/1", "x/2", "y/1"]))
                .unwrap()
                .contains("`y/1` this command would not do")
        );
        assert!(
            a.differs_from(&plan(&["x/2", "x/1"]))
                .unwrap()
                .contains("order")
        );
        let mut b = a.clone();
        b.settings = json!({"runs": 3});
        assert!(a.differs_from(&b).unwrap().contains("settings"));
    }

    #[test]
    fn keys_are_plain_relative_paths() {
        assert!(check_key("agent/hotel-x/noise-1").is_ok());
        for bad in ["", "/a", "a//b", "a/../b", "a/b/", "a b", ".."] {
            assert!(check_key(bad).is_err(), "{bad:?}");
        }
    }
}
