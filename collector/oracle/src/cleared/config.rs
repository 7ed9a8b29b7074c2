//! Configuration objects: a deleted ConfigMap back with the keys its manifest has, a drifted
//! key (or JSON field inside one) present again and no longer holding the drifted value, and a
//! feature flag back on a variant without effects. The services that consume a ConfigMap must
//! still serve, so deleting a consumer does not count.

use problems::primitive::Primitive;
use sim::flags;
use sim::objects::{ConfigMap, key};

use super::{Outcome, no_check};
use crate::assertions::json_field;
use crate::view::View;

pub(super) fn check(v: &View, p: &Primitive) -> Outcome {
    use Primitive as P;
    match p {
        P::ConfigMapDelete { config_map } => restored(v, config_map),
        P::ConfigMapKeyDrift {
            config_map,
            key,
            field,
            value,
        } => undrifted(v, config_map, key, field.as_deref(), value.as_deref()),
        P::FeatureFlag { flag, .. } => flag_harmless(v, flag),
        other => Err(no_check(other)),
    }
}

/// The ConfigMap, which must exist.
fn config_map<'a>(v: &View<'a>, name: &str) -> Result<&'a ConfigMap, String> {
    v.w.configmaps
        .get(&key(v.ns, name))
        .ok_or_else(|| format!("{} does not exist", v.name("ConfigMap", name)))
}

/// Services whose manifest mounts the ConfigMap must still serve.
fn consumers_serve(v: &View, name: &str) -> Outcome {
    v.app
        .services
        .iter()
        .filter(|s| s.config_mounts.iter().any(|m| m.config_map == name))
        .try_for_each(|s| v.serving(&s.name).map(|_| ()))
}

/// The ConfigMap exists with every key its manifest declares.
fn restored(v: &View, name: &str) -> Outcome {
    let cm = config_map(v, name)?;
    if let Some(spec) = v.app.config_map(name)
        && let Some(missing) = spec.data.keys().find(|k| !cm.data.contains_key(*k))
    {
        return Err(format!(
            "{} has no key {missing}, which its manifest has",
            v.name("ConfigMap", name)
        ));
    }
    consumers_serve(v, name)
}

/// The key (or field) is present and no longer holds the drifted value.
fn undrifted(v: &View, name: &str, k: &str, field: Option<&str>, drifted: Option<&str>) -> Outcome {
    let what = v.name("ConfigMap", name);
    let cm = config_map(v, name)?;
    let text = cm
        .data
        .get(k)
        .ok_or_else(|| format!("{what} has no key {k}"))?;
    let current = match field {
        Some(f) => {
            let value = json_field(text, f)
                .ok_or_else(|| format!("{what} key {k} has no JSON field {f}"))?;
            match value {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            }
        }
        None => text.clone(),
    };
    if drifted.is_some_and(|d| d == current) {
        let at = field.map(|f| format!(" field {f}")).unwrap_or_default();
        return Err(format!("{what} key {k}{at} still holds {current}"));
    }
    consumers_serve(v, name)
}

/// The flag's default variant is the manifest's, or one with no effects.
fn flag_harmless(v: &View, flag: &str) -> Outcome {
    let spec = v
        .app
        .feature_flag(flag)
        .ok_or_else(|| format!("application {} has no feature flag {flag}", v.app.name))?;
    let holder = format!("{} key {}", v.name("ConfigMap", &spec.config_map), spec.key);
    let current = flags::current_variant(v.w, v.ns, spec)
        .ok_or_else(|| format!("feature flag {flag} has no variant: {holder} is missing"))?;
    let harmless = current == spec.default_variant
        || spec.variants.get(&current).is_some_and(|e| e.is_empty());
    if !harmless {
        return Err(format!(
            "feature flag {flag}'s default variant is {current} ({} expected; {holder})",
            spec.default_variant
        ));
    }
    Ok(())
}
