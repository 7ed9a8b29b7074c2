//! The fuzz targets: one per kind of input a stranger writes, each driving the real entry point
//! (the parser, the evaluator, the HTTP router) the way a server or command reads that input.

mod api;
mod files;
mod promql;
mod world;

use std::time::Duration;

/// What a target does with one input. It must return (errors are fine, answers of any status
/// are fine); a panic, or a return later than [`Target::slow_limit`], is a finding.
pub trait Target: Send + Sync {
    fn name(&self) -> &'static str;
    /// Tokens of the input's language, which mutations insert.
    fn dictionary(&self) -> &'static [&'static str];
    /// Longest one input may take, the target's own limits included.
    fn slow_limit(&self) -> Duration {
        Duration::from_secs(2)
    }
    fn run(&self, input: &[u8]);
}

/// Every target, by name.
pub fn all() -> Vec<Box<dyn Target>> {
    vec![
        Box::new(promql::Promql::new()),
        Box::new(api::PrometheusApi::new()),
        Box::new(api::Logql::new()),
        Box::new(api::KubeParams::new()),
        Box::new(files::ProblemSpec::new()),
        Box::new(files::GroundTruth::new()),
        Box::new(files::AgentOutput::new()),
        Box::new(files::Manifest::new()),
    ]
}

/// The target named `name`.
pub fn by_name(name: &str) -> Option<Box<dyn Target>> {
    all().into_iter().find(|t| t.name() == name)
}

/// Input bytes as text, as an HTTP server or a file reader would take them (lossy).
fn text(input: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(input)
}
