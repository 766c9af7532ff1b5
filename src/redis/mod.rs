//! Limits shared across machines, kept in Redis (feature `redis`): token bucket, fixed window,
//! sliding window and GCRA, one round trip per decision, with a failure policy you choose.
//!
//! A [`RedisLimiter`] decides each request with one Lua script (`EVALSHA`, and `EVAL` with the
//! script's source after `NOSCRIPT`, e.g. after a restart or `SCRIPT FLUSH`). The script reads
//! the time from Redis `TIME` (integer microseconds), so machines whose clocks disagree still
//! agree on every decision, and returns integers only: allowed, remaining, RetryAfter and reset.
//! The key of a partition is `prefix:{partition}:shape` — the braces are a hash tag, so on a
//! cluster the key lives on the slot of its partition; the shape names the algorithm and its
//! time parameters (see [below](#changing-the-configuration)) — and every write sets a TTL, at
//! most the limiter's span ([`MAX_SPAN`] at most), so an idle key vanishes once its absence
//! means the same as its content.
//!
//! ```no_run
//! use core::time::Duration;
//! use tollgate::redis::{Algorithm, FailurePolicy, RedisLimiter};
//! use tollgate::FixedWindowOptions;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = redis::Client::open("redis://127.0.0.1/")?;
//! let connection = client.get_connection_manager().await?;
//! let limiter = RedisLimiter::builder(
//!     connection,
//!     "api",
//!     Algorithm::FixedWindow(FixedWindowOptions::new(1_000, Duration::from_secs(60))),
//!     FailurePolicy::FailOpen,
//! )
//! .timeout(Duration::from_millis(20))
//! .build()?;
//! match limiter.acquire("customer-42", 1).await {
//!     Ok(_lease) => { /* serve */ }
//!     Err(rejection) => println!("429, retry after {:?}", rejection.retry_after()),
//! }
//! # Ok(()) }
//! ```
//!
//! The feature depends on the `redis` crate 1.x (which needs Rust 1.88) and tokio. Code that
//! glob-imports `tollgate::*` and also uses the `redis` crate names the crate `::redis`.
//!
//! ## Same decisions as the local limiters
//! Each script is the state machine of the matching local limiter, run in Redis: the token
//! bucket and fixed window follow [`TokenBucketLimiter`](crate::TokenBucketLimiter) and
//! [`FixedWindowLimiter`](crate::FixedWindowLimiter) (whole periods, tokens arrive at period
//! boundaries), the sliding window follows
//! [`SlidingWindowLimiter`](crate::SlidingWindowLimiter) segment for segment. Given the same
//! requests at the same instants, a Redis limiter and a local limiter created at a multiple of the
//! period since the Unix epoch make the same decisions with the same RetryAfter (to the
//! microsecond); the test suite checks it on the .NET documentation's worked examples. Where
//! they differ:
//! - **Time**: periods, windows and segments count from the Unix epoch on the Redis server's
//!   clock (a local limiter counts from its creation), at microsecond resolution: periods,
//!   windows and segments must be whole microseconds.
//! - **No queue**: a request is granted or rejected at once; options with a `queue_limit` are
//!   refused ([`RedisConfigError::QueueNotSupported`]). Wait by retrying after the RetryAfter.
//! - **Sliding window granularity**: the window is kept per segment, as locally, in a hash of at
//!   most `segments_per_window` fields (at most [`MAX_SEGMENTS`]); each decision reads them all.
//! - **GCRA** ([`GcraOptions`]) has no local counterpart; its fallback is a local token bucket of
//!   the same burst and rate.
//! - **Leases** return nothing (as every rate limiter's), and there is no `close` on the server:
//!   [`RedisLimiter::close`] closes this client only.
//!
//! ## When Redis fails
//! The [`FailurePolicy`] is a required argument: [`FailOpen`](FailurePolicy::FailOpen),
//! [`FailClosed`](FailurePolicy::FailClosed), or [`Fallback`](FailurePolicy::Fallback) to a local
//! limiter holding a share of the quota. A call that fails — an I/O error, a refused or dropped
//! connection, a server that cannot serve (`LOADING`, `BUSY`, `MASTERDOWN`, `CLUSTERDOWN`,
//! `TRYAGAIN`, `READONLY`, `OOM`, ...) — or takes longer than the
//! [timeout](RedisLimiterBuilder::timeout) (default 50 ms) is decided by the policy; after a few
//! consecutive failures the [`CircuitBreaker`] stops calling Redis and lets one request probe it
//! now and then. [`RedisLimiter::health`] says which is in force.
//!
//! An error of one key is not a failure of Redis: a key holding data the script cannot read (a
//! key of another type, `WRONGTYPE`, or content it did not write) rejects that partition's
//! requests with [`REDIS_KEY_ERROR`] ([`DecidedBy::KeyError`]), and never counts toward the
//! breaker, so the other partitions keep being decided by Redis.
//!
//! **No decision is counted twice**: a call that failed or timed out is never retried — its
//! request is decided by the failure policy. A timed-out script may still have run on the server
//! (its permits are then counted there once, and the request got the policy's answer); retrying
//! it could count it twice, and an idempotency token would cost a write on every decision. The
//! only retry is after `NOSCRIPT`, an error that means the script did not run: the limiter sends
//! the script itself (`EVAL`), which cannot meet `NOSCRIPT` and caches the script again, so a
//! script cache flushed over and over costs round trips, never a failure. (Should a retry still
//! answer `NOSCRIPT`, its request goes to the policy without counting toward the breaker.) The
//! connection manager does not resend failed commands: it reconnects in the background, and a
//! later request finds the new connection.
//!
//! ## Changing the configuration
//! Deploys change limits, and old and new replicas share the prefix while a deploy rolls. The
//! key's shape names what gives the counts their meaning — the algorithm and its time
//! parameters: `tb<period µs>` (token bucket), `fw<window µs>` (fixed window),
//! `sw<window µs>x<segments>` (sliding window), `gcra<interval µs>` — and not the limit:
//! - **Changing the algorithm, period, window, segments or emission interval starts fresh
//!   counts**: the new configuration uses new keys, and the old keys expire on their own TTL
//!   (at most the old span). While both configurations run, each counts its own requests.
//! - **Changing only the limit keeps the counts in flight**: `token_limit`, `tokens_per_period`,
//!   `permit_limit` or `burst` keep the key. A fixed window keeps the permits taken in the current
//!   window (lowering the limit below them refuses until the next window; raising it frees the
//!   difference at once); a token bucket keeps the tokens missing from full (capped at the new
//!   limit); a sliding window keeps its segments' counts (requests wait until enough of them
//!   leave the window); GCRA keeps its debt, capped at the new `burst × interval`.
//!
//! No configuration change ever locks a key: every TTL and RetryAfter stays within what the
//! configuration deciding can mean (its span).
//!
//! ## Chains and partitions
//! The partition *is* the key: `acquire("user-7", 1)` limits `user-7` on every machine. To shed
//! load before a round trip, put a local limiter in front with
//! [`acquire_behind`](RedisLimiter::acquire_behind): the local limiter decides first, and Redis is
//! asked only if it grants (the pattern of .NET's chained limiter, where the first rejection
//! wins). For a partitioned local front, do the same by hand: `front.try_acquire(&key, n)?`,
//! then `redis.acquire(&key, n).await?`, holding both leases (the test suite does both).
//!
//! There is no synchronous `try_acquire`: a decision needs I/O, and blocking on it would starve
//! an async runtime. [`RedisLimiter`] is therefore not a [`Limiter`].

