//! # tollgate
//!
//! Rate and concurrency limiters with the model of .NET's `System.Threading.RateLimiting` —
//! leases, RetryAfter, statistics, idle duration — rebuilt as a lock-free `no_std` core.
//!
//! | limiter | admits | permits come back | state word |
//! |---|---|---|---|
//! | [`ConcurrencyLimiter`] | `permit_limit` held at once | when the lease is dropped | 64-bit |
//! | [`TokenBucketLimiter`] | up to `token_limit` stored tokens | `tokens_per_period` each whole period | 128-bit |
//! | [`FixedWindowLimiter`] | `permit_limit` per window | at each window boundary | 128-bit |
//! | [`SlidingWindowLimiter`] | `permit_limit` per sliding window | when their segment leaves the window | 128-bit + ring |
//! | [`GcraLimiter`] | `burst` at once, then one permit per `interval` | one at a time, smoothly | 64-bit |
//! | [`LeakyBucketMeter`] | what fits under `capacity`; the level drains continuously | as the level drains | 64-bit |
//! | [`LeakyBucketShaper`] | one permit per `interval`, never two at once; the rest wait for their slot | at each departure slot | 64-bit |
//! | [`SlidingCounterLimiter`] | `permit_limit` per rolling window, estimated (previous window weighted by overlap) | as the previous window's weight fades | 128-bit |
//! | [`SlidingLogLimiter`] | `permit_limit` per rolling window, exactly | one window after each request | a locked ring of `N` entries |
//! | [`NoopLimiter`] | everything | — | none |
//! | [`Chain`], [`DynChain`], [`PartitionedChain`] | what every limiter in the chain admits | as each limiter's do | theirs |
//! | [`Partitioned`], [`FixedPartitioned`], [`KeyedLimiter`], [`FixedKeyedLimiter`] | per key, by the key's own limiter ([`partition`]) | as that limiter's do | per key |
//!
//! Every limiter implements [`Limiter`]: [`try_acquire`](Limiter::try_acquire) returns a
//! [`Lease`] or a [`Rejection`] with a [`Reason`] and, for rate limiters, a RetryAfter.
//! Time comes from a [`Clock`]: [`ManualClock`] in tests and simulations, `StdClock` with `std`,
//! or your own.
//!
//! ```
//! use core::time::Duration;
//! use tollgate::{Limiter, ManualClock, TokenBucketLimiter, TokenBucketOptions};
//!
//! let clock = ManualClock::new();
//! let bucket =
//!     TokenBucketLimiter::with_clock(TokenBucketOptions::new(10, 2, Duration::from_secs(60)), &clock)
//!         .unwrap();
//! let _ = bucket.try_acquire(10).unwrap();
//! let denied = bucket.try_acquire(3).unwrap_err();
//! assert_eq!(denied.retry_after(), Some(Duration::from_secs(120))); // two periods for 3 tokens
//! ```
//!
//! ## How it works
//! Each limiter's admission state is one atomic word. Its rules are pure functions over the
//! unpacked word (`state` modules); a small driver runs them in a compare-and-swap loop. Nothing
//! on the acquire or release path locks or allocates, and a denial writes nothing.
//! Replenishment is computed from elapsed time on every call, exactly, without a timer.
//!
//! ## Features
//! | feature | default | gives |
//! |---|---|---|
//! | `std` | yes | `StdClock`; implies `alloc` |
//! | `alloc` | via `std` | [`OwnedLease`] and [`AcquireOwned`] |
//! | `redis` | no | `tollgate::redis`: limits shared across machines through Redis (async, tokio) |
//! | `redis-cluster` | no | the Redis limiter on a Redis Cluster |
//! | `critical-section` | no | kept for compatibility: without `std` the wait queues always use `critical-section` (interrupt-safe); this also takes atomic CAS from it on targets without CAS (automatic where there is no CAS at all) |
//! | `tracing` | no | an event (target `tollgate`) per rejection at `DEBUG`, with fields `reason` and `retry_after_ns`, and per wait queued / granted at `TRACE`: a proxy can leave `DEBUG` on and see each refused request, no event per granted one; `no_std` |
//! | `http` | no | `tollgate::http`: a tower layer of rate and concurrency policies (per key, global, per route), `RateLimit` headers, `Retry-After`; tower and `http` only |
//! | `axum` | no | `http`, with axum's `ConnectInfo` client addresses and router integration |
//! | `serde` | no | `Serialize` / `Deserialize` for every limiter's options and `QueueOrder`, durations written for people (`"1m30s"`); `no_std` |
//! | `metrics` | no | `Registry::export_metrics`: every registered limiter's statistics into the `metrics` facade (any exporter); `std` |
//! | `embassy-time` | no | `EmbassyClock`, and rate-limiter waiters woken by embassy's timer queue: `acquire(n).await` on firmware with nothing to spawn; `no_std` |
//! | `defmt` | no | `defmt::Format` for [`Reason`], [`Rejection`] (RetryAfter as nanoseconds), [`OptionsError`], [`Statistics`], [`QueueOrder`]; `no_std` |
//!
//! Without default features the crate is `no_std` without a heap and builds for
//! `thumbv6m-none-eabi`, `thumbv7em-none-eabihf` and `riscv32imc-unknown-none-elf`.
#![cfg_attr(not(any(feature = "std", test)), no_std)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "alloc")]
extern crate alloc;

