//! GCRA, the generic cell rate algorithm: one 64-bit word (the theoretical arrival time) with
//! governor's quota vocabulary. Its core also drives the leaky buckets.

pub(crate) mod state;

use core::time::Duration;

use crate::cas;
use crate::clock::Clock;
use crate::core_common::RateBase;
use crate::lease::{Reason, Rejection};
use crate::nanos::Nanos;
use crate::options::{OptionsError, QueueOrder};
use crate::queue_kind::{NoQueue, QueueKind};
use crate::rate_core::RateCore;
use crate::state_cell::{CellCore, Single, StateCell};
#[cfg(not(tollgate_cs_cells))]
use crate::sync::fence;
use crate::sync::{AtomicU64, Ordering};
use crate::ticks::{duration_from_nanos_u128, nanos_of};
use crate::wait::{LockedTake, WaitQueue};

use state::{Denied, Gcra, Params, MAX_SPAN};

crate::state_cell::state_word!(Gcra, Denied, u64);

/// The lock-free core shared by [`GcraLimiter`], [`LeakyBucketMeter`](crate::LeakyBucketMeter)
/// and [`LeakyBucketShaper`](crate::LeakyBucketShaper).
///
/// `SHAPE` is the shaper's tolerance rule, fixed at creation: in the type, so that a decision
/// reads no flag for it.
#[derive(Debug)]
pub(crate) struct GcraCore<C, Q = WaitQueue, const SHAPE: bool = false> {
    word: Single<AtomicU64, Gcra>,
    /// Nanosecond ticks from creation.
    pub(crate) base: RateBase<C, Q>,
    params: ParamsCell,
}

/// The interval and burst every decision reads, which [`GcraCore::reconfigure`] changes while
/// the limiter is in use; a decision reads one consistent pair, with no locked instruction.
///
/// Both fit one word, which a decision reads with one load, in one of two forms: an interval
/// under 2^31 ns (2.1 s) with any burst, or an interval under 2^47 ns (39 hours) with a burst
/// under 2^16. Anything else (slower rates with larger bursts) is kept in a sequence lock over
/// three atomics (the word then reads 0). Writers are serialized by the queue lock (without a
/// queue, by [`NoQueue::serialized`]), which on targets without `std` is a critical section: an interrupt handler can never find a write
/// half done and spin on it; between threads a reader retries only while a write is under way.
#[cfg(not(tollgate_cs_cells))]
#[derive(Debug)]
struct ParamsCell {
    /// `interval << 32 | burst` (bit 63 clear), or `1 << 63 | interval << 16 | burst` for a
    /// slow interval and a burst under 2^16; 0 when the parameters are in the fields below (a
    /// packed pair is never 0: the interval is at least 1).
    packed: AtomicU64,
    /// Even when `interval` and `burst` are stable; odd while they are being written.
    seq: AtomicU64,
    interval: AtomicU64,
    burst: AtomicU64,
}

#[cfg(not(tollgate_cs_cells))]
impl ParamsCell {
    crate::sync::const_unless_loom! {
        fn new(p: Params) -> Self {
            Self {
                packed: AtomicU64::new(Self::pack(p)),
                seq: AtomicU64::new(0),
                interval: AtomicU64::new(p.interval),
                burst: AtomicU64::new(p.burst as u64),
            }
        }
    }

    /// The one-word form of `p`, or 0 if it fits neither.
    const fn pack(p: Params) -> u64 {
        if p.interval >> 31 == 0 {
            p.interval << 32 | p.burst as u64
        } else if p.interval >> 47 == 0 && p.burst >> 16 == 0 {
            1 << 63 | p.interval << 16 | p.burst as u64
        } else {
            0
        }
    }

    /// The parameters in force, with the tolerance rule `shape` (the core's, from its type).
    #[inline(always)]
    fn get(&self, shape: bool) -> Params {
        let w = self.packed.load(Ordering::Acquire);
        if w >> 63 == 0 && w != 0 {
            Params::new(w >> 32, w as u32, shape)
        } else if w != 0 {
            Params::new((w << 1) >> 17, (w & 0xFFFF) as u32, shape)
        } else {
            self.get_wide(shape)
        }
    }

