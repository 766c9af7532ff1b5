//! The built-in partition kinds ([`PartitionKind`]) and the limiter they make
//! ([`PartitionLimiter`]).

use core::time::Duration;

use crate::clock::{Clock, Instant};
use crate::concurrency::{ConcurrencyLimiter, ConcurrencyOptions};
use crate::fixed_window::FixedWindowOptions;
use crate::gcra::GcraOptions;
use crate::leaky_bucket::{LeakyBucketOptions, ShaperOptions};
use crate::lease::{Lease, Rejection, Release, Statistics};
use crate::limiter::{Limiter, Replenishing};
use crate::noop::NoopLimiter;
use crate::options::{OptionsError, QueueOrder};
use crate::sliding_counter::SlidingCounterOptions;
use crate::sliding_log::{SlidingLogLimiter, SlidingLogOptions};
use crate::sliding_window::SlidingWindowOptions;
use crate::stats::Counters;
use crate::sync::{AtomicU64, Ordering};
use crate::token_bucket::TokenBucketOptions;
use crate::wait::{self, LockedTake, Source, WaitQueue};

use super::Factory;

/// A built-in partition kind with validated options: the factory of a [`PartitionLimiter`]
/// (.NET's `RateLimitPartition.Get…Limiter` helpers).
///
/// Options are checked once, when the kind is made, so creating a partition's limiter cannot
/// fail. Unlike .NET's helpers there is no `AutoReplenishment` to force off: every limiter here
/// replenishes lazily from its clock.
///
/// ```
/// use core::time::Duration;
/// use tollgate::*;
///
/// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(100, Duration::from_secs(60))).unwrap();
/// assert_eq!(
///     PartitionKind::fixed_window(FixedWindowOptions::new(0, Duration::from_secs(60))),
///     Err(OptionsError::ZeroLimit)
/// );
/// let limiter = kind.limiter(ManualClock::new());
/// assert_eq!(limiter.available_permits(), 100);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PartitionKind(Kind);

impl PartitionKind {
    /// The kind and its options.
    #[cfg(feature = "http")]
    pub(crate) const fn kind(&self) -> Kind {
        self.0
    }

    /// No limit: the partition's limiter grants everything (a [`NoopLimiter`] that remembers its
    /// last use, so that the partition can be evicted by it — the .NET 11 rule).
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let limiter = PartitionKind::NO_LIMIT.limiter(ManualClock::new());
    /// assert!(matches!(limiter, PartitionLimiter::NoLimit(_)));
    /// assert!(limiter.try_acquire(u32::MAX).is_ok());
    /// ```
    pub const NO_LIMIT: Self = Self(Kind::NoLimit);

    /// Makes a limiter of this kind on `clock`.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let kind = PartitionKind::token_bucket(TokenBucketOptions::new(3, 1, Duration::from_secs(1))).unwrap();
    /// // Each call makes a fresh, independent limiter.
    /// let (alice, bob) = (kind.limiter(ManualClock::new()), kind.limiter(ManualClock::new()));
    /// let _ = alice.try_acquire(3).unwrap();
    /// assert_eq!(alice.available_permits(), 0);
    /// assert_eq!(bob.available_permits(), 3);
    /// ```
    pub fn limiter<C: Clock>(&self, clock: C) -> PartitionLimiter<C> {
        let limiter = self.make(clock);
        limiter.compact();
        limiter
    }
}