#[macro_use]
mod sync;
pub mod adaptive;
mod bucket;
mod cas;
mod chain;
mod clock;
#[cfg(feature = "std")]
mod coarse_clock;
mod concurrency;
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub mod config;
mod core_common;
#[cfg(feature = "std")]
mod driver;
#[cfg(feature = "embassy-time")]
#[cfg_attr(docsrs, doc(cfg(feature = "embassy-time")))]
pub mod embassy;
// The lib's own tests link embassy-time's std driver (a program must link one time driver).
#[cfg(all(test, feature = "embassy-time"))]
use embassy_time as _;
mod fixed_window;
#[cfg(any(feature = "stream", feature = "tokio-io", feature = "futures-io"))]
#[cfg_attr(
    docsrs,
    doc(cfg(any(feature = "stream", feature = "tokio-io", feature = "futures-io")))
)]
pub mod io;
mod jitter;
mod lease;
mod limiter;
mod nanos;
mod noop;
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub mod observe;
mod options;
pub mod partition;
pub mod per;
mod queue_kind;
mod quick_path;
mod quota;
mod rate_core;
mod rate_limiter;
mod reciprocal;
#[cfg(feature = "redis")]
pub mod redis;
mod roster;
mod sliding_window;
mod state_cell;
mod stats;
mod ticks;
mod token_bucket;
mod wait;

// The algorithms of issue 15.
mod gcra;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;
mod leaky_bucket;
mod sliding_counter;
mod sliding_log;
#[cfg(feature = "std")]
mod tiers;

