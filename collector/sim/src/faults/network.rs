//! Network faults: latency and packet loss on the link from one service to another (`*` as the
//! caller impairs every caller), held in the runtime for the network model to apply.

use problems::Dur;
use problems::primitive::Primitive;

use super::Result;
use super::context::Ctx;
use super::undo::Saved;

pub(super) fn apply(cx: &mut Ctx, p: &Primitive) -> Result<()> {
    use Primitive as P;
    match p {
        P::NetworkDelay {
            from,
            to,
            delay,
            jitter,
        } => add_delay(cx, from, to, *delay, *jitter),
        P::NetworkLoss { from, to, percent } => add_loss(cx, from, to, *percent),
        other => unreachable!("`{}` is not a network fault", other.name()),
    }
    Ok(())
}

/// The impairment of a link, saved first.
fn link<'c>(cx: &'c mut Ctx, from: &str, to: &str) -> &'c mut crate::runtime::Link {
    let k = (from.to_string(), to.to_string());
    let prev = cx.w.runtime.links.get(&k).cloned();
    cx.undo.push(Saved::Link(k.clone(), prev));
    let now = cx.w.now;
    let l = cx.w.runtime.links.entry(k).or_default();
    l.since = now;
    l
}

/// Adds latency to a link; jitter counts as half its amplitude on average.
pub(super) fn add_delay(cx: &mut Ctx, from: &str, to: &str, delay: Dur, jitter: Dur) {
    link(cx, from, to).delay_ms += delay.as_millis() as f64 + jitter.as_millis() as f64 / 2.0;
}

/// Adds packet loss to a link, independent of the loss it already has.
pub(super) fn add_loss(cx: &mut Ctx, from: &str, to: &str, percent: f64) {
    let l = link(cx, from, to);
    l.loss = 1.0 - (1.0 - l.loss) * (1.0 - percent / 100.0);
}