    /// [`get`](Self::get) of parameters that fit no word: the sequence lock (a few loads, kept
    /// inline: a decision on a day-long interval is no rarer than any other).
    #[inline(always)]
    fn get_wide(&self, shape: bool) -> Params {
        loop {
            let before = self.seq.load(Ordering::Acquire);
            let interval = self.interval.load(Ordering::Relaxed);
            let burst = self.burst.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if before & 1 == 0 && self.seq.load(Ordering::Relaxed) == before {
                // `burst` is only ever stored from a `u32`.
                return Params::new(interval, burst as u32, shape);
            }
            crate::sync::spin_loop();
        }
    }

    /// Replaces the parameters (one writer at a time: under the queue lock, or without a queue
    /// under the limiter's lock on its options). Slow ones are
    /// written under the sequence lock before the word says to read them there.
    fn set(&self, p: Params) {
        let w = Self::pack(p);
        if w == 0 {
            let seq = self.seq.load(Ordering::Relaxed);
            self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
            fence(Ordering::Release);
            self.interval.store(p.interval, Ordering::Relaxed);
            self.burst.store(u64::from(p.burst), Ordering::Relaxed);
            self.seq.store(seq.wrapping_add(2), Ordering::Release);
        }
        self.packed.store(w, Ordering::Release);
    }
}

/// The parameters where the state words are critical-section cells (`tollgate_cs_cells`: no
/// native 64-bit atomics): the whole [`Params`], `window` included, in one such cell. A decision
/// reads them in one critical section (a few loads with interrupts masked), where the atomic
/// form above would take one per field and a sequence check, and recompute `window`.
#[cfg(tollgate_cs_cells)]
#[derive(Debug)]
struct ParamsCell(crate::sync::CsAtomic<Params>);

#[cfg(tollgate_cs_cells)]
impl ParamsCell {
    /// A cell holding `p`.
    const fn new(p: Params) -> Self {
        Self(crate::sync::CsAtomic::new(p))
    }

    /// The parameters in force, with the tolerance rule `shape` (the core's, from its type).
    #[inline(always)]
    fn get(&self, shape: bool) -> Params {
        Params {
            shape,
            ..self.0.load(Ordering::Acquire)
        }
    }

    /// Replaces the parameters.
    fn set(&self, p: Params) {
        self.0.store(p, Ordering::Release);
    }
}

/// `period / n` rounded up to the nanosecond (zero for `n == 0`, refused by validation).
pub(crate) const fn interval_of(period: Duration, n: u32) -> Duration {
    if n == 0 {
        return Duration::ZERO;
    }
    let nanos = period.as_nanos();
    let n = n as u128;
    let each = nanos.div_ceil(n);
    Duration::new((each / 1_000_000_000) as u64, (each % 1_000_000_000) as u32)
}

impl<C: Clock, Q: QueueKind, const SHAPE: bool> GcraCore<C, Q, SHAPE> {
    pub(crate) fn new(params: Params, queue: Q, clock: C) -> Self {
        let origin = clock.now();
        Self::at(params, queue, clock, origin)
    }

    /// Replaces the interval and the burst with no queue to serve (writers serialized by
    /// [`NoQueue::serialized`]).
    pub(crate) fn set_params(&self, params: Params) {
        NoQueue::serialized(|| self.params.set(params));
    }

    /// The interval and burst in force.
    #[inline(always)]
    pub(crate) fn params(&self) -> Params {
        self.params.get(SHAPE)
    }

    /// One lock-free attempt for a newcomer; the state word it decided on, on denial.
    #[inline]
    fn attempt(&self, now: u64, n: u32, p: Params, barge: bool) -> Result<(), (Denied, u64)> {
        cas::transition(self.word.raw(), |w| {
            Gcra::unpack(w)
                .try_take(now, n, p, barge)
                .map(|g| (g.pack(), ()))
                .map_err(|d| (d, w))
        })
        .map(|_| ())
    }

