//! The sliding window's lock-free core: the header word, the ring of frozen segment counts,
//! the segment clock, the limit, the counts and the queue; a [`RateCore`] with a
//! [`QuickPath`](crate::quick_path::QuickPath), which
//! [`rate_limiter!`](crate::rate_limiter::rate_limiter) wires into every capability.

use core::time::Duration;

#[cfg(not(tollgate_cs_cells))]
use crate::cas;
use crate::clock::Clock;
use crate::core_common::RateBase;
use crate::lease::{Reason, Rejection};
use crate::nanos::Nanos;
use crate::queue_kind::QueueKind;
use crate::rate_core::RateCore;
use crate::reciprocal::Reciprocal;
use crate::state_cell::{packed, CellCore, Packed, StateCell};
use crate::sync::{AtomicU128, AtomicU64, Ordering};
use crate::wait::{LockedTake, WaitQueue};

use super::state::{Denied, Header, Shape, TICK_MAX};
use super::SlidingWindowOptions;

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

crate::state_cell::state_word!(Header, Denied);

/// The header's atomic word: the 64-bit layout when the configuration fits it
/// ([`Header::narrow_width`], `cur` and `prev` of `width` bits), else 128 bits; the [`Header`]
/// itself on 32-bit MCUs (see [`Packed`]).
pub(super) type HeaderWord = Packed<Header>;

/// The core of a [`SlidingWindowLimiter`](crate::SlidingWindowLimiter) with a ring of `N`
/// segments.
#[derive(Debug)]
pub(crate) struct WindowCore<C, const N: usize, Q = WaitQueue> {
    pub(super) header: HeaderWord,
    ring: [AtomicU128; N],
    pub(crate) base: RateBase<C, Q>,
    /// Segments per window (fixed at creation).
    segments: u64,
    /// Its reciprocal: a segment's slot in the ring without a division.
    by_segments: Reciprocal,
    /// Permits per window (changed by `reconfigure`).
    limit: AtomicU64,
}

impl<C: Clock, const N: usize, Q: QueueKind> WindowCore<C, N, Q> {
    crate::sync::const_unless_loom! {
        /// An empty window of `options` (validated: segments of `segment` ns, at most `N` of
        /// them), its segments counted from `origin`.
        pub(crate) fn new(
            options: &SlidingWindowOptions,
            segment: u64,
            queue: Q,
            origin: crate::clock::Instant,
            clock: C,
        ) -> Self {
            Self {
                header: packed!(
                    Header::EMPTY,
                    Header::narrow_width(options.permit_limit, segment)
                ),
                ring: empty_ring(),
                base: RateBase::new(origin, segment, queue, clock),
                segments: options.segments_per_window as u64,
                by_segments: Reciprocal::of(options.segments_per_window as u64),
                limit: AtomicU64::new(options.permit_limit as u64),
            }
        }
    }

    /// The window's shape now.
    #[inline(always)]
    fn shape(&self) -> Shape {
        Shape {
            limit: self.limit(),
            segments: self.segments,
        }
    }

    /// How many slots the ring cycles through: all `N` when `N` is a power of two (a slot's
    /// index is then a mask, and a slot lives longer than the window), else `segments`. Either
    /// way a slot is reused only by a segment a whole window or more later.
    #[inline(always)]
    fn slots(&self) -> u64 {
        if N.is_power_of_two() {
            N as u64
        } else {
            self.segments
        }
    }

    /// The ring slot of `segment`: `segment % slots`, by a mask or a multiplication (a 64-bit
    /// division is a slow instruction, and a library routine of almost a kilobyte on a 32-bit
    /// MCU).
    #[inline]
    fn index(&self, segment: u64) -> u64 {
        if N.is_power_of_two() {
            segment & (N as u64 - 1)
        } else {
            self.by_segments.div_rem(segment, self.segments).1
        }
    }

    fn slot(&self, segment: u64) -> &AtomicU128 {
        // `slots() <= N` (`segments <= N` is validated), so the index is in bounds.
        &self.ring[self.index(segment) as usize]
    }

    /// The frozen count of segment `j`: its slot, if the slot still holds segment `j`.
    fn frozen(&self, j: u64) -> u32 {
        self.frozen_in(self.index(j), j)
    }