/// The constructors of the limited kinds: `name(Variant(Options), validate's arguments)` checks
/// the options and wraps them in that [`Kind`] variant.
macro_rules! kinds {
    ($($(#[$doc:meta])* $name:ident($variant:ident($opts:ty) $(, $arg:expr)?);)+) => {
        impl PartitionKind {$(
            $(#[$doc])*
            pub fn $name(options: $opts) -> Result<Self, OptionsError> {
                options.validate($($arg)?)?;
                Ok(Self(Kind::$variant(options)))
            }
        )+}
    };
}

kinds! {
    /// A [`ConcurrencyLimiter`] per partition.
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let kind = PartitionKind::concurrency(ConcurrencyOptions::new(4)).unwrap();
    /// let limiter = kind.limiter(ManualClock::new());
    /// let lease = limiter.try_acquire(4).unwrap();
    /// assert_eq!(limiter.available_permits(), 0);
    /// drop(lease); // a concurrency partition gets its permits back
    /// assert_eq!(limiter.available_permits(), 4);
    /// assert!(PartitionKind::concurrency(ConcurrencyOptions::new(0)).is_err());
    /// ```
    concurrency(Concurrency(ConcurrencyOptions));

    /// A [`TokenBucketLimiter`](crate::TokenBucketLimiter) per partition.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let kind = PartitionKind::token_bucket(TokenBucketOptions::new(2, 1, Duration::from_secs(1))).unwrap();
    /// let limiter = kind.limiter(&clock);
    /// let _ = limiter.try_acquire(2).unwrap();
    /// assert!(limiter.try_acquire(1).is_err());
    /// clock.advance(Duration::from_secs(1)); // one token back
    /// assert!(limiter.try_acquire(1).is_ok());
    /// ```
    token_bucket(TokenBucket(TokenBucketOptions));

    /// A [`FixedWindowLimiter`](crate::FixedWindowLimiter) per partition.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(5, Duration::from_secs(60))).unwrap();
    /// let limiter = kind.limiter(&clock);
    /// let _ = limiter.try_acquire(5).unwrap();
    /// assert!(limiter.try_acquire(1).is_err());
    /// clock.advance(Duration::from_secs(60)); // a new window
    /// assert_eq!(limiter.available_permits(), 5);
    /// ```
    fixed_window(FixedWindow(FixedWindowOptions));

    /// A [`SlidingWindowLimiter`](crate::SlidingWindowLimiter) (16 segments at most) per partition.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let opts = SlidingWindowOptions::new(10, Duration::from_secs(60), 6);
    /// let kind = PartitionKind::sliding_window(opts).unwrap();
    /// assert_eq!(kind.limiter(ManualClock::new()).available_permits(), 10);
    /// let too_fine = SlidingWindowOptions::new(10, Duration::from_secs(60), 17);
    /// assert_eq!(PartitionKind::sliding_window(too_fine), Err(OptionsError::TooManySegments { max: 16 }));
    /// ```
    sliding_window(SlidingWindow(SlidingWindowOptions), 16);

    /// A [`GcraLimiter`](crate::GcraLimiter) per partition.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let kind = PartitionKind::gcra(GcraOptions::per_second(2)).unwrap();
    /// let limiter = kind.limiter(&clock);
    /// let _ = limiter.try_acquire(2).unwrap();
    /// assert!(limiter.try_acquire(1).is_err());
    /// clock.advance(Duration::from_millis(500)); // one permit back
    /// assert!(limiter.try_acquire(1).is_ok());
    /// assert_eq!(PartitionKind::gcra(GcraOptions::per_second(0)), Err(OptionsError::ZeroLimit));
    /// ```
    gcra(Gcra(GcraOptions));

    /// A [`LeakyBucketMeter`](crate::LeakyBucketMeter) per partition.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let kind = PartitionKind::leaky_meter(LeakyBucketOptions::new(4, 1, Duration::from_secs(1))).unwrap();
    /// let limiter = kind.limiter(&clock);
    /// let _ = limiter.try_acquire(4).unwrap();
    /// assert!(limiter.try_acquire(1).is_err());
    /// clock.advance(Duration::from_secs(1)); // one unit drained
    /// assert!(limiter.try_acquire(1).is_ok());
    /// ```
    leaky_meter(LeakyMeter(LeakyBucketOptions));

    /// A [`LeakyBucketShaper`](crate::LeakyBucketShaper) per partition.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let kind = PartitionKind::leaky_shaper(ShaperOptions::per_second(10)).unwrap();
    /// let limiter = kind.limiter(&clock);
    /// let _ = limiter.try_acquire(1).unwrap();
    /// assert!(limiter.try_acquire(1).is_err()); // the next slot is 100 ms away
    /// clock.advance(Duration::from_millis(100));
    /// assert!(limiter.try_acquire(1).is_ok());
    /// ```
    leaky_shaper(LeakyShaper(ShaperOptions));

    /// A [`SlidingCounterLimiter`](crate::SlidingCounterLimiter) per partition.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let kind = PartitionKind::sliding_counter(SlidingCounterOptions::per_minute(10)).unwrap();
    /// let limiter = kind.limiter(&clock);
    /// let _ = limiter.try_acquire(10).unwrap();
    /// clock.advance(Duration::from_secs(90)); // the 10 weigh half in the next window
    /// assert_eq!(limiter.available_permits(), 5);
    /// ```
    sliding_counter(SlidingCounter(SlidingCounterOptions));

    /// A [`SlidingLogLimiter`] per partition, with the default ring of
    /// [`DEFAULT_CAPACITY`](SlidingLogLimiter::DEFAULT_CAPACITY) (16) entries: a limit of at
    /// most 16.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let kind = PartitionKind::sliding_log(SlidingLogOptions::per_minute(5)).unwrap();
    /// let limiter = kind.limiter(&clock);
    /// let _ = limiter.try_acquire(5).unwrap();
    /// assert!(limiter.try_acquire(1).is_err());
    /// clock.advance(Duration::from_secs(60)); // the 5 leave the window
    /// assert!(limiter.try_acquire(5).is_ok());
    /// let big = SlidingLogOptions::per_minute(17);
    /// assert_eq!(PartitionKind::sliding_log(big), Err(OptionsError::ExceedsCapacity { max: 16 }));
    /// ```
    sliding_log(
        SlidingLog(SlidingLogOptions),
        SlidingLogLimiter::<crate::clock::NoClock>::DEFAULT_CAPACITY
    );
}

/// The options were validated when the kind was made, so construction cannot fail.
const VALID: &str = "options validated by PartitionKind";

/// What [`PartitionKind::visit`] does with the maker of a kind's limiter.
#[cfg(feature = "http")]
pub(crate) trait Visit<C: Clock + Sync> {
    type Out;
    fn visit<L>(self, make: impl Fn(C) -> L + Send + Sync + 'static) -> Self::Out
    where
        L: Member<C> + Send + Sync + 'static,
        for<'a> L::Acquire<'a>: Send;
}

/// A limiter type a [`PartitionKind`] makes: one variant of [`PartitionLimiter`].
#[cfg(feature = "http")]
pub(crate) trait Member<C: Clock + Sync>:
    Compact
    + Limiter
    + Release
    + crate::limiter::AcquireAsync
    + crate::quota::Quota
    + Into<PartitionLimiter<C>>
{
    /// Brings the state up to date and serves the waiters whose permits came (a rate
    /// limiter's `replenish`; nothing for the others, served by releases or never short).
    #[cfg(feature = "http")]
    fn nudge(&self) {}
}

/// A partition's limiter: one of many, so memory per key counts more than contention on its
/// counts.
pub(crate) trait Compact {
    /// Makes its statistics compact.
    fn compact(&self);
}

/// `From` each limiter for its variant, and [`Member`]: `$compact` makes its counts compact,
/// `$nudge` (if any) is its `replenish`. After the unlimited partition, each row is a limited
/// kind, whose [`Kind`] variant has the same name and holds the options of its `with_clock`:
/// the rows also make [`PartitionKind::make`] and [`PartitionKind::visit`].
macro_rules! members {
    (@member $variant:ident($ty:ty), |$l:ident| $compact:expr $(, $nudge:ident)?) => {
        impl<C: Clock> From<$ty> for PartitionLimiter<C> {
            /// The variant of this limiter.
            fn from(limiter: $ty) -> Self {
                PartitionLimiter::$variant(limiter)
            }
        }

        impl<C: Clock> Compact for $ty {
            fn compact(&self) {
                let $l = self;
                $compact
            }
        }

        #[cfg(feature = "http")]
        impl<C: Clock + Sync> Member<C> for $ty {
            $(
                #[cfg(feature = "http")]
                fn nudge(&self) {
                    let _ = self.$nudge();
                }
            )?
        }
    };
    (
        NoLimit($none:ty), |$nl:ident| $none_compact:expr;
        $($variant:ident($ty:ty), |$l:ident| $compact:expr $(, $nudge:ident)?;)+
    ) => {
        members!(@member NoLimit($none), |$nl| $none_compact);
        $(members!(@member $variant($ty), |$l| $compact $(, $nudge)?);)+

        impl PartitionKind {
            fn make<C: Clock>(&self, clock: C) -> PartitionLimiter<C> {
                match self.0 {
                    Kind::NoLimit => NoLimitPartition::new(clock).into(),
                    $(Kind::$variant(o) => <$ty>::with_clock(o, clock).expect(VALID).into(),)+
                }
            }

            /// Hands `visitor` the maker of this kind's limiter, by its own type (the HTTP layer
            /// keeps a map of one limiter type per policy, without the enum's largest variant's
            /// size).
            #[cfg(feature = "http")]
            pub(crate) fn visit<C: Clock + Send + Sync + 'static, V: Visit<C>>(
                &self,
                visitor: V,
            ) -> V::Out {
                match self.0 {
                    Kind::NoLimit => visitor.visit(NoLimitPartition::new),
                    $(Kind::$variant(o) => {
                        visitor.visit(move |c| <$ty>::with_clock(o, c).expect(VALID))
                    })+
                }
            }
        }
    };
}

/// The partition kinds and the limiter of a partition, from the roster of rate limiters
/// ([`rate_limiters!`](crate::roster::rate_limiters)): the [`Kind`] and [`PartitionLimiter`]
/// variants, `each_rate!`, the [`members!`] rows, and a check that each has its
/// `PartitionKind` constructor. `$d` is `$`, for the macro it defines.
macro_rules! partitions {
    (($d:tt) $($(#[$doc:meta])* $variant:ident($m:ident::$limiter:ident, $opts:ident) $ctor:ident $(, $per:ident)?;)+) => {
        /// A kind with its options: what [`PartitionKind`] wraps, and what the HTTP layer reads to
        /// describe a policy and to pick its compact keyed form.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub(crate) enum Kind {
            NoLimit,
            Concurrency(ConcurrencyOptions),
            $($variant(crate::$m::$opts),)+
        }

        /// The limiter of a partition of the built-in kinds: one of the nine queued limiters, or no
        /// limit.
        ///
        /// It is a [`Limiter`], [`Replenishing`], waitable ([`AcquireAsync`](crate::AcquireAsync)) and gives permits back to
        /// its concurrency limiter ([`Release`]), each by delegating to the limiter inside.
        ///
        /// ```
        /// use core::time::Duration;
        /// use tollgate::*;
        ///
        /// let kind = PartitionKind::concurrency(ConcurrencyOptions::new(2)).unwrap();
        /// let limiter = kind.limiter(ManualClock::new());
        /// let lease = limiter.try_acquire(2).unwrap();
        /// assert!(matches!(limiter, PartitionLimiter::Concurrency(_)));
        /// assert_eq!(limiter.available_permits(), 0);
        /// drop(lease);
        /// assert_eq!(limiter.available_permits(), 2);
        /// ```
        // The sliding window is the large variant (its ring is inline). Boxing it would cost an
        // allocation per partition, and is impossible in the heapless store this type also serves.
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug)]
        pub enum PartitionLimiter<C: Clock = crate::clock::DefaultClock> {
            /// No limit.
            NoLimit(NoLimitPartition<C>),
            /// A concurrency limiter.
            Concurrency(ConcurrencyLimiter<C>),
            $($(#[$doc])* $variant(crate::$m::$limiter<C>),)+
        }

        /// Calls `$e` with `$l` bound to the rate limiter inside `$self`, or evaluates `$none`
        /// for a concurrency or unlimited partition (`@arms`: with those two partitions' arms
        /// given).
        macro_rules! each_rate {
            ($d self:expr, $d l:ident => $d e:expr, else $d none:expr) => {
                each_rate!(@arms $d self, $d l => $d e,
                    PartitionLimiter::NoLimit(_) | PartitionLimiter::Concurrency(_) => $d none,
                )
            };
            (@arms $d self:expr, $d l:ident => $d e:expr, $d ($d others:tt)+) => {
                match $d self {
                    $(PartitionLimiter::$variant($d l) => $d e,)+
                    $d ($d others)+
                }
            };
        }

        members! {
            NoLimit(NoLimitPartition<C>), |_l| ();
            Concurrency(ConcurrencyLimiter<C>), |l| l.compact_counts();
            $($variant(crate::$m::$limiter<C>), |l| Source::counters(l).make_compact(), replenish;)+
        }

        // Every rate limiter of the roster has its `PartitionKind` constructor.
        const _: () = {
            $(let _ = PartitionKind::$ctor;)+
        };
    };
}

crate::roster::rate_limiters!(partitions! { $ });

impl<K, C: Clock + Clone> Factory<K, C> for PartitionKind {
    type Limiter = PartitionLimiter<C>;

    fn create(self, _key: &K, clock: &C) -> PartitionLimiter<C> {
        self.limiter(clock.clone())
    }
}

/// Calls `$e` with `$l` bound to the limiter inside `$self`.
macro_rules! each {
    ($self:expr, $l:ident => $e:expr) => {
        each_rate!(@arms $self, $l => $e,
            PartitionLimiter::NoLimit($l) => $e,
            PartitionLimiter::Concurrency($l) => $e,
        )
    };
}

impl<C: Clock> PartitionLimiter<C> {
    /// Makes the limiter's counts compact ([`Compact::compact`]).
    fn compact(&self) {
        each!(self, l => l.compact());
    }
}

impl<C: Clock + Sync> Limiter for PartitionLimiter<C> {
    #[inline]
    fn try_acquire(&self, permits: u32) -> Result<Lease<'_>, Rejection> {
        each!(self, l => l.try_acquire(permits))
    }
    fn available_permits(&self) -> u64 {
        each!(self, l => l.available_permits())
    }
    fn statistics(&self) -> Statistics {
        each!(self, l => l.statistics())
    }
    fn idle_duration(&self) -> Option<Duration> {
        each!(self, l => l.idle_duration())
    }
    fn close(&self) {
        each!(self, l => l.close())
    }
    fn is_closed(&self) -> bool {
        each!(self, l => l.is_closed())
    }
}

impl<C: Clock + Sync> crate::limiter::Peek for PartitionLimiter<C> {
    fn peek(&self, permits: u32) -> Result<(), Rejection> {
        each_rate!(@arms self, l => l.peek(permits),
            PartitionLimiter::NoLimit(_) => Ok(()),
            PartitionLimiter::Concurrency(l) => l.peek(permits),
        )
    }
}

impl<C: Clock + Sync> Release for PartitionLimiter<C> {
    fn release(&self, permits: u32) {
        if let PartitionLimiter::Concurrency(l) = self {
            l.release(permits);
        }
    }
    fn settle(&self, s: crate::lease::Settlement) -> Result<(), crate::lease::SettleError> {
        each!(self, l => l.settle(s))
    }
}

impl<C: Clock + Sync> Replenishing for PartitionLimiter<C> {
    /// The rate limiter's period; zero for a concurrency or unlimited partition.
    fn replenishment_period(&self) -> Duration {
        each_rate!(self, l => l.replenishment_period(), else Duration::ZERO)
    }
    fn replenish(&self) -> u64 {
        each_rate!(self, l => l.replenish(), else self.available_permits())
    }
    fn next_service(&self) -> Option<Duration> {
        each_rate!(self, l => l.next_service(), else None)
    }
}

impl<C: Clock + Sync> crate::quota::Quota for PartitionLimiter<C> {
    fn quota(&self) -> crate::quota::QuotaState {
        each!(self, l => l.quota())
    }
}

crate::limiter::queued_capabilities!(@acquire PartitionLimiter<C> where C: Clock | Sync);

impl<C: Clock + Sync> wait::private::Sealed for PartitionLimiter<C> {}

impl<C: Clock + Sync> Source for PartitionLimiter<C> {
    fn queue(&self) -> &WaitQueue {
        each!(self, l => l.queue())
    }
    fn counters(&self) -> &Counters {
        each!(self, l => Source::counters(l))
    }
    fn limit(&self) -> u32 {
        each!(self, l => Source::limit(l))
    }
    fn take_now(&self, n: u32) -> Result<u64, Rejection> {
        each!(self, l => l.take_now(n))
    }
    fn take_locked(&self, n: u32, flag_if_short: bool) -> LockedTake {
        each!(self, l => l.take_locked(n, flag_if_short))
    }
    fn take_for_waiter(&self, n: u32) -> LockedTake {
        each!(self, l => Source::take_for_waiter(l, n))
    }
    fn wait_behind(&self, ahead: &mut dyn Iterator<Item = u32>, n: u32) -> Option<Duration> {
        each!(self, l => Source::wait_behind(l, ahead, n))
    }
    fn timed(&self) -> bool {
        each!(self, l => l.timed())
    }
    fn served_on_return(&self) -> bool {
        each!(self, l => l.served_on_return())
    }
    fn clear_waiters(&self) {
        each!(self, l => l.clear_waiters())
    }
    fn give_back(&self, n: u32, stamp: u64) {
        each!(self, l => Source::give_back(l, n, stamp))
    }
    fn wait_for_permits(&self, total: u64) -> Option<Duration> {
        each!(self, l => l.wait_for_permits(total))
    }
    fn lease(&self, n: u32, stamp: u64) -> Lease<'_> {
        each!(self, l => l.lease(n, stamp))
    }
}

impl<C: Clock + Sync> PartitionLimiter<C> {
    /// Waits on this thread for `permits`, for up to `timeout` (`None`: no limit); the thread
    /// serves the queue itself as time brings permits.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let kind = PartitionKind::concurrency(ConcurrencyOptions::new(2)).unwrap();
    /// let limiter = kind.limiter(StdClock);
    /// let lease = limiter.acquire_blocking(2, Some(Duration::from_millis(10))).unwrap();
    /// assert_eq!(lease.permits(), 2);
    /// // More than the limit can never be granted: refused at once, without waiting.
    /// assert!(limiter.acquire_blocking(3, None).is_err());
    /// ```
    #[cfg(feature = "std")]
    pub fn acquire_blocking(
        &self,
        permits: u32,
        timeout: Option<Duration>,
    ) -> Result<Lease<'_>, Rejection> {
        wait::acquire_blocking(self, permits, timeout)
    }
}

/// The limiter of an unlimited partition: a [`NoopLimiter`] that also remembers when it was last
/// used, so that a partitioned limiter can evict it after its idle timeout (.NET 11 evicts
/// no-limit partitions by last access, since a no-op limiter is never "idle").
///
/// Its [`idle_duration`](Limiter::idle_duration) is the time since its last use.
///
/// ```
/// use core::time::Duration;
/// use tollgate::*;
///
/// let clock = ManualClock::new();
/// let limiter = PartitionKind::NO_LIMIT.limiter(&clock);
/// clock.advance(Duration::from_secs(3));
/// let _ = limiter.try_acquire(1_000_000).unwrap();
/// clock.advance(Duration::from_secs(2));
/// assert_eq!(limiter.idle_duration(), Some(Duration::from_secs(2)));
/// ```
#[derive(Debug)]
pub struct NoLimitPartition<C> {
    noop: NoopLimiter,
    last_use: AtomicU64,
    queue: WaitQueue,
    clock: C,
}

impl<C: Clock> NoLimitPartition<C> {
    fn new(clock: C) -> Self {
        Self {
            noop: NoopLimiter::new(),
            last_use: AtomicU64::new(clock.now().as_nanos()),
            queue: WaitQueue::new(0, QueueOrder::OldestFirst),
            clock,
        }
    }

    #[inline]
    fn touch(&self) {
        // fetch_max: racing uses keep the latest reading.
        self.last_use
            .fetch_max(self.clock.now().as_nanos(), Ordering::Relaxed);
    }
}

impl<C: Clock> Limiter for NoLimitPartition<C> {
    #[inline]
    fn try_acquire(&self, permits: u32) -> Result<Lease<'_>, Rejection> {
        self.touch();
        self.noop.try_acquire(permits)
    }
    fn available_permits(&self) -> u64 {
        u64::MAX
    }
    fn statistics(&self) -> Statistics {
        self.noop.statistics()
    }
    fn idle_duration(&self) -> Option<Duration> {
        let last = Instant::from_nanos(self.last_use.load(Ordering::Relaxed));
        Some(self.clock.now().saturating_duration_since(last))
    }
    /// Does nothing (a no-op limiter stays usable).
    fn close(&self) {}
    fn is_closed(&self) -> bool {
        false
    }
}

