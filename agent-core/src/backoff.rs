//! [`Backoff`]: how long to wait before re-sending a request after a transient failure.

use std::time::Duration;

/// Jittered exponential backoff that honours the server's `retry-after-ms` /
/// `retry-after`.
///
/// The delay before retry `n` (0-based) is the server's requested delay when it is
/// positive and at most [`max_retry_after`](Self::max_retry_after); otherwise
/// `min(initial * 2^n, max) * (1 - jitter * r)` with `r` uniform in `[0, 1)`. The
/// defaults follow the official Anthropic and OpenAI SDKs: 0.5 s initial, 8 s cap, 25 %
/// jitter, server delays honoured up to 60 s.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Backoff {
    /// The first delay.
    pub initial: Duration,
    /// The cap of the computed delay.
    pub max: Duration,
    /// The longest server-requested delay honoured; a longer one falls back to the
    /// computed delay.
    pub max_retry_after: Duration,
    /// The fraction of the delay removed at random, in `0.0..=1.0`.
    pub jitter: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
            jitter: 0.25,
        }
    }
}

impl Backoff {
    /// No waiting at all, for tests (server-requested delays are still honoured).
    pub fn none() -> Self {
        Self {
            initial: Duration::ZERO,
            max: Duration::ZERO,
            ..Self::default()
        }
    }

    /// A backoff with this initial delay and cap, the default jitter and server cap.
    pub fn exponential(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            ..Self::default()
        }
    }

    /// The delay before retry `retry` (0-based), given the server's requested delay.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(requested) = retry_after
            && !requested.is_zero()
            && requested <= self.max_retry_after
        {
            return requested;
        }
        let factor = 2u32.saturating_pow(retry.min(31));
        let base = self.initial.saturating_mul(factor).min(self.max);
        let jitter = self.jitter.clamp(0.0, 1.0) * fastrand::f64();
        base.mul_f64(1.0 - jitter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn computed_delays_grow_and_are_capped() {
        let b = Backoff {
            jitter: 0.0,
            ..Backoff::default()
        };
        let ms: Vec<u128> = (0..6).map(|n| b.delay(n, None).as_millis()).collect();
        assert_eq!(ms, [500, 1000, 2000, 4000, 8000, 8000]);
        assert_eq!(b.delay(1000, None), Duration::from_secs(8));
    }

    #[test]
    fn jitter_removes_at_most_its_fraction() {
        let b = Backoff::default();
        for _ in 0..200 {
            let d = b.delay(0, None);
            assert!(
                d <= Duration::from_millis(500) && d >= Duration::from_millis(375),
                "{d:?}"
            );
        }
    }

    // C18: a server delay within the cap is used as is.
    #[test]
    fn c18_server_delay_is_honoured() {
        let b = Backoff::default();
        assert_eq!(
            b.delay(3, Some(Duration::from_millis(20))),
            Duration::from_millis(20)
        );
    }

    #[test]
    fn too_long_or_zero_server_delays_fall_back() {
        let b = Backoff {
            jitter: 0.0,
            ..Backoff::default()
        };
        assert_eq!(
            b.delay(0, Some(Duration::from_secs(61))),
            Duration::from_millis(500)
        );
        assert_eq!(
            b.delay(1, Some(Duration::ZERO)),
            Duration::from_millis(1000)
        );
        assert_eq!(Backoff::none().delay(5, None), Duration::ZERO);
    }
}