mod breaker;
mod cache;
#[cfg(feature = "http")]
mod http_policy;
mod scripts;

use core::fmt;
use core::time::Duration;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use ::redis::aio::ConnectionLike;
use ::redis::{ErrorKind, RedisError, Script, ServerErrorKind};

pub use breaker::{Circuit, CircuitBreaker};

use crate::clock::{Clock, StdClock};
use crate::lease::{Lease, Reason, Rejection, Statistics};
use crate::limiter::Limiter;
use crate::options::OptionsError;
use crate::partition::{Partition, PartitionConfig, PartitionKind, PartitionLimiter, Partitioned};
use crate::{FixedWindowOptions, SlidingWindowOptions, TokenBucketOptions};

/// The most segments a Redis sliding window may have (each decision reads them all).
///
/// ```
/// # use core::time::Duration;
/// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
/// # use tollgate::redis::*;
/// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
/// # /// A Redis that is down: every call fails at once.
/// # #[derive(Clone)]
/// # struct Down;
/// # impl ConnectionLike for Down {
/// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn get_db(&self) -> i64 { 0 }
/// # }
/// use tollgate::{OptionsError, SlidingWindowOptions};
/// let fine = SlidingWindowOptions::new(100, Duration::from_secs(60), MAX_SEGMENTS + 1);
/// let err = RedisLimiter::builder(Down, "api", Algorithm::SlidingWindow(fine), FailurePolicy::FailOpen).build();
/// assert_eq!(err.unwrap_err(), RedisConfigError::Options(OptionsError::TooManySegments { max: 1024 }));
/// let ok = SlidingWindowOptions::new(100, Duration::from_secs(60), 60); // one segment a second
/// assert!(RedisLimiter::builder(Down, "api", Algorithm::SlidingWindow(ok), FailurePolicy::FailOpen).build().is_ok());
/// ```
pub const MAX_SEGMENTS: u32 = 1024;

/// The longest span a Redis limiter may have: 2^50 µs (about 35.7 years). The span is the time
/// an idle limiter takes to forget everything, which bounds every TTL and RetryAfter: for a
/// token bucket the time to refill from empty (`ceil(token_limit / tokens_per_period)` periods),
/// for a window the window, for GCRA `burst × emission_interval`. The bound keeps every instant
/// the scripts compute exact in a Lua double (below 2^53 µs) for the next 150 years; longer
/// options are refused with [`RedisConfigError::SpanTooLong`].
///
/// ```
/// # use core::time::Duration;
/// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
/// # use tollgate::redis::*;
/// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
/// # /// A Redis that is down: every call fails at once.
/// # #[derive(Clone)]
/// # struct Down;
/// # impl ConnectionLike for Down {
/// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn get_db(&self) -> i64 { 0 }
/// # }
/// // A bucket of u32::MAX tokens, one a day: 11.7 million years to refill.
/// let slow = TokenBucketOptions::new(u32::MAX, 1, Duration::from_secs(86_400));
/// let err = RedisLimiter::builder(Down, "api", Algorithm::TokenBucket(slow), FailurePolicy::FailOpen).build();
/// assert_eq!(err.unwrap_err(), RedisConfigError::SpanTooLong);
/// let gcra = GcraOptions::new(2, MAX_SPAN / 2); // exactly MAX_SPAN
/// assert!(RedisLimiter::builder(Down, "api", Algorithm::Gcra(gcra), FailurePolicy::FailOpen).build().is_ok());
/// ```
pub const MAX_SPAN: Duration = Duration::from_micros(MAX_SPAN_US);

const MAX_SPAN_US: u64 = 1 << 50;

static BUCKET: LazyLock<Script> = LazyLock::new(|| Script::new(scripts::BUCKET));
static SLIDING: LazyLock<Script> = LazyLock::new(|| Script::new(scripts::SLIDING));
static GCRA: LazyLock<Script> = LazyLock::new(|| Script::new(scripts::GCRA));

/// Options of the GCRA (generic cell rate algorithm, as redis-cell and redis_rate): one permit
/// every `emission_interval`, with bursts of up to `burst` permits.
///
/// A GCRA of burst `B` and interval `T` admits `B` permits at once, then one every `T`, and is
/// back to `B` after `B × T` of quiet. Its state is one timestamp per key.
///
/// ```
/// use core::time::Duration;
/// use tollgate::redis::GcraOptions;
///
/// // 100 a second, bursts of 10.
/// let gcra = GcraOptions::new(10, Duration::from_millis(10));
/// assert_eq!(GcraOptions::per_period(100, Duration::from_secs(1), 10), Ok(gcra));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GcraOptions {
    /// Permits that may be taken at once (at least 1).
    pub burst: u32,
    /// The time one permit takes to come back: whole microseconds, at least 1.
    pub emission_interval: Duration,
}

