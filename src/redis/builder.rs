use core::fmt;
use core::time::Duration;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use ::redis::aio::ConnectionLike;

use super::failure::FallbackPartitioner;
use super::Counts;
use super::Inner;
use super::{
    batch, breaker, cache, lease, Algorithm, CircuitBreaker, FailurePolicy, RedisConfigError,
    RedisLimiter,
};
use crate::partition::{Partition, Partitioned};

impl<C: ConnectionLike + Clone + Send + Sync + 'static> RedisLimiter<C> {
    /// Starts building a limiter of `algorithm` on connection `conn` (a
    /// [`ConnectionManager`](::redis::aio::ConnectionManager), a multiplexed connection, or with
    /// feature `redis-cluster` a cluster connection), keys `prefix:{partition}:shape`, with the
    /// failure policy `policy`.
    ///
    /// ```no_run
    /// use core::time::Duration;
    /// use tollgate::redis::{Algorithm, CircuitBreaker, FailurePolicy, RedisLimiter};
    /// use tollgate::TokenBucketOptions;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let conn = redis::Client::open("redis://127.0.0.1/")?.get_connection_manager().await?;
    /// let limiter = RedisLimiter::builder(
    ///     conn,
    ///     "uploads",
    ///     Algorithm::TokenBucket(TokenBucketOptions::new(10, 2, Duration::from_secs(60))),
    ///     FailurePolicy::fallback(0.25), // 4 replicas
    /// )
    /// .timeout(Duration::from_millis(30))
    /// .circuit_breaker(CircuitBreaker::new(5, Duration::from_millis(500)))
    /// .cache_denials(10_000)
    /// .build()?;
    /// # let _ = limiter; Ok(()) }
    /// ```
    pub fn builder(
        conn: C,
        prefix: impl Into<String>,
        algorithm: Algorithm,
        policy: FailurePolicy,
    ) -> RedisLimiterBuilder<C> {
        RedisLimiterBuilder {
            conn,
            prefix: prefix.into(),
            algorithm,
            policy,
            timeout: Duration::from_millis(50),
            breaker: CircuitBreaker::default(),
            cache: None,
            batch: super::BATCH_SIZE,
            batch_delay: super::BATCH_DELAY,
            lease: 0,
        }
    }
}

/// How [`RedisLimiter::builder`] is configured further.
///
/// ```
/// # use tollgate::redis::doc_support::*;
/// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
/// let builder: RedisLimiterBuilder<_> = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen)
///     .timeout(Duration::from_millis(20))
///     .circuit_breaker(CircuitBreaker::new(5, Duration::from_millis(500)));
/// let limiter = builder.build().unwrap();
/// assert_eq!(limiter.limit(), 100);
/// assert_eq!(limiter.key("alice"), "api:{alice}:fw60000000"); // a fixed window of 60 s
/// ```
pub struct RedisLimiterBuilder<C> {
    conn: C,
    prefix: String,
    algorithm: Algorithm,
    policy: FailurePolicy,
    timeout: Duration,
    breaker: CircuitBreaker,
    cache: Option<usize>,
    batch: usize,
    batch_delay: Duration,
    lease: u32,
}