    /// The common decision in a handful of instructions ([`QuickPath::decide_quick`]): a word
    /// with no flag set grants `n` permits with one compare-and-swap of the pushed `tat`, or
    /// refuses with the exact wait (in nanoseconds): no one is queued ahead of a word with no
    /// flag set ([`Gcra::quick`]: what the general path decides on the same word and instant).
    /// `None` sends everything else (a flag, a lost race) to the general path.
    /// None on 32-bit MCUs, where the word is behind a critical section and a second copy of
    /// the decision is only code (the firmware program: 916 → 784 bytes).
    #[inline(always)]
    fn quick(&self, now: u64, n: u32, p: Params) -> Option<Result<u64, Nanos>> {
        // `now` is unclamped (`QuickPath::UNCLAMPED`): `Gcra::quick`'s range test sends a
        // reading of 2^61 or more, a clock behind the origin among them, to the general path.
        if cfg!(tollgate_cs_cells) {
            return None;
        }
        let w = cas::Word::load(self.word.raw());
        // A refusal here waits alone: the word's waiters flag is set (under the queue lock)
        // before a waiter joins the queue and cleared only once it is empty, so a word read
        // with no flag set has no one queued ahead as of that reading (the token bucket's
        // quick path stands on the same order). The queue's count, read after the word, was
        // checked here too: it could only be stale, a count the serving left before syncing
        // it.
        match Gcra::quick(w, now, n, p)? {
            Ok(next) => cas::swap_once(self.word.raw(), w, next).then_some(Ok(0)),
            Err(wait) => Some(Err(Nanos::from_u64(wait))),
        }
    }

    /// [`QuickPath::take_slow`]: the general transition and the queue, on the parameters read
    /// again (they may have been reconfigured since the quick path's reading).
    #[inline(never)]
    fn general(&self, now: u64, n: u32, _: Params, serve: impl FnOnce()) -> Result<u64, Rejection> {
        let p = self.params();
        if n > p.burst {
            return Err(Rejection::new(&Reason::ExceedsLimit));
        }
        let result = crate::quick_path::attempt_after_waiters(
            &self.base.queue,
            false,
            |barge| self.attempt(now, n, p, barge),
            |&(d, w)| d == Denied::Exhausted && Gcra::unpack(w).waiters,
            serve,
        );
        // No stamp: a refund moves the theoretical arrival time back from where it is.
        result
            .map(|()| 0)
            .map_err(|(d, w)| self.rejection(d, w, now, n, p))
    }

    /// The rejection of `n` permits denied for `d` on the word `w` at `now`: an exhausted one
    /// carries the exact wait, behind the permits queued ahead unless newcomers barge. `n ≤
    /// p.burst` (both callers check it on the same `p`). Never inlined on a 32-bit target,
    /// where the general path would otherwise carry a copy after each of its attempts.
    #[cold]
    #[cfg_attr(not(target_pointer_width = "64"), inline(never))]
    fn rejection(&self, d: Denied, w: u64, now: u64, n: u32, p: Params) -> Rejection {
        match d {
            Denied::Closed => Rejection::new(&Reason::Closed),
            Denied::Exhausted => {
                let ahead = if self.base.queue.barging() {
                    0
                } else {
                    self.base.queue.queued_permits()
                };
                let g = Gcra::unpack(w);
                // `n ≤ burst` here (the caller checked it on `p`): alone, 64 bits suffice.
                let wait = if ahead == 0 {
                    Nanos::from_u64(g.wait_alone(now, n.max(1), p).max(1))
                } else {
                    Nanos::from_u128(g.wait(now, u64::from(n.max(1)), ahead, p).max(1))
                };
                Rejection::after(&Reason::Exhausted, wait)
            }
        }
    }

    /// [`QuickPath::judge`].
    fn judge(&self, now: u64, n: u32, p: Params) -> Result<(), Rejection> {
        let w = cas::Word::load(self.word.raw());
        Gcra::unpack(w)
            .try_take(now, n, p, self.base.queue.barging())
            .map(|_| ())
            .map_err(|d| self.rejection(d, w, now, n, p))
    }
}

impl<C: Clock, Q: QueueKind, const SHAPE: bool> RateCore for GcraCore<C, Q, SHAPE> {
    crate::rate_core::base_field!();

    fn limit(&self) -> u32 {
        self.params().burst
    }

    /// The emission interval: one permit comes back every this long.
    fn period(&self) -> Duration {
        Duration::from_nanos(self.params().interval)
    }

    fn available(&self) -> u64 {
        self.word
            .load()
            .available(self.base.elapsed(), self.params())
    }

    /// Full since the theoretical arrival time; `None` while anything is outstanding.
    fn idle_duration(&self) -> Option<Duration> {
        let now = self.base.elapsed();
        let g = self.word.load();
        g.full_since(now).map(|t| Duration::from_nanos(now - t))
    }

    /// Under the queue lock: takes `n` ignoring the queue flag, or finds them short.
    fn take_locked(&self, n: u32, flag_if_short: bool) -> LockedTake {
        let now = self.base.elapsed();
        let p = self.params();
        self.word.take_queued(flag_if_short, |g| {
            g.try_take(now, n, p, true).map(|g| (g, now))
        })
    }

