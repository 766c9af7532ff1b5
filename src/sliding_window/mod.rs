//! The sliding window: at most `permit_limit` permits in any window of `segments_per_window`
//! consecutive segments; permits come back when their segment leaves the window.

mod state;

use core::convert::Infallible;
use core::time::Duration;

use crate::cas;
use crate::clock::Clock;
use crate::lease::{Lease, Reason, Rejection, Statistics};
use crate::limiter::{Limiter, Replenishing};
use crate::nanos::Nanos;
use crate::options::{OptionsError, QueueOrder};
use crate::reciprocal::Reciprocal;
use crate::stats::Counters;
use crate::sync::{AtomicU128, AtomicU64, Ordering};
use crate::ticks::{period_nanos, Ticker};
use crate::wait::{self, Acquire, Source, WaitQueue};

use state::{Denied, Header, Shape, TICK_MAX};

/// Options of a [`SlidingWindowLimiter`] (.NET `SlidingWindowRateLimiterOptions`, without
/// `AutoReplenishment`: the window slides with the clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct SlidingWindowOptions {
    /// Permits per window. At least 1.
    #[doc(alias = "PermitLimit")]
    pub permit_limit: u32,
    /// The window. Its segment is `window / segments_per_window`, in whole nanoseconds (as .NET
    /// divides ticks); at least 1 ns. The window is shorter than 2^63 ns (292 years: a limiter
    /// reads its clock as stepped back from 2^63 ns after its creation on).
    #[doc(alias = "Window")]
    pub window: Duration,
    /// Segments per window: at least 1 and at most the limiter's capacity `N`.
    #[doc(alias = "SegmentsPerWindow")]
    pub segments_per_window: u32,
    /// Permits that may wait in the queue (for waiting acquisitions).
    #[doc(alias = "QueueLimit")]
    pub queue_limit: u32,
    /// The order queued requests are served in.
    #[doc(alias = "QueueProcessingOrder")]
    pub queue_order: QueueOrder,
}

impl SlidingWindowOptions {
    /// `permit_limit` permits per `window` of `segments` segments; no queue.
    pub const fn new(permit_limit: u32, window: Duration, segments: u32) -> Self {
        Self {
            permit_limit,
            window,
            segments_per_window: segments,
            queue_limit: 0,
            queue_order: QueueOrder::OldestFirst,
        }
    }

    /// Checks every option against a ring of `max_segments` slots; returns the segment in
    /// nanoseconds.
    pub const fn validate(&self, max_segments: usize) -> Result<u64, OptionsError> {
        if self.permit_limit == 0 {
            return Err(OptionsError::ZeroLimit);
        }
        if self.segments_per_window == 0 {
            return Err(OptionsError::ZeroSegments);
        }
        if self.segments_per_window as usize > max_segments {
            return Err(OptionsError::TooManySegments { max: max_segments });
        }
        match period_nanos(self.window) {
            None => Err(OptionsError::PeriodTooLong),
            Some(0) => Err(OptionsError::ZeroPeriod),
            Some(ns) if ns / self.segments_per_window as u64 == 0 => {
                Err(OptionsError::SegmentTooShort)
            }
            Some(ns) => Ok(ns / self.segments_per_window as u64),
        }
    }
}

crate::options::with_queue!(
    SlidingWindowOptions,
    "SlidingWindowOptions::new(10, Duration::from_secs(60), 6)"
);

/// A ring of empty slots, built in a constant where the atomics allow it.
#[cfg(not(loom))]
const fn empty_ring<const N: usize>() -> [AtomicU128; N] {
    [const { AtomicU128::new(0) }; N]
}

/// A ring of empty slots (loom's atomics cannot be built in a constant).
#[cfg(loom)]
fn empty_ring<const N: usize>() -> [AtomicU128; N] {
    core::array::from_fn(|_| AtomicU128::new(0))
}

/// The header's atomic word: the 64-bit layout when the configuration fits it
/// ([`Header::narrow_width`]), else 128 bits. Both hold the same [`Header`]; every update goes
/// through [`cas::transition`].
#[derive(Debug)]
enum HeaderWord {
    /// The 64-bit layout, with `cur` and `prev` of `width` bits.
    #[cfg_attr(tollgate_cs_cells, allow(dead_code))] // never built there (see `NarrowWord`)
    Narrow { word: NarrowWord, width: u32 },
    /// The 128-bit layout.
    Wide(AtomicU128),
}

/// The 64-bit header's word.
#[cfg(not(tollgate_cs_cells))]
type NarrowWord = AtomicU64;

/// No 64-bit header on targets without native 64-bit atomics (32-bit MCUs): both words would be
/// critical sections there, so the 64-bit layout would only add its code. The variant holding
/// this type cannot exist, and its code compiles away.
#[cfg(tollgate_cs_cells)]
#[derive(Debug)]
enum NarrowWord {}