impl GcraOptions {
    /// Bursts of `burst`, one permit back every `emission_interval`.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
    /// // redis-cell's `CL.THROTTLE key 14 30 60`: bursts of 15, 30 per minute.
    /// let gcra = GcraOptions::new(15, Duration::from_secs(2));
    /// let limiter = RedisLimiter::builder(Down, "api", Algorithm::Gcra(gcra), FailurePolicy::FailClosed).build().unwrap();
    /// assert_eq!(limiter.limit(), 15);
    /// let sub_micro = GcraOptions::new(15, Duration::from_nanos(1_500));
    /// let err = RedisLimiter::builder(Down, "api", Algorithm::Gcra(sub_micro), FailurePolicy::FailClosed).build();
    /// assert_eq!(err.unwrap_err(), RedisConfigError::NotWholeMicros);
    /// ```
    pub const fn new(burst: u32, emission_interval: Duration) -> Self {
        Self {
            burst,
            emission_interval,
        }
    }

    /// `limit` permits per `period` (the interval is `period / limit`, which must be whole
    /// microseconds), bursts of `burst`.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
    /// let gcra = GcraOptions::per_period(30, Duration::from_secs(60), 15).unwrap();
    /// assert_eq!(gcra.emission_interval, Duration::from_secs(2));
    /// assert_eq!(gcra.burst, 15);
    /// // 1 s / 3 is not a whole number of microseconds.
    /// assert_eq!(GcraOptions::per_period(3, Duration::from_secs(1), 1), Err(RedisConfigError::NotWholeMicros));
    /// ```
    pub fn per_period(limit: u32, period: Duration, burst: u32) -> Result<Self, RedisConfigError> {
        if limit == 0 {
            return Err(OptionsError::ZeroLimit.into());
        }
        let us = whole_micros(period)?;
        if us % u64::from(limit) != 0 {
            return Err(RedisConfigError::NotWholeMicros);
        }
        Ok(Self::new(
            burst,
            Duration::from_micros(us / u64::from(limit)),
        ))
    }
}

/// The algorithm of a [`RedisLimiter`] and its options (the local limiters' options types).
///
/// ```
/// # use core::time::Duration;
/// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
/// # use tollgate::redis::*;
/// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
/// # /// A Redis that is down: every call fails at once.
/// # #[derive(Clone)]
/// # struct Down;
/// # impl ConnectionLike for Down {
/// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn get_db(&self) -> i64 { 0 }
/// # }
/// let algorithms = [
///     Algorithm::TokenBucket(TokenBucketOptions::new(20, 10, Duration::from_secs(1))),
///     Algorithm::FixedWindow(FixedWindowOptions::new(1_000, Duration::from_secs(3600))),
///     Algorithm::Gcra(GcraOptions::new(5, Duration::from_millis(100))),
/// ];
/// for algorithm in algorithms {
///     let limiter = RedisLimiter::builder(Down, "api", algorithm, FailurePolicy::FailOpen).build().unwrap();
///     assert_eq!(*limiter.algorithm(), algorithm);
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// A token bucket, as [`TokenBucketLimiter`](crate::TokenBucketLimiter).
    TokenBucket(TokenBucketOptions),
    /// A fixed window, as [`FixedWindowLimiter`](crate::FixedWindowLimiter).
    FixedWindow(FixedWindowOptions),
    /// A sliding window, as [`SlidingWindowLimiter`](crate::SlidingWindowLimiter).
    SlidingWindow(SlidingWindowOptions),
    /// GCRA, as redis-cell's `CL.THROTTLE`.
    Gcra(GcraOptions),
}

/// Why a [`RedisLimiter`] could not be built.
///
/// ```
/// # use core::time::Duration;
/// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
/// # use tollgate::redis::*;
/// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
/// # /// A Redis that is down: every call fails at once.
/// # #[derive(Clone)]
/// # struct Down;
/// # impl ConnectionLike for Down {
/// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn get_db(&self) -> i64 { 0 }
/// # }
/// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
/// use tollgate::QueueOrder;
/// let queued = TokenBucketOptions::new(10, 1, Duration::from_secs(1)).with_queue(5, QueueOrder::OldestFirst);
/// let err = RedisLimiter::builder(Down, "api", Algorithm::TokenBucket(queued), FailurePolicy::FailOpen).build();
/// assert_eq!(err.unwrap_err(), RedisConfigError::QueueNotSupported);
/// let err = RedisLimiter::builder(Down, "api{v2}", per_minute, FailurePolicy::FailOpen).build().unwrap_err();
/// assert_eq!(err, RedisConfigError::PrefixBraces);
/// assert_eq!(err.to_string(), "the key prefix must not contain '{' or '}'");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RedisConfigError {
    /// The algorithm's options are invalid (as the local limiter would say).
    Options(OptionsError),
    /// A period, window, segment or emission interval is not a whole number of microseconds
    /// (the scripts' resolution), or is longer than 2^53 µs.
    NotWholeMicros,
    /// The options ask for a queue: a Redis limiter has none (it grants or rejects at once).
    QueueNotSupported,
    /// The prefix contains `{` or `}`, which would take the hash tag from the partition.
    PrefixBraces,
    /// The fallback share is not in (0, 1].
    Share,
    /// The timeout is zero.
    ZeroTimeout,
    /// The circuit breaker opens after zero failures.
    ZeroFailures,
    /// The limiter's span — the time to refill an empty bucket, the window, or GCRA's
    /// `burst × emission_interval` — is longer than [`MAX_SPAN`] (2^50 µs, about 35.7 years).
    SpanTooLong,
}

impl From<OptionsError> for RedisConfigError {
    fn from(e: OptionsError) -> Self {
        Self::Options(e)
    }
}

impl fmt::Display for RedisConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Options(e) => write!(f, "invalid limiter options: {e:?}"),
            Self::NotWholeMicros => f.write_str("durations must be whole microseconds below 2^53"),
            Self::QueueNotSupported => f.write_str("a Redis limiter has no queue (queue_limit 0)"),
            Self::PrefixBraces => f.write_str("the key prefix must not contain '{' or '}'"),
            Self::Share => f.write_str("the fallback share must be in (0, 1]"),
            Self::ZeroTimeout => f.write_str("the timeout must be longer than zero"),
            Self::ZeroFailures => f.write_str("the circuit breaker needs at least one failure"),
            Self::SpanTooLong => f.write_str("the limiter's span is longer than 2^50 µs"),
        }
    }
}