    /// [`frozen`](Self::frozen) with the slot index of `j` already known.
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
    ) -> Result<u64, (Denied, Header, (u64, u64))> {
        self.header
            .transition(|h| {
                let (k, into) = self.base.ticker.locate(e, h.tick);
                let next = h
                    .try_take(k, n, s, barge, |j| self.frozen(j))
                    .map_err(|d| (d, h, (k, into)))?;
                self.leave(h, next);
                Ok((next, next.tick))
            })
            .map(|(_, segment)| segment)
    }

    /// [`QuickPath::decide_quick`] at `e` on the header as read (see [`quick`](Self::quick)).
    #[inline(always)]
    fn decide_quick_on(&self, e: u64, n: u32, s: Shape) -> Option<Result<u64, Nanos>> {
        match &self.header {
            #[cfg(not(tollgate_cs_cells))]
            HeaderWord::Narrow { word, width, mask } => {
                let w = cas::Word::load(word);
                let (tick, used) = Header::plain64(w, *width, *mask)?;
                let grant = || cas::swap_once(word, w, w + u64::from(n));
                let prev = || Header::prev64(w, *width, *mask);
                self.quick(e, n, s, tick, used, grant, prev, || {
                    cas::Word::load(word) == w
                })
            }
            #[cfg(not(tollgate_cs_cells))]
            HeaderWord::Wide(word, _) => {
                let w = cas::Word::load(word);
                let (tick, used) = Header::plain(w)?;
                let grant = || cas::swap_once(word, w, w + u128::from(n));
                let prev = || Header::unpack(w).prev;
                self.quick(e, n, s, tick, used, grant, prev, || {
                    cas::Word::load(word) == w
                })
            }
            // No quick path on 32-bit MCUs (the state is unpacked there): the general one.
            #[cfg(tollgate_cs_cells)]
            HeaderWord::Whole(_) => {
                let _ = (e, n, s);
                None
            }
        }
    }

    /// The quick path on a header word read with no flag set (`tick`, `used`): in its own
    /// segment, `n > 0` that fit are granted by one compare-and-swap (`grant`, of the word plus
    /// `n`); a denial answers at once with its wait, read from the ring when permits are counted
    /// in earlier segments (`prev`) and the word is `unchanged` after the reading. `None` sends
    /// everything else (another segment, a lost race, a word that moved under the reading, a
    /// wait of 2^64 ns or more) to the general path.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    #[cfg_attr(tollgate_cs_cells, allow(dead_code))] // no quick path there
    fn quick(
        &self,
        e: u64,
        n: u32,
        s: Shape,
        tick: u64,
        used: u64,
        grant: impl FnOnce() -> bool,
        prev: impl FnOnce() -> u32,
        unchanged: impl FnOnce() -> bool,
    ) -> Option<Result<u64, Nanos>> {
        // The header's tick is one the ticker computed (`locate`, `tick`).
        let into = self.base.ticker.offset_in_own(e, tick)?;
        // `1 <= n` and `used + n <= limit` in one compare (a probe's `n - 1` wraps to
        // `u32::MAX`, above any room): no other gate on the request (`QuickPath::GATED`).
        let short = n.wrapping_sub(1);
        let last = used + u64::from(short);
        if last < u64::from(s.limit) {
            return grant().then_some(Ok(tick));
        }
        // A probe, or a request over the limit: the general path's.
        if short >= s.limit {
            return None;
        }
        let slides = match prev() {
            // Every counted permit is in the current segment: they all come back together when
            // it leaves the window, and then `n <= limit` fits. No ring to read.
            0 => s.segments,
            _ => {
                let missing = last + 1 - u64::from(s.limit);
                let slides = self.slides_in_own(tick, missing);
                // The slots read belong to this word's window while the word stands.
                unchanged().then_some(slides)?
            }
        };
        // Exactly the general path's answer (`retry_after`).
        let ns = slides.checked_mul(self.base.ticker.period_ns())?;
        Some(Err(Nanos::from_u64(ns - into)))
    }

    /// [`slides_to_free`](Self::slides_to_free) for the window ending at the header's own
    /// segment `tick` (the quick path's denial): there the current segment leaves last,
    /// after `segments` slides, which is also the answer when the earlier ones do not free
    /// enough, so its count is not needed (152 → 131 instructions for the denial behind
    /// earlier segments, iai: fewer values live across the walk).
    #[inline(always)]
    fn slides_in_own(&self, tick: u64, missing: u64) -> u64 {
        self.slides_from(tick, tick, missing, &mut 0)
    }

    /// How many segments the window ending at segment `base` must slide before `missing`
    /// permits have left it (its oldest segments leave first), on a header at `tick` with `cur`
    /// permits in it: `segments` if they only leave with the current segment.
    #[inline]
    fn slides_to_free(&self, base: u64, tick: u64, cur: u64, missing: u64) -> u64 {
        let segments = self.segments;
        let first = (base + 1).saturating_sub(segments);
        let mut freed = 0;
        match self.slides_from(base, tick, missing, &mut freed) {
            // Freed by an earlier segment's leaving.
            slides if slides < segments => slides,
            _ if tick >= first && freed + cur >= missing => tick + segments - base,
            _ => segments,
        }
    }

    /// The walk of `window_counts` over the ring's segments before `tick` in the window ending
    /// at `base`, written out (45 instructions fewer than the iterator for the denial behind
    /// earlier segments, iai): the slides until the first of them whose leaving frees
    /// `missing` permits (segment `j` leaves after `j + segments - base`: fewer than
    /// `segments`), else `segments`, with what they free in all counted in `freed`.
    #[inline(always)]
    fn slides_from(&self, base: u64, tick: u64, missing: u64, freed: &mut u64) -> u64 {
        let segments = self.segments;
        let first = (base + 1).saturating_sub(segments);
        let mut index = self.index(first);
        for j in first..tick {
            // A mask finds a power-of-two ring's slot afresh (fewer registers held across the
            // loop); another ring steps its slot along.
            let slot = if N.is_power_of_two() {
                self.index(j)
            } else {
                index
            };
            *freed += u64::from(self.frozen_in(slot, j));
            if *freed >= missing {
                return j + segments - base;
            }
            index += 1;
            if index == self.slots() {
                index = 0;
            }
        }
        segments
    }

    /// The counts of the window ending at segment `base >= tick`, oldest first, for a header at
    /// `tick` with `cur` permits in it: segments before `tick` from the ring, `tick` itself
    /// `cur`, later ones empty. Consecutive segments sit in consecutive slots: one division
    /// finds the first slot.
    #[inline]
    fn window_counts(&self, base: u64, tick: u64, cur: u64) -> impl Iterator<Item = u64> + '_ {
        let segments = self.segments;
        // Count `i` is segment `base + 1 + i - segments`, in slot `(base + 1 + i + slots - segments) % slots`.
        let mut index = self.index(base + 1 + self.slots() - segments);
        (0..segments).map(move |i| {
            let count = match (base + 1 + i).checked_sub(segments) {
                Some(j) if j < tick => u64::from(self.frozen_in(index, j)),
                Some(j) if j == tick => cur,
                _ => 0,
            };
            index += 1;
            if index == self.slots() {
                index = 0;
            }
            count
        })
    }

    /// [`QuickPath::take_slow`]: the general transition (a slide, a denial and its RetryAfter,
    /// the queue, a lost race).
    #[inline(never)]
    fn general(&self, e: u64, n: u32, s: Shape, serve: impl FnOnce()) -> Result<u64, Rejection> {
        let barge = self.base.queue.barging();
        let result = crate::quick_path::attempt_after_waiters(
            &self.base.queue,
            false,
            |barge| self.attempt(e, n, s, barge),
            |(d, h, _)| matches!(d, Denied::Exhausted { .. }) && h.waiters,
            serve,
        );
        match result {
            Ok(segment) => Ok(segment),
            Err((Denied::Closed, _, _)) => Err(Rejection::new(&Reason::Closed)),
            Err((Denied::Exhausted { missing }, h, (k, into))) => {
                let wait = self.retry_after(k, into, h, n, missing, barge);
                Err(Rejection::after(&Reason::Exhausted, wait.at_least_1ns()))
            }
        }
    }

    /// The exact wait before `n` permits can be taken, seen from `into` ns into segment `k` by a
    /// newcomer denied on the header `h`, `missing` permits short; behind an oldest-first queue,
    /// each waiter ahead is served in turn (walked under the queue lock).
    #[cold]
    pub(super) fn retry_after(
        &self,
        k: u64,
        into: u64,
        h: Header,
        n: u32,
        missing: u64,
        barge: bool,
    ) -> Nanos {
        let newcomer = core::iter::once(n.max(1));
        if h.waiters && !barge {
            return self.base.queue.with_requests(|ahead| {
                let h = self.header.load();
                self.wait_behind(k, into, h, ahead.chain(newcomer))
            });
        }
        // Alone: the oldest segments leave until `missing` permits have, read from the ring while
        // the header stays in its segment (then no slot of its window can be reused).
        let base = k.min(TICK_MAX).max(h.tick);
        let slides = self.slides_to_free(base, h.tick, u64::from(h.cur), missing);
        let again = self.header.load();
        if again.tick == h.tick {
            return self
                .base
                .ticker
                .wait_until(k, into, base, base.saturating_add(slides));
        }
        self.wait_behind(k, into, again, newcomer)
    }

    /// How long until time alone lets the window grant `total` permits (in requests of at most
    /// the limit, each counted in the segment it is granted in). Zero if they are free now.
    fn wait_for_nanos(&self, total: u64) -> Nanos {
        let (k, into) = self.base.tick();
        let h = self.header.load();
        let limit = self.limit();
        // Whole windows for all but the last `limit` (a bounded walk for any `total`).
        let whole = total.saturating_sub(1) / u64::from(limit);
        let last = (total - whole * u64::from(limit)) as u32;
        let first = if whole > 0 { Some(limit) } else { None };
        let wait = self.wait_behind(k, into, h, first.into_iter().chain(core::iter::once(last)));
        let windows = whole.saturating_sub(1);
        let extra = u128::from(windows)
            * u128::from(self.segments)
            * u128::from(self.base.ticker.period_ns());
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
                    .base
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
        self.base
            .ticker
            .wait_until(k, into, base, base.saturating_add(slides))
    }

    /// The counts of the window ending at segment `base >= h.tick`, oldest first
    /// ([`window_counts`](Self::window_counts)).
    fn read_window(&self, base: u64, h: Header, window: &mut [u64]) {
        for (c, count) in window
            .iter_mut()
            .zip(self.window_counts(base, h.tick, u64::from(h.cur)))
        {
            *c = count;
        }
    }

    fn now_header(&self) -> (Header, Header, u64) {
        let (k, _) = self.base.tick();
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

    /// [`QuickPath::judge`].
    fn judge(&self, e: u64, n: u32, s: Shape) -> Result<(), Rejection> {
        let h = self.header.load();
        let (k, into) = self.base.ticker.locate(e, h.tick);
        let barge = self.base.queue.barging();
        match h.try_take(k, n, s, barge, |j| self.frozen(j)) {
            Ok(_) => Ok(()),
            Err(Denied::Closed) => Err(Rejection::new(&Reason::Closed)),
            Err(Denied::Exhausted { missing }) => Err(Rejection::after(
                &Reason::Exhausted,
                self.retry_after(k, into, h, n, missing, barge)
                    .at_least_1ns(),
            )),
        }
    }

    /// The largest limit the header's layout holds (a `reconfigure` may not raise it further).
    pub(crate) fn max_limit(&self) -> u32 {
        self.header.max_field()
    }

    /// How far past `limit` a settled lease may take the window (its **debt bound**): one
    /// limit, less where the header's count fields could not hold twice the limit
    /// (`min(limit, field_max - limit)`: only for a limit above 2^31, or in the 64-bit layout
    /// above half its field, e.g. above 8,191 in 1 s segments).
    pub(crate) fn debt_bound(&self, limit: u32) -> u32 {
        crate::core_common::window_debt_bound(limit, self.max_limit())
    }

    /// Changes the limit with no queue to serve.
    pub(crate) fn set_limit(&self, limit: u32) {
        self.limit.store(u64::from(limit), Ordering::Release);
    }
}