#[cfg(tollgate_cs_cells)]
impl cas::Word for NarrowWord {
    type Value = u64;
    fn load(&self) -> u64 {
        match *self {}
    }
    fn cas(&self, _: u64, _: u64) -> Result<u64, u64> {
        match *self {}
    }
}

impl HeaderWord {
    crate::sync::const_unless_loom! {
        fn new(h: Header, width: Option<u32>) -> Self {
            #[cfg(tollgate_cs_cells)]
            let width: Option<u32> = {
                let _ = width;
                None
            };
            match width {
                #[cfg(not(tollgate_cs_cells))]
                Some(width) => HeaderWord::Narrow {
                    word: AtomicU64::new(h.pack64(width)),
                    width,
                },
                _ => HeaderWord::Wide(AtomicU128::new(h.pack())),
            }
        }
    }

    /// The largest limit the layout holds (a `reconfigure` may not raise it further).
    fn max_limit(&self) -> u32 {
        match self {
            HeaderWord::Narrow { width, .. } => (1u32 << width) - 1,
            HeaderWord::Wide(_) => u32::MAX,
        }
    }

    #[inline]
    fn load(&self) -> Header {
        match self {
            HeaderWord::Narrow { word, width } => Header::unpack64(cas::Word::load(word), *width),
            HeaderWord::Wide(word) => Header::unpack(cas::Word::load(word)),
        }
    }

    /// [`cas::transition`] over the unpacked header; returns the header decided on.
    #[inline(always)]
    fn transition<T, E>(
        &self,
        mut decide: impl FnMut(Header) -> Result<(Header, T), E>,
    ) -> Result<(Header, T), E> {
        match self {
            HeaderWord::Narrow { word, width } => {
                let width = *width;
                cas::transition(word, |w| {
                    decide(Header::unpack64(w, width)).map(|(h, t)| (h.pack64(width), t))
                })
                .map(|(w, t)| (Header::unpack64(w, width), t))
            }
            HeaderWord::Wide(word) => cas::transition(word, |w| {
                decide(Header::unpack(w)).map(|(h, t)| (h.pack(), t))
            })
            .map(|(w, t)| (Header::unpack(w), t)),
        }
    }
}

/// A sliding window (.NET `SlidingWindowRateLimiter`): the window is divided into segments;
/// permits taken during a segment count against the limit until that segment leaves the window,
/// then come back.
///
/// `N` is the capacity of the segment ring (default 16): `segments_per_window` may be anything
/// from 1 to `N`. The ring is inline — no allocation — and takes 16 bytes per slot.
///
/// Admission is one compare-and-swap on a header holding the current segment's count and the sum
/// of the window's earlier segments — one native 64-bit word when the counts and every segment
/// up to the horizon fit in it (`2·bits(limit) + bits(segments in 2^63 ns) ≤ 62`: up to 16,383
/// permits with 1 s segments, 511 with 1 ms), else 128 bits; earlier segments' counts are
/// frozen into the ring when the window slides past them. Every rejection carries a RetryAfter: the time until enough
/// of the oldest segments have left the window.
///
/// ```
/// use core::time::Duration;
/// use tollgate::{Limiter, ManualClock, SlidingWindowLimiter, SlidingWindowOptions};
///
/// let clock = ManualClock::new();
/// let opts = SlidingWindowOptions::new(10, Duration::from_secs(3), 3);
/// let window = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
/// let _ = window.try_acquire(7).unwrap();
/// clock.advance(Duration::from_secs(1));
/// let _ = window.try_acquire(3).unwrap();
/// assert_eq!(window.try_acquire(1).unwrap_err().retry_after(), Some(Duration::from_secs(2)));
/// clock.advance(Duration::from_secs(2)); // the first segment leaves the window
/// assert_eq!(window.available_permits(), 7);
/// ```
#[derive(Debug)]
pub struct SlidingWindowLimiter<C: Clock = crate::clock::DefaultClock, const N: usize = 16> {
    header: HeaderWord,
    ring: [AtomicU128; N],
    ticker: Ticker,
    /// Segments per window (fixed at creation).
    segments: u64,
    /// Its reciprocal: a segment's slot in the ring without a division.
    by_segments: Reciprocal,
    /// Permits per window (changed by `reconfigure`).
    limit: AtomicU64,
    counters: Counters,
    queue: WaitQueue,
    options: SlidingWindowOptions,
    clock: C,
}

#[cfg(feature = "std")]
impl SlidingWindowLimiter<crate::StdClock> {
    /// A sliding window on the system clock, with the default ring of
    /// [`DEFAULT_SEGMENTS`](Self::DEFAULT_SEGMENTS) segments (another ring size:
    /// [`with_capacity`](SlidingWindowLimiter::with_capacity)).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Limiter, SlidingWindowLimiter, SlidingWindowOptions};
    ///
    /// let window = SlidingWindowLimiter::new(SlidingWindowOptions::new(10, Duration::from_secs(60), 6)).unwrap();
    /// assert!(window.try_acquire(10).is_ok());
    /// ```
    pub fn new(options: SlidingWindowOptions) -> Result<Self, OptionsError> {
        Self::with_clock(options, crate::StdClock)
    }
}