impl std::error::Error for RedisConfigError {}

fn whole_micros(d: Duration) -> Result<u64, RedisConfigError> {
    if d.subsec_nanos() % 1_000 != 0 || d.is_zero() {
        return Err(RedisConfigError::NotWholeMicros);
    }
    let us = u64::try_from(d.as_micros()).map_err(|_| RedisConfigError::NotWholeMicros)?;
    if us >= 1 << 53 {
        return Err(RedisConfigError::NotWholeMicros);
    }
    Ok(us)
}

/// The script, its arguments (after the permit count), the limit, and the key's shape tag.
#[derive(Clone, Debug)]
struct Plan {
    /// The script's source (sent with `EVAL` after `NOSCRIPT`).
    source: &'static str,
    /// The script (for its SHA1).
    script: &'static LazyLock<Script>,
    args: [u64; 3],
    nargs: usize,
    limit: u32,
    /// The key's suffix naming the algorithm and its time parameters (not its limit).
    shape: String,
}

/// `Ok(())` if `span_us` (a u128 product of the options) is at most [`MAX_SPAN`].
fn within_span(span_us: u128) -> Result<(), RedisConfigError> {
    if span_us > u128::from(MAX_SPAN_US) {
        return Err(RedisConfigError::SpanTooLong);
    }
    Ok(())
}

impl Algorithm {
    fn plan(&self) -> Result<Plan, RedisConfigError> {
        match *self {
            Algorithm::TokenBucket(o) => {
                o.validate()?;
                if o.queue_limit != 0 {
                    return Err(RedisConfigError::QueueNotSupported);
                }
                let p = whole_micros(o.replenishment_period)?;
                let periods = o.token_limit.div_ceil(o.tokens_per_period.max(1));
                within_span(u128::from(periods) * u128::from(p))?;
                Ok(Plan {
                    source: scripts::BUCKET,
                    script: &BUCKET,
                    args: [u64::from(o.token_limit), u64::from(o.tokens_per_period), p],
                    nargs: 3,
                    limit: o.token_limit,
                    shape: format!("tb{p}"),
                })
            }
            Algorithm::FixedWindow(o) => {
                o.validate()?;
                if o.queue_limit != 0 {
                    return Err(RedisConfigError::QueueNotSupported);
                }
                let w = whole_micros(o.window)?;
                within_span(u128::from(w))?;
                let l = u64::from(o.permit_limit);
                Ok(Plan {
                    source: scripts::BUCKET,
                    script: &BUCKET,
                    args: [l, l, w],
                    nargs: 3,
                    limit: o.permit_limit,
                    shape: format!("fw{w}"),
                })
            }
            Algorithm::SlidingWindow(o) => {
                o.validate(MAX_SEGMENTS as usize)?;
                if o.queue_limit != 0 {
                    return Err(RedisConfigError::QueueNotSupported);
                }
                let w = whole_micros(o.window)?;
                let n = u64::from(o.segments_per_window);
                if w % n != 0 {
                    return Err(RedisConfigError::NotWholeMicros);
                }
                within_span(u128::from(w))?;
                Ok(Plan {
                    source: scripts::SLIDING,
                    script: &SLIDING,
                    args: [u64::from(o.permit_limit), n, w / n],
                    nargs: 3,
                    limit: o.permit_limit,
                    shape: format!("sw{w}x{n}"),
                })
            }
            Algorithm::Gcra(o) => {
                if o.burst == 0 {
                    return Err(OptionsError::ZeroLimit.into());
                }
                let t = whole_micros(o.emission_interval)?;
                within_span(u128::from(o.burst) * u128::from(t))?;
                Ok(Plan {
                    source: scripts::GCRA,
                    script: &GCRA,
                    args: [u64::from(o.burst), t, 0],
                    nargs: 2,
                    limit: o.burst,
                    shape: format!("gcra{t}"),
                })
            }
        }
    }

    /// The same algorithm with `share` of the quota, as a local partition kind.
    fn local_share(&self, share: f64) -> Result<PartitionKind, RedisConfigError> {
        let scale = |n: u32| -> u32 { ((f64::from(n) * share).ceil() as u32).max(1) };
        Ok(match *self {
            Algorithm::TokenBucket(o) => PartitionKind::token_bucket(TokenBucketOptions::new(
                scale(o.token_limit),
                scale(o.tokens_per_period),
                o.replenishment_period,
            ))?,
            Algorithm::FixedWindow(o) => PartitionKind::fixed_window(FixedWindowOptions::new(
                scale(o.permit_limit),
                o.window,
            ))?,
            Algorithm::SlidingWindow(o) => PartitionKind::sliding_window(
                SlidingWindowOptions::new(scale(o.permit_limit), o.window, o.segments_per_window),
            )?,
            Algorithm::Gcra(o) => {
                // One token every T / share, bursts of B × share. A tiny share makes that period
                // longer than a `Duration` holds: refused, as the local limiter refuses a
                // period of 292 years or more.
                let t = o.emission_interval.as_secs_f64() / share;
                let period = Duration::try_from_secs_f64(t)
                    .map_err(|_| RedisConfigError::Options(OptionsError::PeriodTooLong))?;
                PartitionKind::token_bucket(TokenBucketOptions::new(scale(o.burst), 1, period))?
            }
        })
    }
}