impl<C: Clock, const N: usize, Q: QueueKind> RateCore for WindowCore<C, N, Q> {
    crate::rate_core::base_field!();

    /// Permits per window now.
    #[inline(always)]
    fn limit(&self) -> u32 {
        // Only ever stored from a `u32`.
        self.limit.load(Ordering::Acquire) as u32
    }

    /// The segment length: permits come back a segment at a time.
    fn period(&self) -> Duration {
        Duration::from_nanos(self.base.ticker.period_ns())
    }

    fn available(&self) -> u64 {
        u64::from(self.limit()).saturating_sub(self.now_header().1.used())
    }

    /// Idle since the last segment with permits taken left the window (since creation if none).
    fn idle_duration(&self) -> Option<Duration> {
        let now = self.base.clock.now();
        let (k, _) = self.base.ticker.tick(now);
        let h = self.header.load();
        let free_from = match self.last_used_segment(h) {
            Some(j) => j.saturating_add(self.segments),
            None => 0,
        };
        (free_from <= k.max(h.tick) && !h.waiters)
            .then(|| self.base.ticker.since_start_of(now, free_from))
    }

    /// Brings the header to the current segment (freezing the segments it leaves); the caller
    /// served the queue first, so that waiters that fit before now are counted where they fit.
    fn catch_up(&self) {
        let (k, _) = self.base.tick();
        let s = self.shape();
        self.header.update(|h| {
            let next = h.at(k, s, |j| self.frozen(j));
            self.leave(h, next);
            next
        });
    }

