//! Duration strings as the Go services we imitate read them: Go's `time.ParseDuration`
//! (`1.5ms`, `2h45m`, `100us`; Jaeger's minDuration, Loki's label filters) and the Prometheus
//! form LogQL range selectors use, which adds days, weeks and years (`5m`, `1d`, `1w`).

const NS: i128 = 1;
const US: i128 = 1_000;
const MS: i128 = 1_000_000;
const SEC: i128 = 1_000_000_000;

fn unit_ns(unit: &str, with_days: bool) -> Option<i128> {
    Some(match unit {
        "ns" => NS,
        "us" | "µs" | "μs" => US,
        "ms" => MS,
        "s" => SEC,
        "m" => 60 * SEC,
        "h" => 3600 * SEC,
        "d" if with_days => 86_400 * SEC,
        "w" if with_days => 7 * 86_400 * SEC,
        "y" if with_days => 365 * 86_400 * SEC,
        _ => return None,
    })
}

fn parse(s: &str, with_days: bool) -> Result<i64, String> {
    let bad = || format!("invalid duration \"{s}\"");
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
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
        if num.is_empty() || num == "." {
            return Err(bad());
        }
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        if unit.is_empty() {
            return Err(format!("missing unit in duration \"{s}\""));
        }
        let scale = unit_ns(unit, with_days)
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
    let total = if neg { -total } else { total };
    i64::try_from(total).map_err(|_| bad())
}

/// Go's `time.ParseDuration`, in nanoseconds.
pub fn parse_go(s: &str) -> Result<i64, String> {
    parse(s, false)
}

/// A Prometheus/LogQL duration (Go units plus `d`, `w`, `y`), in nanoseconds.
pub fn parse_prom(s: &str) -> Result<i64, String> {
    parse(s, true)
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
        assert_eq!(parse_prom("1d"), Ok(86_400_000_000_000));
        assert_eq!(parse_prom("1h30m"), Ok(5_400_000_000_000));
    }
}
