//! Kubernetes faults on what a workload's pods run: the image, environment, command, sidecars
//! and init containers (with the RBAC objects an init container's API call is checked against).

use problems::primitive::Primitive;
use serde_json::json;

use crate::objects::*;

use super::context::Ctx;
use super::undo::Saved;
use super::{FaultError, Result};

pub(super) fn apply(cx: &mut Ctx, p: &Primitive) -> Result<()> {
    use Primitive as P;
    match p {
        P::ContainerImage {
            service,
            image,
            effect,
        } => {
            // What the image does when run is a runtime condition of the image, not of the pod.
            let prev = cx.w.runtime.images.get(image).copied();
            cx.undo.push(Saved::Image(image.clone(), prev));
            cx.w.runtime.images.insert(image.clone(), *effect);
            cx.edit_container(service, |c| c.image = image.clone())?;
        }
        P::EnvRemove { service, var } => {
            cx.edit_container(service, |c| c.env.retain(|e| e.name != *var))?
        }
        P::EnvSet {
            service,
            var,
            value,
        } => cx.edit_container(service, |c| c.env.push(EnvVar::value(var, value)))?,
        P::EnvAddressPort { service, var, port } => env_address_port(cx, service, var, *port)?,
        P::RbacDeniedInit {
            service,
            service_account,
            config_map,
        } => rbac_denied_init(cx, service, service_account, config_map)?,
        P::InitContainerHang { service, waits_for } => cx.edit(service, |t, _| {
            let mut c = Container::new(&format!("wait-for-{waits_for}"), "busybox:1.28");
            c.command = vec![
                "sh".into(),
                "-c".into(),
                format!(
                    "until nslookup {waits_for}; do echo waiting for {waits_for}; sleep 2; done"
                ),
            ];
            t.spec.init_containers.push(c);
        })?,
        P::WrongCommand { service, command } => {
            cx.edit_container(service, |c| c.command = command.clone())?
        }
        P::SidecarPortConflict { service, port } => cx.edit(service, |t, _| {
            let mut c = Container::new("sidecar", "busybox:1.36");
            c.command = vec![
                "sh".into(),
                "-c".into(),
                format!("nc -lk -p {port} -e echo ok"),
            ];
            t.spec.containers.push(c);
        })?,
        other => unreachable!("`{}` is not a container fault", other.name()),
    }
    Ok(())
}

/// Rewrites the port of the `host:port` address in the last `var` of the main container.
fn env_address_port(cx: &mut Ctx, service: &str, var: &str, port: u16) -> Result<()> {
    let mut missing = false;
    cx.edit_container(service, |c| {
        match c
            .env
            .iter_mut()
            .rev()
            .find(|e| e.name == *var)
            .and_then(|e| e.value.as_mut())
        {
            Some(v) => {
                if let Some(edited) = problems::edits::with_address_port(v, port) {
                    *v = edited;
                }
            }
            None => missing = true,
        }
    })?;
    if missing {
        return Err(FaultError(format!(
            "`{service}` has no env var `{var}` with a value"
        )));
    }
    Ok(())
}

/// Gives the workload a ServiceAccount whose Role lacks `configmaps`, and an init container that
/// reads the ConfigMap through the API with it.
fn rbac_denied_init(
    cx: &mut Ctx,
    service: &str,
    service_account: &str,
    config_map: &str,
) -> Result<()> {
    let ns = cx.ns();
    let k = key(&ns, service_account);
    let account = ServiceAccount {
        meta: cx.app_meta(service_account),
        body: json!({}),
    };
    cx.create(k.clone(), account);
    let role = Role {
        meta: cx.app_meta(service_account),
        body: json!({"rules": [{"apiGroups": [""], "resources": ["pods", "services"], "verbs": ["get", "list", "watch"]}]}),
    };
    cx.create(k.clone(), role);
    let binding = RoleBinding {
        meta: cx.app_meta(service_account),
        body: json!({
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": service_account},
            "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": ns}],
        }),
    };
    cx.create(k, binding);
    cx.edit(service, |t, _| {
        t.spec.service_account_name = service_account.to_string();
        let mut c = Container::new("fetch-config", "alpine/k8s:1.28.3");
        c.command = vec!["sh".into(), "-c".into(), format!("kubectl get configmap {config_map} -n {ns} -o jsonpath='{{.data}}' > /config/runtime.json")];
        t.spec.init_containers.push(c);
    })
}