    /// Under the queue lock: takes `n` ignoring the queue flag (stamped with the segment), or
    /// finds them short, setting the flag in the same CAS when `flag_if_short`.
    fn take_locked(&self, n: u32, flag_if_short: bool) -> LockedTake {
        let (k, _) = self.base.tick();
        let s = self.shape();
        self.header.take_queued(flag_if_short, |h| {
            let next = h.try_take(k, n, s, true, |j| self.frozen(j))?;
            self.leave(h, next);
            Ok::<_, Denied>((next, next.tick))
        })
    }

    /// Under the queue lock, for the waiter at the serving end: takes `n` as of the segment
    /// they first fit in ([`Header::take_when_fits`]), or finds them short. The stamp is that
    /// segment.
    fn take_for_waiter(&self, n: u32) -> LockedTake {
        let (k, _) = self.base.tick();
        let s = self.shape();
        self.header.take_queued(false, |h| {
            let (next, at) = h.take_when_fits(k, n, s, |j| self.frozen(j))?;
            self.leave(h, next);
            Ok::<_, Denied>((next, at))
        })
    }

    /// The segment of a lease's stamp: at or before the header's and the clock's.
    fn unmark(&self, stamp: u64) -> u64 {
        let k = self.base.tick().0.max(self.header.load().tick);
        crate::lease::tick_of_stamp(k, stamp)
    }