impl<C: Clock> SlidingWindowLimiter<C> {
    /// The segments per window the default ring holds: 16 (a ring slot is 16 bytes).
    pub const DEFAULT_SEGMENTS: usize = 16;

    /// A sliding window reading time from `clock`, with the default ring of
    /// [`DEFAULT_SEGMENTS`](Self::DEFAULT_SEGMENTS) segments; segments count from
    /// `clock.now()`. Another ring size: [`with_capacity`](SlidingWindowLimiter::with_capacity).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Limiter, ManualClock, SlidingWindowLimiter, SlidingWindowOptions};
    ///
    /// let clock = ManualClock::new();
    /// let opts = SlidingWindowOptions::new(10, Duration::from_secs(60), 6);
    /// let window = SlidingWindowLimiter::with_clock(opts, &clock).unwrap(); // nothing to annotate
    /// assert!(window.try_acquire(10).is_ok());
    /// ```
    pub fn with_clock(options: SlidingWindowOptions, clock: C) -> Result<Self, OptionsError> {
        Self::with_capacity(options, clock)
    }
}

impl<C: Clock, const N: usize> SlidingWindowLimiter<C, N> {
    /// A sliding window reading time from `clock`, with a ring of `N` segments (at least the
    /// options' `segments_per_window`: fewer bytes for coarse windows, more for fine ones);
    /// segments count from `clock.now()`.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{ManualClock, OptionsError, SlidingWindowLimiter, SlidingWindowOptions};
    ///
    /// let opts = SlidingWindowOptions::new(10, Duration::from_secs(60), 60);
    /// let fine = SlidingWindowLimiter::<_, 64>::with_capacity(opts, ManualClock::new());
    /// assert!(fine.is_ok());
    /// let small = SlidingWindowLimiter::<_, 4>::with_capacity(opts, ManualClock::new());
    /// assert_eq!(small.unwrap_err(), OptionsError::TooManySegments { max: 4 });
    /// ```
    pub fn with_capacity(options: SlidingWindowOptions, clock: C) -> Result<Self, OptionsError> {
        let segment = options.validate(N)?;
        Ok(Self {
            header: HeaderWord::new(
                Header::EMPTY,
                Header::narrow_width(options.permit_limit, segment),
            ),
            ring: core::array::from_fn(|_| AtomicU128::new(0)),
            ticker: Ticker::new(clock.now(), segment),
            segments: u64::from(options.segments_per_window),
            by_segments: Reciprocal::of(options.segments_per_window as u64),
            limit: AtomicU64::new(options.permit_limit as u64),
            counters: Counters::new(),
            queue: WaitQueue::new(options.queue_limit, options.queue_order),
            options,
            clock,
        })
    }

    crate::sync::const_unless_loom! {
        /// A sliding window built in a constant, so it can be a `static` shared by thread code
        /// and interrupt handlers (firmware). Its segments count from the clock's epoch
        /// ([`Instant::ZERO`](crate::Instant::ZERO), e.g. boot) rather than from a reading at
        /// creation — the only difference from [`with_clock`](Self::with_clock). Invalid options
        /// stop the build (a `const` panic); at run time use `with_clock`.
        ///
        /// ```
        /// use core::time::Duration;
        /// use tollgate::{Limiter, ManualClock, SlidingWindowLimiter, SlidingWindowOptions};
        ///
        /// static WINDOW: SlidingWindowLimiter<ManualClock, 4> = SlidingWindowLimiter::at_epoch(
        ///     SlidingWindowOptions::new(3, Duration::from_secs(4), 4),
        ///     ManualClock::new(),
        /// );
        ///
        /// assert!(WINDOW.try_acquire(3).is_ok());
        /// assert!(WINDOW.try_acquire(1).is_err());
        /// ```
        pub fn at_epoch(options: SlidingWindowOptions, clock: C) -> Self {
            let segment = match options.validate(N) {
                Ok(segment) => segment,
                Err(e) => e.panic_in_const(),
            };
            Self {
                header: HeaderWord::new(
                    Header::EMPTY,
                    Header::narrow_width(options.permit_limit, segment),
                ),
                ring: empty_ring(),
                ticker: Ticker::new(crate::Instant::ZERO, segment),
                segments: options.segments_per_window as u64,
                by_segments: Reciprocal::of(options.segments_per_window as u64),
                limit: AtomicU64::new(options.permit_limit as u64),
                counters: Counters::new(),
                queue: WaitQueue::new(options.queue_limit, options.queue_order),
                options,
                clock,
            }
        }
    }

