//! Limits shared across machines, kept in Redis (feature `redis`): token bucket, fixed window,
//! sliding window, sliding counter, GCRA and the leaky bucket as a meter, one round trip per
//! decision (or per batch of concurrent decisions, or per lease), with a failure policy you
//! choose.
//!
//! A [`RedisLimiter`] decides each request with one Lua script (`EVALSHA`, and `EVAL` with the
//! script's source after `NOSCRIPT`, e.g. after a restart or `SCRIPT FLUSH`). The script reads
//! the time from Redis `TIME` (integer microseconds), so machines whose clocks disagree still
//! agree on every decision, and returns a few integers from which the client derives allowed,
//! remaining, RetryAfter and reset. Each key's state is one short string, read once and written
//! once with its expiry (`MGET`, then `SET` if the request is granted: three commands per
//! decision, `TIME` included; the expiry is rewritten only when the new state outlives it,
//! about once a second on a busy key, else kept: `SETRANGE` in place for a value as long as
//! the old, `SET ... KEEPTTL` for another); a fixed window keeps each
//! window's count under a key of its own, `key:<window index>`, taken with one `INCRBY` (two
//! commands per grant, `TIME` included, as a hand-written window plus `TIME`), and the sliding
//! counter does the same, reading the previous window's count (one `MGET` per run). Each
//! configuration runs a script of its own, its constants written in.
//! The key of a partition is `prefix:{partition}:shape` — the braces are a hash tag, so on a
//! cluster the key lives on the slot of its partition; the shape names the algorithm and its
//! time parameters (see [below](#changing-the-configuration)) — and every key has a TTL, at
//! most the limiter's span ([`MAX_SPAN`] at most) plus a second (an expiry is rounded up to a
//! whole second of Unix time), so an idle key vanishes less than a second after its absence
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
//! [`SlidingWindowLimiter`](crate::SlidingWindowLimiter) segment for segment, the sliding counter
//! follows [`SlidingCounterLimiter`](crate::SlidingCounterLimiter) and the leaky meter
//! [`LeakyBucketMeter`](crate::LeakyBucketMeter). Given the same
//! requests at the same instants, a Redis limiter and a local limiter created at a multiple of the
//! period since the Unix epoch make the same decisions with the same RetryAfter (to the
//! microsecond); the test suite checks it on the .NET documentation's worked examples. Where
//! they differ:
//! - **Time**: periods, windows and segments count from the Unix epoch on the Redis server's
//!   clock (a local limiter counts from its creation), at microsecond resolution: periods,
//!   windows and segments must be whole microseconds.
//! - **No queue**: a request is granted or rejected at once; options that set a `queue_limit`
//!   are refused ([`RedisConfigError::QueueNotSupported`]), but the quota-style constructors'
//!   waiting default ([`UNBOUNDED_QUEUE`](crate::UNBOUNDED_QUEUE)) is accepted and ignored.
//!   Wait by retrying after the RetryAfter.
//! - **Sliding window granularity**: the window is kept per segment, as locally, in one string
//!   of at most `segments_per_window` counts (at most [`MAX_SEGMENTS`]); each decision parses
//!   them all, so fewer segments cost less Redis CPU. The sliding counter keeps two counts
//!   whatever the window.
//! - **Sliding counter RetryAfter**: the local counter's is exact to the nanosecond; Redis's is
//!   the same instant rounded up to the microsecond.
//! - **GCRA** takes the local [`GcraLimiter`](crate::GcraLimiter)'s
//!   [`GcraOptions`](crate::GcraOptions); its fallback is a local GCRA of the same rate. The
//!   leaky meter runs the same script (its level is GCRA's debt); its fallback is a local meter.
//!   The sliding counter's fallback is a local fixed window (no partition kind is a counter).
//! - **Leases** return nothing (as every rate limiter's), and there is no `close` on the server:
//!   [`RedisLimiter::close`] closes this client only. A lease is settled to its true cost
//!   through the limiter, with its partition ([`RedisLimiter::settle`], below), not by
//!   [`Lease::settle`](crate::Lease::settle), which answers `Unsupported` for it.
//!
//! ## Batching and leases
//! Two ways to spend fewer round trips:
//! - **Batching, on by default** ([`batch_size`](RedisLimiterBuilder::batch_size), default
//!   [`BATCH_SIZE`]; `batch_size(1)` turns it off): concurrent decisions share one script run,
//!   each with its own answer, key error and failure policy. A batch waits for no timer: a
//!   decision that finds no run in flight goes at once, alone (a run of one is the call that
//!   batching off makes), and a batch forms only from the decisions that arrive while a run
//!   is in flight (group commit: the queue goes once no more callers join it, or after at most
//!   the [flush delay](RedisLimiterBuilder::batch_delay), default [`BATCH_DELAY`]). On a
//!   cluster connection a run carries the decisions of one hash slot.
//! - [`lease`](RedisLimiterBuilder::lease) (opt-in, fixed window only): permits of a key's
//!   window taken in blocks and handed out locally until the window ends
//!   ([`DecidedBy::Lease`]; a lock-free lookup and one compare-and-swap); never more than the
//!   limit, at the cost of up to `size - 1` permits per machine per key left unused. A token
//!   bucket's or GCRA's permits do not expire with a window, so a lease of them would lend
//!   what the limit refuses later.
//!
//! ## Settling leases
//! A lease taken for an estimate is settled once its cost is known with
//! [`settle`](RedisLimiter::settle)`(partition, &mut lease, actual)`: one script run (none when
//! this machine's [lease](RedisLimiterBuilder::lease) of the window can take it). The fixed
//! window gives a refund back only to the window the lease was counted in, if it is still
//! current, and counts a debit past the limit into debt (up to one limit more), carried into
//! the next window; GCRA and the leaky meter move `tat` back (never before now) or forward (up
//! to one burst past the tolerance); the token bucket (in either of its states) gives tokens
//! back (never above its limit) or takes them into debt (up to one limit more); the sliding
//! counter and the sliding window (no debt, unlike the local ones) give a refund back to the
//! window or segment the lease was counted in while it counts and take a debit only where it
//! fits. Past the bound, [`SettleError::DebtLimit`](crate::SettleError) and nothing is taken. A
//! failure is a typed [`RedisSettleError`], and changes nothing here.
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
//! parameters: `tbf<period µs>x<tokens per period>` (token bucket: its rate; `tb...` for a
//! bucket of about 2 million tokens a second or more, whose state is two numbers, see
//! [`Algorithm::TokenBucket`]), `fw<window µs>`
//! (fixed window), `swt<window µs>x<segments>` (sliding window), `sc<window µs>` (sliding
//! counter), `gcra<interval µs>`, `lm<interval µs>` (leaky meter) — and not the limit:
//! - **Changing the algorithm, period, tokens per period, window, segments or emission
//!   interval starts fresh counts**: the new configuration uses new keys, and the old keys
//!   expire on their own TTL (at most the old span, and a second). While both configurations
//!   run, each counts its own requests.
//! - **Changing only the limit keeps the counts in flight**: `token_limit`, `permit_limit` or
//!   `burst` keep the key. A fixed window keeps the permits taken in the current
//!   window (lowering the limit below them refuses until the next window; raising it frees the
//!   difference at once); a token bucket keeps the tokens missing from full (capped at the new
//!   limit); a sliding window keeps its segments' counts (requests wait until enough of them
//!   leave the window); GCRA and the leaky meter keep their debt, capped at the new
//!   `burst × interval`; the sliding counter keeps its two counts, capped at the new limit.
//!
//! No configuration change ever locks a key: every RetryAfter stays within what the
//! configuration deciding can mean (its span), and every TTL within the longest span of the
//! configurations that wrote the key, and a second (a grant keeps an expiry that already covers
//! its state, even one set under a longer span).
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

