//! Partitioned limiters (.NET's `PartitionedRateLimiter.Create`): one limiter per key, created on
//! first use, bounded in number, evicted when idle — without a timer.
//!
//! A *partition function* maps each request's resource to a [`Partition`]: a key and the
//! [`Factory`] that makes the key's limiter (a [`PartitionKind`] — concurrency, token bucket,
//! fixed or sliding window, or no limit — or your own closure). The limiter of a key is created
//! the first time the key is seen, exactly once even when many threads see it together, and each
//! request goes to its key's limiter.
//!
//! | type | stores | per key | waiting | needs |
//! |---|---|---|---|---|
//! | [`Partitioned`] | a full limiter per key (any kind, per-key statistics) in a sharded, growable map | ~625 B measured for a [`PartitionLimiter`] (512 bytes whatever its kind, counting compactly, in an `Arc`, and the map's entry); ~290 B for a map of one limiter type, e.g. `Partitioned<K, TokenBucketLimiter>` | yes | `std` |
//! | [`KeyedLimiter`] | a token bucket's, fixed window's, GCRA's, leaky meter's or sliding counter's state per key, 64 bits, beside the key's fingerprint, in a fixed lock-free table (options, clock and counters shared) | 16 bytes a slot, ~21 bytes per key of capacity | no | `std` |
//! | [`FixedPartitioned`] | a full limiter per key in a fixed-capacity `heapless` map | the limiter, inline | no | nothing (no heap) |
//! | [`FixedKeyedLimiter`] | a state word per key in a fixed-capacity `heapless` map | the key + 16 bytes | no | nothing (no heap) |
//!
//! # Better than .NET
//! - **Bounded.** Every partitioned limiter has a capacity ([`PartitionConfig::capacity`]) and a
//!   policy for a new key when it is full ([`WhenFull`]). A request rejected for capacity gets
//!   [`Reason::PartitionsFull`](crate::Reason::PartitionsFull) and **never inserts** its key.
//! - **No timer.** A partition idle (by its limiter's
//!   [`idle_duration`](crate::Limiter::idle_duration)) for longer than
//!   [`PartitionConfig::idle_timeout`] (default 10 s, as .NET) is evicted lazily, by the calls
//!   that happen anyway: each shard remembers the earliest instant any of its partitions can pass
//!   the timeout, and sweeps itself on the first call after it. Replenishment is exact and lazy,
//!   so there is no 100 ms heartbeat either.
//! - **Leases outlive eviction.** A lease keeps its partition's limiter alive ([`Partitioned`]
//!   holds them in `Arc`s), and a partition whose permits are held is not idle, so it is never
//!   evicted from under its leases.
//! - **Statistics do not insert.** [`statistics`](PartitionedLimiter::statistics) for a key not
//!   stored reports a fresh limiter's statistics without storing one.
//!
//! # Why evicting an idle partition is safe
//! An idle limiter — fully available, nothing queued, nothing to replenish — behaves exactly as a
//! fresh one would: a token bucket is full, a window is empty, a concurrency limiter has every
//! permit. So evicting an idle partition changes no decision; only its counters restart. That is
//! what makes [`WhenFull::EvictIdle`] the default: when the limiter is full, a new key takes the
//! place of the partition idle the longest, and is refused only when every partition is in use —
//! exactly when admitting it would require forgetting some client's live state.

/// The body of the [`PartitionedLimiter`] impl of a type that has the trait's methods as
/// inherent methods of the same names: its lease type, and methods that call `$ty`'s own, for
/// resources of type `$r`.
macro_rules! partitioned_by_inherent {
    (
        $ty:ident, $r:ty, type Lease<$a:lifetime> = $lease:ty
        $(; settle: |$s:ident, $res:ident, $l:ident, $n:ident| $settle:expr)?
    ) => {
        type Lease<$a>
            = $lease
        where
            Self: $a;

        $(
            fn settle<'s>(
                &'s self,
                resource: &$r,
                lease: &mut Self::Lease<'s>,
                actual: u32,
            ) -> Result<(), crate::lease::SettleError> {
                let ($s, $res, $l, $n) = (self, resource, lease, actual);
                $settle
            }
        )?

        fn try_acquire(&self, resource: &$r, permits: u32) -> Result<Self::Lease<'_>, Rejection> {
            $ty::try_acquire(self, resource, permits)
        }

        fn statistics(&self, resource: &$r) -> Statistics {
            $ty::statistics(self, resource)
        }

        fn close(&self) {
            $ty::close(self)
        }

        fn is_closed(&self) -> bool {
            $ty::is_closed(self)
        }
    };
}

