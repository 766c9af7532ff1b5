//! The shape of every lock-free rate core's decision, written once: read the configuration and
//! the clock once, let the core's quick path decide the common case in a handful of
//! instructions, count the answer inline, and send everything else (a probe, a request over the
//! limit, a flag, another tick, a lost race) to the core's general path, out of line.
//!
//! A core supplies the pieces ([`QuickPath::decide_quick`] and [`QuickPath::take_slow`] are
//! its algorithm); [`try_acquire_counted`](QuickPath::try_acquire_counted) and
//! [`take_as`](QuickPath::take_as) are what the limiter front calls.

use crate::lease::{Reason, Rejection};
use crate::nanos::Nanos;
use crate::stats::Counters;

/// A rate core with a quick path (token bucket and fixed window, GCRA and the leaky buckets,
/// the sliding window and the sliding counter).
pub(crate) trait QuickPath {
    /// What a decision reads once besides the clock: the refill, the parameters, the shape.
    type Config: Copy;

    fn config(&self) -> Self::Config;

    /// The largest request that can ever succeed under `c`.
    fn most(c: Self::Config) -> u32;

    /// Now, in the core's nanoseconds since creation.
    fn elapsed(&self) -> u64;

    /// [`elapsed`](Self::elapsed) unclamped ([`Ticker::elapsed_raw`](crate::ticks::Ticker::elapsed_raw)):
    /// 2^63 or more for a clock behind the core's origin.
    fn elapsed_raw(&self) -> u64;

    /// Whether [`decide_quick`](Self::decide_quick) itself sends an unclamped reading of 2^63
    /// or more to the general path (GCRA's range test covers it), so that the caller need not
    /// test it first.
    const UNCLAMPED: bool = false;

    /// Whether [`decide_quick`](Self::decide_quick) itself sends a request outside `1 <= n <=
    /// most` to the general path (on its refusal side only: a grant of `1 <= n <= tokens <=
    /// limit` needs no other check), so that the caller need not test it first.
    const GATED: bool = false;

    fn counters(&self) -> &Counters;

    /// The common decision of `1 <= n <= most` permits at `e` (any `n` if
    /// [`GATED`](Self::GATED)): `Ok(stamp)` granted (the core's mark of where they were
    /// counted, for a settle: its tick, segment or window), `Err(wait)` refused with that wait,
    /// `None` for [`take_slow`](Self::take_slow), which decides the same on the same state and
    /// instant. `e` is unclamped ([`elapsed_raw`](Self::elapsed_raw)): below 2^63, unless
    /// [`UNCLAMPED`](Self::UNCLAMPED).
    fn decide_quick(&self, e: u64, n: u32, c: Self::Config) -> Option<Result<u64, Nanos>>;

    /// The general decision of `n <= most` permits at `e` (uncounted): the whole transition,
    /// the queue, the exact RetryAfter. `serve` serves the queue when waiters hold a newcomer
    /// back. Out of line in every core, so that the quick path saves no registers for it.
    fn take_slow(
        &self,
        e: u64,
        n: u32,
        c: Self::Config,
        serve: impl FnOnce(),
    ) -> Result<u64, Rejection>;

    /// What the general decision of `n <= most` permits at `e` would answer, writing nothing
    /// and serving nobody.
    fn judge(&self, e: u64, n: u32, c: Self::Config) -> Result<(), Rejection>;

    /// What [`take`](Self::take) would answer now, writing nothing and serving nobody.
    fn peek(&self, n: u32) -> Result<(), Rejection> {
        let c = self.config();
        if n > Self::most(c) {
            return Err(Rejection::new(&Reason::ExceedsLimit));
        }
        self.judge(self.elapsed(), n, c)
    }

    /// Takes `n` permits now without waiting (uncounted), or says why not and when to retry;
    /// the grant's stamp.
    #[inline(always)]
    fn take(&self, n: u32, serve: impl FnOnce()) -> Result<u64, Rejection> {
        self.take_as(n, |stamp| stamp, serve)
    }

    /// [`take`](Self::take), handing back `granted(stamp)` on success: the caller's result (a lease)
    /// is built where the decision is made, not converted from `Ok(())` afterwards. (The
    /// conversion moved the rejection between two layouts of the `Result`, in pieces a CPU
    /// cannot forward from the stores that wrote them: a stall on every denial.)
    #[inline(always)]
    fn take_as<T>(
        &self,
        n: u32,
        granted: impl FnOnce(u64) -> T,
        serve: impl FnOnce(),
    ) -> Result<T, Rejection> {
        let c = self.config();
        if n > Self::most(c) {
            return Err(Rejection::new(&Reason::ExceedsLimit));
        }
        let e = self.elapsed();
        // A probe (`n == 0`) goes the general way.
        let quick = if n == 0 {
            None
        } else {
            self.decide_quick(e, n, c)
        };
        match quick {
            Some(quick) => quick
                .map(granted)
                .map_err(|wait| Rejection::after(&Reason::Exhausted, wait)),
            None => self.take_slow(e, n, c, serve).map(granted),
        }
    }