/// What a [`RedisLimiter`] does when Redis cannot decide: chosen at construction, no default.
///
/// ```
/// # use core::time::Duration;
/// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
/// # use tollgate::redis::*;
/// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
/// # /// A Redis that is down: every call fails at once.
/// # #[derive(Clone)]
/// # struct Down;
/// # impl ConnectionLike for Down {
/// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn get_db(&self) -> i64 { 0 }
/// # }
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
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
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

    fn kind(&self) -> PolicyKind {
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
/// # use core::time::Duration;
/// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
/// # use tollgate::redis::*;
/// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
/// # /// A Redis that is down: every call fails at once.
/// # #[derive(Clone)]
/// # struct Down;
/// # impl ConnectionLike for Down {
/// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn get_db(&self) -> i64 { 0 }
/// # }
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
/// # use core::time::Duration;
/// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
/// # use tollgate::redis::*;
/// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
/// # /// A Redis that is down: every call fails at once.
/// # #[derive(Clone)]
/// # struct Down;
/// # impl ConnectionLike for Down {
/// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn get_db(&self) -> i64 { 0 }
/// # }
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
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
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

/// Who made a [`Decision`].
///
/// ```
/// # use core::time::Duration;
/// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
/// # use tollgate::redis::*;
/// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
/// # /// A Redis that is down: every call fails at once.
/// # #[derive(Clone)]
/// # struct Down;
/// # impl ConnectionLike for Down {
/// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn get_db(&self) -> i64 { 0 }
/// # }
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
/// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen).build().unwrap();
/// assert_eq!(rt.block_on(limiter.decide("alice", 1)).decided_by, DecidedBy::FailOpen);
/// // Too many permits: refused by this client, without a call.
/// let too_many = rt.block_on(limiter.decide("alice", 101));
/// assert_eq!((too_many.decided_by, too_many.outcome.unwrap_err().reason()), (DecidedBy::Client, Reason::ExceedsLimit));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DecidedBy {
    /// The Redis script.
    Redis,
    /// A cached Redis denial (see [`RedisLimiterBuilder::cache_denials`]).
    CachedDenial,
    /// The failure policy: [`FailurePolicy::FailOpen`].
    FailOpen,
    /// The failure policy: [`FailurePolicy::FailClosed`].
    FailClosed,
    /// The failure policy: the local fallback limiter.
    Fallback,
    /// This client: the limiter is closed, or the request exceeds the limit.
    Client,
    /// Redis answered with an error of the partition's key (see [`REDIS_KEY_ERROR`]): the
    /// request is rejected with that reason, whatever the failure policy.
    KeyError,
}

/// A decision with everything the scripts return (for headers such as `RateLimit`).
///
/// ```
/// # use core::time::Duration;
/// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
/// # use tollgate::redis::*;
/// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
/// # /// A Redis that is down: every call fails at once.
/// # #[derive(Clone)]
/// # struct Down;
/// # impl ConnectionLike for Down {
/// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn get_db(&self) -> i64 { 0 }
/// # }
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// let algorithm = Algorithm::FixedWindow(FixedWindowOptions::new(10, Duration::from_secs(60)));
/// let limiter = RedisLimiter::builder(Down, "api", algorithm, FailurePolicy::fallback(1.0)).build().unwrap();
/// let d: Decision = rt.block_on(limiter.decide("alice", 3));
/// assert!(d.allowed());
/// assert_eq!((d.permits, d.remaining), (3, 7)); // as the local fallback counted
/// assert_eq!(d.server_time_us, None); // Redis did not decide
/// assert_eq!(d.decided_by, DecidedBy::Fallback);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Decision {
    /// The request's permits.
    pub permits: u32,
    /// Granted or not (with the reason and RetryAfter).
    pub outcome: Result<(), Rejection>,
    /// Permits left after this decision (as Redis counted them; 0 if unknown).
    pub remaining: u64,
    /// Time until the limiter is idle again: bucket full, window empty (zero if unknown).
    pub reset: Duration,
    /// Redis's clock at the decision, in microseconds since the Unix epoch (`None` if Redis did
    /// not decide).
    pub server_time_us: Option<u64>,
    /// Who decided.
    pub decided_by: DecidedBy,
}

impl Decision {
    /// Whether the request was granted.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailClosed).build().unwrap();
    /// let d = rt.block_on(limiter.decide("alice", 1));
    /// assert!(!d.allowed());
    /// assert_eq!(d.allowed(), d.outcome.is_ok());
    /// ```
    pub const fn allowed(&self) -> bool {
        self.outcome.is_ok()
    }
}

/// Counters beyond [`Statistics`], for observability.
///
/// ```
/// # use core::time::Duration;
/// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
/// # use tollgate::redis::*;
/// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
/// # /// A Redis that is down: every call fails at once.
/// # #[derive(Clone)]
/// # struct Down;
/// # impl ConnectionLike for Down {
/// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn get_db(&self) -> i64 { 0 }
/// # }
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
    /// Script calls sent to Redis.
    pub calls: u64,
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

#[derive(Debug, Default)]
struct Counts {
    ok: AtomicU64,
    failed: AtomicU64,
    calls: AtomicU64,
    errors: AtomicU64,
    timeouts: AtomicU64,
    key_errors: AtomicU64,
    by_policy: AtomicU64,
    cached: AtomicU64,
    remaining: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

type FallbackPartitioner = Box<dyn Fn(&str) -> Partition<String, PartitionKind> + Send + Sync>;
type FallbackMap = Partitioned<String, PartitionLimiter<StdClock>, FallbackPartitioner>;

/// How [`RedisLimiter::builder`] is configured further.
///
/// ```
/// # use core::time::Duration;
/// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
/// # use tollgate::redis::*;
/// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
/// # /// A Redis that is down: every call fails at once.
/// # #[derive(Clone)]
/// # struct Down;
/// # impl ConnectionLike for Down {
/// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn get_db(&self) -> i64 { 0 }
/// # }
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
            .finish()
    }
}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> RedisLimiterBuilder<C> {
    /// The per-call timeout (default 50 ms): a call slower than this is decided by the failure
    /// policy and counts as a failure for the circuit breaker.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
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
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
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
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
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
                counts: Counts::default(),
                closed: AtomicBool::new(false),
            }),
        })
    }
}

/// Why a call did not decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CallError {
    /// No answer within the timeout: counts toward the breaker.
    Timeout,
    /// The connection or the server failed (I/O, refused, `LOADING`, `BUSY`, `MASTERDOWN`,
    /// `CLUSTERDOWN`, `TRYAGAIN`, `OOM`, ...), or answered something that is not the script's
    /// reply: counts toward the breaker.
    Server,
    /// `NOSCRIPT` even from the retry (impossible from a server with `EVAL`, kept for a proxy
    /// that answers `NOSCRIPT` on its own): the script did not run; the request goes to the
    /// policy, and the breaker counts an answer, not a failure.
    NoScript,
    /// The key's own error: `WRONGTYPE`, or a script error caused by the key's content (the
    /// scripts' `TOLLGATE` error replies, a Lua runtime error). The server is healthy.
    Key,
}

