use core::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ::redis::aio::ConnectionLike;

use super::{Algorithm, Circuit, Health, Inner, RedisDecision, RedisStatistics};
#[cfg(doc)]
use crate::lease::Reason;
use crate::lease::{Lease, Rejection, Statistics};
use crate::limiter::Limiter;

/// A rate limiter whose state lives in Redis, shared by every client that uses the same prefix
/// (see the [module docs](super)). Cheap to clone: clones share the connection, the breaker, the
/// cache and the counters.
///
/// ```
/// # use tollgate::redis::doc_support::*;
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
/// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen).build().unwrap();
/// let for_task = limiter.clone(); // e.g. moved into a spawned task
/// let _ = rt.block_on(for_task.acquire("alice", 1));
/// assert_eq!(limiter.statistics().total_successful, 1); // shared counters
/// for_task.close();
/// assert!(limiter.is_closed());
/// ```
pub struct RedisLimiter<C = ::redis::aio::ConnectionManager> {
    pub(super) inner: Arc<Inner<C>>,
}

impl<C> Clone for RedisLimiter<C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<C> fmt::Debug for RedisLimiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLimiter")
            .field("prefix", &self.inner.prefix)
            .field("algorithm", &self.inner.algorithm)
            .field("policy", &self.inner.policy)
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

/// A lease from a local limiter in front of a Redis limiter
/// ([`RedisLimiter::acquire_behind`]): it holds both; dropping it drops the Redis lease, then the
/// local one (whose permits go back, for a concurrency limiter).
///
/// ```
/// # use tollgate::redis::doc_support::*;
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
/// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen).build().unwrap();
/// let local = ConcurrencyLimiter::new(ConcurrencyOptions::new(4)).unwrap(); // this machine's share
/// let lease: ChainedLease<'_> = rt.block_on(limiter.acquire_behind(&local, "alice", 3)).unwrap();
/// assert_eq!(local.available_permits(), 1);
/// drop(lease); // both leases go; the local permits come back
/// assert_eq!(local.available_permits(), 4);
/// ```
#[derive(Debug)]
#[must_use = "dropping a lease releases its permits at once"]
pub struct ChainedLease<'a> {
    redis: Lease<'static>,
    front: Lease<'a>,
}

