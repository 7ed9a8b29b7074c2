//! Feature flags as the running app reads them: the current variant of each flag comes from its
//! ConfigMap (flagd's `demo.flagd.json`, or a plain runtime config key), and the app spec says
//! what each variant does.

use std::collections::BTreeMap;

use problems::app::{AppSpec, FeatureFlagSpec, FlagEffect};

use super::world::World;

/// The effects of every flag's current variant.
#[derive(Debug, Clone, Default)]
pub struct Effects {
    effects: Vec<FlagEffect>,
}

/// The variant a flag's ConfigMap selects, if the ConfigMap exists.
pub fn current_variant(w: &World, ns: &str, flag: &FeatureFlagSpec) -> Option<String> {
    let text = w
        .configmaps
        .get(&(ns.to_string(), flag.config_map.clone()))?
        .data
        .get(&flag.key)?;
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        if let Some(var) = v["flags"][&flag.name]["defaultVariant"].as_str() {
            return Some(var.to_string());
        }
        if let Some(var) = v[&flag.name].as_str() {
            return Some(var.to_string());
        }
    }
    for line in text.lines() {
        if let Some((k, val)) = line.split_once('=')
            && k.trim() == flag.name
        {
            return Some(val.trim().to_string());
        }
    }
    Some(text.trim().to_string())
}

impl Effects {
    pub fn read(w: &World, app: &AppSpec) -> Effects {
        let mut effects = vec![];
        for flag in &app.feature_flags {
            let variant = current_variant(w, &app.namespace, flag)
                .unwrap_or_else(|| flag.default_variant.clone());
            if let Some(list) = flag.variants.get(&variant) {
                effects.extend(list.iter().cloned());
            }
        }
        Effects { effects }
    }

    pub fn extra_cpu(&self, svc: &str) -> f64 {
        self.effects
            .iter()
            .map(|e| match e {
                FlagEffect::Cpu { service, cpu } if service == svc => cpu.cores(),
                _ => 0.0,
            })
            .sum()
    }

    /// Working-set growth in bytes per minute.
    pub fn memory_growth(&self, svc: &str) -> f64 {
        self.effects
            .iter()
            .map(|e| match e {
                FlagEffect::MemoryGrowth {
                    service,
                    per_minute,
                } if service == svc => per_minute.bytes() as f64,
                _ => 0.0,
            })
            .sum()
    }

    pub fn readiness_failure(&self, svc: &str) -> bool {
        self.effects
            .iter()
            .any(|e| matches!(e, FlagEffect::ReadinessFailure { service } if service == svc))
    }

    pub fn op_error(&self, svc: &str, op: &str) -> f64 {
        self.effects
            .iter()
            .map(|e| match e {
                FlagEffect::Error {
                    service,
                    operation,
                    ratio,
                } if service == svc && (operation == op || operation == "*") => *ratio,
                _ => 0.0,
            })
            .fold(0.0, |a, r| 1.0 - (1.0 - a) * (1.0 - r))
    }

    /// Added latency in milliseconds.
    pub fn op_latency_ms(&self, svc: &str, op: &str) -> f64 {
        self.effects
            .iter()
            .map(|e| match e {
                FlagEffect::Latency {
                    service,
                    operation,
                    added,
                } if service == svc && (operation == op || operation == "*") => {
                    added.as_millis() as f64
                }
                _ => 0.0,
            })
            .sum()
    }

    pub fn unreachable(&self, svc: &str, dep: &str) -> bool {
        self.effects.iter().any(|e| {
            matches!(e, FlagEffect::Unreachable { service, dependency } if service == svc && dependency == dep)
        })
    }

    pub fn load_multiplier(&self) -> f64 {
        self.effects
            .iter()
            .map(|e| match e {
                FlagEffect::Load { multiplier } => *multiplier,
                _ => 1.0,
            })
            .product()
    }

    /// Variants by flag, for tests and summaries.
    pub fn variants(w: &World, app: &AppSpec) -> BTreeMap<String, String> {
        app.feature_flags
            .iter()
            .map(|f| {
                (
                    f.name.clone(),
                    current_variant(w, &app.namespace, f)
                        .unwrap_or_else(|| f.default_variant.clone()),
                )
            })
            .collect()
    }
}