/// Words of a server's failure inside a script's `ERR` reply (Redis 6 wraps the errors of
/// `redis.call` in `ERR Error running script`; Redis 7 keeps their codes).
const SERVER_WORDS: [&str; 10] = [
    "OOM",
    "MISCONF",
    "READONLY",
    "NOREPLICAS",
    "LOADING",
    "BUSY",
    "MASTERDOWN",
    "CLUSTERDOWN",
    "TRYAGAIN",
    "SCRIPT KILL",
];

impl CallError {
    /// Classifies an error reply: only the key's own errors and `NOSCRIPT` are told apart;
    /// everything else (I/O, unknown codes) is the server's, as before.
    fn of(e: &RedisError) -> Self {
        match e.kind() {
            ErrorKind::Server(ServerErrorKind::NoScript) => Self::NoScript,
            // `ERR` from inside a script: Redis 7 says "... script: <sha>, on @user_script:N.",
            // Redis 6 "Error running script (call to f_<sha>): ...". A plain `ERR` (say "max
            // number of clients reached") is the server's.
            ErrorKind::Server(ServerErrorKind::ResponseError)
                if e.detail().is_some_and(|d| {
                    d.contains("script") && !SERVER_WORDS.iter().any(|w| d.contains(w))
                }) =>
            {
                Self::Key
            }
            ErrorKind::Extension if matches!(e.code(), Some("WRONGTYPE" | "TOLLGATE")) => Self::Key,
            _ => Self::Server,
        }
    }
}

struct Inner<C> {
    conn: C,
    prefix: String,
    algorithm: Algorithm,
    plan: Plan,
    policy: PolicyKind,
    fallback: Option<FallbackMap>,
    timeout: Duration,
    breaker: breaker::Breaker,
    cache: Option<cache::DenialCache>,
    counts: Counts,
    closed: AtomicBool,
}