    /// The options in force: those the limiter was built with, as last
    /// [`reconfigure`](Self::reconfigure)d.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{ManualClock, SlidingWindowLimiter, SlidingWindowOptions};
    ///
    /// let opts = SlidingWindowOptions::new(100, Duration::from_secs(60), 6);
    /// let window = SlidingWindowLimiter::with_clock(opts, ManualClock::new()).unwrap();
    /// assert_eq!(window.options(), opts);
    /// ```
    pub fn options(&self) -> SlidingWindowOptions {
        SlidingWindowOptions {
            permit_limit: self.limit(),
            queue_limit: self.queue.limit(),
            ..self.options
        }
    }

    /// Changes the permit limit and the queue limit while the limiter is in use. Permits
    /// already counted in the window stay counted: under a lowered limit the window refuses
    /// until enough segments slide out, under a raised one it has room at once. Waiters asking
    /// for more than the new limit are failed with
    /// [`Reason::ExceedsLimit`](crate::Reason::ExceedsLimit), the rest keep their places and are
    /// served as far as the window allows; a new queue limit applies to newcomers. Refused,
    /// changing nothing: invalid options, a different window, segment count or queue order
    /// ([`OptionsError::FixedAtCreation`]), or a limit larger than the header laid out at
    /// creation holds ([`OptionsError::LimitTooLarge`]: any `u32` with a 128-bit header, and with
    /// the 64-bit one every value its count fields hold, e.g. 16,383 with 1 s segments).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Limiter, ManualClock, SlidingWindowLimiter, SlidingWindowOptions};
    ///
    /// let clock = ManualClock::new();
    /// let minute = Duration::from_secs(60);
    /// let opts = SlidingWindowOptions::new(10, minute, 2);
    /// let window = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
    /// window.try_acquire(6).unwrap().forget();
    /// window.reconfigure(SlidingWindowOptions::new(5, minute, 2)).unwrap();
    /// assert!(window.try_acquire(1).is_err()); // 6 counted, 5 allowed
    /// clock.advance(minute); // the segment holding the 6 slides out
    /// assert!(window.try_acquire(5).is_ok());
    /// ```
    pub fn reconfigure(&self, options: SlidingWindowOptions) -> Result<(), OptionsError> {
        options.validate(N)?;
        if options.window != self.options.window
            || options.segments_per_window != self.options.segments_per_window
            || options.queue_order != self.options.queue_order
        {
            return Err(OptionsError::FixedAtCreation);
        }
        let limit = options.permit_limit;
        let max = self.header.max_limit();
        if limit > max {
            return Err(OptionsError::LimitTooLarge { max });
        }
        self.queue
            .reconfigure(self, options.queue_limit, limit, || {
                self.limit.store(u64::from(limit), Ordering::Release);
            });
        Ok(())
    }

    /// Permits per window now.
    #[inline(always)]
    fn limit(&self) -> u32 {
        // Only ever stored from a `u32`.
        self.limit.load(Ordering::Acquire) as u32
    }

    /// The window's shape now.
    #[inline(always)]
    fn shape(&self) -> Shape {
        Shape {
            limit: self.limit(),
            segments: self.segments,
        }
    }

    /// The ring slot of `segment`: `segment % segments`, by multiplication (a 64-bit division
    /// is a slow instruction, and a library routine of almost a kilobyte on a 32-bit MCU).
    #[inline]
    fn index(&self, segment: u64) -> u64 {
        self.by_segments.div_rem(segment, self.segments).1
    }

    fn slot(&self, segment: u64) -> &AtomicU128 {
        // `segments <= N` (validated), so the index is in bounds.
        &self.ring[self.index(segment) as usize]
    }

    /// The frozen count of segment `j`: its slot, if the slot still holds segment `j`.
    fn frozen(&self, j: u64) -> u32 {
        self.frozen_in(self.index(j), j)
    }

    /// [`frozen`](Self::frozen) with the slot index `j % segments` already known.
    #[inline]
    fn frozen_in(&self, index: u64, j: u64) -> u32 {
        let v = self.ring[index as usize].load(Ordering::Acquire);
        if (v >> 64) as u64 == j {
            v as u32
        } else {
            0
        }
    }

