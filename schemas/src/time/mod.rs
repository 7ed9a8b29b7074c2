//! Time as faultline reads and writes it: the virtual clock every API answers by, RFC 3339 as
//! Kubernetes writes it, and the duration grammars of the Go services faultline imitates.
//!
//! ## The virtual clock
//!
//! A replay is frozen at the dataset's virtual "now". Without a time shift, times are served as
//! recorded and "now" is the virtual now. With a time shift, every served time is moved by
//! `real now − virtual now` at the moment of the request, and every time a client sends is moved back
//! by the same amount: client-side ages (`kubectl describe` event ages, Grafana's "last 15 minutes")
//! then look live, while the data stays frozen at the virtual now.
//!
//! A live environment's now moves with its simulation ([`LiveNow`]); its served times are moved by
//! a constant, so that at 1x speed they are wall-clock times.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use chrono::{DateTime, SecondsFormat, Utc};

pub mod duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    now: Now,
    shift: Shift,
}

/// Where the virtual now comes from.
#[derive(Debug, Clone, Copy)]
enum Now {
    /// A recording: now never moves.
    Fixed(i64),
    /// A live environment: the simulation moves it forward as it runs.
    Live(&'static LiveNow),
    /// A real cluster: now is the wall clock.
    Wall,
}

impl PartialEq for Now {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Now::Fixed(a), Now::Fixed(b)) => a == b,
            (Now::Live(a), Now::Live(b)) => std::ptr::eq(*a, *b),
            (Now::Wall, Now::Wall) => true,
            _ => false,
        }
    }
}

impl Eq for Now {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shift {
    None,
    /// By `real now − virtual now` at each reading (a frozen recording made to look live).
    ToRealNow,
    /// By a constant (a live environment whose virtual clock runs with the wall clock).
    Fixed(i64),
}

/// The virtual now of a live environment, moved by its simulation and read by every API.
///
/// Leaked to a `&'static` so that [`Clock`] stays `Copy` (it is read by value on every request);
/// one is made per environment, a few bytes each.
#[derive(Debug)]
pub struct LiveNow(AtomicI64);

impl LiveNow {
    pub fn leak(now_ns: i64) -> &'static LiveNow {
        Box::leak(Box::new(LiveNow(AtomicI64::new(now_ns))))
    }

    pub fn set(&self, now_ns: i64) {
        self.0.store(now_ns, Ordering::Release);
    }

    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Acquire)
    }
}

impl Clock {
    pub fn frozen(virtual_now_ns: i64) -> Self {
        Clock {
            now: Now::Fixed(virtual_now_ns),
            shift: Shift::None,
        }
    }

    pub fn shifted(virtual_now_ns: i64) -> Self {
        Clock {
            now: Now::Fixed(virtual_now_ns),
            shift: Shift::ToRealNow,
        }
    }

    /// A live environment's clock: now is what the simulation has reached, served `shift_ns`
    /// later (so that at 1x speed served times are wall-clock times).
    pub fn live(now: &'static LiveNow, shift_ns: i64) -> Self {
        Clock {
            now: Now::Live(now),
            shift: Shift::Fixed(shift_ns),
        }
    }

    /// A real system's clock: now is the wall clock, and times are served as recorded.
    pub fn wall() -> Self {
        Clock {
            now: Now::Wall,
            shift: Shift::None,
        }
    }

    pub fn is_shifted(&self) -> bool {
        self.shift != Shift::None
    }

    /// Whether now moves (a live environment or a real system) rather than being fixed (a
    /// recording).
    pub fn is_live(&self) -> bool {
        matches!(self.now, Now::Live(_) | Now::Wall)
    }

    pub fn read(&self) -> Reading {
        let virtual_now_ns = match self.now {
            Now::Fixed(t) => t,
            Now::Live(now) => now.get(),
            Now::Wall => real_now_ns(),
        };
        let shift_ns = match self.shift {
            Shift::None => 0,
            Shift::ToRealNow => real_now_ns() - virtual_now_ns,
            Shift::Fixed(s) => s,
        };
        Reading {
            virtual_now_ns,
            shift_ns,
        }
    }
}

/// The clock as read at the start of one request: every conversion in that request uses the same
/// shift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub virtual_now_ns: i64,
    /// Added to recorded times to serve them; subtracted from client times to look them up.
    pub shift_ns: i64,
}

