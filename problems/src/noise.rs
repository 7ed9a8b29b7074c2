//! Noise profiles: transient, harmless-in-the-end disturbances scheduled from a seed, so two runs
//! with the same seed disturb the same things at the same times. The schedule goes to the
//! evaluator record, never into the dataset.

use rand::Rng;
use rand::SeedableRng;
use rand::seq::{IndexedRandom, index};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::units::{Cpu, Dur};

/// Name of the profile problems use unless they say otherwise.
pub const DEFAULT_PROFILE: &str = "default";
/// Name that means "no noise".
pub const NO_NOISE: &str = "none";

/// A noise profile: `per_period` disturbances every `every`, each lasting `length`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoiseProfile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub every: Dur,
    pub per_period: u32,
    pub length: Dur,
    /// Kinds drawn from (without repetition inside a period).
    pub disturbances: Vec<NoiseKind>,
    /// Keep noise off the services a problem's faults target, so noise never masks the fault.
    #[serde(default = "yes")]
    pub avoid_fault_targets: bool,
}

fn yes() -> bool {
    true
}

/// One kind of transient disturbance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum NoiseKind {
    /// Kill one pod of the target (grace period 0); its controller recreates it.
    PodKill,
    /// Burn extra CPU in one pod of the target.
    CpuBurst { cpu: Cpu },
    /// Add latency to the target's traffic.
    NetworkDelay { delay: Dur, jitter: Dur },
    /// Drop a few percent of the target's requests.
    RequestDrop { percent: f64 },
}

impl NoiseKind {
    pub fn name(&self) -> &'static str {
        match self {
            NoiseKind::PodKill => "pod_kill",
            NoiseKind::CpuBurst { .. } => "cpu_burst",
            NoiseKind::NetworkDelay { .. } => "network_delay",
            NoiseKind::RequestDrop { .. } => "request_drop",
        }
    }
}

/// One scheduled disturbance, with offsets from the start of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedNoise {
    pub kind: NoiseKind,
    /// Service name.
    pub target: String,
    pub start: Dur,
    pub end: Dur,
}

impl NoiseProfile {
    /// The schedule for a run of `window` over the candidate services, drawn from `seed`. Each
    /// period starting at `k * every` gets `per_period` distinct kinds on random candidates,
    /// starting at a random moment that lets them end inside the period and the window.
    pub fn schedule(&self, seed: u64, window: Dur, candidates: &[&str]) -> Vec<PlannedNoise> {
        let mut out = Vec::new();
        let every = self.every.as_millis();
        let length = self.length.as_millis();
        if candidates.is_empty() || self.disturbances.is_empty() || every == 0 {
            return out;
        }
        // Salted so the noise stream differs from other seeded streams of the same run.
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6e6f_6973_655f_7631);
        let per = (self.per_period as usize).min(self.disturbances.len());
        let mut period_start = 0;
        while period_start + length <= window.as_millis() {
            let slack = every
                .saturating_sub(length)
                .min(window.as_millis() - period_start - length);
            for i in index::sample(&mut rng, self.disturbances.len(), per) {
                let start = period_start + rng.random_range(0..=slack);
                let target = candidates.choose(&mut rng).copied().unwrap_or_default();
                out.push(PlannedNoise {
                    kind: self.disturbances[i].clone(),
                    target: target.to_string(),
                    start: Dur::from_millis(start),
                    end: Dur::from_millis(start + length),
                });
            }
            period_start += every;
        }
        out.sort_by_key(|n| (n.start, n.target.clone()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> NoiseProfile {
        NoiseProfile {
            name: "t".into(),
            description: String::new(),
            every: Dur::from_secs(300),
            per_period: 2,
            length: Dur::from_secs(120),
            disturbances: vec![
                NoiseKind::PodKill,
                NoiseKind::CpuBurst {
                    cpu: Cpu::from_millicores(500),
                },
                NoiseKind::RequestDrop { percent: 2.0 },
            ],
            avoid_fault_targets: true,
        }
    }

    #[test]
    fn schedule_is_seeded_and_bounded() {
        let p = profile();
        let window = Dur::from_secs(3600);
        let a = p.schedule(7, window, &["geo", "rate", "profile"]);
        assert_eq!(a, p.schedule(7, window, &["geo", "rate", "profile"]));
        assert_ne!(a, p.schedule(8, window, &["geo", "rate", "profile"]));
        assert_eq!(a.len(), 12 * 2);
        for n in &a {
            assert!(n.end <= window);
            assert_eq!(n.end.as_millis() - n.start.as_millis(), 120_000);
        }
        for period in 0..12u64 {
            let kinds: Vec<_> = a
                .iter()
                .filter(|n| n.start.as_millis() / 300_000 == period)
                .map(|n| n.kind.name())
                .collect();
            assert_eq!(kinds.len(), 2);
            assert_ne!(kinds[0], kinds[1]);
        }
        assert!(p.schedule(7, window, &[]).is_empty());
    }
}
