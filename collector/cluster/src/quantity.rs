//! Kubernetes resource quantities as clients write them (`100m`, `1`, `0.5`, `512Mi`, `1.5Gi`,
//! `1e3`), parsed exactly into the model's units: CPU in millicores and memory in bytes, rounded
//! up as the API server's `MilliValue`/`Value` do. Errors are worded as the API server words them.

use std::collections::BTreeMap;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::objects::ResourceList;

/// The API server's message for text that is not a quantity at all.
pub const FORMAT_ERROR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
/// ... and for a number followed by a suffix it does not know.
pub const SUFFIX_ERROR: &str = "unable to parse quantity's suffix";

/// A quantity as `mantissa × 10^exp10 × 2^exp2`, exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Exact {
    mantissa: i128,
    exp10: i32,
    exp2: u32,
}

fn parse(text: &str) -> Result<Exact, &'static str> {
    let s = text.trim();
    let (negative, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let number_len = body
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b'.')
        .count();
    let (number, suffix) = body.split_at(number_len);
    let suffix_ok = {
        // The regular expression's suffix part: letters, then an optional signed integer.
        let letters = suffix.trim_start_matches(|c: char| "eEinumkKMGTP".contains(c));
        let digits = letters.strip_prefix(['+', '-']).unwrap_or(letters);
        digits.bytes().all(|b| b.is_ascii_digit())
    };
    if number.is_empty() || !suffix_ok || number.matches('.').count() > 1 || number == "." {
        return Err(FORMAT_ERROR);
    }
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let mut mantissa: i128 = 0;
    for b in whole.bytes().chain(fraction.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(i128::from(b - b'0')))
            .ok_or(FORMAT_ERROR)?;
    }
    if negative {
        mantissa = -mantissa;
    }
    let fraction_digits = i32::try_from(fraction.len()).map_err(|_| FORMAT_ERROR)?;
    let (exp10, exp2) = suffix_scale(suffix).ok_or(SUFFIX_ERROR)?;
    Ok(Exact {
        mantissa,
        exp10: exp10 - fraction_digits,
        exp2,
    })
}

/// The scale a suffix stands for: decimal SI, binary, or a decimal exponent (`e3`).
fn suffix_scale(suffix: &str) -> Option<(i32, u32)> {
    let decimal = match suffix {
        "" => Some(0),
        "n" => Some(-9),
        "u" => Some(-6),
        "m" => Some(-3),
        "k" => Some(3),
        "M" => Some(6),
        "G" => Some(9),
        "T" => Some(12),
        "P" => Some(15),
        "E" => Some(18),
        _ => None,
    };
    if let Some(e) = decimal {
        return Some((e, 0));
    }
    let binary = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
        .iter()
        .position(|b| *b == suffix);
    if let Some(i) = binary {
        return Some((0, 10 * (u32::try_from(i).ok()? + 1)));
    }
    let exponent = suffix.strip_prefix(['e', 'E'])?;
    let exponent = exponent.strip_prefix('+').unwrap_or(exponent);
    exponent
        .parse::<i32>()
        .ok()
        .filter(|e| e.abs() <= 40)
        .map(|e| (e, 0))
}

/// The quantity times `10^scale`, rounded up (toward positive infinity), if it fits an i64.
fn scaled(q: Exact, scale: i32) -> Option<i64> {
    let mut n = q.mantissa.checked_mul(1i128.checked_shl(q.exp2)?)?;
    let exp = q.exp10 + scale;
    if exp >= 0 {
        n = n.checked_mul(10i128.checked_pow(u32::try_from(exp).ok()?)?)?;
    } else {
        let d = 10i128.checked_pow(u32::try_from(-exp).ok()?)?;
        n = n.div_euclid(d) + i128::from(n.rem_euclid(d) != 0);
    }
    i64::try_from(n).ok()
}

/// A CPU quantity in millicores.
pub fn cpu_milli(text: &str) -> Result<i64, &'static str> {
    scaled(parse(text)?, 3).ok_or(FORMAT_ERROR)
}

/// A memory (or storage) quantity in bytes.
pub fn bytes(text: &str) -> Result<i64, &'static str> {
    scaled(parse(text)?, 0).ok_or(FORMAT_ERROR)
}

/// A quantity written as a JSON string or number (YAML `cpu: 1` arrives as a number).
pub fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `limits`/`requests`: CPU and memory; other resources (ephemeral storage, devices) are not
/// modelled and are dropped.
impl<'de> Deserialize<'de> for ResourceList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = Option::<BTreeMap<String, Value>>::deserialize(d)?.unwrap_or_default();
        let mut list = ResourceList::default();
        for (name, v) in &map {
            let q = text(v).ok_or_else(|| D::Error::custom(FORMAT_ERROR))?;
            match name.as_str() {
                "cpu" => list.cpu_milli = Some(cpu_milli(&q).map_err(D::Error::custom)?),
                "memory" => list.memory = Some(bytes(&q).map_err(D::Error::custom)?),
                _ => {}
            }
        }
        Ok(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_in_millicores_rounded_up() {
        assert_eq!(cpu_milli("100m"), Ok(100));
        assert_eq!(cpu_milli("1"), Ok(1000));
        assert_eq!(cpu_milli("0.5"), Ok(500));
        assert_eq!(cpu_milli("1.5"), Ok(1500));
        assert_eq!(cpu_milli("1e3"), Ok(1_000_000));
        assert_eq!(cpu_milli("250000u"), Ok(250));
        assert_eq!(
            cpu_milli("1n"),
            Ok(1),
            "a fraction of a millicore rounds up"
        );
        assert_eq!(cpu_milli("+2"), Ok(2000));
        assert_eq!(cpu_milli("-1"), Ok(-1000));
    }

    #[test]
    fn memory_in_bytes() {
        assert_eq!(bytes("512Mi"), Ok(512 << 20));
        assert_eq!(bytes("1.5Gi"), Ok(3 << 29));
        assert_eq!(bytes("1G"), Ok(1_000_000_000));
        assert_eq!(bytes("1e3"), Ok(1000));
        assert_eq!(bytes("128974848"), Ok(128_974_848));
        assert_eq!(bytes("129M"), Ok(129_000_000));
        assert_eq!(bytes("0.1"), Ok(1));
    }

    #[test]
    fn bad_quantities_are_worded_like_the_api_server() {
        for bad in ["", "abc", "1.2.3", "Mi", "1 Mi", "1Mi5x", "."] {
            assert_eq!(bytes(bad), Err(FORMAT_ERROR), "{bad:?}");
        }
        for bad in ["1Qi", "1mm", "1iM", "2KiB"] {
            assert!(bytes(bad).is_err(), "{bad:?}");
        }
        assert_eq!(bytes("1ki"), Err(SUFFIX_ERROR));
        assert_eq!(bytes("99999999999999999999E"), Err(FORMAT_ERROR));
    }

    #[test]
    fn resource_lists_take_strings_and_numbers() {
        let l: ResourceList = serde_json::from_value(
            serde_json::json!({"cpu": 1, "memory": "64Mi", "nvidia.com/gpu": "1"}),
        )
        .unwrap();
        assert_eq!(l.cpu_milli, Some(1000));
        assert_eq!(l.memory, Some(64 << 20));
        let err = serde_json::from_value::<ResourceList>(serde_json::json!({"cpu": "lots"}))
            .unwrap_err()
            .to_string();
        assert_eq!(err, FORMAT_ERROR);
    }
}
