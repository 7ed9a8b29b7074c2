//! Kubernetes faults on configuration objects: drift in a ConfigMap's keys (or in a JSON
//! document held in one) and ConfigMap deletion. Consuming pods are restarted so they read the
//! change, as a rollout after a config change would.

use problems::primitive::Primitive;
use serde_json::json;

use crate::objects::*;

use super::context::Ctx;
use super::{FaultError, Result};

pub(super) fn apply(cx: &mut Ctx, p: &Primitive) -> Result<()> {
    use Primitive as P;
    match p {
        P::ConfigMapKeyDrift {
            config_map,
            key: k_name,
            field,
            value,
        } => {
            cx.modify(config_map, |cm: &mut ConfigMap| {
            match field {
                Some(f) => {
                    let text = cm.data.get(k_name).ok_or_else(|| {
                        FaultError(format!("ConfigMap `{config_map}` has no key `{k_name}`"))
                    })?;
                    let edited = edit_json_field(text, f, value.as_deref()).ok_or_else(|| {
                        FaultError(format!(
                            "ConfigMap `{config_map}` key `{k_name}` is not a JSON object with `{f}`"
                        ))
                    })?;
                    cm.data.insert(k_name.clone(), edited);
                }
                None => match value {
                    Some(v) => {
                        cm.data.insert(k_name.clone(), v.clone());
                    }
                    None => {
                        cm.data.remove(k_name);
                    }
                },
            }
            Ok(())
            })?;
            for s in cx.consumers(config_map) {
                cx.restart(&s);
            }
        }
        P::ConfigMapDelete { config_map } => {
            let consumers = cx.consumers(config_map);
            cx.delete::<ConfigMap>(config_map)?;
            for s in consumers {
                cx.restart(&s);
            }
        }
        other => unreachable!("`{}` is not a ConfigMap fault", other.name()),
    }
    Ok(())
}

/// Edits a JSON document held in a ConfigMap value: removes or sets a top-level or dotted field.
fn edit_json_field(text: &str, field: &str, value: Option<&str>) -> Option<String> {
    let mut v: serde_json::Value = serde_json::from_str(text).ok()?;
    let mut cur = &mut v;
    let parts: Vec<&str> = field.split('.').collect();
    for p in &parts[..parts.len() - 1] {
        cur = cur.get_mut(*p)?;
    }
    let last = parts[parts.len() - 1];
    let obj = cur.as_object_mut()?;
    match value {
        Some(val) => {
            let parsed = serde_json::from_str(val).unwrap_or_else(|_| json!(val));
            obj.insert(last.to_string(), parsed);
        }
        None => {
            obj.remove(last);
        }
    }
    serde_json::to_string_pretty(&v).ok()
}
