//! The concurrency limiter: at most `permit_limit` permits held at once; a lease gives its
//! permits back when dropped.

/// [`Peek`] and [`Limiter`] for `$limiter`, the limiter with one of the queue kinds: the same
/// decisions from the same word, whatever the kind; `close` is the kind's own `close_now`. The
/// doc comments given go on the two impls.
macro_rules! impl_limiter {
    ($limiter:ty $(; $(#[$peek_doc:meta])* Peek; $(#[$limiter_doc:meta])* Limiter)?) => {
        $($(#[$peek_doc])*)?
        impl<C: Clock + Sync> Peek for $limiter {
            fn peek(&self, permits: u32) -> Result<(), Rejection> {
                self.peek_now(permits)
            }
        }

        $($(#[$limiter_doc])*)?
        impl<C: Clock + Sync> Limiter for $limiter {
            #[inline]
            fn try_acquire(
                &self,
                permits: u32,
            ) -> Result<Lease<'_>, Rejection> {
                self.try_acquire_now(permits)
            }

            fn available_permits(&self) -> u64 {
                self.available_now()
            }

            fn statistics(&self) -> Statistics {
                self.statistics_now()
            }

            fn idle_duration(&self) -> Option<Duration> {
                self.idle_now()
            }

            fn close(&self) {
                self.close_now();
            }

            fn is_closed(&self) -> bool {
                self.state().closed()
            }
        }
    };
}

mod stamp;
mod state;
mod unqueued;

use core::convert::Infallible;
use core::time::Duration;

use crate::cas;
use crate::clock::{Clock, Instant};
use crate::lease::{Lease, Reason, Rejection, Release, SettleError, Settlement, Statistics};
use crate::limiter::{Limiter, Peek};
use crate::options::{OptionsError, QueueOrder};
use crate::queue_kind::QueueKind;
use crate::stats::Counters;
use crate::sync::{AtomicUsize, Ordering};
use crate::wait::{self, Acquire, LockedTake, Source, WaitQueue};

use stamp::{Eager, Stamp};
use state::{Denied, State};

use state::MAX_LIMIT;

/// Options of a [`ConcurrencyLimiter`] (.NET `ConcurrencyLimiterOptions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ConcurrencyOptions {
    /// Permits that can be held at once. At least 1.
    #[doc(alias = "PermitLimit")]
    pub permit_limit: u32,
    /// Permits that may wait in the queue (for waiting acquisitions).
    #[doc(alias = "QueueLimit")]
    pub queue_limit: u32,
    /// The order queued requests are served in.
    #[doc(alias = "QueueProcessingOrder")]
    pub queue_order: QueueOrder,
}

impl ConcurrencyOptions {
    /// `permit_limit` permits, no queue.
    pub const fn new(permit_limit: u32) -> Self {
        Self {
            permit_limit,
            queue_limit: 0,
            queue_order: QueueOrder::OldestFirst,
        }
    }

    /// The largest `permit_limit` the limiter's native word holds: `u32::MAX` on 64-bit targets,
    /// 2^27 - 1 on 32-bit ones.
    pub const MAX_PERMIT_LIMIT: u32 = MAX_LIMIT;

    /// Checks the options: the limit must be at least 1, and at most
    /// [`MAX_PERMIT_LIMIT`](Self::MAX_PERMIT_LIMIT).
    ///
    /// ```
    /// use tollgate::{ConcurrencyOptions, OptionsError};
    /// assert_eq!(ConcurrencyOptions::new(0).validate(), Err(OptionsError::ZeroLimit));
    /// assert_eq!(ConcurrencyOptions::new(1).validate(), Ok(()));
    /// ```
    pub const fn validate(&self) -> Result<(), OptionsError> {
        if self.permit_limit == 0 {
            return Err(OptionsError::ZeroLimit);
        }
        // Always false on 64-bit targets, where the word holds any u32.
        #[allow(clippy::absurd_extreme_comparisons)]
        if self.permit_limit > MAX_LIMIT {
            return Err(OptionsError::LimitTooLarge { max: MAX_LIMIT });
        }
        Ok(())
    }
}

crate::options::with_queue!(ConcurrencyOptions, "ConcurrencyOptions::new(4)");

/// At most `permit_limit` permits held at once (.NET `ConcurrencyLimiter`). While nobody waits,
/// acquire and release are each one compare-and-swap on a native word (`usize`: 32 bits on 32-bit
/// MCUs); nothing locks or allocates, and a denial writes nothing shared.
/// [`acquire`](Self::acquire) waits in the queue; permits returned by a lease go to the queue
/// first (hand-off: nobody barges past an oldest-first queue).
///
/// Idleness ([`idle_duration`](Limiter::idle_duration)): on a clock whose reading is cheap
/// ([`Clock::now_is_cheap`]: `ManualClock`, `CoarseClock`, and any clock by default), the release
/// that makes the limiter fully available reads the clock and the idle duration is exact, as in
/// .NET. On an expensive clock (`StdClock`), and on targets without native 64-bit atomics, no
/// release reads the clock: the release marks the word "idle, undated", and the first
/// `idle_duration` call that sees it dates it — so `idle_duration` counts from that first call,
/// and can under-report idleness by the time between the release and that call, never
/// over-report it. Partitioned limiters poll idleness when they sweep; a partition is then
/// evicted at most one sweep later than with exact dating.
///
/// ```
/// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Limiter, Reason};
///
/// let limiter = ConcurrencyLimiter::new(ConcurrencyOptions::new(3)).unwrap();
/// let a = limiter.try_acquire(2).unwrap();
/// assert_eq!(limiter.try_acquire(2).unwrap_err().reason(), Reason::Exhausted);
/// drop(a); // the permits come back
/// assert!(limiter.try_acquire(3).is_ok());
/// assert_eq!(limiter.try_acquire(4).unwrap_err().reason(), Reason::ExceedsLimit);
/// ```
///
/// The second parameter is the kind of queue: a wait queue by default;
/// [`NoQueue`](crate::NoQueue) for a limiter that only decides at once (`try_acquire`, and the
/// release when a lease drops), with none of the queue's code or memory (built by
/// [`without_queue`](ConcurrencyLimiter::without_queue) and
/// [`at_epoch_without_queue`](ConcurrencyLimiter::at_epoch_without_queue)).
#[derive(Debug)]
pub struct ConcurrencyLimiter<C: Clock = crate::clock::DefaultClock, Q = WaitQueue> {
    word: AtomicUsize,
    /// The idle stamp: raw clock nanoseconds since which the limiter has been idle.
    idle_since: Stamp,
    /// Releases date idleness themselves (a cheap clock, and a 64-bit stamp to `fetch_max`).
    eager: Eager,
    counters: Counters,
    queue: Q,
    /// The permit limit now (changed by `reconfigure`), and [`LIMIT_CLOSED`] once the limiter
    /// is closed, so that the quick refusal tells an open limiter's limit from a closed one in
    /// one signed compare.
    limit: AtomicUsize,
    /// Permits owed by the leases out after the limit was lowered below what they hold (see
    /// `State::lower`): nonzero only while the word is `indebted`, read and written only under
    /// the queue lock (without a queue, under the slow-path lock: see `unqueued`).
    debt: AtomicUsize,
    clock: C,
}

impl<C: Clock, Q> ConcurrencyLimiter<C, Q> {
    crate::sync::const_unless_loom! {
        /// A full limiter for `options` (already validated) with the wait queue `queue`, idle
        /// since `idle_since` (ns on `clock`), dating idleness on releases if `eager`: what every
        /// constructor, with a queue or without, builds.
        fn assemble(
            options: ConcurrencyOptions,
            clock: C,
            queue: Q,
            idle_since: u64,
            eager: bool,
        ) -> Self {
            Self {
                word: AtomicUsize::new(State::full(options.permit_limit).pack()),
                idle_since: Stamp::new(idle_since),
                eager: Eager::new(eager),
                counters: Counters::new(),
                queue,
                limit: AtomicUsize::new(options.permit_limit as usize),
                debt: AtomicUsize::new(0),
                clock,
            }
        }
    }

    /// The clock this limiter reads.
    #[allow(dead_code)] // the adaptive limiter's, which times its leases on it
    pub(crate) fn clock(&self) -> &C {
        &self.clock
    }

    /// The statistics' counters, whose per-thread cells also hold an adaptive limiter's
    /// samples.
    #[allow(dead_code)]
    pub(crate) fn cells(&self) -> &Counters {
        &self.counters
    }

    /// [`assemble`](Self::assemble) idle from a reading of `clock` now, dating idleness on
    /// releases if the clock is cheap to read (see the type's docs).
    fn at_clock_reading(options: ConcurrencyOptions, clock: C, queue: Q) -> Self {
        let idle_since = clock.now().as_nanos();
        let eager = Stamp::RAISES && clock.now_is_cheap();
        Self::assemble(options, clock, queue, idle_since, eager)
    }
}

#[cfg(feature = "std")]
impl ConcurrencyLimiter<crate::clock::StdClock> {
    /// A limiter on the system clock. The clock only dates idleness, and no release reads it
    /// (see the type's docs): `idle_duration` dates idleness from the first call that sees it.
    /// For exact dating at a clock read's cost, build it `with_clock(options,
    /// CoarseClock::new()?)`: one relaxed load.
    pub fn new(options: ConcurrencyOptions) -> Result<Self, OptionsError> {
        Self::with_clock(options, crate::clock::StdClock)
    }
}

impl<C: Clock> ConcurrencyLimiter<C> {
    /// A limiter reading time from `clock`.
    pub fn with_clock(options: ConcurrencyOptions, clock: C) -> Result<Self, OptionsError> {
        options.validate()?;
        let queue = WaitQueue::new(options.queue_limit, options.queue_order);
        Ok(Self::at_clock_reading(options, clock, queue))
    }

    crate::sync::const_unless_loom! {
        /// A limiter built in a constant, so it can be a `static` shared by thread code and
        /// interrupt handlers (firmware). Its idleness counts from the clock's epoch
        /// ([`Instant::ZERO`](crate::Instant::ZERO)) rather than from a reading at creation, and
        /// no release reads the clock: `idle_duration` dates idleness from the first call that
        /// sees it (as on an expensive clock; see the type's docs).
        ///
        /// Meant for constants: invalid options stop the build there (a `const` panic is a
        /// compile error, naming the option). At run time use [`with_clock`](Self::with_clock),
        /// which returns an [`OptionsError`] instead.
        ///
        /// ```
        /// use tollgate::{Clock, ConcurrencyLimiter, ConcurrencyOptions, Instant, Limiter};
        ///
        /// struct Uptime; // e.g. a timer peripheral's counter, in nanoseconds
        /// impl Clock for Uptime {
        ///     fn now(&self) -> Instant {
        ///         Instant::from_nanos(0)
        ///     }
        /// }
        ///
        /// static PERMITS: ConcurrencyLimiter<Uptime> =
        ///     ConcurrencyLimiter::at_epoch(ConcurrencyOptions::new(4), Uptime);
        ///
        /// let lease = PERMITS.try_acquire(3).unwrap();
        /// assert_eq!(PERMITS.available_permits(), 1);
        /// drop(lease);
        /// assert_eq!(PERMITS.available_permits(), 4);
        /// ```
        ///
        /// ```compile_fail
        /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, ManualClock};
        /// static NONE: ConcurrencyLimiter<ManualClock> =
        ///     ConcurrencyLimiter::at_epoch(ConcurrencyOptions::new(0), ManualClock::new());
        /// ```
        pub fn at_epoch(options: ConcurrencyOptions, clock: C) -> Self {
            if let Err(e) = options.validate() {
                e.panic_in_const();
            }
            let queue = WaitQueue::new(options.queue_limit, options.queue_order);
            Self::assemble(options, clock, queue, 0, false)
        }
    }

    /// Changes the permit limit and the queue limit while the limiter is in use — what an
    /// adaptive concurrency controller (AIMD, gradient) does on every sample. The rule:
    /// - **A raised limit** makes the difference available at once (serving waiters).
    /// - **A lowered limit** takes what is available first; if the leases out hold more than
    ///   the new limit, they owe the rest: their releases pay it off before any permit becomes
    ///   available again. No lease is revoked, and from the call on no more than the new limit
    ///   is ever held once the excess has drained.
    /// - **Waiters** asking for more than the new limit are failed with
    ///   [`Reason::ExceedsLimit`](crate::Reason::ExceedsLimit); the rest keep their places. A
    ///   new queue limit applies to newcomers.
    ///
    /// Refused, changing nothing: invalid options (as [`with_clock`](Self::with_clock) refuses
    /// them) or a different queue order ([`OptionsError::FixedAtCreation`]).
    ///
    /// ```
    /// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Limiter};
    ///
    /// let limiter = ConcurrencyLimiter::new(ConcurrencyOptions::new(10)).unwrap();
    /// let held = limiter.try_acquire(8).unwrap();
    /// limiter.reconfigure(ConcurrencyOptions::new(4)).unwrap(); // 8 held, 4 allowed: 4 owed
    /// assert_eq!(limiter.available_permits(), 0);
    /// drop(held); // pays the 4 owed, frees the other 4
    /// assert_eq!(limiter.available_permits(), 4);
    /// limiter.reconfigure(ConcurrencyOptions::new(6)).unwrap();
    /// assert_eq!(limiter.available_permits(), 6);
    /// ```
    pub fn reconfigure(&self, options: ConcurrencyOptions) -> Result<(), OptionsError>
    where
        C: Sync,
    {
        options.validate()?;
        if options.queue_order != self.queue.order() {
            return Err(OptionsError::FixedAtCreation);
        }
        let new = options.permit_limit;
        self.queue
            .reconfigure(self, options.queue_limit, new, || self.apply_limit(new));
        Ok(())
    }

    /// Waits for `permits` in the queue (see [`Acquire`]). Rejected at once if the request
    /// exceeds the limit, the limiter is closed, or the queue has no room (with `NewestFirst`,
    /// the oldest waiters are evicted to make room instead).
    ///
    /// ```
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Limiter, QueueOrder};
    /// # async fn demo() {
    /// let opts = ConcurrencyOptions::new(1).with_queue(10, QueueOrder::OldestFirst);
    /// let limiter = ConcurrencyLimiter::new(opts).unwrap();
    /// let lease = limiter.acquire(1).await.unwrap();
    /// drop(lease); // hands the permit to the next waiter
    /// # }
    /// ```
    pub fn acquire(&self, permits: u32) -> Acquire<'_, Self>
    where
        C: Sync,
    {
        Acquire::new(self, permits)
    }

    /// Waits on this thread for `permits`, for up to `timeout` (`None`: no limit); gives up with
    /// [`Reason::TimedOut`].
    #[cfg(feature = "std")]
    pub fn acquire_blocking(
        &self,
        permits: u32,
        timeout: Option<Duration>,
    ) -> Result<Lease<'_>, Rejection>
    where
        C: Sync,
    {
        wait::acquire_blocking(self, permits, timeout)
    }
}

impl<C: Clock, Q: QueueKind> ConcurrencyLimiter<C, Q> {
    /// The options in force: those the limiter was built with, as last
    /// [`reconfigure`](Self::reconfigure)d (read from the limit and the queue, so a limiter
    /// without a queue reports a queue limit of 0, oldest first).
    ///
    /// ```
    /// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, ManualClock};
    ///
    /// let opts = ConcurrencyOptions::new(8);
    /// let limiter = ConcurrencyLimiter::with_clock(opts, ManualClock::new()).unwrap();
    /// assert_eq!(limiter.options(), opts);
    /// ```
    pub fn options(&self) -> ConcurrencyOptions {
        ConcurrencyOptions {
            permit_limit: self.limit(),
            queue_limit: self.queue.queue_limit(),
            queue_order: self.queue.order(),
        }
    }

    /// Sets the permit limit to `new` (the caller holds the queue lock, or the slow-path lock
    /// of a limiter without a queue, so that reconfigurations apply whole, one after the
    /// other, and no slow release runs meanwhile): the word absorbs the cut or receives the
    /// raise, and the debt follows.
    fn apply_limit(&self, new: u32) {
        let old = self.limit();
        let debt = self.debt.load(Ordering::Relaxed) as u64;
        // A release's give-back is capped at the limit it reads: raise the limit before
        // the permits arrive, lower it only after the word has absorbed the cut, so that
        // no racing release is capped below what it returns.
        if new > old {
            self.store_limit(new);
        }
        let Ok((_, owed)) = cas::transition(&self.word, |w| {
            let s = State::unpack(w);
            let (next, owed) = if new < old {
                s.lower(old - new, debt)
            } else {
                s.repay(new - old, debt, new)
            };
            Ok::<_, Infallible>((self.date_if_idle(next).pack(), owed))
        });
        if new < old {
            self.store_limit(new);
        }
        self.debt.store(owed as usize, Ordering::Relaxed);
    }

    /// The permit limit now.
    #[inline(always)]
    pub(crate) fn limit(&self) -> u32 {
        // Only ever stored from a `u32` (at most `MAX_LIMIT`), with the closed mark above it.
        (self.limit.load(Ordering::Acquire) & !LIMIT_CLOSED) as u32
    }

    /// Whether `short < limit` on an open limiter: the quick refusal's test of the request
    /// (`short = permits - 1`, wrapped: a probe is `u32::MAX`) and of the limiter's state in
    /// one signed compare, the closed mark being the field's sign. Exact for a word read
    /// before it: `close` marks the limit before the word, so a word read closed (acquire)
    /// is followed by a limit read marked.
    #[inline(always)]
    fn open_and_within(&self, short: u32) -> bool {
        i64::from(short) < self.limit.load(Ordering::Acquire) as isize as i64
    }

    /// Stores the limit `new`, keeping the closed mark (a `close` may race a reconfiguration).
    fn store_limit(&self, new: u32) {
        let _ = self
            .limit
            .fetch_update(Ordering::Release, Ordering::Relaxed, |l| {
                Some(new as usize | l & LIMIT_CLOSED)
            });
    }

    fn state(&self) -> State {
        State::unpack(self.word.load(Ordering::Acquire))
    }

    fn take(&self, permits: u32) -> Result<(), Rejection> {
        if permits > self.limit() {
            return Err(Rejection::new(&Reason::ExceedsLimit));
        }
        let barge = self.queue.barging();
        cas::transition(&self.word, |w| {
            State::unpack(w)
                .try_take(permits, barge)
                .map(|s| (s.pack(), ()))
        })
        .map(|_| ())
        .map_err(Self::rejection)
    }

    #[inline(always)]
    fn rejection(d: Denied) -> Rejection {
        match d {
            Denied::Closed => Rejection::new(&Reason::Closed),
            Denied::Exhausted => Rejection::new(&Reason::Exhausted),
        }
    }

    /// Called inside a transition, before the CAS that would write `next`; returns the state to
    /// write. If `next` is idle: with `eager` dating, stamps the idle start first, so that no
    /// reader can see the idle word with an older stamp (which would over-report idleness; a
    /// stamp left by an attempt whose CAS then fails can only under-report, and `fetch_max`
    /// keeps the latest of racing stamps); otherwise marks it undated, reading no clock.
    #[inline]
    fn date_if_idle(&self, next: State) -> State {
        let limit = self.limit();
        // `eager` is never set where the stamp cannot be raised (32-bit MCUs): saying so here
        // lets the compiler drop the eager branch's code there.
        if !Stamp::RAISES || !self.eager.get() {
            return next.mark_undated_if_idle(limit);
        }
        if next.idle(limit) {
            self.idle_since.raise(self.clock.now().as_nanos());
        }
        next
    }

    /// Dates an undated idle limiter now (the first `idle_duration` call that sees it idle):
    /// `undated` → `dating` (one caller wins), read the clock — after seeing the word idle, so
    /// never before the idle period began — write the stamp, `dating` → dated. A release that
    /// makes the limiter idle again meanwhile marks it undated again; it is dated next time.
    #[cold]
    fn date_now(&self) {
        let limit = self.limit();
        let won = cas::transition(&self.word, |w| {
            let s = State::unpack(w);
            if s.undated() && !s.dating() && s.idle(limit) {
                Ok((s.start_dating().pack(), ()))
            } else {
                Err(())
            }
        });
        if won.is_err() {
            return;
        }
        self.idle_since.write_exclusive(self.clock.now().as_nanos());
        let _ = cas::transition(&self.word, |w| {
            Ok::<_, Infallible>((State::unpack(w).end_dating().pack(), ()))
        });
    }
}

impl<C: Clock> wait::private::Sealed for ConcurrencyLimiter<C> {}

impl<C: Clock> ConcurrencyLimiter<C> {
    /// Makes the counts compact (see `Counters::make_compact`): for a partition's limiter.
    pub(crate) fn compact_counts(&self) {
        self.counters.make_compact();
    }
}

crate::limiter::queued_capabilities!(ConcurrencyLimiter<C> where C: Clock | Sync);

impl<C: Clock + Sync> Source for ConcurrencyLimiter<C> {
    fn queue(&self) -> &WaitQueue {
        &self.queue
    }
    fn counters(&self) -> &Counters {
        &self.counters
    }
    fn limit(&self) -> u32 {
        self.limit()
    }
    fn take_now(&self, n: u32) -> Result<u64, Rejection> {
        self.take(n).map(|()| 0)
    }
    #[inline]
    fn take_locked(&self, n: u32, flag_if_short: bool) -> LockedTake {
        cas::transition(&self.word, |w| {
            let s = State::unpack(w);
            match s.try_take(n, true) {
                Ok(next) => Ok((next.pack(), Some(0))),
                Err(Denied::Closed) => Err(&Reason::Closed),
                Err(Denied::Exhausted) if flag_if_short => Ok((s.with_waiters(true).pack(), None)),
                Err(Denied::Exhausted) => Ok((w, None)),
            }
        })
        .map(|(_, taken)| taken)
    }
    fn clear_waiters(&self) {
        let _ = cas::transition(&self.word, |w| {
            let s = State::unpack(w);
            if !s.waiters() {
                // Already clear (e.g. close() on an empty queue): nothing changes, no new stamp.
                return Ok::<_, Infallible>((w, ()));
            }
            let next = self.date_if_idle(s.with_waiters(false));
            Ok::<_, Infallible>((next.pack(), ()))
        });
    }
    fn take_for_waiter(&self, n: u32) -> LockedTake {
        self.take_locked(n, false) // no time to replay: permits come only from releases
    }
    fn give_back(&self, n: u32, _stamp: u64) {
        self.release(n);
    }
    fn wait_for_permits(&self, _total: u64) -> Option<Duration> {
        None // only releases bring permits back
    }
    fn wait_behind(&self, _ahead: &mut dyn Iterator<Item = u32>, _n: u32) -> Option<Duration> {
        None
    }
    fn timed(&self) -> bool {
        false
    }
    fn served_on_return(&self) -> bool {
        // Releases, reconfigurations and cancellations bring permits back, each serving the
        // queue under its lock.
        true
    }
    fn lease(&self, n: u32, _stamp: u64) -> Lease<'_> {
        if n == 0 {
            Lease::settling(0, PROBE, self)
        } else {
            Lease::releasing(n, self)
        }
    }
}

/// The decisions and bookkeeping shared by both queue kinds, written once and inlined into each
/// kind's `Limiter` and `Release` implementations.
impl<C: Clock, Q: QueueKind> ConcurrencyLimiter<C, Q> {
    #[inline(always)]
    fn peek_now(&self, permits: u32) -> Result<(), Rejection> {
        if permits > self.limit() {
            return Err(Rejection::new(&Reason::ExceedsLimit));
        }
        match self.state().try_take(permits, self.queue.barging()) {
            Ok(_) => Ok(()),
            Err(Denied::Closed) => Err(Rejection::new(&Reason::Closed)),
            Err(Denied::Exhausted) => Err(Rejection::new(&Reason::Exhausted)),
        }
    }

    /// `try_acquire` of both kinds (with and without a queue): the decision, counted, and a
    /// lease that gives the permits back (none for a probe).
    #[inline(always)]
    fn try_acquire_now(&self, permits: u32) -> Result<Lease<'_>, Rejection>
    where
        Self: Release + Sync,
    {
        // On 32-bit MCUs, where a count is no cheaper than a call: one copy of the decision
        // (code size).
        if cfg!(tollgate_cs_cells) {
            return self.try_acquire_general(permits);
        }
        // The decision on one reading of the word, and its count, inline; a lost race, a
        // probe (`permits == 0`), a request over the limit, a closed limiter, and a count that
        // needs its slow path, in tail calls (no registers saved on the quick path).
        let w = cas::Word::load(&self.word);
        let state = State::unpack(w);
        let short = permits.wrapping_sub(1);
        if short < state.available() {
            // `1 <= permits <= available`, in one compare: no limit to read, as the word never
            // holds more permits than the limit (a raise is applied to the limit before the
            // word, a cut to the word before the limit), and no probe case left in `try_take`.
            // With a queue, anyone waiting sends the newcomer to the general path, which lets
            // it barge if the queue's order does (newest first): a grant while others wait is
            // rare (they wait for want of permits), and the quick one reads no order (a load,
            // a shift and a 64-bit constant fewer). Without one, nobody waits: only the closed
            // flag blocks.
            let taken = state.try_take(permits, !Q::QUEUED);
            // Refused here only by a flag (closed, waiters): the general path's.
            if let Ok(next) = taken {
                if next.pack() == w || cas::swap_once(&self.word, w, next.pack()) {
                    return self.counters.count_granted(self.lease(permits));
                }
            }
        } else if self.open_and_within(short) {
            // `available < permits <= limit` on an open limiter: exhausted, whoever waits.
            // (Closed, which no later call changes, is the general path's answer, so that this
            // common refusal chooses no reason.)
            return self
                .counters
                .count_rejected(Self::rejection(Denied::Exhausted));
        }
        self.try_acquire_cold(permits)
    }

    #[cold]
    #[inline(never)]
    fn try_acquire_cold(&self, permits: u32) -> Result<Lease<'_>, Rejection>
    where
        Self: Release + Sync,
    {
        self.try_acquire_general(permits)
    }

    /// [`try_acquire_now`](Self::try_acquire_now) through the general transition.
    #[inline(always)]
    fn try_acquire_general(&self, permits: u32) -> Result<Lease<'_>, Rejection>
    where
        Self: Release + Sync,
    {
        let taken = self.counters.count(self.take(permits));
        taken.map(|()| self.lease(permits))
    }

    /// The lease of `permits` granted: released on drop (none for a probe, whose lease
    /// returns nothing and settles to nothing: see [`PROBE`]).
    #[inline(always)]
    fn lease(&self, permits: u32) -> Lease<'_>
    where
        Self: Release + Sync,
    {
        if permits == 0 {
            Lease::settling(0, PROBE, self)
        } else {
            Lease::releasing(permits, self)
        }
    }

    #[inline(always)]
    fn available_now(&self) -> u64 {
        u64::from(self.state().available())
    }

    #[inline(always)]
    fn statistics_now(&self) -> Statistics {
        Statistics {
            available_permits: self.available_now(),
            queued_permits: self.queue.queued_permits(),
            total_successful: self.counters.successful(),
            total_failed: self.counters.failed(),
        }
    }

    #[inline(always)]
    fn idle_now(&self) -> Option<Duration> {
        let limit = self.limit();
        if self.state().undated() {
            self.date_now();
        }
        // Clock first, then the word, then the stamp: a stamp is written before the CAS that
        // makes the word idle (eager) or dated (lazy), so an idle, dated word read here comes
        // with its own stamp or a later one.
        let now = self.clock.now();
        let s = self.state();
        if !s.idle(limit) {
            return None;
        }
        if s.undated() || s.dating() {
            // Became idle again just now (after the dating above), or being dated right now.
            return Some(Duration::ZERO);
        }
        Some(match self.idle_since.read() {
            Some(since) => now.saturating_duration_since(Instant::from_nanos(since)),
            None => Duration::ZERO, // being rewritten (32-bit stamp): it just became idle
        })
    }

    /// Marks the word closed (a queued limiter then fails its waiters).
    #[inline(always)]
    fn close_word(&self) {
        // The limit's mark first (see `open_and_within`), then the word.
        if LIMIT_CLOSED != 0 {
            self.limit.fetch_or(LIMIT_CLOSED, Ordering::Release);
        }
        let _ = cas::transition(&self.word, |w| {
            Ok::<_, Infallible>((State::unpack(w).close().pack(), ()))
        });
    }

    /// A release's fast path: nobody waits and nothing is owed, one CAS; `false` sends the
    /// release to the slow path ([`repay_and_hand`](Self::repay_and_hand) under a lock).
    ///
    /// With nothing owed, the permits available and held make the limit, so a release never
    /// needs capping; the fast path writes the uncapped sum and leaves a sum above the limit it
    /// reads (a release of more than was taken, or a limit read from another moment) to the
    /// slow path, under the lock, where the limit holds still. Capping here instead would pair
    /// the word with a limit of another moment: a word that returned to the same value
    /// (lowered, then raised back: an ABA the CAS cannot see) would be capped at the lowered
    /// limit and lose permits (loom: `a_release_racing_a_lower_and_a_raise_loses_nothing`).
    #[inline(always)]
    fn release_fast(&self, permits: u32) -> bool {
        cas::transition(&self.word, |w| {
            let s = State::unpack(w);
            if s.waiters() || s.indebted() {
                return Err(());
            }
            let next = s.give_back(permits, MAX_LIMIT);
            if next.available() > self.limit() {
                return Err(());
            }
            Ok((self.date_if_idle(next).pack(), ()))
        })
        .is_ok()
    }

    /// Takes `extra` more permits for a lease settled above its estimate (under the queue
    /// lock, or the slow-path lock of a limiter without a queue, where the debt is kept): the
    /// available permits give what they can and the rest is owed, as when the limit is lowered
    /// ([`State::lower`]): releases repay it before anything becomes available again. At most
    /// one `limit` may be owed: past that, [`SettleError::DebtLimit`] and nothing is taken.
    fn take_debt(&self, extra: u32, max_debt: u32) -> Result<(), SettleError> {
        let debt = self.debt.load(Ordering::Relaxed) as u64;
        let bound = u64::from(self.limit().min(max_debt));
        let (_, owed) = cas::transition(&self.word, |w| {
            let (next, owed) = State::unpack(w).lower(extra, debt);
            if owed > bound {
                return Err(SettleError::DebtLimit);
            }
            Ok((next.pack(), owed))
        })?;
        self.debt.store(owed as usize, Ordering::Relaxed);
        Ok(())
    }

    /// A settle, with and without a queue: a probe's lease cannot (see [`PROBE`]); below the
    /// estimate, the difference is released at once (`release`: serving the queue); above,
    /// the extra is taken past any waiter by `debit` under the lock that serializes the slow
    /// paths ([`take_debt`](Self::take_debt): into debt when it is not available, at most one
    /// `limit` owed).
    #[inline]
    fn settle_now(
        &self,
        s: Settlement,
        release: impl FnOnce(u32),
        debit: impl FnOnce(u32) -> Result<(), SettleError>,
    ) -> Result<(), SettleError> {
        if s.stamp == PROBE {
            // A probe's lease returns nothing when dropped: permits it took would never
            // come back.
            return Err(SettleError::Unsupported);
        }
        if s.actual < s.held {
            release(s.held - s.actual);
            Ok(())
        } else {
            debit(s.actual - s.held)
        }
    }

    /// A release's slow path, under the queue lock (or the slow-path lock of a limiter without
    /// a queue): returns the permits, paying what is owed first (capped at the limit, which
    /// holds still there), and hands the rest to `head`, the permits of the waiter at the
    /// queue's serving end: in the same CAS, they are taken for it if they fit now (direct
    /// hand-off). Returns the hand-off (as `give_back_and_serve` wants it).
    #[inline(always)]
    fn repay_and_hand(&self, permits: u32, head: Option<u32>) -> Option<(u64, bool)> {
        let debt = self.debt.load(Ordering::Relaxed) as u64;
        let Ok((_, (owed, handed))) = cas::transition(&self.word, |w| {
            let (next, owed) = State::unpack(w).repay(permits, debt, self.limit());
            let (next, handed) = match head.map(|n| next.try_take(n, true)) {
                Some(Ok(taken)) => (taken, Some(taken.available() > 0)),
                _ => (next, None),
            };
            Ok::<_, Infallible>((self.date_if_idle(next).pack(), (owed, handed)))
        });
        self.debt.store(owed as usize, Ordering::Relaxed);
        handed.map(|left| (0, left))
    }
}

impl_limiter!(ConcurrencyLimiter<C>);

impl<C: Clock + Sync> ConcurrencyLimiter<C> {
    /// Closes the word, then fails every waiter.
    fn close_now(&self) {
        self.close_word();
        self.queue.close(self);
    }
}

/// The mark of a closed limiter in its limit field (its sign bit; a limit is at most
/// [`MAX_LIMIT`], far below it), read by the quick refusal. None on 32-bit MCUs, which have no
/// quick path.
const LIMIT_CLOSED: usize = if cfg!(tollgate_cs_cells) {
    0
} else {
    1 << (usize::BITS - 1)
};

/// The stamp of a probe's lease (`try_acquire(0)`, `acquire(0)`): it holds nothing and gives
/// nothing back when dropped, so it cannot settle ([`SettleError::Unsupported`]: the permits a
/// settle took would never come back). Every other lease's stamp is 0 (a concurrency limiter
/// keeps no mark of when it granted), whatever lease carries it (owned, a partition's).
const PROBE: u64 = 1;

impl<C: Clock + Sync> Release for ConcurrencyLimiter<C> {
    #[inline]
    fn release(&self, permits: u32) {
        if self.release_fast(permits) {
            return;
        }
        // Waiters, a debt, or a sum above the limit: under the queue lock, then serve the queue.
        self.queue
            .give_back_and_serve(self, |head| self.repay_and_hand(permits, head));
    }

    /// Below the estimate, the difference is released at once (serving the queue); above, the
    /// extra is taken past any waiter, into debt when it is not available: owed as when the
    /// limit is lowered (releases repay it first), at most one `limit`.
    fn settle(&self, s: Settlement) -> Result<(), SettleError> {
        self.settle_now(
            s,
            |n| self.release(n),
            |extra| {
                let mut wakes = crate::wait::WakeList::new();
                let mut take = Some(|| self.take_debt(extra, s.max_debt));
                self.queue
                    .locked(&mut wakes, |_, _| take.take().map(|take| take()))
            },
        )
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use core::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::clock::ManualClock;

    const SEC: Duration = Duration::from_secs(1);

    /// A manual clock that counts its reads, and says whether it is cheap.
    struct Counted<'a> {
        clock: &'a ManualClock,
        reads: AtomicU32,
        cheap: bool,
    }

    impl Clock for Counted<'_> {
        fn now(&self) -> Instant {
            self.reads.fetch_add(1, Ordering::Relaxed);
            self.clock.now()
        }
        fn now_is_cheap(&self) -> bool {
            self.cheap
        }
    }

    /// Every refusal of a closed limiter is `Closed` (the quick refusal reads the closed mark
    /// in the limit field), whatever the request; reconfiguring it keeps it closed and its
    /// limit reads back without the mark.
    #[test]
    fn a_closed_limiter_refuses_as_closed_and_stays_closed_when_reconfigured() {
        let clock = ManualClock::new();
        for queue_limit in [0, 4] {
            let opts = ConcurrencyOptions::new(2).with_queue(queue_limit, QueueOrder::NewestFirst);
            let l = ConcurrencyLimiter::with_clock(opts, &clock).unwrap();
            let held = l.try_acquire(2).unwrap();
            assert_eq!(l.try_acquire(1).unwrap_err().reason(), Reason::Exhausted);
            l.close();
            for n in [0, 1, 2, 3] {
                let expected = if n > 2 {
                    Reason::ExceedsLimit
                } else {
                    Reason::Closed
                };
                assert_eq!(l.try_acquire(n).unwrap_err().reason(), expected, "{n}");
            }
            l.reconfigure(ConcurrencyOptions {
                permit_limit: 5,
                ..opts
            })
            .unwrap();
            assert_eq!((l.options().permit_limit, l.available_permits()), (5, 3));
            assert!(l.is_closed());
            assert_eq!(l.try_acquire(1).unwrap_err().reason(), Reason::Closed);
            drop(held);
            assert_eq!(l.available_permits(), 5);
        }
    }

    fn limiter(clock: &ManualClock, limit: u32, cheap: bool) -> ConcurrencyLimiter<Counted<'_>> {
        let counted = Counted {
            clock,
            reads: AtomicU32::new(0),
            cheap,
        };
        ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(limit), counted).unwrap()
    }

    fn reads(l: &ConcurrencyLimiter<Counted<'_>>) -> u32 {
        l.clock.reads.load(Ordering::Relaxed)
    }

    #[test]
    fn acquire_and_release_read_no_expensive_clock() {
        let clock = ManualClock::new();
        let l = limiter(&clock, 2, false);
        let before = reads(&l);
        for _ in 0..10 {
            let a = l.try_acquire(1).unwrap();
            let b = l.try_acquire(1).unwrap();
            assert!(l.try_acquire(1).is_err());
            drop(a);
            drop(b); // back to full: idle
        }
        assert_eq!(reads(&l), before);
    }

    #[test]
    fn a_cheap_clock_dates_idleness_on_the_release() {
        let clock = ManualClock::new();
        let l = limiter(&clock, 2, true);
        let a = l.try_acquire(1).unwrap();
        let before = reads(&l);
        clock.advance(SEC);
        drop(a);
        assert_eq!(reads(&l), before + 1);
        clock.advance(3 * SEC);
        assert_eq!(l.idle_duration(), Some(3 * SEC));
    }

    #[test]
    fn an_expensive_clock_dates_idleness_at_the_first_look() {
        let clock = ManualClock::new();
        let l = limiter(&clock, 2, false);
        clock.advance(SEC);
        // Idle since creation (dated at construction).
        assert_eq!(l.idle_duration(), Some(SEC));
        let a = l.try_acquire(1).unwrap();
        let b = l.try_acquire(1).unwrap();
        assert_eq!(l.idle_duration(), None);
        drop(a);
        assert_eq!(l.idle_duration(), None);
        drop(b); // idle from here (t = 1 s), but nothing read the clock
        clock.advance(3 * SEC);
        // First look (t = 4 s): dated now; under-reports, never over-reports.
        assert_eq!(l.idle_duration(), Some(Duration::ZERO));
        clock.advance(2 * SEC);
        assert_eq!(l.idle_duration(), Some(2 * SEC));
        // A probe takes nothing and keeps the date.
        drop(l.try_acquire(0).unwrap());
        assert_eq!(l.idle_duration(), Some(2 * SEC));
        // In use again, then idle again: dated by the next look.
        let c = l.try_acquire(2).unwrap();
        clock.advance(SEC);
        assert_eq!(l.idle_duration(), None);
        drop(c);
        clock.advance(SEC);
        assert_eq!(l.idle_duration(), Some(Duration::ZERO));
        clock.advance(SEC);
        assert_eq!(l.idle_duration(), Some(SEC));
        // Closing changes nothing about idleness.
        l.close();
        assert_eq!(l.idle_duration(), Some(SEC));
    }

    #[test]
    fn a_release_while_being_dated_is_dated_again() {
        let clock = ManualClock::new();
        let l = limiter(&clock, 1, false);
        drop(l.try_acquire(1).unwrap());
        // Someone holds the dating flag (as `date_now` does between its two CASes) ...
        let dating = State::unpack(l.word.load(Ordering::Acquire)).start_dating();
        l.word.store(dating.pack(), Ordering::Release);
        assert_eq!(l.idle_duration(), Some(Duration::ZERO));
        // ... while the limiter is taken and released again: still dating, now undated too.
        drop(l.try_acquire(1).unwrap());
        let s = l.state();
        assert!(s.dating() && s.undated());
        // Only the flag's holder writes the stamp; nobody else starts dating meanwhile.
        clock.advance(SEC);
        assert_eq!(l.idle_duration(), Some(Duration::ZERO));
        assert!(l.state().dating());
        // The holder finishes; the next look dates the newer idle period.
        l.idle_since.write_exclusive(0);
        let _ = cas::transition(&l.word, |w| {
            Ok::<_, Infallible>((State::unpack(w).end_dating().pack(), ()))
        });
        clock.advance(SEC);
        assert_eq!(l.idle_duration(), Some(Duration::ZERO));
        clock.advance(SEC);
        assert_eq!(l.idle_duration(), Some(SEC));
    }

    #[test]
    fn limits_beyond_the_native_word_are_refused() {
        let too_big = ConcurrencyOptions::MAX_PERMIT_LIMIT.checked_add(1);
        if let Some(limit) = too_big {
            assert_eq!(
                ConcurrencyOptions::new(limit).validate(),
                Err(OptionsError::LimitTooLarge {
                    max: ConcurrencyOptions::MAX_PERMIT_LIMIT
                })
            );
        }
        let max = ConcurrencyOptions::new(ConcurrencyOptions::MAX_PERMIT_LIMIT);
        assert_eq!(max.validate(), Ok(()));
    }
}