    /// Under the queue lock, for the waiter at the serving end: takes `n` as of the instant
    /// they fit ([`Gcra::take_when_fits`]), or finds them short. The stamp is that instant.
    fn take_for_waiter(&self, n: u32) -> LockedTake {
        let now = self.base.elapsed();
        let p = self.params();
        self.word
            .take_queued(false, |g| g.take_when_fits(now, n, p))
    }

    /// `tat` moves on by `n` slots past the tolerance, up to one burst of debt
    /// ([`Gcra::take_debt`]).
    fn take_debt(&self, n: u32, max_debt: u32) -> Result<(), crate::lease::SettleError> {
        let now = self.base.elapsed();
        let p = self.params();
        self.word
            .transition(|g| {
                g.take_debt(now, n, p.burst.min(max_debt), p)
                    .map(|next| (next, ()))
                    .ok_or(crate::lease::SettleError::DebtLimit)
            })
            .map(|_| ())
    }

    /// Returns `n` permits a waiter was granted (or a lease settled below what it took) but
    /// never used; whether anyone waits.
    fn give_back(&self, n: u32, _stamp: u64) -> bool {
        let now = self.base.elapsed();
        let p = self.params();
        self.word.update(|g| g.give_back(now, n, p)).waiters
    }

    /// How long until a request of `total` permits would be admitted by time alone.
    fn wait_for(&self, total: u64) -> Duration {
        let g = self.word.load();
        duration_from_nanos_u128(g.wait(self.base.elapsed(), total, 0, self.params()))
    }

    fn wait_for_requests(&self, requests: &mut dyn Iterator<Item = u32>) -> Duration {
        // Time alone serves them in order, each at its slot: only the permits ahead of the last
        // request count, not how they are split.
        let (mut ahead, mut last) = (0u64, 1u32);
        for (i, n) in requests.enumerate() {
            if i > 0 {
                ahead = ahead.saturating_add(u64::from(last));
            }
            last = n;
        }
        let g = self.word.load();
        let p = self.params();
        duration_from_nanos_u128(g.wait(self.base.elapsed(), u64::from(last.max(1)), ahead, p))
    }
}

crate::quick_path::quick_path! {
    impl[C: Clock, Q: QueueKind, const SHAPE: bool] GcraCore<C, Q, SHAPE> { params: Params, burst, quick, general, judge, unclamped: true }
}

impl<C, Q, const SHAPE: bool> CellCore for GcraCore<C, Q, SHAPE> {
    type Cell = Single<AtomicU64, Gcra>;
    fn cell(&self) -> &Self::Cell {
        &self.word
    }
}

impl<C: Clock, const SHAPE: bool> GcraCore<C, WaitQueue, SHAPE> {
    /// Changes the interval, the burst and the queue limit (the caller validated them and
    /// checked what is fixed), under the queue lock, which then fails the waiters larger than
    /// the new burst and serves the rest ([`WaitQueue::reconfigure`]); `then` runs under the same
    /// lock (the caller records its options there).
    ///
    /// The state word is not touched: the theoretical arrival time keeps its instant, so the
    /// time already owed stays owed. From the change on, a decision admits what the new
    /// parameters admit from that state, which is never more than they admit from an idle
    /// limiter: a lowered burst refuses until the debt drains below it, a slower rate spaces
    /// permits by the new interval at once.
    pub(crate) fn reconfigure<S: crate::wait::Source + ?Sized>(
        &self,
        src: &S,
        params: Params,
        queue_limit: u32,
        then: impl FnOnce(),
    ) {
        self.base
            .queue
            .reconfigure(src, queue_limit, params.burst, || {
                self.params.set(params);
                then();
            });
    }
}