mod evict;
mod fixed;
#[cfg(feature = "std")]
mod keyed;
#[cfg(feature = "std")]
mod keyed_sliding;
mod keyed_state;
mod kind;
#[cfg(feature = "std")]
mod map;
#[cfg(feature = "std")]
mod shards;
#[cfg(feature = "std")]
mod table;

use core::future::Future;
use core::time::Duration;

use crate::lease::{Rejection, Statistics};

pub use fixed::{FixedKeyedLimiter, FixedLease, FixedPartitioned};
#[cfg(feature = "std")]
pub use keyed::KeyedLimiter;
#[cfg(feature = "http")]
pub(crate) use kind::Kind;
#[cfg(feature = "http")]
pub(crate) use kind::{Compact, Member, Visit};
pub use kind::{NoLimitPartition, PartitionKind, PartitionLimiter};
#[cfg(feature = "std")]
pub use map::{PartitionLease, Partitioned};

/// A limiter of requests for resources of type `R`, each resource limited by its own partition
/// (.NET `PartitionedRateLimiter<TResource>`).
///
/// Implemented by [`Partitioned`], [`KeyedLimiter`], [`FixedPartitioned`], [`FixedKeyedLimiter`]
/// and [`PartitionedChain`](crate::PartitionedChain).
///
/// ```
/// use core::time::Duration;
/// use tollgate::*;
///
/// /// Admits a request for `resource`, whatever partitioned limiter guards it.
/// fn admit<R: ?Sized, P: PartitionedLimiter<R>>(limiter: &P, resource: &R) -> bool {
///     limiter.try_acquire(resource, 1).is_ok()
/// }
///
/// let per_user: KeyedLimiter<str> =
///     KeyedLimiter::fixed_window(FixedWindowOptions::new(1, Duration::from_secs(60)), PartitionConfig::default())
///         .unwrap();
/// assert!(admit(&per_user, "alice"));
/// assert!(!admit(&per_user, "alice"));
/// assert!(admit(&per_user, "bob"));
/// ```
pub trait PartitionedLimiter<R: ?Sized> {
    /// What a granted request holds.
    type Lease<'a>
    where
        Self: 'a;

    /// Takes `permits` from `resource`'s partition now, without waiting.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let per_user: KeyedLimiter<str> =
    ///     KeyedLimiter::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60)), PartitionConfig::default())
    ///         .unwrap();
    /// assert!(PartitionedLimiter::try_acquire(&per_user, "alice", 2).is_ok());
    /// let refused = PartitionedLimiter::try_acquire(&per_user, "alice", 1).unwrap_err();
    /// assert_eq!(refused.reason(), Reason::Exhausted);
    /// assert!(PartitionedLimiter::try_acquire(&per_user, "bob", 1).is_ok()); // another partition
    /// ```
    fn try_acquire(&self, resource: &R, permits: u32) -> Result<Self::Lease<'_>, Rejection>;

