//! Application faults: feature flags (a variant set in the flag's ConfigMap, whose effects the
//! flag reader applies) and database conditions held in the runtime (authentication, locks).

use problems::primitive::{AuthMode, Primitive};
use serde_json::json;

use crate::objects::*;
use crate::runtime::DbAuth;

use super::context::Ctx;
use super::undo::Saved;
use super::{FaultError, Result};

pub(super) fn apply(cx: &mut Ctx, p: &Primitive) -> Result<()> {
    use Primitive as P;
    match p {
        P::FeatureFlag { flag, variant } => {
            let spec = cx
                .app
                .feature_flag(flag)
                .ok_or_else(|| FaultError(format!("no feature flag `{flag}`")))?;
            cx.modify(&spec.config_map, |cm: &mut ConfigMap| {
                let text = cm.data.get(&spec.key).cloned().unwrap_or_default();
                cm.data
                    .insert(spec.key.clone(), set_flag_variant(&text, flag, variant));
                Ok(())
            })?;
        }
        P::DatabaseAuth {
            service,
            mode,
            restart_clients,
        } => {
            if cx.app.service(service).is_none() {
                return Err(FaultError(format!("no service named `{service}`")));
            }
            cx.service_rt(service);
            // Clients started after this instant see the change at login.
            let prev_at = cx.w.runtime.auth_changed_at.get(service).copied();
            cx.undo.push(Saved::AuthAt(service.clone(), prev_at));
            let now = cx.w.now;
            cx.w.runtime.auth_changed_at.insert(service.clone(), now);
            let rt = cx.w.runtime.services.entry(service.clone()).or_default();
            rt.db_auth = match mode {
                AuthMode::RevokeRoles => DbAuth::RolesRevoked,
                AuthMode::DropUser => DbAuth::UserRemoved,
                AuthMode::PasswordChanged => DbAuth::PasswordChanged,
                AuthMode::RequireTls => DbAuth::TlsRequired,
            };
            if !rt.db_auth.persists() {
                rt.process_since = Some(now);
            }
            for s in restart_clients {
                cx.restart(s);
            }
        }
        P::DatabaseLock { service, table } => {
            let now = cx.w.now;
            let rt = cx.service_rt(service);
            rt.locked_table = Some(table.clone());
            rt.process_since = Some(now);
        }
        other => unreachable!("`{}` is not an application fault", other.name()),
    }
    Ok(())
}

/// Sets a flag's default variant in its ConfigMap text (flagd JSON, `name=value` lines, or a
/// plain value).
fn set_flag_variant(text: &str, flag: &str, variant: &str) -> String {
    if let Ok(mut v) = serde_json::from_str::<serde_json::Value>(text) {
        if v["flags"][flag].is_object() {
            v["flags"][flag]["defaultVariant"] = json!(variant);
            return serde_json::to_string_pretty(&v).unwrap_or_else(|_| text.to_string());
        }
        if v.get(flag).is_some() {
            v[flag] = json!(variant);
            return serde_json::to_string_pretty(&v).unwrap_or_else(|_| text.to_string());
        }
    }
    if text
        .lines()
        .any(|l| l.split_once('=').is_some_and(|(k, _)| k.trim() == flag))
    {
        return text
            .lines()
            .map(|l| match l.split_once('=') {
                Some((k, _)) if k.trim() == flag => format!("{flag}={variant}"),
                _ => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n");
    }
    variant.to_string()
}