impl Reading {
    /// "Now" as the client sees it.
    pub fn served_now_ns(&self) -> i64 {
        self.virtual_now_ns + self.shift_ns
    }
    /// A recorded time as served to the client.
    pub fn serve(&self, recorded_ns: i64) -> i64 {
        recorded_ns.saturating_add(self.shift_ns)
    }
    /// A client's time as a recorded time.
    pub fn recorded(&self, served_ns: i64) -> i64 {
        served_ns.saturating_sub(self.shift_ns)
    }
    pub fn serve_rfc3339(&self, recorded_ns: i64) -> String {
        rfc3339(self.serve(recorded_ns))
    }
    /// The shift in whole milliseconds (rounded down), for APIs that count time in ms.
    pub fn shift_ms(&self) -> i64 {
        self.shift_ns.div_euclid(1_000_000)
    }
    /// The virtual now in whole milliseconds (rounded down).
    pub fn virtual_now_ms(&self) -> i64 {
        self.virtual_now_ns.div_euclid(1_000_000)
    }
}

pub fn real_now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// RFC 3339 with whole seconds and `Z`, as Kubernetes writes `metav1.Time` (`creationTimestamp`).
pub fn rfc3339(ns: i64) -> String {
    DateTime::<Utc>::from_timestamp_nanos(ns).to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// RFC 3339 with microseconds, as Kubernetes writes `metav1.MicroTime` (an event's `eventTime`).
pub fn rfc3339_micros(ns: i64) -> String {
    DateTime::<Utc>::from_timestamp_nanos(ns).to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// RFC 3339 with nanoseconds, as `kubectl logs --timestamps` shows.
pub fn rfc3339_nanos(ns: i64) -> String {
    DateTime::<Utc>::from_timestamp_nanos(ns).to_rfc3339_opts(SecondsFormat::Nanos, true)
}

/// Shifts every timestamp-valued field of a Kubernetes object (`creationTimestamp`,
/// `lastTimestamp`, `startedAt`, `lastTransitionTime`, ...) by `shift_ns`, as a shifted clock
/// serves it, so that client-side ages look live.
pub fn shift_object_times(v: &mut serde_json::Value, shift_ns: i64) {
    use serde_json::Value;
    if shift_ns == 0 {
        return;
    }
    match v {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                let timey = k.ends_with("Timestamp") || k.ends_with("Time") || k.ends_with("At");
                match child {
                    Value::String(s) if timey => {
                        if let Some(t) = parse_rfc3339(s) {
                            let shifted = t.saturating_add(shift_ns);
                            *s = if s.contains('.') {
                                rfc3339_nanos(shifted)
                            } else {
                                rfc3339(shifted)
                            };
                        }
                    }
                    _ => shift_object_times(child, shift_ns),
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|x| shift_object_times(x, shift_ns)),
        _ => {}
    }
}

/// Parses an RFC 3339 time to ns since the epoch (`None` outside the years 1677–2262 that
/// nanoseconds in an i64 can hold).
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .and_then(|t| t.timestamp_nanos_opt())
}

/// Parses an RFC 3339 time to ms since the epoch, over chrono's whole range of years (a
/// Prometheus client may send `9999-12-31T23:59:59Z` as an open end).
pub fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shifted_reading_round_trips_times() {
        let virtual_now = 1_767_225_600_000_000_000;
        let r = Clock::shifted(virtual_now).read();
        assert!(r.shift_ns > 0);
        assert_eq!(r.recorded(r.serve(virtual_now - 5)), virtual_now - 5);
        assert!((r.served_now_ns() - real_now_ns()).abs() < 60_000_000_000);
        let f = Clock::frozen(virtual_now).read();
        assert_eq!((f.shift_ns, f.served_now_ns()), (0, virtual_now));
    }

    #[test]
    fn a_wall_clock_reads_the_real_now_and_serves_times_as_recorded() {
        let clock = Clock::wall();
        let before = real_now_ns();
        let r = clock.read();
        assert!((before..=real_now_ns()).contains(&r.virtual_now_ns));
        assert_eq!((r.shift_ns, r.serve(42)), (0, 42));
        assert!(clock.is_live() && !clock.is_shifted());
        assert!(clock.read().virtual_now_ns >= r.virtual_now_ns, "it moves");
    }

    #[test]
    fn formats_like_kubernetes() {
        assert_eq!(rfc3339(1_767_225_600_000_000_000), "2026-01-01T00:00:00Z");
        assert_eq!(
            rfc3339_nanos(1_767_225_600_000_000_007),
            "2026-01-01T00:00:00.000000007Z"
        );
        assert_eq!(
            rfc3339_micros(1_767_225_600_000_123_456),
            "2026-01-01T00:00:00.000123Z"
        );
        assert_eq!(
            parse_rfc3339("2026-01-01T00:00:00Z"),
            Some(1_767_225_600_000_000_000)
        );
        assert_eq!(parse_rfc3339("9999-12-31T23:59:59Z"), None);
        assert_eq!(
            parse_rfc3339_ms("9999-12-31T23:59:59Z"),
            Some(253_402_300_799_000)
        );
    }
}
