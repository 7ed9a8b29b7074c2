//! Top-down rates: the load generator's requests per second split over its operation mix, then
//! pushed down the call graph in topological order, each call amplified by the retries its
//! caller makes of the attempts that failed last step.

use std::collections::HashMap;

use crate::calls::OpKey;
use crate::world::World;

use super::routes::{EdgeViews, Reach};
use super::{EdgeState, Tick};

/// This step's load.
pub(super) struct Load {
    /// Requests per second of each operation reached.
    pub rates: HashMap<OpKey, f64>,
    /// Requests per second the load generator sends.
    pub total_rate: f64,
    /// Share of the load generator's requests that reach the target.
    pub entry_reach: f64,
    /// Sum of the mix's weights (never zero).
    pub mix_total: f64,
}

impl Load {
    pub fn top_down(
        w: &World,
        t: &Tick,
        reach: &Reach,
        order: &[OpKey],
        edges: &HashMap<(String, String), EdgeState>,
        views: &EdgeViews,
    ) -> Load {
        let mut rates: HashMap<OpKey, f64> = HashMap::new();
        let wl = &t.app.workload;
        let diurnal = 1.0 + 0.08 * (std::f64::consts::TAU * w.secs() / 1800.0).sin();
        let total_rate =
            wl.rate * w.runtime.load_multiplier * t.effects.load_multiplier() * diurnal;
        let gen_pods = t.serving.get(&wl.generator).cloned().unwrap_or_default();
        // Only the share matters: the load generator is not instrumented, so how its dials fail
        // is recorded nowhere.
        let entry_reach = if t.app.service(&wl.generator).is_some() {
            reach.of(&gen_pods, &wl.target).0
        } else {
            1.0
        };
        let entry_reach = entry_reach * (1.0 - w.runtime.entry_drop);
        let mix_total: f64 = wl.mix.iter().map(|m| m.weight).sum::<f64>().max(1e-9);
        for m in &wl.mix {
            *rates
                .entry((wl.target.clone(), m.operation.clone()))
                .or_default() += total_rate * m.weight / mix_total * entry_reach;
        }
        through_calls(t, &mut rates, order, edges, views);
        Load {
            rates,
            total_rate,
            entry_reach,
            mix_total,
        }
    }
}

/// Adds each operation's calls to its callees' rates, callers first.
fn through_calls(
    t: &Tick,
    rates: &mut HashMap<OpKey, f64>,
    order: &[OpKey],
    edges: &HashMap<(String, String), EdgeState>,
    views: &EdgeViews,
) {
    for k in order {
        let r = rates.get(k).copied().unwrap_or(0.0);
        if r <= 0.0 {
            continue;
        }
        let Some(op) = t.app.service(&k.0).and_then(|s| s.operation(&k.1)) else {
            continue;
        };
        for c in &op.calls {
            let f = edges
                .get(&(k.0.clone(), c.service.clone()))
                .map(|e| e.fail)
                .unwrap_or(0.0);
            let view = &views[&(k.0.as_str(), c.service.as_str())];
            let attempts = (0..=view.retries).map(|i| f.powi(i as i32)).sum::<f64>();
            *rates
                .entry((c.service.clone(), c.operation.clone()))
                .or_default() += r * c.probability * attempts * view.reach;
        }
    }
}