/// A limiter on a [`GcraCore`] whose options are an `interval`, a burst (the field `$burst`) and
/// a queue (GCRA and the shaper; `$shape` is the shaper's tolerance rule): its type, its front
/// ([`rate_limiter_front!`](crate::core_common::rate_limiter_front), a queueless limiter
/// changing its parameters in place), its private constructors and option check, and its
/// `reconfigure` and `options`, with the docs given.
macro_rules! gcra_limiter {
    (
        $(#[$doc:meta])*
        pub struct $ty:ident($options:ident { $burst:ident }, shape: $shape:literal);
        front: $what:literal, new: $new:literal, $(unqueued: $unqueued:literal,)?
        queued: $queued:literal;
        $(#[$reconfigure:meta])* reconfigure;
        $(#[$options_doc:meta])* options;
    ) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $ty<C: $crate::clock::Clock = $crate::clock::DefaultClock, Q = $crate::wait::WaitQueue> {
            core: $crate::gcra::GcraCore<C, Q, $shape>,
        }

        $crate::core_common::rate_limiter_front! {
            $ty, $options, $what,
            apply = |l, params, _| l.core.set_params(params),
            new: $new, $(unqueued: $unqueued,)? queued: $queued,
        }

        impl<C: $crate::clock::Clock> $ty<C> {
            $(#[$reconfigure])*
            pub fn reconfigure(&self, options: $options) -> Result<(), $crate::options::OptionsError> {
                let p = self.checked(&options)?;
                self.core.reconfigure(self, p, options.queue_limit, || {});
                Ok(())
            }
        }

        impl<C: $crate::clock::Clock, Q: $crate::queue_kind::QueueKind> $ty<C, Q> {
            fn build(options: $options, clock: C) -> Result<Self, $crate::options::OptionsError> {
                let params = $crate::gcra::params(options.interval, options.$burst, $shape)?;
                let queue = Q::for_options(options.queue_limit, options.queue_order)?;
                Ok(Self {
                    core: $crate::gcra::GcraCore::new(params, queue, clock),
                })
            }

            $(#[$options_doc])*
            pub fn options(&self) -> $options {
                let p = self.core.params();
                $options {
                    interval: core::time::Duration::from_nanos(p.interval),
                    $burst: p.burst,
                    queue_limit: self.core.base.queue.queue_limit(),
                    queue_order: self.core.base.queue.order(),
                }
            }

            /// `options`' parameters, if valid and with the queue order this limiter was built
            /// with.
            fn checked(
                &self,
                options: &$options,
            ) -> Result<$crate::gcra::state::Params, $crate::options::OptionsError> {
                let p = $crate::gcra::params(options.interval, options.$burst, $shape)?;
                let before = self.options().queue_order;
                $crate::queue_kind::unchanged::<Q>(true, options.queue_order, before)?;
                Ok(p)
            }
        }

        impl<C: $crate::clock::Clock, Q> $ty<C, Q> {
            $crate::sync::const_unless_loom! {
                /// A limiter of valid `options` whose time counts from the clock's epoch.
                fn at_epoch_with(options: $options, queue: Q, clock: C) -> Self {
                    let params = $crate::gcra::params(options.interval, options.$burst, $shape);
                    Self {
                        core: $crate::gcra::GcraCore::at(
                            $crate::options::OptionsError::valid_in_const(params),
                            queue,
                            clock,
                            $crate::clock::Instant::ZERO,
                        ),
                    }
                }
            }
        }
    };
}
pub(crate) use gcra_limiter;

/// Options of a [`GcraLimiter`], in governor's quota vocabulary.
///
/// | constructor | permits come back | burst |
/// |---|---|---|
/// | [`per_second(n)`](Self::per_second), [`per_minute(n)`](Self::per_minute), [`per_hour(n)`](Self::per_hour), [`per(period, n)`](Self::per) | one every `period / n` (rounded up to the ns: never faster than asked) | `n` |
/// | [`with_period(interval)`](Self::with_period) | one every `interval` | 1 |
/// | [`.with_burst(b)`](Self::with_burst) | unchanged | `b` |
///
/// ```
/// use core::time::Duration;
/// use tollgate::GcraOptions;
///
/// let quota = GcraOptions::per_second(50);
/// assert_eq!((quota.interval, quota.burst), (Duration::from_millis(20), 50));
/// let spaced = GcraOptions::with_period(Duration::from_millis(100)).with_burst(5);
/// assert_eq!((spaced.interval, spaced.burst), (Duration::from_millis(100), 5));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct GcraOptions {
    /// One permit comes back every `interval` (the emission interval). Longer than zero.
    pub interval: Duration,
    /// The most permits that may be taken at once after an idle spell (and the largest request).
    /// At least 1; `burst · interval` must be under 2^61 ns (73 years).
    pub burst: u32,
    /// Permits that may wait in the queue (for waiting acquisitions).
    pub queue_limit: u32,
    /// The order queued requests are served in.
    pub queue_order: QueueOrder,
}

impl GcraOptions {
    /// `n` permits per `period`, one every `period / n` (rounded up), burst `n`; no queue.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::GcraOptions;
    ///
    /// let q = GcraOptions::per(Duration::from_secs(3), 2);
    /// assert_eq!((q.interval, q.burst), (Duration::from_millis(1500), 2));
    /// ```
    pub const fn per(period: Duration, n: u32) -> Self {
        Self {
            interval: interval_of(period, n),
            burst: n,
            queue_limit: crate::options::UNBOUNDED_QUEUE,
            queue_order: QueueOrder::OldestFirst,
        }
    }

    /// One permit every `interval`, burst 1 (governor's `Quota::with_period`).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::GcraOptions;
    ///
    /// assert_eq!(GcraOptions::with_period(Duration::from_millis(5)).burst, 1);
    /// ```
    pub const fn with_period(interval: Duration) -> Self {
        Self {
            interval,
            burst: 1,
            queue_limit: crate::options::UNBOUNDED_QUEUE,
            queue_order: QueueOrder::OldestFirst,
        }
    }

    /// The same rate with a burst of `burst` permits. A zero burst fails validation.
    ///
    /// ```
    /// use tollgate::{GcraLimiter, GcraOptions, Limiter, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let gcra = GcraLimiter::with_clock(GcraOptions::per_second(10).with_burst(3), &clock).unwrap();
    /// assert_eq!(gcra.available_permits(), 3);
    /// ```
    pub const fn with_burst(self, burst: u32) -> Self {
        Self { burst, ..self }
    }

    /// Checks every option; returns the interval in nanoseconds.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{GcraOptions, OptionsError};
    ///
    /// assert_eq!(GcraOptions::per_second(0).validate(), Err(OptionsError::ZeroLimit));
    /// assert_eq!(GcraOptions::with_period(Duration::ZERO).validate(), Err(OptionsError::ZeroPeriod));
    /// assert_eq!(GcraOptions::per_second(4).validate(), Ok(250_000_000));
    /// ```
    pub fn validate(&self) -> Result<u64, OptionsError> {
        params(self.interval, self.burst, false).map(|p| p.interval)
    }
}

crate::gcra::gcra_limiter! {
    /// GCRA, the generic cell rate algorithm (governor's algorithm): permits come back **one at a
    /// time**, one every `interval`, and up to `burst` may be taken at once after an idle spell.
    ///
    /// Unlike the [`TokenBucketLimiter`](crate::TokenBucketLimiter)'s whole-period steps, the spacing
    /// is smooth: `per_second(50)` gives a permit back every 20 ms. The whole state is one 64-bit
    /// word — the theoretical arrival time — updated by one compare-and-swap; a denial writes
    /// nothing, and its RetryAfter is exact (the nanosecond the request would be admitted, counting
    /// the queue ahead). A clock that steps backwards only makes it stricter, never more lenient.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{GcraLimiter, GcraOptions, Limiter, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let gcra = GcraLimiter::with_clock(GcraOptions::per_second(10).with_burst(2), &clock).unwrap();
    /// let _a = gcra.try_acquire(1).unwrap();
    /// let _b = gcra.try_acquire(1).unwrap(); // the burst of 2
    /// let denied = gcra.try_acquire(1).unwrap_err();
    /// assert_eq!(denied.retry_after(), Some(Duration::from_millis(100)));
    /// clock.advance(Duration::from_millis(100)); // one permit back, spaced 100 ms
    /// assert!(gcra.try_acquire(1).is_ok());
    /// assert!(gcra.try_acquire(1).is_err());
    /// ```
    pub struct GcraLimiter(GcraOptions { burst }, shape: false);
    front: "GCRA limiter", new: "GcraOptions::per_second(2)",
    queued: "GcraOptions::per_second(10).with_burst(1).with_queue(1, QueueOrder::OldestFirst)";
    /// Changes the rate (the interval), the burst and the queue limit while the limiter is in
    /// use. The rule: the theoretical arrival time keeps its instant — time already owed stays
    /// owed — and from the change on every decision uses the new interval and burst, so the
    /// limiter never admits more than the new configuration admits from that instant:
    /// - **a lowered burst** refuses until the outstanding debt drains below it; a raised one
    ///   has room at once;
    /// - **a new rate** spaces the next permits by the new interval (debt already owed drains
    ///   in real time, as before);
    /// - **waiters** asking for more than the new burst are failed with
    ///   [`Reason::ExceedsLimit`](crate::Reason::ExceedsLimit); the rest keep their places and
    ///   are served as far as the limiter allows. A new queue limit applies to newcomers.
    ///
    /// Refused, changing nothing: invalid options (as [`with_clock`](Self::with_clock) refuses
    /// them), or a different queue order ([`OptionsError::FixedAtCreation`]).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{GcraLimiter, GcraOptions, Limiter, ManualClock, OptionsError, QueueOrder};
    ///
    /// let clock = ManualClock::new();
    /// let gcra = GcraLimiter::with_clock(GcraOptions::per_second(10), &clock).unwrap();
    /// gcra.try_acquire(4).unwrap().forget();
    /// gcra.reconfigure(GcraOptions::per_second(2)).unwrap(); // a burst of 2, one every 500 ms
    /// assert_eq!(gcra.available_permits(), 1); // 400 ms still owed: room for one 500 ms slot
    /// clock.advance(Duration::from_millis(400));
    /// assert_eq!(gcra.available_permits(), 2);
    /// let fifo = GcraOptions::per_second(2).with_queue(1, QueueOrder::NewestFirst);
    /// assert_eq!(gcra.reconfigure(fifo), Err(OptionsError::FixedAtCreation));
    /// ```
    reconfigure;
    /// The options in force: those the limiter was built with, as last
    /// [`reconfigure`](Self::reconfigure)d.
    ///
    /// ```
    /// use tollgate::{GcraLimiter, GcraOptions, ManualClock};
    ///
    /// let gcra = GcraLimiter::with_clock(GcraOptions::per_second(5), ManualClock::new()).unwrap();
    /// assert_eq!(gcra.options().burst, 5);
    /// ```
    options;
}

// ---------------------------------------------------------------------------------------------
// `static` limiters (issue 15, helper "algos"): constant constructors for GCRA and the two leaky
// buckets, kept in one self-contained block.

/// Validates an interval and a burst into [`Params`] (in constant evaluation too).
pub(crate) const fn params(
    interval: Duration,
    burst: u32,
    shape: bool,
) -> Result<Params, OptionsError> {
    if burst == 0 {
        return Err(OptionsError::ZeroLimit);
    }
    let interval = match nanos_of(interval) {
        None => return Err(OptionsError::PeriodTooLong),
        Some(0) => return Err(OptionsError::ZeroPeriod),
        Some(ns) => ns,
    };
    match interval.checked_mul(burst as u64) {
        Some(span) if span <= MAX_SPAN => Ok(Params::new(interval, burst, shape)),
        _ => Err(OptionsError::PeriodTooLong),
    }
}

impl<C: Clock, Q, const SHAPE: bool> GcraCore<C, Q, SHAPE> {
    crate::sync::const_unless_loom! {
        /// A fresh core whose time counts from `origin`
        /// ([`Instant::ZERO`](crate::Instant::ZERO) for a constant).
        pub(crate) fn at(params: Params, queue: Q, clock: C, origin: crate::clock::Instant) -> Self {
            debug_assert!(params.shape == SHAPE, "the parameters of another tolerance rule");
            Self {
                word: Single::new(AtomicU64::new(Gcra::FRESH.pack())),
                base: RateBase::new(origin, 1, queue, clock),
                params: ParamsCell::new(params),
            }
        }
    }
}

#[cfg(test)]
mod at_epoch_tests {
    use super::*;

    #[test]
    fn params_cell_holds_every_form_and_switches_between_them() {
        let cases = [
            (1u64, 1u32),
            ((1 << 31) - 1, u32::MAX),
            (1 << 31, (1 << 16) - 1),
            ((1 << 47) - 1, 1),
            (1 << 31, 1 << 16),
            (1 << 47, 1),
            (MAX_SPAN, 1),
        ];
        for shape in [false, true] {
            for &(interval, burst) in &cases {
                let p = Params::new(interval, burst, shape);
                let cell = ParamsCell::new(p);
                assert_eq!(cell.get(shape), p, "{interval} {burst}");
                for &(i2, b2) in &cases {
                    let q = Params::new(i2, b2, shape);
                    cell.set(q);
                    assert_eq!(cell.get(shape), q, "{interval} {burst} -> {i2} {b2}");
                    cell.set(p);
                    assert_eq!(cell.get(shape), p);
                }
            }
        }
    }
}