    /// Records that segment `j` ended with `count` permits, before the header moves past it.
    /// Racing writers of the same segment keep the largest count (a segment's count only grows,
    /// and the writer whose header wins saw the final one); a slot already holding a later
    /// segment is left alone. Empty segments are not written.
    fn freeze(&self, j: u64, count: u32) {
        if count == 0 {
            return;
        }
        let new = u128::from(j) << 64 | u128::from(count);
        let slot = self.slot(j);
        let mut cur = slot.load(Ordering::Acquire);
        loop {
            let (seg, held) = ((cur >> 64) as u64, cur as u32);
            if seg > j || (seg == j && held >= count) {
                return;
            }
            match slot.compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(v) => cur = v,
            }
        }
    }

    /// Freezes the segment a header leaves when it moves to `next`.
    fn leave(&self, h: Header, next: Header) {
        if next.tick != h.tick {
            self.freeze(h.tick, h.cur);
        }
    }

    /// One lock-free attempt at `e` ns after creation; on denial, the header it decided on and
    /// the segment and offset `e` falls in (located from the header's own segment: no division
    /// while time stays in it).
    #[inline]
    fn attempt(
        &self,
        e: u64,
        n: u32,
        s: Shape,
        barge: bool,
    ) -> Result<(), (Denied, Header, (u64, u64))> {
        self.header
            .transition(|h| {
                let (k, into) = self.ticker.locate(e, h.tick);
                let next = h
                    .try_take(k, n, s, barge, |j| self.frozen(j))
                    .map_err(|d| (d, h, (k, into)))?;
                self.leave(h, next);
                Ok((next, ()))
            })
            .map(|_| ())
    }

    /// Takes `n` permits now without waiting (uncounted), or says why not and when to retry.
    #[inline(always)]
    fn take(&self, n: u32) -> Result<(), Rejection> {
        self.take_as(n, || ())
    }

    /// [`take`](Self::take), handing back `granted()` on success, built where the decision is
    /// made (see the token bucket's `take_as`: converting `Ok(())` afterwards moved the rejection
    /// between two layouts of the `Result`, a store-forwarding stall on every denial).
    #[inline(always)]
    fn take_as<T>(&self, n: u32, granted: impl FnOnce() -> T) -> Result<T, Rejection> {
        // One reading of the limit for the whole decision (it may be reconfigured meanwhile).
        let s = self.shape();
        if n > s.limit {
            return Err(Rejection::new(Reason::ExceedsLimit));
        }
        let e = self.ticker.elapsed(self.clock.now());
        match self.decide_quick(e, n, s) {
            Some(Ok(())) => Ok(granted()),
            Some(Err(wait)) => Err(Rejection::after(Reason::Exhausted, wait)),
            None => self.take_slow(e, n, s, granted),
        }
    }

    /// The whole `try_acquire`, counted: the quick decision and its count inline, everything
    /// else (the general path, a count that needs its slow path) in tail calls, so that the
    /// quick path saves no registers.
    #[inline(always)]
    fn try_acquire_counted<T>(&self, n: u32, granted: impl FnOnce() -> T) -> Result<T, Rejection> {
        // On 32-bit MCUs, where a count is no cheaper than a call: one copy of the quick path
        // (code size).
        if cfg!(tollgate_cs_cells) {
            return self.counters.count(self.take_as(n, granted));
        }
        // One reading of the limit and of the clock for the whole decision, the general path's
        // included.
        let s = self.shape();
        if n > s.limit {
            return self.try_acquire_general(None, n, s, granted);
        }
        let e = self.ticker.elapsed(self.clock.now());
        match self.decide_quick(e, n, s) {
            Some(Ok(())) => self.counters.count_granted(granted()),
            Some(Err(wait)) => self
                .counters
                .count_rejected(Rejection::after(Reason::Exhausted, wait)),
            None => self.try_acquire_general(Some(e), n, s, granted),
        }
    }

    /// `try_acquire` past the quick path (which this does not repeat), counted: the general
    /// transition at `e` ns after creation; `None` for a request over the limit.
    #[inline(never)]
    fn try_acquire_general<T>(
        &self,
        e: Option<u64>,
        n: u32,
        s: Shape,
        granted: impl FnOnce() -> T,
    ) -> Result<T, Rejection> {
        let taken = match e {
            None => Err(Rejection::new(Reason::ExceedsLimit)),
            Some(e) => self.take_slow(e, n, s, granted),
        };
        self.counters.count(taken)
    }

    /// The quick decision at `e` on the header as read (see [`quick`](Self::quick)): `Ok`
    /// granted, `Err(wait)` refused with that wait, `None` for the general path.
    #[inline(always)]
    fn decide_quick(&self, e: u64, n: u32, s: Shape) -> Option<Result<(), Nanos>> {
        if n == 0 {
            return None;
        }
        match &self.header {
            HeaderWord::Narrow { word, width } => {
                let w = cas::Word::load(word);
                let (tick, used) = Header::plain64(w, *width)?;
                let grant = || cas::swap_once(word, w, w + u64::from(n));
                self.quick(e, n, s, tick, used, grant, || {
                    Header::prev64(w, *width) == 0
                })
            }
            HeaderWord::Wide(word) => {
                let w = cas::Word::load(word);
                let (tick, used) = Header::plain(w)?;
                let grant = || cas::swap_once(word, w, w + u128::from(n));
                self.quick(e, n, s, tick, used, grant, || Header::unpack(w).prev == 0)
            }
        }
    }

    /// The quick path on a header word read with no flag set (`tick`, `used`): in its own
    /// segment, `n > 0` that fit are granted by one compare-and-swap (`grant`, of the word plus
    /// `n`); a denial whose counted permits are all in the current segment (`prev_is_zero`)
    /// answers at once, with its wait. `None` sends everything else (another segment, a lost
    /// race, a denial that needs the ring, a wait of 2^64 ns or more) to the general path.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn quick(
        &self,
        e: u64,
        n: u32,
        s: Shape,
        tick: u64,
        used: u64,
        grant: impl FnOnce() -> bool,
        prev_is_zero: impl FnOnce() -> bool,
    ) -> Option<Result<(), Nanos>> {
        // The header's tick is one the ticker computed (`locate`, `tick`).
        let into = self.ticker.offset_in_own(e, tick)?;
        if used + u64::from(n) <= u64::from(s.limit) {
            return grant().then_some(Ok(()));
        }
        if prev_is_zero() {
            // Every counted permit is in the current segment: they all come back together when
            // it leaves the window, `segments` segments after it began, and then `n <= limit`
            // fits. No ring to read: exactly the general path's answer (`retry_after`).
            let ns = s.segments.checked_mul(self.ticker.period_ns())?;
            return Some(Err(Nanos::from_u64(ns - into)));
        }
        None
    }

    /// [`take`](Self::take) past the quick path: the general transition (a slide, a denial and
    /// its RetryAfter, the queue, a lost race). Out of line, so that the quick path saves no
    /// registers for it.
    #[inline(never)]
    fn take_slow<T>(
        &self,
        e: u64,
        n: u32,
        s: Shape,
        granted: impl FnOnce() -> T,
    ) -> Result<T, Rejection> {
        let barge = self.queue.barging();
        // Nobody takes past waiters before they are served: those that fit before now are
        // granted first, counted where they fit (then a newest-first queue lets the newcomer
        // barge past the rest).
        let mut result = self.attempt(e, n, s, false);
        if let Err((Denied::Exhausted { .. }, h, _)) = result {
            if h.waiters {
                self.queue.serve(self);
                result = self.attempt(e, n, s, barge);
            }
        }
        match result {
            Ok(()) => Ok(granted()),
            Err((Denied::Closed, _, _)) => Err(Rejection::new(Reason::Closed)),
            Err((Denied::Exhausted { .. }, h, (k, into))) => {
                let wait = self.retry_after(k, into, h, n, barge);
                Err(Rejection::after(Reason::Exhausted, wait.at_least_1ns()))
            }
        }
    }

    /// The exact wait before `n` permits can be taken, seen from `into` ns into segment `k` by a
    /// newcomer denied on the header `h`; behind an oldest-first queue, each waiter ahead is
    /// served in turn (walked under the queue lock).
    #[cold]
    fn retry_after(&self, k: u64, into: u64, h: Header, n: u32, barge: bool) -> Nanos {
        let newcomer = core::iter::once(n.max(1));
        if h.waiters && !barge {
            self.queue.with_requests(|ahead| {
                let h = self.header.load();
                self.wait_behind(k, into, h, ahead.chain(newcomer))
            })
        } else {
            self.wait_behind(k, into, h, newcomer)
        }
    }

    /// How long until time alone lets the window grant `total` permits (in requests of at most
    /// the limit, each counted in the segment it is granted in). Zero if they are free now.
    fn wait_for(&self, total: u64) -> Nanos {
        let (k, into) = self.ticker.tick(self.clock.now());
        let h = self.header.load();
        let limit = self.limit();
        // Whole windows for all but the last `limit` (a bounded walk for any `total`).
        let whole = total.saturating_sub(1) / u64::from(limit);
        let last = (total - whole * u64::from(limit)) as u32;
        let first = if whole > 0 { Some(limit) } else { None };
        let wait = self.wait_behind(k, into, h, first.into_iter().chain(core::iter::once(last)));
        let windows = whole.saturating_sub(1);
        let extra =
            u128::from(windows) * u128::from(self.segments) * u128::from(self.ticker.period_ns());
        wait.saturating_add(Nanos::from_u128(extra))
    }

    /// The wait until the last of `requests` is granted (in order, each as soon as the window
    /// has room), seen from `into` ns into segment `k`, starting from the header `h`.
    ///
    /// The window's counts come from one consistent snapshot: the frozen slots are read and the
    /// header re-read; if it has not moved to another segment meanwhile, no slot of its window
    /// can have been reused (a slot is overwritten only by the segment `segments` later, which
    /// is frozen only after the header reached it). Otherwise the walk starts again from the
    /// newer header. Counted from the header's own segment if that is later than `k` (a stale
    /// reading: real time is at least there).
    fn wait_behind(
        &self,
        k: u64,
        into: u64,
        mut h: Header,
        requests: impl IntoIterator<Item = u32>,
    ) -> Nanos {
        let segments = self.segments;
        let mut window = [0u64; N];
        let window = &mut window[..segments as usize];
        for _ in 0..8 {
            let base = k.min(TICK_MAX).max(h.tick);
            self.read_window(base, h, window);
            let again = self.header.load();
            if again.tick == h.tick {
                // Same segment: the slots read are those of `h`'s window. Its current count may
                // have changed since (takes, gives back): use the latest.
                if let Some(i) = (h.tick + segments).checked_sub(base + 1) {
                    window[i as usize] = u64::from(again.cur);
                }
                let slides = Header::slides_to_serve(self.shape(), window, requests);
                return self
                    .ticker
                    .wait_until(k, into, base, base.saturating_add(slides));
            }
            h = again;
        }
        // The window slid under every attempt (segments of a few nanoseconds): answer as if the
        // whole limit had just been taken in the current segment, which can only wait longer.
        let base = k.min(TICK_MAX).max(h.tick);
        window.fill(0);
        window[segments as usize - 1] = u64::from(self.limit());
        let slides = Header::slides_to_serve(self.shape(), window, requests);
        self.ticker
            .wait_until(k, into, base, base.saturating_add(slides))
    }

    /// The counts of the window ending at segment `base >= h.tick`, oldest first: segments
    /// before `h.tick` from the ring, `h.tick` itself from the header, later ones empty.
    /// Consecutive segments sit in consecutive slots: one division finds the first slot.
    fn read_window(&self, base: u64, h: Header, window: &mut [u64]) {
        let segments = self.segments;
        // `window[i]` is segment `base + 1 + i - segments`, in slot `(base + 1 + i) % segments`.
        let mut index = self.index(base + 1);
        for (i, c) in window.iter_mut().enumerate() {
            *c = match (base + 1 + i as u64).checked_sub(segments) {
                Some(j) if j < h.tick => u64::from(self.frozen_in(index, j)),
                Some(j) if j == h.tick => u64::from(h.cur),
                _ => 0,
            };
            index += 1;
            if index == segments {
                index = 0;
            }
        }
    }

    /// Waits for `permits` in the queue (see [`Acquire`]). Queued waiters are served as
    /// segments leave the window: by any later acquisition, by
    /// [`replenish`](Replenishing::replenish), or by a registered `Driver` (feature `std`).
    pub fn acquire(&self, permits: u32) -> Acquire<'_, Self> {
        Acquire::new(self, permits)
    }

    /// Waits on this thread for `permits`, for up to `timeout` (`None`: no limit); the thread
    /// wakes itself when the window has room, so no driver is needed.
    #[cfg(feature = "std")]
    pub fn acquire_blocking(
        &self,
        permits: u32,
        timeout: Option<Duration>,
    ) -> Result<Lease<'_>, Rejection> {
        wait::acquire_blocking(self, permits, timeout)
    }

    fn now_header(&self) -> (Header, Header, u64) {
        let (k, _) = self.ticker.tick(self.clock.now());
        let h = self.header.load();
        (h, h.at(k, self.shape(), |j| self.frozen(j)), k)
    }

    /// The last segment in which permits were taken, if any.
    fn last_used_segment(&self, h: Header) -> Option<u64> {
        if h.cur > 0 {
            return Some(h.tick);
        }
        self.ring
            .iter()
            .map(|slot| slot.load(Ordering::Acquire))
            .filter(|v| *v as u32 > 0 && ((v >> 64) as u64) < h.tick)
            .map(|v| (v >> 64) as u64)
            .max()
    }
}