impl<C> fmt::Debug for RedisLimiterBuilder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLimiterBuilder")
            .field("prefix", &self.prefix)
            .field("algorithm", &self.algorithm)
            .field("policy", &self.policy)
            .field("timeout", &self.timeout)
            .field("breaker", &self.breaker)
            .field("cache", &self.cache)
            .field("batch", &self.batch)
            .field("batch_delay", &self.batch_delay)
            .field("lease", &self.lease)
            .finish()
    }
}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> RedisLimiterBuilder<C> {
    /// The per-call timeout (default 50 ms): a call slower than this is decided by the failure
    /// policy and counts as a failure for the circuit breaker.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen)
    ///     .timeout(Duration::from_millis(20)) // a request waits at most 20 ms for Redis
    ///     .build();
    /// assert!(limiter.is_ok());
    /// let zero = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen).timeout(Duration::ZERO).build();
    /// assert_eq!(zero.unwrap_err(), RedisConfigError::ZeroTimeout);
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The circuit breaker (default: open after 3 consecutive failures, for 1 s).
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen)
    ///     .circuit_breaker(CircuitBreaker::new(1, Duration::from_secs(60)))
    ///     .build()
    ///     .unwrap();
    /// let _ = rt.block_on(limiter.acquire("alice", 1));
    /// assert_eq!(limiter.health(), Health::Degraded(PolicyKind::FailOpen)); // after one failure
    /// let never = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen)
    ///     .circuit_breaker(CircuitBreaker::new(0, Duration::from_secs(1)))
    ///     .build();
    /// assert_eq!(never.unwrap_err(), RedisConfigError::ZeroFailures);
    /// ```
    pub fn circuit_breaker(mut self, breaker: CircuitBreaker) -> Self {
        self.breaker = breaker;
        self
    }

    /// Leases of up to `size` permits (a fixed window only): a decision that finds no lease
    /// for its key takes up to `size` permits of the key's current window from Redis in one
    /// call, keeps what it does not use, and later decisions on the key take from it locally
    /// (a lock-free lookup and one compare-and-swap,
    /// [`DecidedBy::Lease`](super::DecidedBy::Lease)) until the window
    /// ends; a window Redis says is spent is refused locally until it ends. `0` (the default)
    /// is no lease. Leased decisions skip batching.
    ///
    /// **Never more than the limit**: Redis counts permits when it leases them, and a lease
    /// ends at its window's end measured from before the call (up to the drift between this
    /// machine's clock and the server's over one window). **The cost** is undershoot and
    /// unfairness: a window may end with up to `size - 1` permits leased but unused per
    /// machine per key, refused to the others meanwhile. For hot keys with limits much larger
    /// than `size × machines`.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// use tollgate::SlidingCounterOptions;
    /// let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(10_000, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen)
    ///     .lease(100) // one round trip per 100 decisions on a hot key
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(rt.block_on(limiter.decide("alice", 1)).decided_by, DecidedBy::FailOpen); // Redis is down
    /// let counter = Algorithm::SlidingCounter(SlidingCounterOptions::per_minute(10_000));
    /// let err = RedisLimiter::builder(Down, "api", counter, FailurePolicy::FailOpen).lease(100).build();
    /// assert_eq!(err.unwrap_err(), RedisConfigError::LeaseNotSupported);
    /// ```
    pub fn lease(mut self, size: u32) -> Self {
        self.lease = size;
        self
    }

    /// Decides up to `max` concurrent decisions in one script run (one round trip); default
    /// [`BATCH_SIZE`](super::BATCH_SIZE) (64): batching is **on by default**, and
    /// `batch_size(1)` turns it off (a script run per decision; `0` is taken as `1`).
    ///
    /// **A batch waits for no timer, and a lone caller for nothing.** A decision that finds no
    /// run in flight and none queued goes at once, alone, as a run of one (a lone caller never
    /// waits for anyone, and a run of one is the same call as with batching off). A batch forms
    /// only from the decisions that arrive *while a run is in flight*: they queue, and the queue
    /// goes as one run, led by its first caller, when it holds `max` decisions, or when it has
    /// *settled*: the first to queue yields to the runtime and looks again for as long as
    /// callers keep queueing, and sends the queue as soon as a look finds no newcomer (no
    /// timer: a few microseconds when one caller queues alone; a burst of callers woken
    /// together goes as one run), or at the latest after the [flush delay](Self::batch_delay)
    /// (default [`BATCH_DELAY`](super::BATCH_DELAY), 200 µs). Runs go alongside the one in
    /// flight (pipelined on the connection), at most two in flight: with two out, the queue
    /// waits for one to return and then goes at once (group commit: under load, more and
    /// smaller runs would cost Redis and the client more CPU per decision).
    /// Each decision keeps its own answer (RetryAfter, remaining), its own failure policy, and
    /// its own key error; the same key twice is decided in order. A queued decision waits at
    /// most for its run to be sent, then its own run: each bounded by the
    /// [timeout](Self::timeout). A caller cancelled while it queues, settles or leads leaves
    /// nothing waiting on it.
    ///
    /// On a cluster connection (feature `redis-cluster`), a run takes only the queued decisions
    /// of its first decision's hash slot (a script's keys must share a slot), so batches form
    /// per partition: it pays on hot partitions only. Leased decisions
    /// ([`lease`](Self::lease)) skip batching.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// let algorithm = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", algorithm, FailurePolicy::FailOpen)
    ///     .build() // batching on: concurrent decisions share a script run
    ///     .unwrap();
    /// for _ in 0..2 { let _ = rt.block_on(limiter.acquire("alice", 1)); }
    /// let s = limiter.redis_statistics();
    /// assert_eq!((s.calls, s.script_runs), (2, 2)); // one at a time: nothing to batch, no wait
    /// let per_call = RedisLimiter::builder(Down, "api", algorithm, FailurePolicy::FailOpen)
    ///     .batch_size(1) // off: a script run per decision, even under load
    ///     .build();
    /// assert!(per_call.is_ok());
    /// ```
    pub fn batch_size(mut self, max: usize) -> Self {
        self.batch = max;
        self
    }

    /// The flush delay of batching ([`batch_size`](Self::batch_size), on by default): the
    /// longest a queue keeps settling (waiting for more callers while they keep coming) before
    /// it goes (default [`BATCH_DELAY`](super::BATCH_DELAY), 200 µs). The delay is a bound, not
    /// a wait:
    /// a queue goes as soon as a look finds no newcomer, so a caller that queues alone is sent
    /// after microseconds whatever the delay; only a steady stream of arrivals (each look finds
    /// one more) keeps a queue waiting until the delay, which then bounds the latency batching
    /// adds. With two runs in flight the queue waits for one to return, whatever the delay.
    /// Zero sends a queued decision at once (no settling).
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// let algorithm = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", algorithm, FailurePolicy::FailOpen)
    ///     .batch_delay(Duration::from_micros(100)) // a queue settles for 100 µs at most
    ///     .build();
    /// assert!(limiter.is_ok());
    /// ```
    pub fn batch_delay(mut self, delay: Duration) -> Self {
        self.batch_delay = delay;
        self
    }

    /// Caches Redis denials locally until their RetryAfter, for up to `capacity` keys: a cached
    /// denial answers requests of at least as many permits on its key without a round trip.
    /// Allows are never cached. Off by default.
    ///
    /// ```no_run
    /// # use core::time::Duration;
    /// # use tollgate::redis::*;
    /// # use tollgate::{FixedWindowOptions, TokenBucketOptions};
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let conn = ::redis::Client::open("redis://127.0.0.1/")?.get_connection_manager().await?;
    /// let algorithm = Algorithm::FixedWindow(FixedWindowOptions::new(1, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(conn, "login", algorithm, FailurePolicy::FailClosed)
    ///     .cache_denials(10_000)
    ///     .build()?;
    /// assert!(limiter.acquire("mallory", 1).await.is_ok());
    /// assert!(limiter.acquire("mallory", 1).await.is_err()); // Redis says no, for about a minute
    /// let d = limiter.decide("mallory", 1).await; // answered locally
    /// assert_eq!(d.decided_by, DecidedBy::CachedDenial);
    /// assert_eq!(limiter.redis_statistics().calls, 2);
    /// # Ok(()) }
    /// ```
    pub fn cache_denials(mut self, capacity: usize) -> Self {
        self.cache = Some(capacity);
        self
    }

    /// Checks everything and makes the limiter.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen).build();
    /// assert!(limiter.is_ok());
    /// let zero = Algorithm::FixedWindow(FixedWindowOptions::new(0, Duration::from_secs(60)));
    /// let err = RedisLimiter::builder(Down, "api", zero, FailurePolicy::FailOpen).build().unwrap_err();
    /// assert_eq!(err, RedisConfigError::Options(tollgate::OptionsError::ZeroLimit));
    /// ```
    pub fn build(self) -> Result<RedisLimiter<C>, RedisConfigError> {
        let plan = self.algorithm.plan()?;
        if self.prefix.contains(['{', '}']) {
            return Err(RedisConfigError::PrefixBraces);
        }
        if self.timeout.is_zero() {
            return Err(RedisConfigError::ZeroTimeout);
        }
        if self.breaker.failures == 0 {
            return Err(RedisConfigError::ZeroFailures);
        }
        if self.lease > 0 && !matches!(self.algorithm, Algorithm::FixedWindow(_)) {
            return Err(RedisConfigError::LeaseNotSupported);
        }
        let policy_kind = self.policy.kind();
        let fallback = match self.policy {
            FailurePolicy::Fallback { share, partitions } => {
                if !(share > 0.0 && share <= 1.0) {
                    return Err(RedisConfigError::Share);
                }
                let kind = self.algorithm.local_share(share)?;
                let partitioner: FallbackPartitioner =
                    Box::new(move |key: &str| Partition::new(key.to_owned(), kind));
                Some(Partitioned::new(partitioner, partitions))
            }
            _ => None,
        };
        Ok(RedisLimiter {
            inner: Arc::new(Inner {
                conn: self.conn,
                prefix: self.prefix,
                algorithm: self.algorithm,
                plan,
                policy: policy_kind,
                fallback,
                timeout: self.timeout,
                breaker: breaker::Breaker::new(self.breaker),
                cache: self.cache.map(cache::DenialCache::new),
                batcher: (self.batch > 1)
                    .then(|| batch::Batcher::new(self.batch, self.batch_delay, is_cluster::<C>())),
                leases: (self.lease > 0).then(|| lease::Leases::new(self.lease)),
                counts: Counts::default(),
                closed: AtomicBool::new(false),
            }),
        })
    }
}

/// Whether `C` is the cluster connection (feature `redis-cluster`): batches then group by
/// hash slot.
#[cfg_attr(
    not(feature = "redis-cluster"),
    allow(clippy::extra_unused_type_parameters)
)]
fn is_cluster<C: 'static>() -> bool {
    #[cfg(feature = "redis-cluster")]
    {
        core::any::TypeId::of::<C>()
            == core::any::TypeId::of::<::redis::cluster_async::ClusterConnection>()
    }
    #[cfg(not(feature = "redis-cluster"))]
    {
        false
    }
}