    /// Settles `lease`, granted for `resource` by this limiter, to `actual` permits (see
    /// [`Lease::settle`](crate::Lease::settle)): a refund of what it took beyond `actual`, or
    /// a debit of the extra. [`Partitioned`]'s leases settle with their partition,
    /// [`KeyedLimiter`]'s through the limiter and the key, a
    /// [`PartitionedChain`](crate::PartitionedChain)'s in every link; the default (and
    /// [`FixedPartitioned`], [`FixedKeyedLimiter`]) changes nothing and answers
    /// [`SettleError::Unsupported`](crate::SettleError::Unsupported).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let opts = TokenBucketOptions::new(1_000, 1_000, Duration::from_secs(60));
    /// let per_tenant: KeyedLimiter<str> = KeyedLimiter::token_bucket(opts, PartitionConfig::default()).unwrap();
    /// let mut lease = PartitionedLimiter::try_acquire(&per_tenant, "acme", 800).unwrap();
    /// PartitionedLimiter::settle(&per_tenant, "acme", &mut lease, 100).unwrap();
    /// assert_eq!(per_tenant.statistics("acme").available_permits, 900);
    /// ```
    fn settle<'s>(
        &'s self,
        resource: &R,
        lease: &mut Self::Lease<'s>,
        actual: u32,
    ) -> Result<(), crate::lease::SettleError> {
        let _ = (resource, lease, actual);
        Err(crate::lease::SettleError::Unsupported)
    }

    /// A snapshot of `resource`'s partition's counters (a fresh partition's, if it has none yet).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let per_user: KeyedLimiter<str> =
    ///     KeyedLimiter::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60)), PartitionConfig::default())
    ///         .unwrap();
    /// let _ = per_user.try_acquire("alice", 1).unwrap();
    /// assert_eq!(PartitionedLimiter::statistics(&per_user, "alice").available_permits, 1);
    /// assert_eq!(PartitionedLimiter::statistics(&per_user, "carol").available_permits, 2);
    /// assert_eq!(per_user.len(), 1); // asking about carol stored nothing
    /// ```
    fn statistics(&self, resource: &R) -> Statistics;

    /// Closes the limiter and every partition in it: later requests are rejected with
    /// [`Reason::Closed`](crate::Reason::Closed).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let per_user: KeyedLimiter<str> =
    ///     KeyedLimiter::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60)), PartitionConfig::default())
    ///         .unwrap();
    /// PartitionedLimiter::close(&per_user); // shutting down
    /// let refused = per_user.try_acquire("alice", 1).unwrap_err();
    /// assert_eq!(refused.reason(), Reason::Closed);
    /// ```
    fn close(&self);

    /// Whether [`close`](PartitionedLimiter::close) has been called.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let per_user: KeyedLimiter<str> =
    ///     KeyedLimiter::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60)), PartitionConfig::default())
    ///         .unwrap();
    /// assert!(!PartitionedLimiter::is_closed(&per_user));
    /// per_user.close();
    /// assert!(PartitionedLimiter::is_closed(&per_user));
    /// ```
    fn is_closed(&self) -> bool;
}

/// Waiting on a partitioned limiter: [`acquire`](PartitionedAcquireAsync::acquire) waits in the
/// queue of `resource`'s partition, with the guarantees of [`AcquireAsync`](crate::AcquireAsync)
/// (cancellation-safe: dropping the future leaves the queue and gives back anything granted).
///
/// Implemented by [`Partitioned`] (each partition's own queue), [`KeyedLimiter`] (which has no
/// queue: its `acquire` is its `try_acquire`, as a .NET limiter with a queue limit of 0), and
/// [`PartitionedChain`](crate::PartitionedChain) (each limiter in turn, all or nothing). The
/// heapless [`FixedPartitioned`] and [`FixedKeyedLimiter`] do not wait.
///
/// ```
/// use core::time::Duration;
/// use tollgate::*;
/// # fn block_on<F: core::future::Future>(f: F) -> F::Output {
/// #     let mut f = core::pin::pin!(f);
/// #     let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
/// #     loop { if let core::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// /// Waits for one permit for `user`, whatever partitioned limiter guards it.
/// async fn admit<P: PartitionedAcquireAsync<str>>(limiter: &P, user: &str) -> bool {
///     limiter.acquire(user, 1).await.is_ok()
/// }
///
/// let per_user: KeyedLimiter<str> =
///     KeyedLimiter::fixed_window(FixedWindowOptions::new(1, Duration::from_secs(60)), PartitionConfig::default())
///         .unwrap();
/// assert!(block_on(admit(&per_user, "alice")));
/// assert!(!block_on(admit(&per_user, "alice"))); // no queue: refused at once
/// ```
pub trait PartitionedAcquireAsync<R: ?Sized>: PartitionedLimiter<R> {
    /// Waits for `permits` in `resource`'s partition.
    ///
    /// ```
    /// use tollgate::*;
    /// # fn block_on<F: core::future::Future>(f: F) -> F::Output {
    /// #     let mut f = core::pin::pin!(f);
    /// #     let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
    /// #     loop { if let core::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
    /// # }
    /// let kind = PartitionKind::concurrency(ConcurrencyOptions::new(1)).unwrap();
    /// let per_user = Partitioned::new(move |user: &str| Partition::new(user.to_owned(), kind), PartitionConfig::default());
    /// let lease = block_on(PartitionedAcquireAsync::acquire(&per_user, "alice", 1)).unwrap();
    /// assert_eq!(lease.permits(), 1);
    /// assert_eq!(per_user.statistics("alice").available_permits, 0);
    /// ```
    fn acquire<'a>(
        &'a self,
        resource: &'a R,
        permits: u32,
    ) -> impl Future<Output = Result<Self::Lease<'a>, Rejection>> + 'a;
}

