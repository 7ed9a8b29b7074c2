//! Kubernetes faults on configuration objects: drift in a ConfigMap's keys (or in a JSON
//! document held in one) and ConfigMap deletion. Consuming pods are restarted so they read the
//! change, as a rollout after a config change would.

use problems::edits::edit_json_field;
use problems::primitive::Primitive;

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