mod batch;
mod breaker;
mod builder;
mod cache;
mod decision;
#[doc(hidden)]
pub mod doc_support;
mod failure;
#[cfg(feature = "http")]
mod http_policy;
mod lease;
mod limiter;
mod options;
mod scripts;
mod settle;
mod stats;

use core::time::Duration;
use std::sync::atomic::{AtomicBool, AtomicU64};

use failure::FallbackMap;
use options::Plan;

pub use breaker::{Circuit, CircuitBreaker};
pub use builder::RedisLimiterBuilder;
pub use decision::{DecidedBy, RedisDecision};
pub use failure::{FailurePolicy, Health, PolicyKind, REDIS_KEY_ERROR, REDIS_UNAVAILABLE};
pub use limiter::{ChainedLease, RedisLimiter};
pub use options::{Algorithm, RedisConfigError, MAX_SEGMENTS, MAX_SPAN};
pub use settle::RedisSettleError;
pub use stats::RedisStatistics;

/// The default batch size of [`RedisLimiterBuilder::batch_size`]: at most 64 concurrent
/// decisions share a script run (batching is on by default; `batch_size(1)` turns it off).
///
/// ```
/// assert_eq!(tollgate::redis::BATCH_SIZE, 64);
/// ```
pub const BATCH_SIZE: usize = 64;

