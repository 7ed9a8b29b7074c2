//! What one request to the APIs may cost, as a server's flags set it: PromQL's query length,
//! nesting, timeout, samples and steps, how many queries run at once, and how many traces a
//! Jaeger search returns. LogQL's limits are Loki's own defaults (`loki` module).

use promql::Engine;

/// The limits of the APIs of one environment (replay or live).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// PromQL: length, depth, timeout, samples and steps of one query.
    pub promql: Engine,
    /// PromQL requests evaluated at once (`--query.max-concurrency`).
    pub max_concurrency: usize,
    /// Most traces one Jaeger search returns.
    pub max_traces: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            promql: Engine::default(),
            max_concurrency: promql::api::DEFAULT_MAX_CONCURRENCY,
            max_traces: crate::jaeger::DEFAULT_MAX_TRACES,
        }
    }
}