impl<R: ?Sized, P: PartitionedAcquireAsync<R> + ?Sized> PartitionedAcquireAsync<R> for &P {
    fn acquire<'a>(
        &'a self,
        resource: &'a R,
        permits: u32,
    ) -> impl Future<Output = Result<Self::Lease<'a>, Rejection>> + 'a {
        (**self).acquire(resource, permits)
    }
}

impl<R: ?Sized, P: PartitionedLimiter<R> + ?Sized> PartitionedLimiter<R> for &P {
    type Lease<'a>
        = P::Lease<'a>
    where
        Self: 'a;

    fn try_acquire(&self, resource: &R, permits: u32) -> Result<Self::Lease<'_>, Rejection> {
        (**self).try_acquire(resource, permits)
    }
    fn settle<'s>(
        &'s self,
        resource: &R,
        lease: &mut Self::Lease<'s>,
        actual: u32,
    ) -> Result<(), crate::lease::SettleError> {
        (**self).settle(resource, lease, actual)
    }
    fn statistics(&self, resource: &R) -> Statistics {
        (**self).statistics(resource)
    }
    fn close(&self) {
        (**self).close()
    }
    fn is_closed(&self) -> bool {
        (**self).is_closed()
    }
}

/// What a partition function returns for a resource: the key of its partition and how to make
/// the partition's limiter (.NET `RateLimitPartition<TKey>`).
///
/// ```
/// use core::time::Duration;
/// use tollgate::*;
///
/// let per_ip = PartitionKind::token_bucket(TokenBucketOptions::new(10, 1, Duration::from_secs(1))).unwrap();
/// let partition = |ip: &std::net::IpAddr| {
///     if ip.is_loopback() { Partition::no_limit(*ip) } else { Partition::new(*ip, per_ip) }
/// };
/// let p = partition(&"127.0.0.1".parse().unwrap());
/// assert_eq!(p.factory, PartitionKind::NO_LIMIT);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Partition<K, F = PartitionKind> {
    /// The partition's key: requests with equal keys share one limiter.
    pub key: K,
    /// Makes the key's limiter, once, when the key is first seen.
    pub factory: F,
}

impl<K, F> Partition<K, F> {
    /// The partition `key`, whose limiter `factory` makes.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let free = PartitionKind::fixed_window(FixedWindowOptions::new(10, Duration::from_secs(60))).unwrap();
    /// let p = Partition::new("tenant-1", free);
    /// assert_eq!((p.key, p.factory), ("tenant-1", free));
    /// ```
    pub const fn new(key: K, factory: F) -> Self {
        Self { key, factory }
    }
}

impl<K> Partition<K> {
    /// The partition `key` with no limit (.NET `RateLimitPartition.GetNoLimiter`).
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let internal = Partition::no_limit("health-check");
    /// assert_eq!(internal.factory, PartitionKind::NO_LIMIT);
    /// assert!(internal.factory.limiter(ManualClock::new()).try_acquire(1_000).is_ok());
    /// ```
    pub const fn no_limit(key: K) -> Self {
        Self::new(key, PartitionKind::NO_LIMIT)
    }
}