    /// The whole `try_acquire`, counted: one reading of the clock for the whole decision, the
    /// quick decision and its count inline, everything else in a tail call. `1 <= n <= most`
    /// is one comparison.
    #[inline(always)]
    fn try_acquire_counted<T>(
        &self,
        n: u32,
        granted: impl FnOnce(u32, u64) -> T,
        serve: impl FnOnce(),
    ) -> Result<T, Rejection> {
        // On 32-bit MCUs, where a count is no cheaper than a call: one copy of the decision
        // (code size). The lease is built after the count, from the counted stamp: built
        // before, its fields merge with the rejection's in the same registers, and the
        // compiler no longer sees that dropping a detached lease releases nothing (an indirect
        // call and the no-op releaser, linked into every firmware image: 76 to 196 bytes).
        if cfg!(tollgate_cs_cells) {
            return self
                .counters()
                .count(self.take(n, serve))
                .map(|stamp| granted(n, stamp));
        }
        // The clock read once; a reading behind the origin (2^63 or more unclamped, which
        // `elapsed` reads as 0) goes to the general path, so the quick one needs no clamp.
        let raw = self.elapsed_raw();
        let c = self.config();
        if (Self::GATED || n.wrapping_sub(1) < Self::most(c))
            && (Self::UNCLAMPED || !crate::ticks::Ticker::behind_origin(raw))
        {
            match self.decide_quick(raw, n, c) {
                Some(Ok(stamp)) => return self.counters().count_granted(granted(n, stamp)),
                Some(Err(wait)) => {
                    return self
                        .counters()
                        .count_rejected(Rejection::after(&Reason::Exhausted, wait))
                }
                None => {}
            }
        }
        self.try_acquire_general(raw, n, granted, serve)
    }

    /// `try_acquire` past the quick path (which this does not repeat), counted, on the
    /// configuration read again: passing the quick path's reading along would keep it in
    /// memory across the quick path (a configuration of more than two words goes by
    /// reference), which costs every quick decision its stores.
    ///
    /// Marked cold (for layout, not because it is rare: the first call of every tick comes
    /// here): the quick path then keeps its registers for itself and runs straight through to
    /// the return, 2 to 3 instructions fewer on every quick answer; this call's own setup
    /// costs the general path 3 to 4 more (the 128-bit word's rows). `granted` takes the
    /// count, so that a closure capturing only the limiter goes in one register.
    #[cold]
    #[inline(never)]
    fn try_acquire_general<T>(
        &self,
        raw: u64,
        n: u32,
        granted: impl FnOnce(u32, u64) -> T,
        serve: impl FnOnce(),
    ) -> Result<T, Rejection> {
        let e = crate::ticks::Ticker::clamped(raw);
        let c = self.config();
        let taken = if n > Self::most(c) {
            Err(Rejection::new(&Reason::ExceedsLimit))
        } else {
            self.take_slow(e, n, c, serve)
                .map(|stamp| granted(n, stamp))
        };
        self.counters().count(taken)
    }
}

/// [`QuickPath`] for a core with the fields `ticker`, `clock` and `counters`, from the names of
/// its own methods: `$read` the configuration (of type `$config`, whose field `$most` is the
/// largest request), `$quick` the quick decision, `$general` the general path and `$judge` its
/// answer without a write, with the signatures of [`QuickPath::decide_quick`],
/// [`QuickPath::take_slow`] and [`QuickPath::judge`].
macro_rules! quick_path {
    (impl[$($gen:tt)*] $core:ty { $read:ident: $config:ty, $most:ident, $quick:ident, $general:ident, $judge:ident $(, unclamped: $unclamped:literal)? $(, gated: $gated:literal)? }) => {
        impl<$($gen)*> $crate::quick_path::QuickPath for $core {
            type Config = $config;
            $(const UNCLAMPED: bool = $unclamped;)?
            $(const GATED: bool = $gated;)?
            #[inline(always)]
            fn config(&self) -> $config {
                self.$read()
            }
            #[inline(always)]
            fn most(c: $config) -> u32 {
                c.$most
            }
            #[inline(always)]
            fn elapsed(&self) -> u64 {
                self.base.elapsed()
            }
            #[inline(always)]
            fn elapsed_raw(&self) -> u64 {
                self.base.elapsed_raw()
            }
            #[inline(always)]
            fn counters(&self) -> &$crate::stats::Counters {
                &self.base.counters
            }
            #[inline(always)]
            fn decide_quick(&self, e: u64, n: u32, c: $config) -> Option<Result<u64, $crate::nanos::Nanos>> {
                self.$quick(e, n, c)
            }
            #[inline(always)]
            fn take_slow(&self, e: u64, n: u32, c: $config, serve: impl FnOnce()) -> Result<u64, $crate::lease::Rejection> {
                self.$general(e, n, c, serve)
            }
            fn judge(&self, e: u64, n: u32, c: $config) -> Result<(), $crate::lease::Rejection> {
                self.$judge(e, n, c)
            }
        }
    };
}
pub(crate) use quick_path;

/// The general path's attempt, written once for the lock-free cores. Nobody takes past waiters
/// before they are served: an attempt refused for want of permits on a state that holds waiters
/// (`behind_waiters`) serves the queue — those whose permits came before now are granted
/// first, where they fit — and tries once more, barging past the rest when the queue's order
/// lets it. Without a queue (`Q::QUEUED` false) nobody waits: one attempt, and no code for a
/// second; whether that attempt may barge (`alone_barges`) then changes no answer (no waiters
/// flag is ever set), only the code: each core passes what compiles smaller on a 32-bit MCU
/// (`benches/firmware-size`).
#[inline(always)]
pub(crate) fn attempt_after_waiters<Q: crate::queue_kind::QueueKind, T, E>(
    queue: &Q,
    alone_barges: bool,
    mut attempt: impl FnMut(bool) -> Result<T, E>,
    behind_waiters: impl FnOnce(&E) -> bool,
    serve: impl FnOnce(),
) -> Result<T, E> {
    match attempt(!Q::QUEUED && alone_barges) {
        Err(e) if Q::QUEUED && behind_waiters(&e) => {
            serve();
            attempt(queue.barging())
        }
        result => result,
    }
}
