//! Query results and Prometheus' number formatting.

use crate::labels::Labels;

/// One element of an instant vector.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub labels: Labels,
    pub v: f64,
}

/// One series of a range vector / matrix: `(timestamp ms, value)` points in time order.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub labels: Labels,
    pub points: Vec<(i64, f64)>,
}

/// The value of a PromQL expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Scalar(f64),
    String(String),
    Vector(Vec<Sample>),
    Matrix(Vec<Series>),
}

impl Value {
    /// The type name Prometheus reports as `resultType`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Scalar(_) => "scalar",
            Value::String(_) => "string",
            Value::Vector(_) => "vector",
            Value::Matrix(_) => "matrix",
        }
    }
}

/// Formats a float as Go's `strconv.FormatFloat(v, 'f', -1, 64)` does, which is what Prometheus
/// uses for sample values in JSON and for `count_values` labels: shortest round-trip digits,
/// never an exponent, `NaN`, `+Inf`, `-Inf`.
pub fn format_float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

/// Formats a millisecond timestamp as Prometheus' JSON does: Unix seconds with up to three
/// decimals, no trailing zeros.
pub fn format_timestamp(t_ms: i64) -> String {
    let secs = t_ms.div_euclid(1000);
    let ms = t_ms.rem_euclid(1000);
    if ms == 0 {
        return secs.to_string();
    }
    // Negative timestamps keep Go's rendering: the float value t/1000.
    if t_ms < 0 {
        return format!("{}", t_ms as f64 / 1000.0);
    }
    let frac = format!("{ms:03}");
    format!("{secs}.{}", frac.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_render_like_go() {
        assert_eq!(format_float(1.0), "1");
        assert_eq!(format_float(0.1), "0.1");
        assert_eq!(format_float(1e21), "1000000000000000000000");
        assert_eq!(format_float(-2.5e-7), "-0.00000025");
        assert_eq!(format_float(f64::NAN), "NaN");
        assert_eq!(format_float(f64::INFINITY), "+Inf");
        assert_eq!(format_float(f64::NEG_INFINITY), "-Inf");
    }

    #[test]
    fn timestamps_render_as_seconds() {
        assert_eq!(format_timestamp(1_435_781_451_781), "1435781451.781");
        assert_eq!(format_timestamp(1_435_781_451_000), "1435781451");
        assert_eq!(format_timestamp(1_435_781_451_100), "1435781451.1");
        assert_eq!(format_timestamp(-1500), "-1.5");
    }
}