    /// Takes `n` more permits now, in the current segment, past any waiter and into debt when
    /// they are not there ([`Header::take_debt`]), down to one limit past it
    /// ([`debt_bound`](Self::debt_bound)).
    fn take_debt(&self, n: u32, max_debt: u32) -> Result<(), crate::lease::SettleError> {
        let (k, _) = self.base.tick();
        let s = self.shape();
        let bound = self.debt_bound(s.limit).min(max_debt);
        self.header
            .transition(|h| {
                let next = h
                    .take_debt(k, n, s, bound, |j| self.frozen(j))
                    .ok_or(crate::lease::SettleError::DebtLimit)?;
                self.leave(h, next);
                Ok((next, ()))
            })
            .map(|_| ())
    }

    /// Returns `n` permits granted in segment `stamp` to a waiter that never received them (or
    /// to a lease settled below what it took), if that segment is still in the window;
    /// whether anyone waits.
    fn give_back(&self, n: u32, stamp: u64) -> bool {
        self.header.update(|h| h.give_back(stamp, n)).waiters
    }

    /// How long until time alone lets the window grant `total` permits.
    fn wait_for(&self, total: u64) -> Duration {
        self.wait_for_nanos(total).to_duration()
    }

    fn wait_for_requests(&self, requests: &mut dyn Iterator<Item = u32>) -> Duration {
        let (k, into) = self.base.tick();
        let h = self.header.load();
        self.wait_behind(k, into, h, requests).to_duration()
    }
}

crate::quick_path::quick_path! {
    impl[C: Clock, const N: usize, Q: QueueKind] WindowCore<C, N, Q> { shape: Shape, limit, decide_quick_on, general, judge, gated: true }
}

impl<C, const N: usize, Q> CellCore for WindowCore<C, N, Q> {
    type Cell = HeaderWord;
    fn cell(&self) -> &HeaderWord {
        &self.header
    }
}
