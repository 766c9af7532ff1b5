//! [`KeyedLimiter`]'s constructors: one per rule (token bucket, fixed window, GCRA, leaky
//! meter, sliding counter), each on the system clock, on a clock of yours, and with a hasher of
//! yours; and the table's allocation they share.

use core::marker::PhantomData;
use std::hash::RandomState;

use crossbeam_utils::CachePadded;

use super::{KeyedLimiter, Meta, Shard, SLOT_BYTES};
use crate::clock::{Clock, StdClock};
use crate::options::OptionsError;
use crate::partition::evict::{Marks, Policy};
use crate::partition::keyed_sliding::KeyedSliding;
use crate::partition::keyed_state::{KeyedBucket, KeyedGcra, KeyedRule};
use crate::partition::table::Table;
use crate::partition::PartitionConfig;
use crate::stats::Counters as Tally;
use crate::sync::{AtomicBool, AtomicU64};
use crate::wait::Lock;
use crate::{
    FixedWindowOptions, GcraOptions, LeakyBucketOptions, SlidingCounterOptions, TokenBucketOptions,
};

/// The constructors, one per rule in each of three forms: on the system clock (`@std`), on a
/// clock of yours (`@clock`), and also with a hasher of yours (`@hasher`, which makes the rule's
/// state and stores it as its [`KeyedRule`] variant); each form calls the next.
macro_rules! constructors {
    (@std $($(#[$doc:meta])* $name:ident($options:ty) => $with_clock:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(options: $options, config: PartitionConfig) -> Result<Self, OptionsError> {
            Self::$with_clock(options, config, StdClock)
        }
    )*};
    (@clock $($(#[$doc:meta])* $name:ident($options:ty) => $with_hasher:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(
            options: $options,
            config: PartitionConfig,
            clock: C,
        ) -> Result<Self, OptionsError> {
            Self::$with_hasher(options, config, clock, RandomState::new())
        }
    )*};
    (@hasher $($(#[$doc:meta])* $name:ident($options:ty) => $rule:ident($state:path);)*) => {$(
        $(#[$doc])*
        pub fn $name(
            options: $options,
            config: PartitionConfig,
            clock: C,
            hasher: S,
        ) -> Result<Self, OptionsError> {
            let state = $state(&options, clock.now())?;
            Self::build(KeyedRule::$rule(state), config, clock, hasher)
        }
    )*};
}

impl<K: ?Sized> KeyedLimiter<K> {
    constructors! {
        @std
        /// A token bucket per key, on the system clock.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// let opts = TokenBucketOptions::new(10, 10, Duration::from_secs(1));
        /// let per_ip: KeyedLimiter<std::net::IpAddr> =
        ///     KeyedLimiter::token_bucket(opts, PartitionConfig::default()).unwrap();
        /// let ip = "203.0.113.9".parse().unwrap();
        /// assert!(per_ip.try_acquire(&ip, 10).is_ok());
        /// assert!(per_ip.try_acquire(&ip, 10).is_err()); // within the same second
        /// ```
        token_bucket(TokenBucketOptions) => token_bucket_with_clock;
        /// A fixed window per key, on the system clock.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// let opts = FixedWindowOptions::new(100, Duration::from_secs(3600));
        /// let per_key: KeyedLimiter<str> = KeyedLimiter::fixed_window(opts, PartitionConfig::default()).unwrap();
        /// assert!(per_key.try_acquire("api-key-1", 100).is_ok());
        /// assert_eq!(per_key.statistics("api-key-1").available_permits, 0);
        /// assert_eq!(per_key.statistics("api-key-2").available_permits, 100);
        /// ```
        fixed_window(FixedWindowOptions) => fixed_window_with_clock;
        /// GCRA per key (governor's keyed limiter), on the system clock: one permit back every
        /// `interval`, up to `burst` at once, 16 bytes a key.
        ///
        /// ```
        /// # use tollgate::*;
        /// let per_ip: KeyedLimiter<std::net::IpAddr> =
        ///     KeyedLimiter::gcra(GcraOptions::per_second(5), PartitionConfig::default()).unwrap();
        /// let ip = "203.0.113.9".parse().unwrap();
        /// assert!(per_ip.try_acquire(&ip, 5).is_ok());
        /// assert!(per_ip.try_acquire(&ip, 1).is_err()); // the next permit comes in 200 ms
        /// ```
        gcra(GcraOptions) => gcra_with_clock;
        /// A leaky bucket as a meter per key, on the system clock.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// let opts = LeakyBucketOptions::new(4, 2, Duration::from_secs(1));
        /// let per_user: KeyedLimiter<str> = KeyedLimiter::leaky_meter(opts, PartitionConfig::default()).unwrap();
        /// assert!(per_user.try_acquire("ann", 4).is_ok());
        /// assert!(per_user.try_acquire("ann", 1).is_err()); // full: drains 2 a second
        /// ```
        leaky_meter(LeakyBucketOptions) => leaky_meter_with_clock;
        /// The sliding-window counter per key, on the system clock: `permit_limit` per rolling
        /// window, estimated as [`SlidingCounterLimiter`](crate::SlidingCounterLimiter) estimates
        /// it, 16 bytes a key. Both counts and the window index share the slot's 64 bits of state,
        /// so the limit is bounded by the window (about `√(2 × window in ns)`: 32,767 for a second,
        /// 262,143 for a minute); a larger one is refused with [`OptionsError::LimitTooLarge`],
        /// which names the largest.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// let per_user: KeyedLimiter<str> =
        ///     KeyedLimiter::sliding_counter(SlidingCounterOptions::per_minute(100), PartitionConfig::default()).unwrap();
        /// assert!(per_user.try_acquire("ann", 100).is_ok());
        /// assert!(per_user.try_acquire("ann", 1).is_err()); // the minute's 100 are taken
        /// assert!(per_user.try_acquire("bob", 1).is_ok());
        ///
        /// let too_many = SlidingCounterOptions::per_second(100_000);
        /// assert_eq!(
        ///     KeyedLimiter::<str>::sliding_counter(too_many, PartitionConfig::default()).unwrap_err(),
        ///     OptionsError::LimitTooLarge { max: 32_767 }
        /// );
        /// ```
        sliding_counter(SlidingCounterOptions) => sliding_counter_with_clock;
    }
}

impl<K: ?Sized, C: Clock> KeyedLimiter<K, C> {
    constructors! {
        @clock
        /// A token bucket per key, reading time from `clock`.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// # let clock = ManualClock::new();
        /// let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
        /// let per_user: KeyedLimiter<str, _> =
        ///     KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::new(1_000), &clock).unwrap();
        /// let _ = per_user.try_acquire("alice", 2).unwrap();
        /// assert!(per_user.try_acquire("alice", 1).is_err());
        /// clock.advance(Duration::from_secs(1)); // one token back
        /// assert!(per_user.try_acquire("alice", 1).is_ok());
        /// ```
        token_bucket_with_clock(TokenBucketOptions) => with_hasher_token_bucket;
        /// A fixed window per key, reading time from `clock`.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// let clock = ManualClock::new();
        /// let opts = FixedWindowOptions::new(3, Duration::from_secs(60));
        /// let per_user: KeyedLimiter<str, _> =
        ///     KeyedLimiter::fixed_window_with_clock(opts, PartitionConfig::default(), &clock).unwrap();
        /// let _ = per_user.try_acquire("alice", 3).unwrap();
        /// assert!(per_user.try_acquire("alice", 1).is_err());
        /// clock.advance(Duration::from_secs(60)); // the next window
        /// assert!(per_user.try_acquire("alice", 3).is_ok());
        /// ```
        fixed_window_with_clock(FixedWindowOptions) => with_hasher_fixed_window;
        /// GCRA per key, reading time from `clock`.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// let clock = ManualClock::new();
        /// let per_user: KeyedLimiter<str, _> =
        ///     KeyedLimiter::gcra_with_clock(GcraOptions::per_second(2), PartitionConfig::new(1_000), &clock).unwrap();
        /// let _ = per_user.try_acquire("alice", 2).unwrap();
        /// let refused = per_user.try_acquire("alice", 1).unwrap_err();
        /// assert_eq!(refused.retry_after(), Some(Duration::from_millis(500)));
        /// clock.advance(Duration::from_millis(500)); // one permit back
        /// assert!(per_user.try_acquire("alice", 1).is_ok());
        /// ```
        gcra_with_clock(GcraOptions) => with_hasher_gcra;
        /// A leaky bucket as a meter per key, reading time from `clock`.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// let clock = ManualClock::new();
        /// let opts = LeakyBucketOptions::new(4, 1, Duration::from_secs(1));
        /// let per_user: KeyedLimiter<str, _> =
        ///     KeyedLimiter::leaky_meter_with_clock(opts, PartitionConfig::new(1_000), &clock).unwrap();
        /// let _ = per_user.try_acquire("alice", 4).unwrap();
        /// clock.advance(Duration::from_secs(1)); // one unit drained
        /// assert!(per_user.try_acquire("alice", 1).is_ok());
        /// assert!(per_user.try_acquire("alice", 1).is_err());
        /// ```
        leaky_meter_with_clock(LeakyBucketOptions) => with_hasher_leaky_meter;
        /// The sliding-window counter per key, reading time from `clock`. Each key decides as a
        /// [`SlidingCounterLimiter`](crate::SlidingCounterLimiter) of its own, created with this
        /// limiter, would: the same grants, the same RetryAfter.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// let clock = ManualClock::new();
        /// let opts = SlidingCounterOptions::per_minute(10);
        /// let per_user: KeyedLimiter<str, _> =
        ///     KeyedLimiter::sliding_counter_with_clock(opts, PartitionConfig::new(1_000), &clock).unwrap();
        /// let _ = per_user.try_acquire("alice", 9).unwrap();
        /// clock.advance(Duration::from_secs(60)); // the next window: the 9 weigh fully
        /// let refused = per_user.try_acquire("alice", 5).unwrap_err();
        /// // 9 · (60 s - x) / 60 s + 5 ≤ 10 once x ≥ 26.67 s into the window.
        /// assert_eq!(refused.retry_after(), Some(Duration::from_nanos(26_666_666_667)));
        /// clock.advance(Duration::from_secs(45)); // 9 · 0.25 = 2.25 in the estimate
        /// assert_eq!(per_user.statistics("alice").available_permits, 7);
        /// ```
        sliding_counter_with_clock(SlidingCounterOptions) => with_hasher_sliding_counter;
    }
}

impl<K: ?Sized, C: Clock, S> KeyedLimiter<K, C, S> {
    /// The largest [`PartitionConfig::capacity`] a keyed limiter accepts: its tables (16 bytes
    /// a slot, `4/3` slot per key, in up to 64 shards) must fit in the address space. A larger
    /// capacity is refused with [`OptionsError::CapacityTooLarge`]; one the allocator cannot
    /// satisfy, with [`OptionsError::OutOfMemory`] — never an abort.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let opts = TokenBucketOptions::new(5, 1, Duration::from_secs(1));
    /// let too_many = PartitionConfig::new(usize::MAX);
    /// let max = KeyedLimiter::<str>::MAX_CAPACITY;
    /// assert_eq!(
    ///     KeyedLimiter::<str>::token_bucket(opts, too_many).unwrap_err(),
    ///     OptionsError::CapacityTooLarge { max }
    /// );
    /// ```
    pub const MAX_CAPACITY: usize = (isize::MAX as usize / SLOT_BYTES - 256) / 4 * 3;

    constructors! {
        @hasher
        /// A token bucket per key, reading time from `clock` and fingerprinting keys with `hasher`.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// use std::collections::hash_map::DefaultHasher;
        /// use std::hash::BuildHasherDefault;
        ///
        /// // Unkeyed fingerprints, the same in every run: fine for keys the clients do not choose.
        /// let hasher = BuildHasherDefault::<DefaultHasher>::default();
        /// let clock = ManualClock::new();
        /// let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
        /// let per_device: KeyedLimiter<u64, _, _> =
        ///     KeyedLimiter::with_hasher_token_bucket(opts, PartitionConfig::default(), &clock, hasher).unwrap();
        /// assert!(per_device.try_acquire(&42, 2).is_ok());
        /// assert!(per_device.try_acquire(&42, 1).is_err());
        /// ```
        with_hasher_token_bucket(TokenBucketOptions) => Bucket(KeyedBucket::token_bucket);
        /// A fixed window per key, reading time from `clock` and fingerprinting keys with `hasher`.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// use std::collections::hash_map::DefaultHasher;
        /// use std::hash::BuildHasherDefault;
        ///
        /// // Unkeyed fingerprints, the same in every run: fine for keys the clients do not choose.
        /// let hasher = BuildHasherDefault::<DefaultHasher>::default();
        /// let clock = ManualClock::new();
        /// let opts = FixedWindowOptions::new(5, Duration::from_secs(60));
        /// let per_device: KeyedLimiter<u64, _, _> =
        ///     KeyedLimiter::with_hasher_fixed_window(opts, PartitionConfig::default(), &clock, hasher).unwrap();
        /// assert!(per_device.try_acquire(&42, 5).is_ok());
        /// assert_eq!(per_device.statistics(&42).available_permits, 0);
        /// ```
        with_hasher_fixed_window(FixedWindowOptions) => Bucket(KeyedBucket::fixed_window);
        /// GCRA per key, reading time from `clock` and fingerprinting keys with `hasher`.
        ///
        /// ```
        /// # use std::hash::{BuildHasherDefault, DefaultHasher};
        /// # use tollgate::*;
        /// let hasher = BuildHasherDefault::<DefaultHasher>::default();
        /// let per_device: KeyedLimiter<u64, _, _> =
        ///     KeyedLimiter::with_hasher_gcra(GcraOptions::per_second(3), PartitionConfig::default(), ManualClock::new(), hasher).unwrap();
        /// assert!(per_device.try_acquire(&42, 3).is_ok());
        /// assert_eq!(per_device.statistics(&42).available_permits, 0);
        /// ```
        with_hasher_gcra(GcraOptions) => Gcra(KeyedGcra::gcra);
        /// A leaky bucket as a meter per key, reading time from `clock` and fingerprinting keys
        /// with `hasher`.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use std::hash::{BuildHasherDefault, DefaultHasher};
        /// # use tollgate::*;
        /// let hasher = BuildHasherDefault::<DefaultHasher>::default();
        /// let opts = LeakyBucketOptions::new(2, 1, Duration::from_secs(1));
        /// let per_device: KeyedLimiter<u64, _, _> =
        ///     KeyedLimiter::with_hasher_leaky_meter(opts, PartitionConfig::default(), ManualClock::new(), hasher).unwrap();
        /// assert!(per_device.try_acquire(&42, 2).is_ok());
        /// assert!(per_device.try_acquire(&42, 1).is_err());
        /// ```
        with_hasher_leaky_meter(LeakyBucketOptions) => Gcra(KeyedGcra::leaky_meter);
        /// The sliding-window counter per key, reading time from `clock` and fingerprinting keys
        /// with `hasher`.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use std::hash::{BuildHasherDefault, DefaultHasher};
        /// # use tollgate::*;
        /// let hasher = BuildHasherDefault::<DefaultHasher>::default();
        /// let opts = SlidingCounterOptions::per_second(3);
        /// let per_device: KeyedLimiter<u64, _, _> =
        ///     KeyedLimiter::with_hasher_sliding_counter(opts, PartitionConfig::default(), ManualClock::new(), hasher).unwrap();
        /// assert!(per_device.try_acquire(&42, 3).is_ok());
        /// assert_eq!(per_device.statistics(&42).available_permits, 0);
        /// ```
        with_hasher_sliding_counter(SlidingCounterOptions) => Sliding(KeyedSliding::new);
    }

    fn build(
        bucket: KeyedRule,
        config: PartitionConfig,
        clock: C,
        hasher: S,
    ) -> Result<Self, OptionsError> {
        if !bucket.fits_64() {
            return Err(OptionsError::RateTooHigh);
        }
        if config.capacity > Self::MAX_CAPACITY {
            return Err(OptionsError::CapacityTooLarge {
                max: Self::MAX_CAPACITY,
            });
        }
        let capacity = config.capacity.max(1);
        let n = if config.shards == 0 {
            (capacity / 4096).clamp(1, 64)
        } else {
            config.shards.clamp(1, 64)
        };
        let cap = capacity.div_ceil(n);
        // At most 3/4 full: short probes, and always an empty slot to end them.
        let slots = cap + cap / 3 + 1;
        let policy = Policy::new(&config, (cap / 16).max(1));
        let marks = Marks::new(clock.now().as_nanos(), &policy);
        let mut shards = Vec::new();
        let out_of_memory = OptionsError::OutOfMemory {
            bytes: n.saturating_mul(slots).saturating_mul(SLOT_BYTES),
        };
        shards.try_reserve_exact(n).map_err(|_| out_of_memory)?;
        for _ in 0..n {
            shards.push(CachePadded::new(Shard {
                table: Table::new(slots).ok_or(out_of_memory)?,
                cap,
                meta: Lock::new(Meta { len: 0, marks }),
                next_sweep: AtomicU64::new(marks.next_sweep),
                rejected_full: AtomicU64::new(0),
            }));
        }
        let shards = shards.into_boxed_slice();
        Ok(Self {
            shards,
            bucket,
            clock,
            hasher,
            policy,
            max_tick: CachePadded::new(AtomicU64::new(0)),
            tally: Tally::new(),
            closed: AtomicBool::new(false),
            _key: PhantomData,
        })
    }
}