impl<C: Clock, const N: usize> wait::private::Sealed for SlidingWindowLimiter<C, N> {}

impl<C: Clock, const N: usize> Source for SlidingWindowLimiter<C, N> {
    fn queue(&self) -> &WaitQueue {
        &self.queue
    }
    fn counters(&self) -> &Counters {
        &self.counters
    }
    fn limit(&self) -> u32 {
        self.limit()
    }
    fn take_now(&self, n: u32) -> Result<(), Rejection> {
        self.take(n)
    }
    fn take_locked(&self, n: u32, flag_if_short: bool) -> Result<Option<u64>, Reason> {
        let (k, _) = self.ticker.tick(self.clock.now());
        let s = self.shape();
        self.header
            .transition(|h| match h.try_take(k, n, s, true, |j| self.frozen(j)) {
                Ok(next) => {
                    self.leave(h, next);
                    Ok((next, Some(next.tick)))
                }
                Err(Denied::Closed) => Err(Reason::Closed),
                Err(Denied::Exhausted { .. }) if flag_if_short => Ok((h.with_waiters(true), None)),
                Err(Denied::Exhausted { .. }) => Ok((h, None)),
            })
            .map(|(_, taken)| taken)
    }
    fn take_for_waiter(&self, n: u32) -> Result<Option<u64>, Reason> {
        let (k, _) = self.ticker.tick(self.clock.now());
        let s = self.shape();
        self.header
            .transition(|h| match h.take_when_fits(k, n, s, |j| self.frozen(j)) {
                Ok((next, at)) => {
                    self.leave(h, next);
                    Ok((next, Some(at)))
                }
                Err(Denied::Closed) => Err(Reason::Closed),
                Err(Denied::Exhausted { .. }) => Ok((h, None)),
            })
            .map(|(_, taken)| taken)
    }
    fn wait_behind(&self, ahead: &mut dyn Iterator<Item = u32>, n: u32) -> Option<Duration> {
        let (k, into) = self.ticker.tick(self.clock.now());
        let h = self.header.load();
        let requests = ahead.chain(core::iter::once(n.max(1)));
        Some(self.wait_behind(k, into, h, requests).to_duration())
    }
    fn clear_waiters(&self) {
        let _ = self
            .header
            .transition(|h| Ok::<_, Infallible>((h.with_waiters(false), ())));
    }
    fn give_back(&self, n: u32, stamp: u64) {
        // The waiters that fit before now are granted first, where they fit: a give-back
        // comes at its own instant, after them.
        if self.header.load().waiters {
            self.queue.serve(self);
        }
        let Ok((before, ())) = self
            .header
            .transition(|h| Ok::<_, Infallible>((h.give_back(stamp, n), ())));
        if before.waiters {
            self.queue.serve(self);
        }
    }
    fn wait_for_permits(&self, total: u64) -> Option<Duration> {
        Some(self.wait_for(total).to_duration())
    }
    fn lease(&self, n: u32) -> Lease<'_> {
        Lease::unreleased(n)
    }
    fn timed(&self) -> bool {
        self.clock.advances_by_itself()
    }
    fn served_on_return(&self) -> bool {
        false // time brings permits
    }
}

