//! Store footprint at scale: builds a store of kube-state-metrics/cAdvisor-shaped series on a
//! 15 s scrape (SERIES × SAMPLES, default 20,000 × 2,880 = 57.6 M samples: one day), then prints
//! bytes per sample, resident memory (VmRSS) and build time, next to the 16 bytes a sample of
//! plain `(i64, f64)` vectors. `JITTER_MS` sets the scrape jitter (default 4 ms). Run:
//! `CARGO_PROFILE_DEV_OPT_LEVEL=2 cargo bench --profile dev -p promql --bench store_memory`.

use std::time::Instant;

use promql::StorageBuilder;

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let series = env("SERIES", 20_000);
    let samples = env("SAMPLES", 2_880);
    // Scrape jitter in ms (0: perfectly regular scrapes, as a simulator writes them).
    let jitter = env("JITTER_MS", 4) as f64;
    let before = rss_mib();
    let t = Instant::now();
    let mut b = StorageBuilder::new();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 / (1u64 << 53) as f64
    };
    let names = [
        "container_cpu_usage_seconds_total",
        "container_memory_working_set_bytes",
        "http_requests_total",
        "kube_pod_container_status_restarts_total",
        "kube_pod_status_phase",
    ];
    let t0 = 1_768_003_200_000i64;
    for s in 0..series {
        let name = names[s % names.len()];
        let pod = format!("svc-{}-{:x}", s / 40, s * 2654435761 % 65536);
        let ns = format!("ns-{}", s % 7);
        let container = format!("c{}", s % 3);
        let h = b.series(
            name,
            [
                ("namespace", ns.as_str()),
                ("pod", pod.as_str()),
                ("container", container.as_str()),
                ("job", "kubelet"),
            ],
        );
        let phase = (s as i64 * 37) % 1000;
        let mut v = 1000.0 * rnd();
        for k in 0..samples as i64 {
            v = match s % names.len() {
                0 => v + 15.0 * 0.2 * rnd(),
                1 => (2.0e8 + 1.0e6 * rnd()).round(),
                2 => v + (300.0 * rnd()).round(),
                3 => v + if rnd() < 0.001 { 1.0 } else { 0.0 },
                _ => 1.0,
            };
            // Real scrapes jitter by a few milliseconds.
            b.push(h, t0 + phase + k * 15_000 + (rnd() * jitter) as i64, v);
        }
    }
    let st = b.build();
    let secs = t.elapsed().as_secs_f64();
    let after = rss_mib();
    let n = st.num_samples();
    println!(
        "store: {} series, {} samples, built in {secs:.1}s",
        st.num_series(),
        n
    );
    println!(
        "compressed samples: {:.1} MiB = {:.2} bytes/sample (plain vectors: 16 bytes/sample = {:.1} MiB)",
        st.sample_bytes() as f64 / 1048576.0,
        st.sample_bytes() as f64 / n as f64,
        n as f64 * 16.0 / 1048576.0
    );
    println!("resident memory: {before:.0} MiB before, {after:.0} MiB after build");
}
