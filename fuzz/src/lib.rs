//! Fuzzing on stable Rust: every parser and evaluator that reads what strangers write (PromQL,
//! LogQL, Kubernetes selectors and query parameters, problem specs, ground truths, agent outputs,
//! dataset manifests) is driven with millions of generated inputs, in process, and must neither
//! panic nor run past its limits.
//!
//! libFuzzer (cargo-fuzz) needs a nightly toolchain that a machine with the one stable toolchain
//! does not have, so inputs come from this crate's own generator instead: each input is a corpus
//! entry (`fuzz/corpus/TARGET/`, seeds and every input that once broke something) with one to
//! four mutations drawn from a seeded generator (byte edits, the target's dictionary of tokens,
//! splices, and repeats of a slice thousands of times, which is what turns `sum(` into a nesting
//! bomb). Input `i` of a run depends only on the seed and `i`, so any finding is replayed exactly.
//!
//! `cargo test -p fuzz` runs a short pass of every target (seconds each, `FAULTLINE_FUZZ_SECS`);
//! `cargo run -p fuzz --release -- run` runs a million inputs per target with crash isolation.

pub mod engine;
pub mod mutate;
pub mod targets;

pub use engine::{Budget, Report, run_target};
pub use targets::{Target, all};
