//! Duration strings as the Go services faultline imitates read them, through one scanner
//! (a number, a unit, repeated) with four grammars:
//! - Go's `time.ParseDuration` (`1.5ms`, `2h45m`, `100us`, `-1s`): Jaeger's minDuration, Loki's
//!   label filters;
//! - Prometheus' `model.ParseDuration` (`5m`, `1h30m`, `1d`, `2w`, `1y`: whole numbers, units from
//!   `ms` to `y`): PromQL range selectors, the HTTP API's `step`, promqltest scripts;
//! - Loki's, which tries Go's grammar and then Prometheus' (`1.5h`, `1d`): LogQL range selectors;
//! - faultline's problem specs (`500us`, `250ms`, `1h30m`: whole numbers, units from `us` to `h`).

const NS: i128 = 1;
const US: i128 = 1_000;
const MS: i128 = 1_000_000;
const SEC: i128 = 1_000_000_000;

/// The units a grammar admits (tables shared between grammars), and whether it admits Go's sign and
/// decimal fractions.
#[derive(Clone, Copy)]
struct Grammar {
    units: &'static [&'static [(&'static str, i128)]],
    go: bool,
}

const NANOS: &[(&str, i128)] = &[("ns", NS)];
const MICROS: &[(&str, i128)] = &[("us", US), ("µs", US), ("μs", US)];
const CLOCK: &[(&str, i128)] = &[("ms", MS), ("s", SEC), ("m", 60 * SEC), ("h", 3600 * SEC)];
const DAYS: &[(&str, i128)] = &[
    ("d", 86_400 * SEC),
    ("w", 7 * 86_400 * SEC),
    ("y", 365 * 86_400 * SEC),
];

const GO: Grammar = Grammar {
    units: &[NANOS, MICROS, CLOCK],
    go: true,
};
const PROMETHEUS: Grammar = Grammar {
    units: &[CLOCK, DAYS],
    go: false,
};
const LOKI: Grammar = Grammar {
    units: &[NANOS, MICROS, CLOCK, DAYS],
    go: true,
};
const SPEC: Grammar = Grammar {
    units: &[MICROS, CLOCK],
    go: false,
};

fn unit_ns(unit: &str, g: Grammar) -> Option<i128> {
    g.units
        .iter()
        .flat_map(|table| table.iter())
        .find(|(u, _)| *u == unit)
        .map(|(_, ns)| *ns)
}

/// The duration in nanoseconds, as an i128 so that long Prometheus durations counted in
/// milliseconds do not overflow on the way.
fn parse(s: &str, g: Grammar) -> Result<i128, String> {
    let bad = || format!("invalid duration \"{s}\"");
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) if g.go => (true, r),
        _ => (false, s.strip_prefix('+').filter(|_| g.go).unwrap_or(s)),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_len);
        if num.is_empty() || num == "." || (!g.go && num.contains('.')) {
            return Err(bad());
        }
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        if unit.is_empty() {
            return Err(format!("missing unit in duration \"{s}\""));
        }
        let scale = unit_ns(unit, g)
            .ok_or_else(|| format!("unknown unit \"{unit}\" in duration \"{s}\""))?;
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        let int: i128 = if int.is_empty() {
            0
        } else {
            int.parse().map_err(|_| bad())?
        };
        let mut part = int.checked_mul(scale).ok_or_else(bad)?;
        let mut div = 1i128;
        for d in frac.bytes().take(18) {
            div *= 10;
            part += i128::from(d - b'0') * scale / div;
        }
        total = total.checked_add(part).ok_or_else(bad)?;
        rest = tail;
    }
    Ok(if neg { -total } else { total })
}

fn fit(s: &str, v: i128) -> Result<i64, String> {
    i64::try_from(v).map_err(|_| format!("invalid duration \"{s}\""))
}

/// Go's `time.ParseDuration`, in nanoseconds.
pub fn parse_go(s: &str) -> Result<i64, String> {
    fit(s, parse(s, GO)?)
}

/// A LogQL range duration (Go's grammar, or Prometheus' with `d`, `w`, `y`), in nanoseconds.
pub fn parse_loki(s: &str) -> Result<i64, String> {
    fit(s, parse(s, LOKI)?)
}

/// A duration in a problem spec (`500us`, `250ms`, `1h30m`), in microseconds.
pub fn parse_spec_us(s: &str) -> Result<u64, String> {
    let ns = parse(s, SPEC)?;
    u64::try_from(ns / US).map_err(|_| format!("invalid duration \"{s}\""))
}

/// A Prometheus duration (`1h30m`, `10s53ms`, `1d`), in milliseconds.
pub fn parse_prometheus_ms(s: &str) -> Result<i64, String> {
    fit(s, parse(s, PROMETHEUS)? / MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_go_and_prometheus_durations() {
        assert_eq!(parse_go("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_go("2h45m"), Ok((2 * 3600 + 45 * 60) * 1_000_000_000));
        assert_eq!(parse_go("100us"), Ok(100_000));
        assert_eq!(parse_go("100µs"), Ok(100_000));
        assert_eq!(parse_go("0"), Ok(0));
        assert_eq!(parse_go("-1s"), Ok(-1_000_000_000));
        assert!(parse_go("1d").is_err());
        assert!(parse_go("10").unwrap_err().contains("missing unit"));
        assert!(parse_go("abc").is_err());
        assert_eq!(parse_loki("1d"), Ok(86_400_000_000_000));
        assert_eq!(parse_loki("1h30m"), Ok(5_400_000_000_000));
        assert_eq!(parse_loki("1.5h"), Ok(5_400_000_000_000));
    }

    #[test]
    fn prometheus_durations_are_whole_numbers_in_milliseconds() {
        assert_eq!(parse_prometheus_ms("1h30m"), Ok(5_400_000));
        assert_eq!(parse_prometheus_ms("10s53ms"), Ok(10_053));
        assert_eq!(parse_prometheus_ms("2w"), Ok(14 * 86_400_000));
        assert_eq!(parse_prometheus_ms("1000y"), Ok(1000 * 365 * 86_400_000));
        for bad in ["", "1.5m", "-1m", "+1m", "100us", "5", "1x"] {
            assert!(parse_prometheus_ms(bad).is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn spec_durations_are_whole_numbers_from_micros_to_hours() {
        assert_eq!(parse_spec_us("1h30m"), Ok(5_400_000_000));
        assert_eq!(parse_spec_us("500us"), Ok(500));
        assert_eq!(parse_spec_us("250ms"), Ok(250_000));
        for bad in ["", "5", "m", "5x", "1.5s", "-3s", "1d", "10ns"] {
            assert!(parse_spec_us(bad).is_err(), "{bad} parsed");
        }
    }
}
