use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(doc)]
use super::RedisLimiterBuilder;
#[cfg(doc)]
use super::REDIS_KEY_ERROR;
#[cfg(doc)]
use crate::lease::Statistics;

/// Counters beyond [`Statistics`], for observability.
///
/// ```
/// # use tollgate::redis::doc_support::*;
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
/// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen).build().unwrap();
/// for _ in 0..2 { let _ = rt.block_on(limiter.acquire("alice", 1)); }
/// let s: RedisStatistics = limiter.redis_statistics();
/// assert_eq!((s.calls, s.errors, s.timeouts), (2, 2, 0));
/// assert_eq!((s.by_policy, s.total_successful), (2, 2)); // both failed open
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RedisStatistics {
    /// Requests granted (by anyone).
    pub total_successful: u64,
    /// Requests rejected (by anyone, for any reason).
    pub total_failed: u64,
    /// Decisions sent to Redis (each in a script run of its own, or batched with others: see
    /// [`script_runs`](Self::script_runs)).
    pub calls: u64,
    /// Script runs sent to Redis: round trips. Fewer than [`calls`](Self::calls) when
    /// concurrent decisions were batched ([`RedisLimiterBuilder::batch_size`]); each settle
    /// that goes to Redis ([`RedisLimiter::settle`](super::RedisLimiter::settle)) is one more
    /// (a settle is not a decision: it is not in `calls`).
    pub script_runs: u64,
    /// Requests decided from this machine's lease, without a round trip
    /// ([`RedisLimiterBuilder::lease`]).
    pub leased: u64,
    /// Calls that failed with an error of the server or the connection (each counts toward the
    /// circuit breaker), or with `NOSCRIPT` after the retry (which does not).
    pub errors: u64,
    /// Calls answered with an error of the partition's key ([`REDIS_KEY_ERROR`]): not failures
    /// of Redis, never counted toward the circuit breaker.
    pub key_errors: u64,
    /// Calls that timed out.
    pub timeouts: u64,
    /// Requests decided by the failure policy.
    pub by_policy: u64,
    /// Requests rejected from the denial cache, without a call.
    pub cached_denials: u64,
    /// Times the circuit breaker opened.
    pub circuit_opened: u64,
}

pub(super) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}
