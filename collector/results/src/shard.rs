//! A share of a work list: shard `index` of `count` takes every `count`-th item of the list,
//! starting at `index`. Every shard computes the same list in the same order (the plan, see
//! [`crate::Plan`]), so between them the shards cover it exactly once; round-robin rather than
//! contiguous ranges so that each shard gets a mix of agents and problems, not one slow problem's
//! every run. IO-free.

use std::fmt;

/// Shard `index` of `count` (0-based, as Kubernetes numbers an Indexed Job's pods).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    /// The whole list.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// From `--shard-index` / `--shard-count` (or `JOB_COMPLETION_INDEX` and the count the Job's
    /// pods are given): both or neither; the index below the count.
    pub fn new(index: Option<u64>, count: Option<u64>) -> Result<Shard, String> {
        match (index, count) {
            (None, None) => Ok(Shard::ALL),
            (None, Some(count)) => Err(format!(
                "--shard-count {count} without --shard-index (or JOB_COMPLETION_INDEX): which shard is this?"
            )),
            (Some(index), None) => Err(format!(
                "--shard-index {index} without --shard-count: how many shards share the work?"
            )),
            (Some(_), Some(0)) => Err("--shard-count: expected at least 1".into()),
            (Some(index), Some(count)) if index >= count => Err(format!(
                "--shard-index {index}: expected below --shard-count {count} (indexes start at 0)"
            )),
            (Some(index), Some(count)) => Ok(Shard { index, count }),
        }
    }

    /// Whether item `i` of the work list is this shard's.
    pub fn owns(&self, i: usize) -> bool {
        i as u64 % self.count == self.index
    }

    /// This shard's items of `items`, in their order.
    pub fn take<T>(&self, items: impl IntoIterator<Item = T>) -> Vec<T> {
        items
            .into_iter()
            .enumerate()
            .filter(|(i, _)| self.owns(*i))
            .map(|(_, t)| t)
            .collect()
    }

    pub fn is_all(&self) -> bool {
        self.count == 1
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shard {} of {}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_the_list_exactly_once() {
        for count in 1..=7u64 {
            let mut seen = vec![0; 23];
            for index in 0..count {
                let shard = Shard::new(Some(index), Some(count)).unwrap();
                for i in shard.take(0..23usize) {
                    seen[i] += 1;
                }
            }
            assert!(seen.iter().all(|n| *n == 1), "count {count}: {seen:?}");
        }
        let s = Shard::new(Some(1), Some(3)).unwrap();
        assert_eq!(s.take(["a", "b", "c", "d", "e"]), vec!["b", "e"]);
    }

    #[test]
    fn inconsistent_flags_say_what_is_missing() {
        assert_eq!(Shard::new(None, None).unwrap(), Shard::ALL);
        assert!(
            Shard::new(Some(0), None)
                .unwrap_err()
                .contains("--shard-count")
        );
        assert!(
            Shard::new(None, Some(2))
                .unwrap_err()
                .contains("JOB_COMPLETION_INDEX")
        );
        assert!(Shard::new(Some(2), Some(2)).unwrap_err().contains("below"));
        assert!(
            Shard::new(Some(0), Some(0))
                .unwrap_err()
                .contains("at least 1")
        );
    }
}