/// A rate limiter whose state lives in Redis, shared by every client that uses the same prefix
/// (see the [module docs](self)). Cheap to clone: clones share the connection, the breaker, the
/// cache and the counters.
///
/// ```
/// # use core::time::Duration;
/// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
/// # use tollgate::redis::*;
/// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
/// # /// A Redis that is down: every call fails at once.
/// # #[derive(Clone)]
/// # struct Down;
/// # impl ConnectionLike for Down {
/// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn get_db(&self) -> i64 { 0 }
/// # }
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
    inner: Arc<Inner<C>>,
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
/// # use core::time::Duration;
/// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
/// # use tollgate::redis::*;
/// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
/// # /// A Redis that is down: every call fails at once.
/// # #[derive(Clone)]
/// # struct Down;
/// # impl ConnectionLike for Down {
/// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
/// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
/// #     }
/// #     fn get_db(&self) -> i64 { 0 }
/// # }
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
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
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
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
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
        }
    }

    /// The Redis key of `partition`: `prefix:{partition}:shape`, where the shape names the
    /// algorithm and its time parameters, not its limit (see
    /// [changing the configuration](self#changing-the-configuration)): `tb<period µs>`,
    /// `fw<window µs>`, `sw<window µs>x<segments>` or `gcra<interval µs>`.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api:v2", per_minute, FailurePolicy::FailOpen).build().unwrap();
    /// // `redis-cli TTL 'api:v2:{user-7}:fw60000000'` shows when user-7's window ends.
    /// assert_eq!(limiter.key("user-7"), "api:v2:{user-7}:fw60000000");
    /// let gcra = Algorithm::Gcra(GcraOptions::new(10, Duration::from_millis(100)));
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
    /// (which returns nothing when dropped) or a rejection with its RetryAfter.
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
        self.decide(partition, permits)
            .await
            .outcome
            .map(|()| Lease::unreleased(permits))
    }

    /// Asks `front` (a local limiter) first; only if it grants is Redis asked. Returns the
    /// first rejection, or a lease holding both (see [`ChainedLease`]). A front that rejects
    /// costs no round trip.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
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
    pub async fn decide(&self, partition: &str, permits: u32) -> Decision {
        let d = self.decide_uncounted(partition, permits).await;
        let c = &self.inner.counts;
        bump(if d.allowed() { &c.ok } else { &c.failed });
        d
    }

    async fn decide_uncounted(&self, partition: &str, permits: u32) -> Decision {
        let inner = &*self.inner;
        let client = |r: Reason, decided_by| Decision {
            permits,
            outcome: Err(Rejection::new(r)),
            remaining: 0,
            reset: Duration::ZERO,
            server_time_us: None,
            decided_by,
        };
        if inner.closed.load(Ordering::Acquire) {
            return client(Reason::Closed, DecidedBy::Client);
        }
        if permits > inner.plan.limit {
            return client(Reason::ExceedsLimit, DecidedBy::Client);
        }
        let key = self.key(partition);
        let now = StdClock.now();
        if let Some(cache) = &inner.cache {
            if let Some(left) = cache.get(&key, permits, now) {
                bump(&inner.counts.cached);
                return Decision {
                    permits,
                    outcome: Err(Rejection::with_retry_after(Reason::Exhausted, left)),
                    remaining: 0,
                    reset: Duration::ZERO,
                    server_time_us: None,
                    decided_by: DecidedBy::CachedDenial,
                };
            }
        }
        let skip = match inner.breaker.admit(now) {
            breaker::Admit::Call | breaker::Admit::Probe => None,
            breaker::Admit::Skip(d) => Some(d),
        };
        if let Some(left) = skip {
            return self.by_policy(partition, permits, Some(left));
        }
        bump(&inner.counts.calls);
        match self.call(&key, permits).await {
            Ok(d) => {
                inner.breaker.success();
                if let (Some(cache), Err(r)) = (&inner.cache, &d.outcome) {
                    if let Some(ra) = r.retry_after() {
                        cache.put(&key, permits, now, ra);
                    }
                }
                inner.counts.remaining.store(d.remaining, Ordering::Relaxed);
                d
            }
            Err(CallError::Key) => {
                // Redis answered: it is healthy, and this key alone is the problem.
                inner.breaker.success();
                bump(&inner.counts.key_errors);
                client(REDIS_KEY_ERROR, DecidedBy::KeyError)
            }
            Err(CallError::NoScript) => {
                // The script did not run, twice: nothing counted, and the server answered (it is
                // up; its script cache is being flushed, or a proxy lost the script): the policy
                // decides this request only, and the breaker hears of an answer, not a failure.
                inner.breaker.success();
                bump(&inner.counts.errors);
                self.by_policy(partition, permits, None)
            }
            Err(e) => {
                bump(if e == CallError::Timeout {
                    &inner.counts.timeouts
                } else {
                    &inner.counts.errors
                });
                inner.breaker.failure(StdClock.now());
                self.by_policy(partition, permits, None)
            }
        }
    }

    /// One script call, bounded by the timeout: `EVALSHA`, and after `NOSCRIPT` (the script did
    /// not run) `EVAL` with the script's source, which cannot meet `NOSCRIPT` and caches the
    /// script for the next `EVALSHA`. Nothing else is retried.
    async fn call(&self, key: &str, permits: u32) -> Result<Decision, CallError> {
        let inner = &*self.inner;
        let plan = &inner.plan;
        let command = |name: &str, script: &str| {
            let mut c = ::redis::cmd(name);
            c.arg(script).arg(1).arg(key).arg(permits);
            for a in &plan.args[..plan.nargs] {
                c.arg(*a);
            }
            c
        };
        let mut conn = inner.conn.clone();
        let run = async {
            let sha = command("EVALSHA", plan.script.get_hash());
            match sha.query_async::<Vec<i64>>(&mut conn).await {
                Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                    command("EVAL", plan.source)
                        .query_async::<Vec<i64>>(&mut conn)
                        .await
                }
                other => other,
            }
        };
        let v = match tokio::time::timeout(inner.timeout, run).await {
            Err(_) => return Err(CallError::Timeout),
            Ok(Err(e)) => return Err(CallError::of(&e)),
            Ok(Ok(v)) => v,
        };
        let [allowed, remaining, retry_us, reset_us, now_us] = v[..] else {
            return Err(CallError::Server);
        };
        let micros = |x: i64| Duration::from_micros(u64::try_from(x).unwrap_or(0));
        let outcome = if allowed == 1 {
            Ok(())
        } else {
            Err(Rejection::with_retry_after(
                Reason::Exhausted,
                micros(retry_us).max(Duration::from_micros(1)),
            ))
        };
        Ok(Decision {
            permits,
            outcome,
            remaining: u64::try_from(remaining).unwrap_or(0),
            reset: micros(reset_us),
            server_time_us: u64::try_from(now_us).ok(),
            decided_by: DecidedBy::Redis,
        })
    }

    fn by_policy(&self, partition: &str, permits: u32, open_for: Option<Duration>) -> Decision {
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
                    Some(d) if !d.is_zero() => Rejection::with_retry_after(REDIS_UNAVAILABLE, d),
                    _ => Rejection::new(REDIS_UNAVAILABLE),
                }),
                DecidedBy::FailClosed,
            ),
        };
        let remaining = match (&inner.fallback, decided_by) {
            (Some(local), DecidedBy::Fallback) => local.statistics(partition).available_permits,
            _ => 0,
        };
        Decision {
            permits,
            outcome,
            remaining,
            reset: Duration::ZERO,
            server_time_us: None,
            decided_by,
        }
    }

    /// Which policy decides requests now.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
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
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
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
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailClosed).build().unwrap();
    /// let _ = rt.block_on(limiter.acquire("alice", 1));
    /// let s = limiter.statistics();
    /// assert_eq!((s.total_successful, s.total_failed, s.queued_permits), (0, 1, 0));
    /// ```
    pub fn statistics(&self) -> Statistics {
        let c = &self.inner.counts;
        Statistics {
            available_permits: c.remaining.load(Ordering::Relaxed),
            queued_permits: 0,
            total_successful: c.ok.load(Ordering::Relaxed),
            total_failed: c.failed.load(Ordering::Relaxed),
        }
    }

    /// Every counter, for observability.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
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
        RedisStatistics {
            total_successful: l(&c.ok),
            total_failed: l(&c.failed),
            calls: l(&c.calls),
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
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
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
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
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
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
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
    /// # use core::time::Duration;
    /// # use ::redis::{aio::ConnectionLike, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
    /// # use tollgate::redis::*;
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, Limiter, Reason, TokenBucketOptions};
    /// # /// A Redis that is down: every call fails at once.
    /// # #[derive(Clone)]
    /// # struct Down;
    /// # impl ConnectionLike for Down {
    /// #     fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn req_packed_commands<'a>(&'a mut self, _: &'a Pipeline, _: usize, _: usize) -> RedisFuture<'a, Vec<Value>> {
    /// #         Box::pin(async { Err(RedisError::from((ErrorKind::Io, "connection refused"))) })
    /// #     }
    /// #     fn get_db(&self) -> i64 { 0 }
    /// # }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The error a server's reply `line` (without the leading `-`) makes.
    fn reply(line: &str) -> RedisError {
        let bytes = format!("-{line}\r\n");
        match ::redis::parse_redis_value(bytes.as_bytes()) {
            Ok(::redis::Value::ServerError(e)) => e.into(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn only_server_and_connection_failures_count_toward_the_breaker() {
        let key = [
            "WRONGTYPE Operation against a key holding the wrong kind of value script: 8f0e, on @user_script:9.",
            "TOLLGATE unreadable bucket state",
            "ERR user_script:12: attempt to compare nil with number script: 8f0e, on @user_script:12.",
            "ERR Error running script (call to f_8f0e): @user_script:9: WRONGTYPE Operation against a key holding the wrong kind of value",
        ];
        for line in key {
            assert_eq!(CallError::of(&reply(line)), CallError::Key, "{line}");
        }
        let server = [
            "LOADING Redis is loading the dataset in memory",
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
            "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
            "CLUSTERDOWN The cluster is down",
            "TRYAGAIN Multiple keys request during rehashing of slot",
            "READONLY You can't write against a read only replica.",
            "OOM command not allowed when used memory > 'maxmemory'. script: 8f0e, on @user_script:40.",
            "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.",
            "ERR max number of clients reached",
            "ERR Error running script (call to f_8f0e): @user_script:40: -OOM command not allowed when used memory > 'maxmemory'",
            "NOPERM this user has no permissions to run the 'evalsha' command",
            "SOMETHINGNEW an error code this crate does not know",
        ];
        for line in server {
            assert_eq!(CallError::of(&reply(line)), CallError::Server, "{line}");
        }
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(CallError::of(&io), CallError::Server);
        assert_eq!(
            CallError::of(&reply("NOSCRIPT No matching script. Please use EVAL.")),
            CallError::NoScript
        );
    }

    /// A connection answering `NOSCRIPT` to every command: what no server does to `EVAL`
    /// (hence no real server here), but a proxy might.
    #[derive(Clone)]
    struct NoScriptEver;

    impl ConnectionLike for NoScriptEver {
        fn req_packed_command<'a>(
            &'a mut self,
            _: &'a ::redis::Cmd,
        ) -> ::redis::RedisFuture<'a, ::redis::Value> {
            Box::pin(async { Err(reply("NOSCRIPT No matching script. Please use EVAL.")) })
        }
        fn req_packed_commands<'a>(
            &'a mut self,
            _: &'a ::redis::Pipeline,
            _: usize,
            _: usize,
        ) -> ::redis::RedisFuture<'a, Vec<::redis::Value>> {
            Box::pin(async { Err(reply("NOSCRIPT No matching script. Please use EVAL.")) })
        }
        fn get_db(&self) -> i64 {
            0
        }
    }

    #[test]
    fn noscript_after_the_retry_goes_to_the_policy_and_never_opens_the_breaker() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let fw = Algorithm::FixedWindow(FixedWindowOptions::new(10, Duration::from_secs(60)));
        let l = RedisLimiter::builder(NoScriptEver, "p", fw, FailurePolicy::FailClosed)
            .circuit_breaker(CircuitBreaker::new(1, Duration::from_secs(60)))
            .build()
            .unwrap();
        for _ in 0..5 {
            let d = rt.block_on(l.decide("k", 1));
            assert_eq!(d.decided_by, DecidedBy::FailClosed);
            assert_eq!(d.outcome.unwrap_err().reason(), REDIS_UNAVAILABLE);
        }
        let s = l.redis_statistics();
        assert_eq!((s.calls, s.errors, s.circuit_opened), (5, 5, 0), "{s:?}");
        assert_eq!(l.circuit(), Circuit::Closed);
    }

    #[test]
    fn spans_are_bounded_and_every_long_option_is_a_typed_error() {
        let us = Duration::from_micros;
        let gcra = |b, t| {
            Algorithm::Gcra(GcraOptions::new(b, t))
                .plan()
                .map(|p| p.limit)
        };
        assert_eq!(gcra(1, MAX_SPAN), Ok(1));
        assert_eq!(
            gcra(1, MAX_SPAN + us(1)),
            Err(RedisConfigError::SpanTooLong)
        );
        assert_eq!(
            gcra(1, us((1 << 53) - 1)),
            Err(RedisConfigError::SpanTooLong)
        );
        assert_eq!(
            gcra(u32::MAX, Duration::from_secs(1)),
            Err(RedisConfigError::SpanTooLong)
        );
        let bucket = |l, per, p| {
            Algorithm::TokenBucket(TokenBucketOptions::new(l, per, p))
                .plan()
                .map(|p| p.limit)
        };
        assert_eq!(
            bucket(u32::MAX, 1, Duration::from_secs(86_400)),
            Err(RedisConfigError::SpanTooLong)
        );
        // ceil(5 / 2) = 3 periods.
        assert_eq!(bucket(5, 2, us(MAX_SPAN_US / 3)), Ok(5));
        assert_eq!(
            bucket(5, 2, us(MAX_SPAN_US / 3 + 1)),
            Err(RedisConfigError::SpanTooLong)
        );
        // The fallback of a GCRA whose local period overflows a `Duration`: an error, no panic.
        for (t, share) in [
            (Duration::from_secs(9_000_000_000), 1e-10),
            (MAX_SPAN, 1e-12),
            (Duration::from_secs(1), f64::MIN_POSITIVE),
        ] {
            let local = Algorithm::Gcra(GcraOptions::new(1, t)).local_share(share);
            assert_eq!(
                local.err(),
                Some(RedisConfigError::Options(OptionsError::PeriodTooLong)),
                "{t:?} × {share}"
            );
        }
    }

    #[test]
    fn the_key_names_the_time_shape_not_the_limit() {
        let shape = |a: Algorithm| a.plan().unwrap().shape;
        let s = Duration::from_secs;
        let fw = |n| Algorithm::FixedWindow(FixedWindowOptions::new(n, s(60)));
        assert_eq!(shape(fw(10)), "fw60000000");
        assert_eq!(shape(fw(10)), shape(fw(20)));
        let tb = |n, per, p| Algorithm::TokenBucket(TokenBucketOptions::new(n, per, p));
        assert_eq!(shape(tb(10, 1, s(1))), shape(tb(20, 5, s(1))));
        assert_ne!(shape(tb(10, 1, s(1))), shape(tb(10, 1, s(2))));
        let sw = |n, w, k| Algorithm::SlidingWindow(SlidingWindowOptions::new(n, w, k));
        assert_eq!(shape(sw(10, s(60), 6)), "sw60000000x6");
        assert_ne!(shape(sw(10, s(60), 6)), shape(sw(10, s(60), 60)));
        let gcra = |b, t| Algorithm::Gcra(GcraOptions::new(b, t));
        assert_eq!(shape(gcra(5, s(2))), shape(gcra(50, s(2))));
        assert_eq!(shape(gcra(5, s(2))), "gcra2000000");
        // A fixed window and a token bucket of the same period share a script, not a key.
        assert_ne!(shape(fw(10)), shape(tb(10, 10, s(60))));
    }
}