/// The default flush delay of batching ([`RedisLimiterBuilder::batch_delay`]): the longest a
/// queue waits for more callers while they keep coming (it goes as soon as none comes).
///
/// ```
/// assert_eq!(tollgate::redis::BATCH_DELAY, core::time::Duration::from_micros(200));
/// ```
pub const BATCH_DELAY: Duration = Duration::from_micros(200);

#[cfg(doc)]
use crate::limiter::Limiter;

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
    batcher: Option<batch::Batcher>,
    leases: Option<lease::Leases>,
    counts: Counts,
    closed: AtomicBool,
}

#[derive(Debug, Default)]
struct Counts {
    /// Granted and refused, but for the decisions of [`leased`](Self::leased). Per-thread
    /// cells (as a local limiter's), so that counting is no contended write.
    decided: crate::stats::Counters,
    /// Granted and refused from a lease: the hot path, counted apart so that a thread deciding
    /// from its lease keeps counting in one cached cell.
    leased: crate::stats::Counters,
    calls: AtomicU64,
    runs: AtomicU64,
    errors: AtomicU64,
    timeouts: AtomicU64,
    key_errors: AtomicU64,
    by_policy: AtomicU64,
    cached: AtomicU64,
    remaining: AtomicU64,
}

impl Counts {
    /// (granted, refused) so far, by anyone.
    fn totals(&self) -> (u64, u64) {
        let (ok, failed) = self.decided.totals();
        let (leased_ok, leased_failed) = self.leased.totals();
        (ok + leased_ok, failed + leased_failed)
    }
}

#[cfg(test)]
mod tests {
    use core::time::Duration;

    use ::redis::aio::ConnectionLike;
    use ::redis::RedisError;

    use super::decision::CallError;
    use super::options::MAX_SPAN_US;
    use super::*;
    use crate::{
        FixedWindowOptions, GcraOptions, OptionsError, SlidingWindowOptions, TokenBucketOptions,
    };

    /// `ms` milliseconds after the clock's origin: the instants of the unit tests.
    pub(crate) fn at(ms: u64) -> crate::clock::Instant {
        crate::clock::Instant::from_nanos(ms * 1_000_000)
    }

    /// The error a server's reply `line` (without the leading `-`) makes.
    fn reply(line: &str) -> RedisError {
        let bytes = format!("-{line}\r\n");
        match ::redis::parse_redis_value(bytes.as_bytes()) {
            Ok(::redis::Value::ServerError(e)) => e.into(),
            other => panic!("{other:?}"),
        }
    }

