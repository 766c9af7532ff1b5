use core::fmt;
use core::time::Duration;

use ::redis::aio::ConnectionLike;

use super::stats::bump;
#[cfg(doc)]
use super::CircuitBreaker;
use super::{DecidedBy, RedisDecision, RedisLimiter};
use crate::clock::StdClock;
use crate::lease::{Reason, Rejection};
use crate::partition::{Partition, PartitionConfig, PartitionKind, PartitionLimiter, Partitioned};

/// What a [`RedisLimiter`] does when Redis cannot decide: chosen at construction, no default.
///
/// ```
/// # use tollgate::redis::doc_support::*;
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
/// // A login limit must hold even when Redis is down: fail closed.
/// let logins = RedisLimiter::builder(Down, "login", per_minute, FailurePolicy::FailClosed).build().unwrap();
/// let refused = rt.block_on(logins.acquire("alice", 1)).unwrap_err();
/// assert_eq!(refused.reason(), REDIS_UNAVAILABLE);
/// // An API limit protects, but should not take the API down with Redis: fail open.
/// let api = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen).build().unwrap();
/// assert!(rt.block_on(api.acquire("alice", 1)).is_ok());
/// ```
#[non_exhaustive]
pub enum FailurePolicy {
    /// Grant every request (availability over the limit). The lease is granted; nothing counts
    /// it anywhere.
    FailOpen,
    /// Reject every request with [`REDIS_UNAVAILABLE`] (the limit over availability). The
    /// RetryAfter is the time until the circuit breaker probes Redis again, if it is open.
    FailClosed,
    /// Decide locally: each partition gets a local limiter of the same algorithm holding `share`
    /// of the quota (with 4 replicas, `0.25` keeps the total near the limit). GCRA falls back to
    /// a token bucket of the same burst and rate.
    Fallback {
        /// The share of the quota each machine keeps, in (0, 1]; limits are rounded up, to at
        /// least 1.
        share: f64,
        /// The bounds of the local partition map.
        partitions: PartitionConfig,
    },
}

impl FailurePolicy {
    /// A local fallback holding `share` of the quota, for up to 100,000 partitions.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// // 4 per minute over 2 replicas: each keeps 2 per minute while Redis is down.
    /// let algorithm = Algorithm::FixedWindow(FixedWindowOptions::new(4, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", algorithm, FailurePolicy::fallback(0.5)).build().unwrap();
    /// let decisions: Vec<_> = (0..3).map(|_| rt.block_on(limiter.decide("alice", 1))).collect();
    /// assert!(decisions.iter().all(|d| d.decided_by == DecidedBy::Fallback));
    /// assert_eq!(decisions.iter().map(|d| d.allowed()).collect::<Vec<_>>(), [true, true, false]);
    /// let bad = RedisLimiter::builder(Down, "api", algorithm, FailurePolicy::fallback(1.5)).build();
    /// assert_eq!(bad.unwrap_err(), RedisConfigError::Share);
    /// ```
    pub const fn fallback(share: f64) -> Self {
        Self::Fallback {
            share,
            partitions: PartitionConfig::new(PartitionConfig::DEFAULT_CAPACITY),
        }
    }

    pub(super) fn kind(&self) -> PolicyKind {
        match self {
            Self::FailOpen => PolicyKind::FailOpen,
            Self::FailClosed => PolicyKind::FailClosed,
            Self::Fallback { .. } => PolicyKind::Fallback,
        }
    }
}

impl fmt::Debug for FailurePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::FailOpen => f.write_str("FailOpen"),
            Self::FailClosed => f.write_str("FailClosed"),
            Self::Fallback { share, partitions } => f
                .debug_struct("Fallback")
                .field("share", share)
                .field("partitions", partitions)
                .finish(),
        }
    }
}

/// The reason of a [`FailurePolicy::FailClosed`] rejection.
///
/// ```
/// # use tollgate::redis::doc_support::*;
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
/// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailClosed).build().unwrap();
/// let rejection = rt.block_on(limiter.acquire("alice", 1)).unwrap_err();
/// // Tell the store's outage (a 503, say) from the client's own limit (a 429).
/// let status = if rejection.reason() == REDIS_UNAVAILABLE { 503 } else { 429 };
/// assert_eq!(status, 503);
/// ```
pub const REDIS_UNAVAILABLE: Reason = Reason::Custom("rate-limit store unavailable");

