//! The request limits of the APIs as flags (`collector replay`, `collector env up`), named after
//! the Prometheus flags they mirror.

use problems::Dur;

/// What one request to the APIs may cost.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Request limits")]
pub struct LimitArgs {
    /// Longest a PromQL query may run before it is cancelled (Prometheus' --query.timeout).
    #[arg(long, default_value = "2m")]
    pub query_timeout: Dur,
    /// Most samples a PromQL query may load or compute, subqueries included
    /// (--query.max-samples).
    #[arg(long, default_value_t = 50_000_000)]
    pub query_max_samples: usize,
    /// Most instants a PromQL query may evaluate: range steps times subquery steps
    /// (`x[1d:1ms]` is 86 million).
    #[arg(long, default_value_t = promql::eval::DEFAULT_MAX_STEPS)]
    pub query_max_steps: u64,
    /// PromQL queries evaluated at once; the others wait (--query.max-concurrency).
    #[arg(long, default_value_t = promql::api::DEFAULT_MAX_CONCURRENCY)]
    pub query_max_concurrency: usize,
    /// Longest PromQL query text, in bytes.
    #[arg(long, default_value_t = promql::limits::DEFAULT_MAX_QUERY_LENGTH)]
    pub query_max_length: usize,
    /// Deepest PromQL nesting (brackets and chained operators), checked before parsing.
    #[arg(long, default_value_t = promql::limits::DEFAULT_MAX_DEPTH)]
    pub query_max_depth: usize,
    /// Most traces one Jaeger search may return.
    #[arg(long, default_value_t = apis::jaeger::DEFAULT_MAX_TRACES)]
    pub jaeger_max_traces: usize,
}

impl LimitArgs {
    pub fn limits(&self) -> anyhow::Result<apis::limits::Limits> {
        anyhow::ensure!(
            self.query_timeout > Dur::ZERO,
            "--query-timeout: expected a duration above 0"
        );
        anyhow::ensure!(
            (1..=promql::limits::MAX_MAX_DEPTH).contains(&self.query_max_depth),
            "--query-max-depth: expected 1 to {}",
            promql::limits::MAX_MAX_DEPTH
        );
        anyhow::ensure!(
            self.query_max_concurrency > 0,
            "--query-max-concurrency: expected at least 1"
        );
        Ok(apis::limits::Limits {
            promql: promql::Engine {
                timeout: self.query_timeout.to_std(),
                max_samples: self.query_max_samples,
                max_steps: self.query_max_steps,
                max_query_length: self.query_max_length,
                max_depth: self.query_max_depth,
                ..promql::Engine::default()
            },
            max_concurrency: self.query_max_concurrency,
            max_traces: self.jaeger_max_traces,
        })
    }
}
