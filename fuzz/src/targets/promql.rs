//! PromQL straight into the engine: the length and nesting check, the parser, then an instant
//! and a range evaluation under tight limits, and the formatter `format_query` uses.

use std::time::Duration;

use promql::Engine;

use super::world::{NOW_MS, World};
use super::{Target, text};

pub struct Promql {
    world: World,
    engine: Engine,
}

impl Promql {
    pub fn new() -> Self {
        Promql {
            world: World::new(),
            // A server's limits, scaled down so that a million inputs take minutes: what runs
            // past them must be cut off by them.
            engine: Engine {
                timeout: Duration::from_millis(300),
                max_samples: 2_000_000,
                max_steps: 200_000,
                ..Engine::default()
            },
        }
    }
}

impl Target for Promql {
    fn name(&self) -> &'static str {
        "promql"
    }

    fn dictionary(&self) -> &'static [&'static str] {
        DICTIONARY
    }

    fn run(&self, input: &[u8]) {
        let q = text(input);
        let _ = promql::api::parse_time(&q);
        let _ = promql::api::parse_duration(&q);
        let Ok(expr) = self.engine.parse(&q) else {
            return;
        };
        let _ = expr.prettify();
        let st = &*self.world.metrics;
        let _ = self.engine.instant(st, &expr, NOW_MS);
        let _ = self
            .engine
            .range(st, &expr, NOW_MS - 600_000, NOW_MS, 15_000);
    }
}

const DICTIONARY: &[&str] = &[
    "sum(",
    "avg(",
    "min(",
    "max(",
    "count(",
    "topk(3,",
    "bottomk(2,",
    "quantile(0.9,",
    "count_values(\"v\",",
    "stddev(",
    "group(",
    "abs(",
    "rate(",
    "irate(",
    "increase(",
    "delta(",
    "deriv(",
    "predict_linear(",
    "histogram_quantile(0.99,",
    "label_replace(",
    "label_join(",
    "sort(",
    "sort_desc(",
    "clamp(",
    "clamp_max(",
    "vector(",
    "scalar(",
    "time()",
    "timestamp(",
    "absent(",
    "absent_over_time(",
    "changes(",
    "resets(",
    "max_over_time(",
    "avg_over_time(",
    "quantile_over_time(0.5,",
    "holt_winters(",
    "double_exponential_smoothing(",
    "round(",
    "-(",
    " by (pod) ",
    " without (code) ",
    " on (job) ",
    " ignoring (code) ",
    " group_left ",
    " group_right(pod) ",
    " and ",
    " or ",
    " unless ",
    " + ",
    " - ",
    " * ",
    " / ",
    " % ",
    " ^ ",
    " == ",
    " != ",
    " > ",
    " < ",
    " >= ",
    " <= ",
    " bool ",
    " atan2 ",
    "[5m]",
    "[1h:1m]",
    "[1d:1ms]",
    "[100y:1ms]",
    "[30s:]",
    " offset 5m",
    " offset -1h",
    " @ start()",
    " @ end()",
    " @ 1e300",
    " @ -1e300",
    "up",
    "http_requests_total",
    "memory_bytes",
    "{",
    "}",
    "=~\".*\"",
    "!~\"g.+\"",
    "pod=\"geo-1\"",
    "__name__=~\".+\"",
    "le",
    "\"",
    "(",
    ")",
    "1e300",
    "NaN",
    "Inf",
    "0x1f",
    "5m",
    "1ms",
    "#",
];