/// The reason of a rejection because the partition's key holds data the script cannot read:
/// a key of another type (`WRONGTYPE`), or content the script did not write (a script error).
/// Redis is healthy and answered: the error is that key's alone, so it is not decided by the
/// failure policy and never counts toward the [`CircuitBreaker`] — the other partitions keep
/// being decided by Redis. The key stays as it is (nothing deletes data it does not recognize);
/// delete it, or use a prefix of its own, to limit that partition again.
///
/// ```no_run
/// # use core::time::Duration;
/// # use tollgate::redis::*;
/// # use tollgate::FixedWindowOptions;
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let mut conn = ::redis::Client::open("redis://127.0.0.1/")?.get_connection_manager().await?;
/// let algorithm = Algorithm::FixedWindow(FixedWindowOptions::new(10, Duration::from_secs(60)));
/// let limiter = RedisLimiter::builder(conn.clone(), "api", algorithm, FailurePolicy::FailOpen).build()?;
/// let () = ::redis::cmd("RPUSH").arg(limiter.key("alice")).arg("not a window").query_async(&mut conn).await?;
/// let d = limiter.decide("alice", 1).await;
/// assert_eq!(d.decided_by, DecidedBy::KeyError);
/// assert_eq!(d.outcome.unwrap_err().reason(), REDIS_KEY_ERROR);
/// assert_eq!(limiter.decide("bob", 1).await.decided_by, DecidedBy::Redis); // the others are fine
/// assert_eq!(limiter.health(), Health::Redis);
/// # Ok(()) }
/// ```
pub const REDIS_KEY_ERROR: Reason = Reason::Custom("rate-limit key unreadable");

/// Which failure policy a limiter was built with.
///
/// ```
/// # use tollgate::redis::doc_support::*;
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
/// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailClosed)
///     .circuit_breaker(CircuitBreaker::new(1, Duration::from_secs(60)))
///     .build()
///     .unwrap();
/// assert_eq!(limiter.health().policy_in_force(), None);
/// let _ = rt.block_on(limiter.acquire("alice", 1));
/// assert_eq!(limiter.health(), Health::Degraded(PolicyKind::FailClosed));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PolicyKind {
    /// [`FailurePolicy::FailOpen`].
    FailOpen,
    /// [`FailurePolicy::FailClosed`].
    FailClosed,
    /// [`FailurePolicy::Fallback`].
    Fallback,
}

/// What decides requests now.
///
/// ```
/// use tollgate::redis::{Health, PolicyKind};
/// assert_eq!(Health::Degraded(PolicyKind::FailOpen).policy_in_force(), Some(PolicyKind::FailOpen));
/// assert_eq!(Health::Redis.policy_in_force(), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Health {
    /// Redis decides (the circuit is closed).
    Redis,
    /// The circuit is half open: one request probes Redis, the failure policy decides the rest.
    Probing(PolicyKind),
    /// The circuit is open: the failure policy decides every request.
    Degraded(PolicyKind),
}

impl Health {
    /// The failure policy deciding (some) requests now, or `None` when Redis decides them all.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen)
    ///     .circuit_breaker(CircuitBreaker::new(3, Duration::from_secs(60)))
    ///     .build()
    ///     .unwrap();
    /// for _ in 0..3 { let _ = rt.block_on(limiter.acquire("alice", 1)); }
    /// // Alert: the limit is not enforced by Redis right now.
    /// assert_eq!(limiter.health().policy_in_force(), Some(PolicyKind::FailOpen));
    /// ```
    pub const fn policy_in_force(&self) -> Option<PolicyKind> {
        match self {
            Health::Redis => None,
            Health::Probing(p) | Health::Degraded(p) => Some(*p),
        }
    }
}

pub(super) type FallbackPartitioner =
    Box<dyn Fn(&str) -> Partition<String, PartitionKind> + Send + Sync>;
pub(super) type FallbackMap = Partitioned<String, PartitionLimiter<StdClock>, FallbackPartitioner>;

impl<C: ConnectionLike + Clone + Send + Sync + 'static> RedisLimiter<C> {
    pub(super) fn by_policy(
        &self,
        partition: &str,
        permits: u32,
        open_for: Option<Duration>,
    ) -> RedisDecision {
        let inner = &*self.inner;
        bump(&inner.counts.by_policy);
        let (outcome, decided_by) = match (inner.policy, &inner.fallback) {
            (PolicyKind::Fallback, Some(local)) => (
                local.try_acquire(partition, permits).map(drop),
                DecidedBy::Fallback,
            ),
            (PolicyKind::FailOpen, _) => (Ok(()), DecidedBy::FailOpen),
            _ => (
                Err(match open_for {
                    Some(d) if !d.is_zero() => Rejection::with_retry_after(&REDIS_UNAVAILABLE, d),
                    _ => Rejection::new(&REDIS_UNAVAILABLE),
                }),
                DecidedBy::FailClosed,
            ),
        };
        let remaining = match (&inner.fallback, decided_by) {
            (Some(local), DecidedBy::Fallback) => local.statistics(partition).available_permits,
            _ => 0,
        };
        RedisDecision::local(permits, outcome, remaining, decided_by)
    }
}
