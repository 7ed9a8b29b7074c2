//! Small helpers the simulator shares: virtual time, Kubernetes-style names and uids, resource
//! quantities, and the few distributions the workload needs.

use chrono::{DateTime, Utc};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

pub const NS_PER_SEC: i64 = 1_000_000_000;

/// Virtual nanoseconds since the Unix epoch as a UTC instant.
pub fn instant(ns: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(ns)
}

pub use schemas::time::{rfc3339, rfc3339_micros};

/// The alphabet Kubernetes uses for generated name suffixes (no vowels, no look-alikes).
const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A random suffix like the `kqf5f` of `web-896bb5df7-kqf5f`.
pub fn name_suffix(rng: &mut ChaCha8Rng, len: usize) -> String {
    (0..len)
        .map(|_| SAFE_ALPHABET[rng.random_range(0..SAFE_ALPHABET.len())] as char)
        .collect()
}

/// `pod-template-hash`: fnv-32a of the template, rendered with SafeEncodeString as the
/// deployment controller does.
pub fn template_hash(template_json: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in template_json.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h.to_string()
        .bytes()
        .map(|b| SAFE_ALPHABET[usize::from(b) % SAFE_ALPHABET.len()] as char)
        .collect()
}

/// A version-4 UUID drawn from the simulation's generator (deterministic for a seed).
pub fn uuid(rng: &mut ChaCha8Rng) -> String {
    let mut b: [u8; 16] = rng.random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Lower-case hex of `n` random bytes (trace and span ids, container ids).
pub fn hex_id(rng: &mut ChaCha8Rng, n: usize) -> String {
    (0..n)
        .map(|_| format!("{:02x}", rng.random::<u8>()))
        .collect()
}

/// CPU in millicores as a Kubernetes quantity (`250m`, `1`).
pub fn cpu_quantity(milli: i64) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

/// Bytes as a Kubernetes quantity with the largest exact binary suffix (`64Mi`, `2Gi`).
pub fn memory_quantity(bytes: i64) -> String {
    for (suffix, unit) in [("Gi", 1i64 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)] {
        if bytes >= unit && bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// Parses a CPU quantity (`100m`, `0.5`, `2`) into millicores, by the catalog's grammar.
pub fn parse_cpu(q: &str) -> Option<i64> {
    q.parse::<problems::Cpu>()
        .ok()
        .and_then(|c| i64::try_from(c.millicores()).ok())
}

/// Parses a memory quantity (`64Mi`, `1G`, `1.5Gi`, `500000`) into bytes, by the catalog's grammar.
pub fn parse_memory(q: &str) -> Option<i64> {
    q.parse::<problems::Memory>()
        .ok()
        .and_then(|m| i64::try_from(m.bytes()).ok())
}

/// Standard normal CDF (Abramowitz–Stegun 7.1.26, error < 1.5e-7): enough for latency tails.
pub fn normal_cdf(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs() / std::f64::consts::SQRT_2);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-(x * x) / 2.0).exp();
    if x >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// P(X <= x) for a log-normal latency with the given median and shape.
pub fn lognormal_cdf(x: f64, median: f64, sigma: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    normal_cdf((x / median).ln() / sigma)
}

/// CFS bandwidth control: the share of 100 ms periods in which a container with `limit` cores
/// exhausts its quota. Work arrives as requests (Poisson, `rate` a second, `cost` core-seconds
/// each) on top of a steady `base` load; a period is throttled when its work exceeds the quota,
/// so bursts throttle a container whose average stays below its limit.
pub fn cfs_throttled_share(limit: f64, base: f64, rate: f64, cost: f64) -> f64 {
    const PERIOD: f64 = 0.1;
    let room = (limit - base) * PERIOD;
    if room <= 0.0 {
        return 1.0;
    }
    if rate <= 0.0 || cost <= 0.0 {
        return 0.0;
    }
    let lambda = rate * PERIOD;
    // Requests a period can hold: more than `fit` throttles it.
    let fit = (room / cost).floor();
    if fit > lambda + 12.0 * lambda.sqrt() + 20.0 {
        return 0.0;
    }
    if lambda > 50.0 {
        // Normal approximation of the Poisson tail.
        return 1.0 - normal_cdf((fit + 0.5 - lambda) / lambda.sqrt());
    }
    let mut term = (-lambda).exp();
    let mut cdf = term;
    for k in 1..=(fit as u64) {
        term *= lambda / k as f64;
        cdf += term;
    }
    (1.0 - cdf).clamp(0.0, 1.0)
}

/// A log-normal draw with the given median and shape (Box–Muller).
pub fn lognormal(rng: &mut ChaCha8Rng, median: f64, sigma: f64) -> f64 {
    let u1: f64 = rng.random_range(f64::EPSILON..1.0);
    let u2: f64 = rng.random();
    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    median * (sigma * z).exp()
}

/// A Poisson-like count with mean `lambda`: exact for small means, normal approximation above.
pub fn poisson(rng: &mut ChaCha8Rng, lambda: f64) -> u64 {
    if lambda <= 0.0 {
        return 0;
    }
    if lambda < 30.0 {
        let l = (-lambda).exp();
        let mut k = 0u64;
        let mut p = 1.0;
        loop {
            p *= rng.random::<f64>();
            if p <= l {
                return k;
            }
            k += 1;
        }
    }
    let u1: f64 = rng.random_range(f64::EPSILON..1.0);
    let u2: f64 = rng.random();
    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    (lambda + z * lambda.sqrt()).round().max(0.0) as u64
}

pub use problems::edits::split_address;

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn cfs_throttles_bursts_below_the_limit_and_everything_above_it() {
        // 8 requests/s of 0.2 ms on 1 ms of idle work under a 5m limit: occasional bursts.
        let bursty = cfs_throttled_share(0.005, 0.001, 8.0, 0.0002);
        assert!(bursty > 0.01 && bursty < 0.5, "{bursty}");
        // Twice the limit on average: most periods; four times: nearly all.
        assert!(cfs_throttled_share(0.2, 0.0, 200.0, 0.002) > 0.9);
        assert!(cfs_throttled_share(0.2, 0.0, 400.0, 0.002) > 0.999);
        // Far below the limit: never.
        assert_eq!(cfs_throttled_share(1.0, 0.01, 10.0, 0.001), 0.0);
        // Idle work alone above the limit: every period.
        assert_eq!(cfs_throttled_share(0.005, 0.01, 0.0, 0.0), 1.0);
    }

    #[test]
    fn quantities_round_trip() {
        for m in [100, 250, 1000, 1500, 4000] {
            assert_eq!(parse_cpu(&cpu_quantity(m)), Some(m));
        }
        for b in [64 << 20, 1 << 30, 512 << 10, 1234] {
            assert_eq!(parse_memory(&memory_quantity(b)), Some(b));
        }
        assert_eq!(parse_cpu("0.5"), Some(500));
        assert_eq!(parse_memory("1G"), Some(1_000_000_000));
        assert_eq!(memory_quantity(3 << 30), "3Gi");
    }

    #[test]
    fn uuids_are_version_4_and_seeded() {
        let mut a = ChaCha8Rng::seed_from_u64(7);
        let mut b = ChaCha8Rng::seed_from_u64(7);
        let u = uuid(&mut a);
        assert_eq!(u, uuid(&mut b));
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }

    #[test]
    fn template_hash_uses_safe_alphabet() {
        let h = template_hash("{\"a\":1}");
        assert!(h.bytes().all(|c| SAFE_ALPHABET.contains(&c)), "{h}");
        assert_ne!(h, template_hash("{\"a\":2}"));
    }

    #[test]
    fn normal_cdf_matches_known_values() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-6);
        assert!((normal_cdf(1.96) - 0.975).abs() < 1e-3);
        assert!((normal_cdf(-1.0) - 0.1587).abs() < 1e-3);
    }
}