/// Makes a partition's limiter, given its key and the partitioned limiter's clock (.NET's
/// partition factory, `Func<TKey, RateLimiter>`).
///
/// Implemented by [`PartitionKind`] and by every closure `FnOnce(&K, &C) -> L`:
///
/// ```
/// use tollgate::*;
///
/// let factory = |_key: &u32, clock: &ManualClock| {
///     let _now = clock.now();
///     NoopLimiter::new()
/// };
/// let limiter = Factory::create(factory, &7, &ManualClock::new());
/// # let _: NoopLimiter = limiter;
/// ```
///
/// The factory runs once per key. In a [`Partitioned`] limiter it runs under no lock, as in .NET:
/// a slow factory (one that loads the key's quota from a database, say) delays only the callers
/// of its own key, which wait for it; other keys are served meanwhile, and the factory may call
/// the partitioned limiter for another key. In the heapless [`FixedPartitioned`], whose
/// partitions live inline in its one locked table, it runs under that lock: keep it cheap there,
/// and do not call the limiter from it.
pub trait Factory<K, C> {
    /// The limiter made.
    type Limiter;

    /// Makes the limiter of partition `key`.
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// // A quota per tenant, from the tenant's plan.
    /// let plan = |tenant: &&str, _clock: &ManualClock| {
    ///     let limit = if tenant.starts_with("pro-") { 100 } else { 10 };
    ///     ConcurrencyLimiter::new(ConcurrencyOptions::new(limit)).unwrap()
    /// };
    /// let limiter = plan.create(&"pro-acme", &ManualClock::new());
    /// assert_eq!(limiter.available_permits(), 100);
    /// ```
    fn create(self, key: &K, clock: &C) -> Self::Limiter;
}

impl<K, C, L, F: FnOnce(&K, &C) -> L> Factory<K, C> for F {
    type Limiter = L;

    fn create(self, key: &K, clock: &C) -> L {
        self(key, clock)
    }
}

/// What a full partitioned limiter does with a request for a key it does not hold.
///
/// Either way, a request refused for capacity is rejected with
/// [`Reason::PartitionsFull`](crate::Reason::PartitionsFull) and inserts nothing.
///
/// ```
/// use core::time::Duration;
/// use tollgate::*;
///
/// let clock = ManualClock::new();
/// let opts = FixedWindowOptions::new(1, Duration::from_secs(1));
/// for when_full in [WhenFull::Reject, WhenFull::EvictIdle] {
///     let config = PartitionConfig::new(1).with_when_full(when_full);
///     let l: FixedKeyedLimiter<u8, _, 2> = FixedKeyedLimiter::fixed_window(opts, config, &clock).unwrap();
///     let _ = l.try_acquire(&1, 1).unwrap();
///     clock.advance(Duration::from_secs(2)); // key 1's window has reset: it is idle
///     // A full limiter and a new key: refused, or key 1 makes way.
///     assert_eq!(l.try_acquire(&2, 1).is_ok(), when_full == WhenFull::EvictIdle);
/// }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WhenFull {
    /// Refuse new keys until partitions pass the idle timeout and are evicted.
    Reject,
    /// Evict the partitions idle the longest to make room; refuse only if none is idle (the
    /// default). An idle partition behaves exactly as a fresh one, so this never weakens a limit
    /// (see the [module docs](crate::partition)).
    #[default]
    EvictIdle,
}

/// The bounds of a partitioned limiter: how many partitions it holds, what it does when full,
/// and when an idle partition is evicted.
///
/// ```
/// use core::time::Duration;
/// use tollgate::{PartitionConfig, WhenFull};
///
/// let config = PartitionConfig::new(50_000)
///     .with_when_full(WhenFull::Reject)
///     .with_idle_timeout(Duration::from_secs(60));
/// assert_eq!(config.capacity, 50_000);
/// assert_eq!(PartitionConfig::default().idle_timeout, Duration::from_secs(10));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct PartitionConfig {
    /// The most partitions stored at once (at least 1). The fixed-capacity limiters hold at most
    /// their const capacity `N` whatever this says. The sharded ones divide it among their shards,
    /// so a new key can find its shard full a little before the whole limiter is (about
    /// `1 / sqrt(capacity / shards)` before: 1% for a million keys in 64 shards). A
    /// [`KeyedLimiter`] allocates its table for the whole capacity when it is made.
    pub capacity: usize,
    /// What a full limiter does with a new key.
    pub when_full: WhenFull,
    /// A partition idle for longer than this is evicted (default 10 s, as .NET's).
    pub idle_timeout: Duration,
    /// Shards of the growable maps (0: chosen from the capacity, at most 64).
    pub shards: usize,
}