/// Nothing to give back: every request is granted.
impl<C: Clock> Release for NoLimitPartition<C> {
    fn release(&self, _permits: u32) {}
    fn settle(&self, _: crate::lease::Settlement) -> Result<(), crate::lease::SettleError> {
        Ok(())
    }
}

/// An unlimited partition's quota: the no-op limiter's (unbounded, nothing to reset).
impl<C: Clock> crate::quota::Quota for NoLimitPartition<C> {
    fn quota(&self) -> crate::quota::QuotaState {
        NoopLimiter::new().quota()
    }
}

crate::limiter::queued_capabilities!(@acquire NoLimitPartition<C> where C: Clock);

impl<C: Clock> wait::private::Sealed for NoLimitPartition<C> {}

impl<C: Clock> Source for NoLimitPartition<C> {
    fn queue(&self) -> &WaitQueue {
        &self.queue
    }
    fn counters(&self) -> &Counters {
        self.noop.counters()
    }
    fn limit(&self) -> u32 {
        u32::MAX
    }
    fn take_now(&self, _n: u32) -> Result<u64, Rejection> {
        self.touch();
        Ok(0)
    }
    fn take_locked(&self, _n: u32, _flag_if_short: bool) -> LockedTake {
        self.touch();
        Ok(Some(0))
    }
    fn take_for_waiter(&self, n: u32) -> LockedTake {
        self.take_locked(n, false)
    }
    fn wait_behind(&self, _ahead: &mut dyn Iterator<Item = u32>, _n: u32) -> Option<Duration> {
        Some(Duration::ZERO)
    }
    fn timed(&self) -> bool {
        false
    }
    fn served_on_return(&self) -> bool {
        false
    }
    fn clear_waiters(&self) {}
    fn give_back(&self, _n: u32, _stamp: u64) {}
    fn wait_for_permits(&self, _total: u64) -> Option<Duration> {
        Some(Duration::ZERO)
    }
    fn lease(&self, n: u32, _stamp: u64) -> Lease<'_> {
        Lease::free(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::concurrency::ConcurrencyOptions;
    use crate::quota::Quota;

    #[test]
    fn a_partition_limiter_reports_its_limiters_quota() {
        let kind = PartitionKind::concurrency(ConcurrencyOptions::new(3)).unwrap();
        assert_eq!(kind.limiter(ManualClock::new()).quota().remaining, 3);
        let unlimited = PartitionKind::NO_LIMIT.limiter(ManualClock::new());
        assert_eq!(unlimited.quota().limit, u64::MAX);
    }
}