impl ChainedLease<'_> {
    /// The permits held.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen).build().unwrap();
    /// let local = ConcurrencyLimiter::new(ConcurrencyOptions::new(4)).unwrap(); // this machine's share
    /// let lease = rt.block_on(limiter.acquire_behind(&local, "alice", 2)).unwrap();
    /// assert_eq!(lease.permits(), 2);
    /// ```
    pub fn permits(&self) -> u32 {
        self.redis.permits()
    }

    /// The local limiter's lease.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen).build().unwrap();
    /// let local = ConcurrencyLimiter::new(ConcurrencyOptions::new(4)).unwrap(); // this machine's share
    /// let lease = rt.block_on(limiter.acquire_behind(&local, "alice", 2)).unwrap();
    /// assert!(lease.front().returns_permits()); // a concurrency limiter's
    /// assert_eq!(lease.front().permits(), 2);
    /// ```
    pub fn front(&self) -> &Lease<'_> {
        &self.front
    }
}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> RedisLimiter<C> {
    /// The Redis key of `partition`: `prefix:{partition}:shape`, where the shape names the
    /// algorithm and its time parameters, not its limit (see
    /// [changing the configuration](super#changing-the-configuration)):
    /// `tbf<period µs>x<tokens per period>` (`tb...` for a token bucket of 2 million tokens a
    /// second or more),
    /// `fw<window µs>`, `swt<window µs>x<segments>`, `sc<window µs>`, `gcra<interval µs>` or
    /// `lm<interval µs>`. A fixed window keeps the count of window `k` (windows since the Unix
    /// epoch) under `key:k`, which expires when the window ends; a sliding counter too, expired
    /// when the next window ends (it is read in both).
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api:v2", per_minute, FailurePolicy::FailOpen).build().unwrap();
    /// // `redis-cli --scan --pattern 'api:v2:{user-7}:fw60000000:*'` finds user-7's window.
    /// assert_eq!(limiter.key("user-7"), "api:v2:{user-7}:fw60000000");
    /// let gcra = Algorithm::Gcra(GcraOptions::with_period(Duration::from_millis(100)).with_burst(10));
    /// let limiter = RedisLimiter::builder(Down, "api:v2", gcra, FailurePolicy::FailOpen).build().unwrap();
    /// assert_eq!(limiter.key("user-7"), "api:v2:{user-7}:gcra100000");
    /// ```
    pub fn key(&self, partition: &str) -> String {
        let shape = &self.inner.plan.shape;
        let mut k =
            String::with_capacity(self.inner.prefix.len() + partition.len() + shape.len() + 4);
        k.push_str(&self.inner.prefix);
        k.push_str(":{");
        k.push_str(partition);
        k.push_str("}:");
        k.push_str(shape);
        k
    }

    /// Takes `permits` from `partition`'s limit, shared by every client of this prefix: a lease
    /// (which returns nothing when dropped) or a rejection with its RetryAfter. The lease keeps
    /// who granted it and, for a fixed window, the window it was counted in, so that it can be
    /// [settled](Self::settle) to its true cost once that is known.
    ///
    /// ```no_run
    /// # use core::time::Duration;
    /// # use tollgate::redis::*;
    /// # use tollgate::{FixedWindowOptions, TokenBucketOptions};
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let conn = ::redis::Client::open("redis://127.0.0.1/")?.get_connection_manager().await?;
    /// let algorithm = Algorithm::FixedWindow(FixedWindowOptions::new(2, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(conn, "api", algorithm, FailurePolicy::FailOpen).build()?;
    /// let lease = limiter.acquire("customer-42", 2).await?;
    /// assert!(!lease.returns_permits()); // a rate limit: nothing to give back
    /// let refused = limiter.acquire("customer-42", 1).await.unwrap_err();
    /// assert!(refused.retry_after().is_some_and(|d| d <= Duration::from_secs(60)));
    /// # Ok(()) }
    /// ```
    pub async fn acquire(
        &self,
        partition: &str,
        permits: u32,
    ) -> Result<Lease<'static>, Rejection> {
        let (d, window) = self.decide_window(partition, permits).await;
        d.outcome
            .map(|()| Lease::detached(permits, self.stamp_of(&d, window)))
    }

    /// Asks `front` (a local limiter) first; only if it grants is Redis asked. Returns the
    /// first rejection, or a lease holding both (see [`ChainedLease`]). A front that rejects
    /// costs no round trip.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen).build().unwrap();
    /// let local = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
    /// let _busy = rt.block_on(limiter.acquire_behind(&local, "alice", 1)).unwrap();
    /// let refused = rt.block_on(limiter.acquire_behind(&local, "alice", 1)).unwrap_err();
    /// assert_eq!(refused.reason(), Reason::Exhausted); // by the local limiter...
    /// assert_eq!(limiter.redis_statistics().calls, 1); // ...without a second round trip
    /// ```
    pub async fn acquire_behind<'a, L: Limiter + ?Sized>(
        &self,
        front: &'a L,
        partition: &str,
        permits: u32,
    ) -> Result<ChainedLease<'a>, Rejection> {
        let front = front.try_acquire(permits)?;
        let redis = self.acquire(partition, permits).await?;
        Ok(ChainedLease { redis, front })
    }

    /// Like [`acquire`](Self::acquire), with everything known about the decision.
    ///
    /// ```no_run
    /// # use core::time::Duration;
    /// # use tollgate::redis::*;
    /// # use tollgate::{FixedWindowOptions, TokenBucketOptions};
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let conn = ::redis::Client::open("redis://127.0.0.1/")?.get_connection_manager().await?;
    /// let algorithm = Algorithm::FixedWindow(FixedWindowOptions::new(10, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(conn, "api", algorithm, FailurePolicy::FailClosed).build()?;
    /// let d = limiter.decide("customer-42", 4).await;
    /// if d.decided_by == DecidedBy::Redis {
    ///     assert!(d.allowed() && d.server_time_us.is_some());
    ///     assert_eq!(d.remaining, 6); // for a `RateLimit: r=6` header, on a fresh key
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn decide(&self, partition: &str, permits: u32) -> RedisDecision {
        self.decide_window(partition, permits).await.0
    }

    /// [`decide`](Self::decide), with the window of a decision made from this machine's lease.
    async fn decide_window(&self, partition: &str, permits: u32) -> (RedisDecision, u64) {
        let (d, window) = self.decide_uncounted(partition, permits).await;
        let c = &self.inner.counts;
        let counts = if d.decided_by == super::DecidedBy::Lease {
            &c.leased
        } else {
            &c.decided
        };
        counts.tally(!d.allowed());
        (d, window)
    }

    /// Which policy decides requests now.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::fallback(0.25))
    ///     .circuit_breaker(CircuitBreaker::new(2, Duration::from_secs(60)))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(limiter.health(), Health::Redis);
    /// for _ in 0..2 { let _ = rt.block_on(limiter.acquire("alice", 1)); }
    /// assert_eq!(limiter.health(), Health::Degraded(PolicyKind::Fallback));
    /// ```
    pub fn health(&self) -> Health {
        match self.inner.breaker.circuit() {
            Circuit::Closed => Health::Redis,
            Circuit::HalfOpen => Health::Probing(self.inner.policy),
            Circuit::Open => Health::Degraded(self.inner.policy),
        }
    }

    /// The circuit breaker's state now: [`health`](Self::health) without the failure policy,
    /// for a dashboard or an alert on the breaker itself. (The example on [`Circuit`] shows it
    /// opening.)
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailClosed)
    ///     .circuit_breaker(CircuitBreaker::new(2, Duration::from_secs(60)))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(limiter.circuit(), Circuit::Closed); // nothing has failed yet
    /// let _ = rt.block_on(limiter.acquire("alice", 1));
    /// assert_eq!(limiter.circuit(), Circuit::Closed); // one failure of the two it allows
    /// let _ = rt.block_on(limiter.acquire("alice", 1));
    /// assert_eq!(limiter.circuit(), Circuit::Open);
    /// ```
    pub fn circuit(&self) -> Circuit {
        self.inner.breaker.circuit()
    }

    /// The counters, as every limiter's: `available_permits` is the `remaining` of the last
    /// decision Redis made (any partition), `queued_permits` is always 0.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailClosed).build().unwrap();
    /// let _ = rt.block_on(limiter.acquire("alice", 1));
    /// let s = limiter.statistics();
    /// assert_eq!((s.total_successful, s.total_failed, s.queued_permits), (0, 1, 0));
    /// ```
    pub fn statistics(&self) -> Statistics {
        let c = &self.inner.counts;
        let (total_successful, total_failed) = c.totals();
        Statistics {
            available_permits: c.remaining.load(Ordering::Relaxed),
            queued_permits: 0,
            total_successful,
            total_failed,
        }
    }

    /// Every counter, for observability.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailClosed).build().unwrap();
    /// let _ = rt.block_on(limiter.acquire("alice", 1));
    /// let _ = rt.block_on(limiter.acquire("alice", 500)); // over the limit: no call
    /// let s = limiter.redis_statistics();
    /// assert_eq!((s.calls, s.errors, s.by_policy, s.total_failed), (1, 1, 1, 2));
    /// ```
    pub fn redis_statistics(&self) -> RedisStatistics {
        let c = &self.inner.counts;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (total_successful, total_failed) = c.totals();
        let (leased_ok, leased_failed) = c.leased.totals();
        RedisStatistics {
            total_successful,
            total_failed,
            calls: l(&c.calls),
            script_runs: l(&c.runs),
            leased: leased_ok + leased_failed,
            errors: l(&c.errors),
            timeouts: l(&c.timeouts),
            key_errors: l(&c.key_errors),
            by_policy: l(&c.by_policy),
            cached_denials: l(&c.cached),
            circuit_opened: self.inner.breaker.opened(),
        }
    }

    /// The algorithm and its options.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen).build().unwrap();
    /// match limiter.algorithm() {
    ///     Algorithm::FixedWindow(o) => assert_eq!(o.window, Duration::from_secs(60)),
    ///     other => panic!("unexpected {other:?}"),
    /// }
    /// ```
    pub fn algorithm(&self) -> &Algorithm {
        &self.inner.algorithm
    }

    /// The most permits one request may take.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// let burst = Algorithm::TokenBucket(TokenBucketOptions::new(20, 5, Duration::from_secs(1)));
    /// let limiter = RedisLimiter::builder(Down, "api", burst, FailurePolicy::FailOpen).build().unwrap();
    /// assert_eq!(limiter.limit(), 20);
    /// let d = rt.block_on(limiter.decide("alice", 21)); // refused without a call
    /// assert_eq!(d.outcome.unwrap_err().reason(), Reason::ExceedsLimit);
    /// ```
    pub fn limit(&self) -> u32 {
        self.inner.plan.limit
    }

    /// Closes this client: later requests are rejected with [`Reason::Closed`] without a call.
    /// Other clients of the same keys are not affected.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen).build().unwrap();
    /// limiter.close(); // shutting down
    /// let refused = rt.block_on(limiter.acquire("alice", 1)).unwrap_err();
    /// assert_eq!(refused.reason(), Reason::Closed);
    /// assert_eq!(limiter.redis_statistics().calls, 0);
    /// ```
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
    }

    /// Whether [`close`](Self::close) was called.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen).build().unwrap();
    /// assert!(!limiter.is_closed());
    /// limiter.close();
    /// assert!(limiter.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }
}
