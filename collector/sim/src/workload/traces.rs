//! Sampled traces: a Poisson share of the requests the load generator delivered this second,
//! each picking an operation of the mix by weight and a start instant, replayed by the span
//! generator over this step's outcomes and routes.

use std::collections::HashMap;

use rand::Rng;

use crate::calls::{OpKey, OpView};
use crate::network::Route;
use crate::objects::Key;
use crate::spans;
use crate::util::{self, NS_PER_SEC};
use crate::world::World;

use super::rates::Load;
use super::{DT, OpState, Tick};

pub(super) fn sample(
    w: &mut World,
    t: &Tick,
    states: &HashMap<OpKey, OpState>,
    routes: &HashMap<(Key, String), Route>,
    trace_sample: f64,
    load: &Load,
) {
    let wl = &t.app.workload;
    let view = views(states);
    let walk = spans::Walk {
        app: t.app,
        states: &view,
        routes,
        serving: t.serving,
        timeout: wl.timeout.as_secs_f64(),
    };
    // At least ~2 traces a second, so low-rate apps still show every path.
    let sample = trace_sample.max(2.0 / wl.rate.max(1.0)).min(1.0);
    // Requests the load generator could not deliver leave no trace (it is not instrumented).
    let n_traces = util::poisson(&mut w.rng, load.total_rate * sample * DT * load.entry_reach);
    for _ in 0..n_traces {
        let pick: f64 = w.rng.random::<f64>() * load.mix_total;
        let mut acc = 0.0;
        let mut op = wl.mix[0].operation.clone();
        for m in &wl.mix {
            acc += m.weight;
            if pick <= acc {
                op = m.operation.clone();
                break;
            }
        }
        let start = t.now + w.rng.random_range(0..NS_PER_SEC);
        let trace_id = util::hex_id(&mut w.rng, 16);
        walk.trace(w, &trace_id, &(wl.target.clone(), op), None, start, 0);
    }
}

/// The outcome views the span generator walks.
fn views(states: &HashMap<OpKey, OpState>) -> HashMap<OpKey, OpView> {
    states
        .iter()
        .map(|(k, s)| {
            (
                k.clone(),
                OpView {
                    ok: s.ok,
                    own_ok: s.own_ok,
                    own_error: s.own_error.clone(),
                    latency: s.latency,
                    error: s.error.clone(),
                },
            )
        })
        .collect()
}