    /// Asserts that every reply line in `lines` is an error of `kind`.
    fn each_is(lines: &[&str], kind: CallError) {
        for line in lines {
            assert_eq!(CallError::of(&reply(line)), kind, "{line}");
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
        each_is(&key, CallError::Key);
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
        each_is(&server, CallError::Server);
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
            Algorithm::Gcra(GcraOptions::with_period(t).with_burst(b))
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
            let local =
                Algorithm::Gcra(GcraOptions::with_period(t).with_burst(1)).local_share(share);
            assert_eq!(
                local.err(),
                Some(RedisConfigError::Options(OptionsError::PeriodTooLong)),
                "{t:?} × {share}"
            );
        }
    }

    /// The token bucket keeps one number below about 2 tokens per µs, two above, chosen from
    /// the period and the tokens per period alone; the one-number script holds through the
    /// year 2112 and refuses a run after its last exact period.
    #[test]
    fn the_bucket_keeps_one_number_within_its_bound_and_two_past_it() {
        use super::options::{one_number_last_period, ONE_NUMBER_HORIZON_US};
        use super::scripts::Kind;
        let plan = |l, per, p| {
            Algorithm::TokenBucket(TokenBucketOptions::new(l, per, Duration::from_micros(p)))
                .plan()
                .unwrap()
        };
        // (period µs, the most tokens per period that keep one number)
        for (p, most) in [
            (1, 1),
            (1_000, 1_999),
            (1_000_000, 1_999_998),
            (60_000_000, 119_999_885),
        ] {
            let one = plan(u32::MAX, most, p);
            assert_eq!(one.kind, Kind::BucketOne, "{p} µs × {most}");
            assert_eq!(one.shape, format!("tbf{p}x{most}"));
            let two = plan(u32::MAX, most + 1, p);
            assert_eq!(two.kind, Kind::Bucket, "{p} µs × {}", most + 1);
            assert_eq!(two.shape, format!("tb{p}x{}", most + 1));
            // The limit does not choose: a key keeps one form under every limit.
            assert_eq!(plan(most, most, p).kind, Kind::BucketOne);
            assert_eq!(plan(most + 1, most + 1, p).kind, Kind::Bucket);
            // Within the bound, every "full at" up to the last period is exact in a double:
            // (kmax + 1) × per + the largest limit and request stays below 2^53.
            let kmax = one_number_last_period(p, u64::from(most)).unwrap();
            assert!(kmax >= ONE_NUMBER_HORIZON_US / p);
            let top = u128::from(kmax + 1) * u128::from(most) + 2 * u128::from(u32::MAX);
            assert!(top < 1 << 53, "{p} µs × {most}: {top}");
            assert!(one.source.contains(&format!("if k > {kmax} then")));
            assert_eq!(one_number_last_period(p, u64::from(most) + 1), None);
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
        // The bucket's rate (period and tokens per period) is its time shape: every writer of
        // a key computes alike when the bucket is full again, which its expiry covers.
        assert_eq!(shape(tb(10, 5, s(1))), shape(tb(20, 5, s(1))));
        assert_eq!(shape(tb(10, 5, s(1))), "tbf1000000x5");
        assert_ne!(shape(tb(10, 1, s(1))), shape(tb(10, 5, s(1))));
        assert_ne!(shape(tb(10, 1, s(1))), shape(tb(10, 1, s(2))));
        let sw = |n, w, k| Algorithm::SlidingWindow(SlidingWindowOptions::new(n, w, k));
        assert_eq!(shape(sw(10, s(60), 6)), "swt60000000x6");
        assert_ne!(shape(sw(10, s(60), 6)), shape(sw(10, s(60), 60)));
        let gcra = |b, t| Algorithm::Gcra(GcraOptions::with_period(t).with_burst(b));
        assert_eq!(shape(gcra(5, s(2))), shape(gcra(50, s(2))));
        assert_eq!(shape(gcra(5, s(2))), "gcra2000000");
        // A fixed window and a token bucket of the same period share a script, not a key.
        assert_ne!(shape(fw(10)), shape(tb(10, 10, s(60))));
    }
}