impl PartitionConfig {
    /// The default capacity: 100,000 partitions. That is a [`KeyedLimiter`] of 2.1 MB (its
    /// table, allocated at construction) and at most about 62 MB of [`Partitioned`] limiters
    /// of any built-in kind (~625 B a [`PartitionLimiter`] partition, measured: 200,000 new
    /// keys filling a full table grew the resident set by 60 MiB; ~290 B a partition of one
    /// rate limiter type), and more distinct clients than most single
    /// servers see within one idle timeout.
    /// Raise it when yours see more.
    ///
    /// ```
    /// use tollgate::PartitionConfig;
    ///
    /// assert_eq!(PartitionConfig::default().capacity, PartitionConfig::DEFAULT_CAPACITY);
    /// let bigger = PartitionConfig::new(4 * PartitionConfig::DEFAULT_CAPACITY);
    /// assert_eq!(bigger.capacity, 400_000);
    /// ```
    pub const DEFAULT_CAPACITY: usize = 100_000;

    /// The default idle timeout: 10 seconds, as .NET's.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::PartitionConfig;
    ///
    /// assert_eq!(PartitionConfig::DEFAULT_IDLE_TIMEOUT, Duration::from_secs(10));
    /// assert_eq!(PartitionConfig::new(1_000).idle_timeout, PartitionConfig::DEFAULT_IDLE_TIMEOUT);
    /// ```
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

    /// At most `capacity` partitions, evicting idle ones when full, idle timeout 10 s.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{PartitionConfig, WhenFull};
    ///
    /// let config = PartitionConfig::new(10_000);
    /// assert_eq!(config.capacity, 10_000);
    /// assert_eq!(config.when_full, WhenFull::EvictIdle);
    /// assert_eq!((config.idle_timeout, config.shards), (Duration::from_secs(10), 0));
    /// ```
    pub const fn new(capacity: usize) -> Self {
        Self {
            capacity,
            when_full: WhenFull::EvictIdle,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            shards: 0,
        }
    }

    /// The same configuration with `when_full`.
    ///
    /// ```
    /// use tollgate::{PartitionConfig, WhenFull};
    ///
    /// let config = PartitionConfig::new(10_000).with_when_full(WhenFull::Reject);
    /// assert_eq!(config.when_full, WhenFull::Reject);
    /// assert_eq!(config.capacity, 10_000); // the rest is kept
    /// ```
    pub const fn with_when_full(self, when_full: WhenFull) -> Self {
        Self { when_full, ..self }
    }

    /// The same configuration with `idle_timeout`.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::PartitionConfig;
    ///
    /// // Keep a client's state for a minute of silence (a 60 s window must outlive it).
    /// let config = PartitionConfig::new(10_000).with_idle_timeout(Duration::from_secs(60));
    /// assert_eq!(config.idle_timeout, Duration::from_secs(60));
    /// assert_eq!(config.capacity, 10_000);
    /// ```
    pub const fn with_idle_timeout(self, idle_timeout: Duration) -> Self {
        Self {
            idle_timeout,
            ..self
        }
    }

    /// The same configuration with `shards` shards (0: automatic).
    ///
    /// ```
    /// use tollgate::{PartitionConfig, WhenFull};
    ///
    /// let config = PartitionConfig::new(10_000).with_shards(8);
    /// assert_eq!(config.shards, 8);
    /// assert_eq!(config.when_full, WhenFull::EvictIdle);
    /// ```
    pub const fn with_shards(self, shards: usize) -> Self {
        Self { shards, ..self }
    }

    fn timeout_ns(&self) -> u64 {
        crate::ticks::nanos_of(self.idle_timeout).unwrap_or(u64::MAX)
    }
}

impl Default for PartitionConfig {
    fn default() -> Self {
        Self::new(Self::DEFAULT_CAPACITY)
    }
}
