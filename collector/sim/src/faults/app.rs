//! Application faults: feature flags (a variant set in the flag's ConfigMap, whose effects the
//! flag reader applies) and database conditions held in the runtime (authentication, locks).

use problems::edits::set_flag_variant;
use problems::primitive::{AuthMode, Primitive};

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
