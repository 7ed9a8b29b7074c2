//! Text an agent copied from its own task. The task describes the application, naming its
//! services; a "diagnosis" that echoes it (or a dump of the agent's environment, which holds the
//! task too) would name the culprit of many problems without any diagnosing. Runs of words taken
//! over from the task are removed before a diagnosis is judged, so what is judged is what the
//! agent said itself. IO-free.

use std::collections::HashSet;

/// How many consecutive words, the same as in the task and in the same order, count as copied.
/// Six keeps a diagnosis that quotes a name with a word or two of the task's around it.
pub const RUN: usize = 6;

/// `diagnosis` without the runs of [`RUN`] or more words it shares with `task` (words compared
/// case-insensitively, without their punctuation); unchanged when it shares none.
pub fn without_task(diagnosis: &str, task: &str) -> String {
    let key = |w: &str| {
        w.trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase()
    };
    let task_words: Vec<String> = task
        .split_whitespace()
        .map(key)
        .filter(|w| !w.is_empty())
        .collect();
    let runs: HashSet<&[String]> = task_words.windows(RUN).collect();
    let words: Vec<&str> = diagnosis.split_whitespace().collect();
    // Runs are over the words that have a key, each with its place among `words`: punctuation
    // alone neither breaks nor makes one.
    let (at, keys): (Vec<usize>, Vec<String>) = words
        .iter()
        .enumerate()
        .map(|(i, w)| (i, key(w)))
        .filter(|(_, k)| !k.is_empty())
        .unzip();
    let mut copied = vec![false; words.len()];
    for (start, window) in keys.windows(RUN).enumerate() {
        if runs.contains(window) {
            for &i in &at[start..start + RUN] {
                copied[i] = true;
            }
        }
    }
    if !copied.contains(&true) {
        return diagnosis.to_string();
    }
    words
        .iter()
        .zip(&copied)
        .filter(|(_, c)| !**c)
        .map(|(w, _)| *w)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const TASK: &str = "You are the on-call SRE for the application astronomy-shop. The OpenTelemetry \
        demo web shop: polyglot gRPC/HTTP services behind an Envoy proxy, a valkey cart store, \
        PostgreSQL, Kafka consumers and flagd feature flags, driven by Locust.";

    #[test]
    fn an_echo_of_the_task_loses_what_it_copied() {
        let echo = format!("FAULTLINE_PROMPT={TASK}\nsh -c ./hunt.sh");
        let left = without_task(&echo, TASK);
        assert!(!left.to_lowercase().contains("cart"), "{left}");
        assert!(!left.contains("PostgreSQL"), "{left}");
        assert!(left.contains("./hunt.sh"), "{left}");
        // Changing the case or the line breaks does not hide a copy.
        let shouted = TASK.to_uppercase().replace(' ', "\n");
        assert!(!without_task(&shouted, TASK).contains("CART"));
    }

    #[test]
    fn a_diagnosis_in_the_agents_own_words_is_kept_whole() {
        let own = "The cart service cannot reach valkey: its Service targets port 6380, the \
                   valkey cart store listens on 6379.";
        assert_eq!(without_task(own, TASK), own);
        // Quoting the task's few words around a name is not copying it.
        let quoted = "Root cause: a valkey cart store misconfiguration in cart.";
        assert_eq!(without_task(quoted, TASK), quoted);
    }
}
