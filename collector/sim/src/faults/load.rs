//! Load faults: a spike in the load generator's rate, and the client and runtime settings that
//! turn load into overload (aggressive RPC retries, a garbage collector starved of memory).

use problems::primitive::Primitive;

use crate::objects::EnvVar;

use super::Result;
use super::context::Ctx;
use super::resources::limit_memory;
use super::undo::Saved;

pub(super) fn apply(cx: &mut Ctx, p: &Primitive) -> Result<()> {
    use Primitive as P;
    match p {
        P::LoadSpike { multiplier } => {
            cx.undo.push(Saved::Load(cx.w.runtime.load_multiplier));
            cx.w.runtime.load_multiplier *= multiplier;
        }
        P::RpcRetryConfig {
            service,
            dependency: _,
            timeout,
            retries,
        } => cx.edit_container(service, |c| {
            c.env.retain(|e| {
                e.name != "GRPC_CLIENT_TIMEOUT" && e.name != "GRPC_CLIENT_RETRIES_ON_ERROR"
            });
            c.env
                .push(EnvVar::value("GRPC_CLIENT_TIMEOUT", &timeout.to_string()));
            c.env.push(EnvVar::value(
                "GRPC_CLIENT_RETRIES_ON_ERROR",
                &retries.to_string(),
            ));
        })?,
        P::GcPressure {
            services,
            gogc,
            memory_limit,
        } => {
            for s in services {
                cx.edit_container(s, |c| {
                    c.env.retain(|e| e.name != "GOGC");
                    c.env.push(EnvVar::value("GOGC", &gogc.to_string()));
                    if let Some(m) = memory_limit {
                        limit_memory(c, m.bytes() as i64);
                    }
                })?;
            }
        }
        other => unreachable!("`{}` is not a load fault", other.name()),
    }
    Ok(())
}