impl<C: Clock, const N: usize> Limiter for SlidingWindowLimiter<C, N> {
    #[inline]
    fn try_acquire(&self, permits: u32) -> Result<Lease<'_>, Rejection> {
        self.try_acquire_counted(permits, || Lease::unreleased(permits))
    }

    fn available_permits(&self) -> u64 {
        u64::from(self.limit()).saturating_sub(self.now_header().1.used())
    }

    fn statistics(&self) -> Statistics {
        Statistics {
            available_permits: self.available_permits(),
            queued_permits: self.queue.queued_permits(),
            total_successful: self.counters.successful(),
            total_failed: self.counters.failed(),
        }
    }

    /// Idle since the last segment with permits taken left the window (since creation if none).
    fn idle_duration(&self) -> Option<Duration> {
        let now = self.clock.now();
        let (k, _) = self.ticker.tick(now);
        let h = self.header.load();
        let free_from = match self.last_used_segment(h) {
            Some(j) => j.saturating_add(self.segments),
            None => 0,
        };
        (free_from <= k.max(h.tick) && !h.waiters)
            .then(|| self.ticker.since_start_of(now, free_from))
    }

    fn close(&self) {
        let _ = self
            .header
            .transition(|h| Ok::<_, Infallible>((h.close(), ())));
        self.queue.close(self);
    }

    fn is_closed(&self) -> bool {
        self.header.load().closed
    }
}

