//! A token bucket shared by every request of a run: `rate` tokens per second, at most `burst`
//! stored. Waiters are served in arrival order because the bucket sits behind a fair tokio mutex.

use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

#[derive(Debug)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// `rate` requests per second (> 0), `burst` ≥ 1.
    pub fn new(rate: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            rate,
            burst,
            state: Mutex::new(State {
                tokens: burst,
                last: Instant::now(),
            }),
        }
    }

    /// Waits until a token is available and takes it.
    pub async fn acquire(&self) {
        let mut s = self.state.lock().await;
        loop {
            let now = Instant::now();
            let refill = now.duration_since(s.last).as_secs_f64() * self.rate;
            s.tokens = (s.tokens + refill).min(self.burst);
            s.last = now;
            if s.tokens >= 1.0 {
                s.tokens -= 1.0;
                return;
            }
            let wait = (1.0 - s.tokens) / self.rate;
            // Holding the lock while sleeping keeps later callers queued behind this one.
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn admits_burst_then_the_rate() {
        let bucket = TokenBucket::new(10.0, 3);
        let start = Instant::now();
        for _ in 0..3 {
            bucket.acquire().await;
        }
        // The burst is free.
        assert_eq!(start.elapsed(), Duration::ZERO);
        for _ in 0..10 {
            bucket.acquire().await;
        }
        // Ten more at 10/s take one (virtual) second.
        let e = start.elapsed().as_secs_f64();
        assert!((e - 1.0).abs() < 1e-3, "{e}");
    }
}
