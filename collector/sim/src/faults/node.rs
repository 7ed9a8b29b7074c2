//! Node / OS faults: CPU stress on a node and a stopped kubelet, held in the node's runtime
//! conditions for the kubelet and node controller to act on.

use problems::primitive::Primitive;

use super::Result;
use super::context::Ctx;

pub(super) fn apply(cx: &mut Ctx, p: &Primitive) -> Result<()> {
    use Primitive as P;
    match p {
        P::NodeCpuStress { node, cpu } => {
            cx.node_rt(node)?.cpu_stress_milli += cpu.millicores() as i64;
        }
        P::KubeletDown { node } => {
            let now = cx.w.now;
            cx.node_rt(node)?.kubelet_down = true;
            // The node's last heartbeat is now: the node controller marks it NotReady once the
            // grace period passes from here.
            if let Some(n) = cx.w.nodes.get_mut(node) {
                n.heartbeat = now;
            }
        }
        other => unreachable!("`{}` is not a node fault", other.name()),
    }
    Ok(())
}