#[cfg(feature = "alloc")]
pub use chain::DynChain;
pub use chain::{Chain, ChainLease, EmptyChain, Leases, Links, PartitionedChain, PartitionedLinks};
#[cfg(feature = "std")]
pub use clock::StdClock;
pub use clock::{Clock, DefaultClock, Instant, ManualClock, NoClock};
#[cfg(feature = "std")]
pub use coarse_clock::CoarseClock;
pub use concurrency::{ConcurrencyLimiter, ConcurrencyOptions};
#[cfg(feature = "std")]
pub use driver::Driver;
pub use fixed_window::{FixedWindowLimiter, FixedWindowOptions};
pub use jitter::Jitter;
#[cfg(feature = "alloc")]
pub use lease::OwnedLease;
pub use lease::{
    Lease, Outcome, Reason, Rejection, Release, SettleError, Settlement, Statistics, STAMP_BITS,
};
#[cfg(feature = "alloc")]
pub use limiter::AcquireOwned;
pub use limiter::{AcquireAsync, Limiter, Peek, Replenishing};
pub use noop::NoopLimiter;
pub use options::{OptionsError, QueueOrder, UNBOUNDED_QUEUE};
pub use partition::{
    Factory, FixedKeyedLimiter, FixedLease, FixedPartitioned, NoLimitPartition, Partition,
    PartitionConfig, PartitionKind, PartitionLimiter, PartitionedAcquireAsync, PartitionedLimiter,
    WhenFull,
};
#[cfg(feature = "std")]
pub use partition::{KeyedLimiter, PartitionLease, Partitioned};
pub use queue_kind::{NoQueue, QueueKind};
pub use quota::{Quota, QuotaState};
pub use sliding_window::{SlidingWindowLimiter, SlidingWindowOptions};
pub use token_bucket::{TokenBucketLimiter, TokenBucketOptions};
#[cfg(feature = "std")]
pub use wait::DriverHandle;
pub use wait::WaitQueue;
pub use wait::{Acquire, Source};

pub use gcra::{GcraLimiter, GcraOptions};
pub use leaky_bucket::{LeakyBucketMeter, LeakyBucketOptions, LeakyBucketShaper, ShaperOptions};
pub use sliding_counter::{SlidingCounterLimiter, SlidingCounterOptions};
pub use sliding_log::{SlidingLogLimiter, SlidingLogOptions};
#[cfg(feature = "std")]
pub use tiers::{RuleLimiter, TierError, TierLease, TierRules};

/// The traits that give the limiters their methods, in one import: `use tollgate::prelude::*;`
/// makes `try_acquire`, `acquire`, `peek`, `replenish`, `quota`, `available_permits`,
/// `statistics` and the rest callable on every limiter, partitioned limiter and clock.
///
/// ```
/// use core::time::Duration;
/// use tollgate::prelude::*;
/// use tollgate::{ManualClock, TokenBucketLimiter, TokenBucketOptions};
///
/// let clock = ManualClock::new();
/// let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
/// let bucket = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
/// let _lease = bucket.try_acquire(2).unwrap();
/// assert!(bucket.peek(1).is_err());
/// assert_eq!(bucket.quota().remaining, 0);
/// clock.advance(Duration::from_secs(1));
/// assert_eq!(bucket.replenish(), 1);
/// ```
pub mod prelude {
    #[cfg(feature = "alloc")]
    pub use crate::limiter::AcquireOwned;
    pub use crate::limiter::{AcquireAsync, Limiter, Peek, Replenishing};
    pub use crate::partition::{PartitionedAcquireAsync, PartitionedLimiter};
    pub use crate::{Clock, Quota, Release};
}

/// The README's examples, compiled and run as doc tests so that the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The examples of the documents under `docs/`, run as doc tests as the README's are.
#[cfg(doctest)]
pub mod docs_doctests {
    #[doc = include_str!("../docs/limiters.md")]
    pub struct Limiters;
    #[doc = include_str!("../docs/features.md")]
    pub struct Features;
    #[doc = include_str!("../docs/dotnet.md")]
    pub struct DotNet;
    #[doc = include_str!("../docs/firmware.md")]
    pub struct Firmware;
    #[doc = include_str!("../docs/redis.md")]
    pub struct Redis;
    #[doc = include_str!("../docs/http.md")]
    pub struct Http;
    #[doc = include_str!("../docs/design.md")]
    pub struct Design;
    #[doc = include_str!("../docs/performance.md")]
    pub struct Performance;
}

/// What the loom models reach inside the crate (built with `--cfg loom` only).
#[cfg(all(loom, feature = "std"))]
#[doc(hidden)]
pub mod __loom {
    pub use crate::stats::tally::LoomTally;
}
