//! Quantities written the way Kubernetes and operators write them: durations (`90s`, `5m`,
//! `1h30m`, `250ms`), CPU (`500m`, `2`) and memory (`256Mi`, `1G`). They are strings in the specs
//! and typed numbers in code, so a typo is caught at load time and the simulator never parses text.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A span of time, stored in microseconds.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct Dur {
    micros: u64,
}

impl Dur {
    pub const ZERO: Dur = Dur { micros: 0 };

    pub const fn from_micros(micros: u64) -> Self {
        Dur { micros }
    }

    pub const fn from_millis(millis: u64) -> Self {
        Dur {
            micros: millis * 1000,
        }
    }

    pub const fn from_secs(secs: u64) -> Self {
        Dur {
            micros: secs * 1_000_000,
        }
    }

    pub const fn as_micros(self) -> u64 {
        self.micros
    }

    /// Whole milliseconds (rounded down).
    pub const fn as_millis(self) -> u64 {
        self.micros / 1000
    }

    pub fn as_secs_f64(self) -> f64 {
        self.micros as f64 / 1e6
    }

    pub fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_micros(self.micros)
    }
}

impl FromStr for Dur {
    type Err = String;

    /// Parses a sequence of `<integer><unit>` parts, units `us`, `ms`, `s`, `m`, `h` (Go style).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        schemas::time::duration::parse_spec_us(s.trim())
            .map(Dur::from_micros)
            .map_err(|_| {
                format!(
                    "`{s}` is not a duration (expected e.g. `500us`, `250ms`, `30s`, `5m`, `1h30m`)"
                )
            })
    }
}

impl TryFrom<String> for Dur {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Dur> for String {
    fn from(d: Dur) -> String {
        d.to_string()
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = self.micros;
        if us == 0 {
            return f.write_str("0s");
        }
        if !us.is_multiple_of(1000) {
            return write!(f, "{us}us");
        }
        if !us.is_multiple_of(1_000_000) {
            return write!(f, "{}ms", us / 1000);
        }
        let (h, m, s) = (
            us / 3_600_000_000,
            us / 60_000_000 % 60,
            us / 1_000_000 % 60,
        );
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if m > 0 {
            write!(f, "{m}m")?;
        }
        if s > 0 {
            write!(f, "{s}s")?;
        }
        Ok(())
    }
}

/// A CPU quantity in millicores (`500m` = half a core, `2` = two cores).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Cpu {
    millicores: u64,
}

impl Cpu {
    pub const fn from_millicores(millicores: u64) -> Self {
        Cpu { millicores }
    }

    pub const fn millicores(self) -> u64 {
        self.millicores
    }

    pub fn cores(self) -> f64 {
        self.millicores as f64 / 1000.0
    }
}

impl FromStr for Cpu {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let expected = || format!("`{s}` is not a CPU quantity (expected e.g. `250m`, `1`, `1.5`)");
        let t = s.trim();
        let millicores = if let Some(m) = t.strip_suffix('m') {
            m.parse::<u64>().map_err(|_| expected())?
        } else {
            let cores: f64 = t.parse().map_err(|_| expected())?;
            if !cores.is_finite() || cores < 0.0 {
                return Err(expected());
            }
            (cores * 1000.0).round() as u64
        };
        Ok(Cpu { millicores })
    }
}

impl TryFrom<String> for Cpu {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Cpu> for String {
    fn from(c: Cpu) -> String {
        c.to_string()
    }
}

impl fmt::Display for Cpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.millicores.is_multiple_of(1000) {
            write!(f, "{}", self.millicores / 1000)
        } else {
            write!(f, "{}m", self.millicores)
        }
    }
}

/// A memory quantity in bytes (`256Mi`, `1Gi`, `500M`, `1048576`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Memory {
    bytes: u64,
}

const MEMORY_SUFFIXES: [(&str, u64); 8] = [
    ("Ki", 1 << 10),
    ("Mi", 1 << 20),
    ("Gi", 1 << 30),
    ("Ti", 1 << 40),
    ("k", 1_000),
    ("M", 1_000_000),
    ("G", 1_000_000_000),
    ("T", 1_000_000_000_000),
];

impl Memory {
    pub const fn from_bytes(bytes: u64) -> Self {
        Memory { bytes }
    }

    pub const fn from_mib(mib: u64) -> Self {
        Memory { bytes: mib << 20 }
    }

    pub const fn bytes(self) -> u64 {
        self.bytes
    }
}

impl FromStr for Memory {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let expected =
            || format!("`{s}` is not a memory quantity (expected e.g. `64Mi`, `1Gi`, `500M`)");
        let t = s.trim();
        let (number, scale) = MEMORY_SUFFIXES
            .iter()
            .find_map(|(suffix, scale)| t.strip_suffix(suffix).map(|n| (n, *scale)))
            .unwrap_or((t, 1));
        let bytes = match number.parse::<u64>() {
            Ok(n) => n.checked_mul(scale).ok_or_else(expected)?,
            // A decimal quantity (`1.5Gi`), rounded up to a whole byte as Kubernetes does.
            Err(_) => {
                let v: f64 = number.parse().map_err(|_| expected())?;
                let b = (v * scale as f64).ceil();
                if !b.is_finite() || b < 0.0 || b >= u64::MAX as f64 {
                    return Err(expected());
                }
                b as u64
            }
        };
        Ok(Memory { bytes })
    }
}

impl TryFrom<String> for Memory {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Memory> for String {
    fn from(m: Memory) -> String {
        m.to_string()
    }
}

impl fmt::Display for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.bytes;
        for (suffix, scale) in [("Gi", 1u64 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)] {
            if b >= scale && b.is_multiple_of(scale) {
                return write!(f, "{}{suffix}", b / scale);
            }
        }
        write!(f, "{b}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_print_round_trip() {
        assert_eq!("1h30m".parse::<Dur>().unwrap().as_millis(), 5_400_000);
        assert_eq!("250ms".parse::<Dur>().unwrap().as_millis(), 250);
        assert_eq!("500us".parse::<Dur>().unwrap().as_micros(), 500);
        assert_eq!(Dur::from_micros(1500).to_string(), "1500us");
        assert_eq!(Dur::from_millis(1500).to_string(), "1500ms");
        assert_eq!("2m30s".parse::<Dur>().unwrap().to_string(), "2m30s");
        assert_eq!(Dur::from_secs(300).to_string(), "5m");
        for bad in ["", "5", "m", "5x", "1.5s", "-3s"] {
            assert!(bad.parse::<Dur>().is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn cpu_and_memory_quantities() {
        assert_eq!("500m".parse::<Cpu>().unwrap().millicores(), 500);
        assert_eq!("1.5".parse::<Cpu>().unwrap().millicores(), 1500);
        assert_eq!(Cpu::from_millicores(2000).to_string(), "2");
        assert!("lots".parse::<Cpu>().is_err());
        assert_eq!("256Mi".parse::<Memory>().unwrap().bytes(), 256 << 20);
        assert_eq!("1G".parse::<Memory>().unwrap().bytes(), 1_000_000_000);
        assert_eq!(Memory::from_mib(1024).to_string(), "1Gi");
        assert!("12Zi".parse::<Memory>().is_err());
        assert_eq!("1.5Gi".parse::<Memory>().unwrap().bytes(), 3 << 29);
        for bad in ["-1Mi", "NaN", "inf", "1e400"] {
            assert!(bad.parse::<Memory>().is_err(), "{bad} parsed");
        }
    }
}
