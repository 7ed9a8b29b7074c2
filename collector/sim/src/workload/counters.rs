//! What the outcomes leave behind: the load generator's cumulative totals, each service's
//! health for the alerts (rate, error ratio, p99), and per pod and operation the cumulative
//! requests, errors by code, duration sum and histogram buckets the RED metrics are scraped from,
//! with a few error log lines per failing pod and second.

use std::collections::HashMap;

use rand::Rng;

use crate::calls::OpKey;
use crate::logs::{self, Level};
use crate::objects::Key;
use crate::programs::{self, LogStyle};
use crate::util::{self, NS_PER_SEC};
use crate::world::World;

use super::rates::Load;
use super::{DT, OpCounters, OpState, SIGMA, Tick, Workload};

impl Workload {
    /// Adds this step's requests of the load generator, and those that failed, to its totals.
    pub(super) fn count_entry(&mut self, t: &Tick, states: &HashMap<OpKey, OpState>, load: &Load) {
        let wl = &t.app.workload;
        let entry_ok: f64 = {
            let mut acc = 0.0;
            for m in &wl.mix {
                let st = states.get(&(wl.target.clone(), m.operation.clone()));
                let p_to = st
                    .map(|s| {
                        1.0 - util::lognormal_cdf(
                            wl.timeout.as_secs_f64(),
                            s.latency.max(1e-4),
                            SIGMA,
                        )
                    })
                    .unwrap_or(0.0);
                acc += m.weight / load.mix_total * st.map(|s| s.ok * (1.0 - p_to)).unwrap_or(0.0);
            }
            acc * load.entry_reach
        };
        let entry_n = load.total_rate * DT;
        self.entry.0 += entry_n;
        self.entry.1 += entry_n * (1.0 - entry_ok);
    }

    /// Service health and per-pod counters of every operation served this step.
    pub(super) fn count_ops(&mut self, w: &mut World, t: &Tick, states: &HashMap<OpKey, OpState>) {
        self.service_health.clear();
        for k in &self.order {
            let Some(st) = states.get(k) else {
                continue;
            };
            let pods = &t.serving[&k.0];
            if pods.is_empty() || st.rate <= 0.0 {
                continue;
            }
            let per_pod = st.rate / pods.len() as f64;
            let h = self
                .service_health
                .entry(k.0.clone())
                .or_insert((0.0, 0.0, 0.0));
            add_health(h, st);
            for pk in pods {
                let n = util::poisson(&mut w.rng, per_pod * DT) as f64;
                if n == 0.0 {
                    continue;
                }
                let errs = if st.ok >= 1.0 {
                    0.0
                } else {
                    (0..n as u64)
                        .filter(|_| w.rng.random::<f64>() > st.ok)
                        .count() as f64
                };
                let c = self
                    .counters
                    .entry((pk.clone(), k.1.clone()))
                    .or_insert_with(|| OpCounters {
                        buckets: vec![0.0; self.buckets.len()],
                        ..Default::default()
                    });
                add_requests(c, &self.buckets, st, n, errs);
                if errs > 0.0 {
                    error_logs(w, t, k, pk, st, errs);
                }
            }
        }
    }
}

/// Folds an operation into its service's (requests/s, error ratio, p99 seconds).
fn add_health(h: &mut (f64, f64, f64), st: &OpState) {
    let err_ratio = 1.0 - st.ok;
    let tot = h.0 + st.rate;
    h.1 = (h.1 * h.0 + err_ratio * st.rate) / tot.max(1e-9);
    // 2.326 is the standard normal's 99th percentile.
    let p99 = if st.tail.0 > 0.01 {
        (st.latency + st.tail.1) * (2.326 * SIGMA).exp()
    } else {
        st.latency * (2.326 * SIGMA).exp()
    };
    h.2 = h.2.max(p99);
    h.0 = tot;
}

/// Adds `n` requests, `errs` of them failed, to a pod's counters of one operation.
fn add_requests(c: &mut OpCounters, buckets: &[f64], st: &OpState, n: f64, errs: f64) {
    c.requests += n;
    c.errors += errs;
    let code = st
        .error
        .as_ref()
        .map(|e| e.0.clone())
        .unwrap_or_else(|| "Unknown".into());
    *c.by_code.entry("OK".into()).or_default() += n - errs;
    if errs > 0.0 {
        *c.by_code.entry(code).or_default() += errs;
    }
    // The mean of a log-normal is its median times exp(sigma^2 / 2).
    c.duration_sum += n * (st.latency + st.tail.0 * st.tail.1) * (SIGMA * SIGMA / 2.0).exp();
    let mut prev = 0.0;
    for (i, b) in buckets.iter().enumerate() {
        let cdf = (1.0 - st.tail.0) * util::lognormal_cdf(*b, st.latency.max(1e-5), SIGMA)
            + st.tail.0 * util::lognormal_cdf(*b, (st.latency + st.tail.1).max(1e-5), SIGMA);
        c.buckets[i] += ((cdf - prev) * n).round();
        prev = cdf;
    }
}

/// Error logs, a few per pod per second as real services print them, each at a random instant
/// of the second.
fn error_logs(w: &mut World, t: &Tick, k: &OpKey, pk: &Key, st: &OpState, errs: f64) {
    let Some((_, msg, peer)) = &st.error else {
        return;
    };
    let spec = t.app.service(&k.0).expect("op of a service");
    let style = programs::log_style(spec);
    let lines = (errs as usize).min(3);
    for _ in 0..lines {
        let text = match peer {
            Some(p) => logs::call_error(style, p, &k.1, msg),
            None => msg.clone(),
        };
        let container = spec.container_name().to_string();
        let restart = w
            .pods
            .get(pk)
            .and_then(|p| p.statuses.first())
            .map(|s| s.restart_count)
            .unwrap_or(0);
        let jitter: i64 = w.rng.random_range(0..NS_PER_SEC);
        let line = logs::line(style, &k.0, Level::Error, t.now + jitter, &text);
        let stream = if matches!(style, LogStyle::Zerolog | LogStyle::BoostLog) {
            "stdout"
        } else {
            "stderr"
        };
        w.now += jitter;
        w.log(pk, &container, restart, stream, line);
        w.now -= jitter;
    }
}