impl<C: Clock, const N: usize> crate::limiter::Peek for SlidingWindowLimiter<C, N> {
    fn peek(&self, permits: u32) -> Result<(), Rejection> {
        let s = self.shape();
        if permits > s.limit {
            return Err(Rejection::new(Reason::ExceedsLimit));
        }
        let e = self.ticker.elapsed(self.clock.now());
        let h = self.header.load();
        let (k, into) = self.ticker.locate(e, h.tick);
        let barge = self.queue.barging();
        match h.try_take(k, permits, s, barge, |j| self.frozen(j)) {
            Ok(_) => Ok(()),
            Err(Denied::Closed) => Err(Rejection::new(Reason::Closed)),
            Err(Denied::Exhausted { .. }) => Err(Rejection::after(
                Reason::Exhausted,
                self.retry_after(k, into, h, permits, barge).at_least_1ns(),
            )),
        }
    }
}

impl<C: Clock, const N: usize> Replenishing for SlidingWindowLimiter<C, N> {
    fn replenishment_period(&self) -> Duration {
        Duration::from_nanos(self.ticker.period_ns())
    }

    fn replenish(&self) -> u64 {
        // Served first: the waiters that fit before now are counted in the segment they fit
        // in, which must not be behind the header.
        self.queue.serve(self);
        let (k, _) = self.ticker.tick(self.clock.now());
        let s = self.shape();
        let _ = self.header.transition(|h| {
            let next = h.at(k, s, |j| self.frozen(j));
            self.leave(h, next);
            Ok::<_, Infallible>((next, ()))
        });
        self.available_permits()
    }

    fn next_service(&self) -> Option<Duration> {
        wait::next_service(self)
    }

    #[cfg(feature = "std")]
    fn attach_driver(&self, handle: crate::wait::DriverHandle) {
        self.queue.attach(handle);
    }
}

#[cfg(test)]
mod tests;
