//! The success and failure counters behind [`Statistics`](crate::Statistics).
//!
//! Exact, and no locked instruction on the hot path where there is more than one core:
//!
//! | build | a count is | exact under | shared write on a denial |
//! |---|---|---|---|
//! | `std` | a plain load + store in the calling thread's own cell ([`tally`]), on a cache line of its own | any number of threads | none (a thread beyond the 256th shares one cell with `fetch_add`) |
//! | no `std` | one atomic add on a native 32-bit word (`ldrex`/`strex` on Cortex-M3 and up; on targets with no compare-and-swap, such as thumbv6m, portable-atomic's critical section) | interrupts, and threads | the counter word (single core: nothing to contend with) |
//! | `cfg(loom)` | one shared `fetch_add` (the model checker sees every count) | threads | the counter word |
//!
//! Why not a plain load + store without `std`: an interrupt that counts between the load and the
//! store of the code it interrupted would lose a count. An atomic add on a 32-bit word is the
//! cheapest exact increment on a single core: no bus lock, a few cycles. The 64-bit totals are
//! kept in two such words (see [`Split`]), so no 64-bit atomic — which a 32-bit MCU does not
//! have, and which portable-atomic would emulate with a spin lock that an interrupt handler can
//! deadlock on — is ever used.

#[cfg(feature = "std")]
#[cfg_attr(loom, allow(dead_code))]
pub(crate) mod tally;

use crate::lease::Rejection;

/// The `tracing` feature's events, all with target `tollgate`, emitted where requests are
/// counted (so every limiter and partition emits them, and nothing else does):
///
/// | event | level | fields |
/// |---|---|---|
/// | `"rejected"`: a rejection returned, by `try_acquire` or by a failed wait | `DEBUG` | `reason` (its [`Display`](core::fmt::Display)), `retry_after_ns` when the rejection has one |
/// | `"granted"`: a wait granted its permits | `TRACE` | none |
/// | `"queued"`: a request joined a wait queue | `TRACE` | `permits` |
///
/// Rejections are `DEBUG` so that a proxy can leave them on (one event per refused request,
/// which is the traffic it wants to see) without paying for an event per granted request; the
/// per-wait events are `TRACE`. Successful `try_acquire` calls emit nothing. Without the
/// feature, none of this is compiled.
#[cfg(feature = "tracing")]
pub(crate) mod trace {
    use crate::lease::Reason;
    use core::time::Duration;

    #[cold]
    pub(crate) fn rejected(reason: Reason, retry_after: Option<Duration>) {
        match retry_after {
            Some(d) => tracing::debug!(
                target: "tollgate",
                reason = %reason,
                retry_after_ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
                "rejected"
            ),
            None => tracing::debug!(target: "tollgate", reason = %reason, "rejected"),
        }
    }

    #[inline]
    pub(crate) fn granted() {
        tracing::trace!(target: "tollgate", "granted");
    }

    #[inline]
    pub(crate) fn queued(permits: u32) {
        tracing::trace!(target: "tollgate", permits, "queued");
    }
}

/// Granted and refused counts of one limiter.
pub struct Counters {
    #[cfg(all(feature = "std", not(loom)))]
    inner: tally::Tally,
    #[cfg(loom)]
    inner: shared::Shared,
    #[cfg(all(not(feature = "std"), not(loom)))]
    inner: split::Pair,
}

impl core::fmt::Debug for Counters {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (ok, ko) = self.totals();
        f.debug_struct("Counters")
            .field("successful", &ok)
            .field("failed", &ko)
            .finish()
    }
}

impl Default for Counters {
    fn default() -> Self {
        Self::new()
    }
}

impl Counters {
    /// Zero and zero.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        Self {
            #[cfg(feature = "std")]
            inner: tally::Tally::new(),
            #[cfg(not(feature = "std"))]
            inner: split::Pair::new(),
        }
    }

    /// Zero and zero.
    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        Self {
            inner: shared::Shared::new(),
        }
    }

    /// Counts `result` and hands it back. With the `tracing` feature, a rejection is also a
    /// `DEBUG` event (see [`trace`]).
    #[inline]
    pub(crate) fn count<T>(&self, result: Result<T, Rejection>) -> Result<T, Rejection> {
        self.inner.bump(usize::from(result.is_err()));
        if let Err(r) = &result {
            self.note_rejected(r);
        }
        result
    }

    /// Counts a granted `try_acquire` and hands back its `lease`: the count's common case
    /// inline, its slow case in a tail call.
    #[inline(always)]
    pub(crate) fn count_granted<T>(&self, lease: T) -> Result<T, Rejection> {
        if self.inner.try_bump(0) {
            Ok(lease)
        } else {
            self.count_slow(Ok(lease))
        }
    }

    /// Counts a refused `try_acquire` and hands back its rejection `r`.
    #[inline(always)]
    pub(crate) fn count_rejected<T>(&self, r: Rejection) -> Result<T, Rejection> {
        if self.inner.try_bump(1) {
            self.note_rejected(&r);
            Err(r)
        } else {
            self.count_slow(Err(r))
        }
    }

    #[cold]
    #[inline(never)]
    fn count_slow<T>(&self, result: Result<T, Rejection>) -> Result<T, Rejection> {
        self.count(result)
    }

    /// Counts a request, granted or `refused`, with no event (a decision made elsewhere, e.g.
    /// by Redis, whose rejection is not this crate's to trace).
    #[cfg(feature = "redis")]
    #[inline]
    pub(crate) fn tally(&self, refused: bool) {
        self.inner.bump(usize::from(refused));
    }

    /// Counts a granted request (a wait's, or a limiter's that has no `try_acquire` of its
    /// own). With the `tracing` feature, also a `TRACE` event.
    #[inline]
    pub(crate) fn record_success(&self) {
        self.inner.bump(0);
        #[cfg(feature = "tracing")]
        trace::granted();
    }

    /// Counts the refused request `r` (an acquisition that waited or would have: refused
    /// outright, queue full, timed out). With the `tracing` feature, also a `DEBUG` event, as
    /// from [`count`](Self::count). Never call it under a queue lock (the event runs the
    /// subscriber's code): there, [`record_dequeued`](Self::record_dequeued).
    #[inline]
    pub(crate) fn record_failure(&self, r: &Rejection) {
        self.inner.bump(1);
        self.note_rejected(r);
    }

    /// Counts a queued waiter failed by someone else under the queue lock (evicted, closed):
    /// no event here, the waiter emits it when it sees its rejection
    /// ([`note_rejected`](Self::note_rejected)).
    #[inline]
    pub(crate) fn record_dequeued(&self) {
        self.inner.bump(1);
    }

    /// Not a count: with the `tracing` feature, the `DEBUG` event of a rejection counted
    /// elsewhere; without it, nothing.
    #[inline]
    pub(crate) fn note_rejected(&self, r: &Rejection) {
        #[cfg(feature = "tracing")]
        trace::rejected(r.reason(), r.retry_after());
        #[cfg(not(feature = "tracing"))]
        let _ = r;
    }

    /// Notes that a request joined the wait queue (not a count). With the `tracing` feature, a
    /// `TRACE` event; without it, nothing.
    #[inline]
    pub(crate) fn note_queued(&self, permits: u32) {
        #[cfg(feature = "tracing")]
        trace::queued(permits);
        #[cfg(not(feature = "tracing"))]
        let _ = permits;
    }

    /// Makes the counts compact, if nothing was counted through a cell yet: one shared pair of
    /// counters (a `fetch_add` a count) and no per-thread cells. For a partition's limiter,
    /// where memory per key counts more than contention (no allocation at all, against a
    /// 72-byte directory and a 128-byte line per counting thread). Without `std` the counts
    /// are always compact.
    pub(crate) fn make_compact(&self) {
        #[cfg(all(feature = "std", not(loom)))]
        self.inner.make_compact();
    }

    /// A limiter's statistics: `available` and `queued` permits now, and these counts.
    pub(crate) fn statistics(&self, available: u64, queued: u64) -> crate::lease::Statistics {
        let (total_successful, total_failed) = self.totals();
        crate::lease::Statistics {
            available_permits: available,
            queued_permits: queued,
            total_successful,
            total_failed,
        }
    }

    /// (granted, refused) so far.
    pub(crate) fn totals(&self) -> (u64, u64) {
        self.inner.totals()
    }

    /// Granted so far.
    pub(crate) fn successful(&self) -> u64 {
        self.totals().0
    }

    /// Refused so far.
    pub(crate) fn failed(&self) -> u64 {
        self.totals().1
    }

    /// Counts an adaptive limiter's sample of `us` µs in the calling thread's statistics
    /// cells (feature `std`), beside the counts: `false` where there is no such cell (a
    /// thread without one, a compact tally, no `std`), and the caller keeps it elsewhere.
    #[inline]
    #[allow(unused_variables)]
    pub(crate) fn add_sample(&self, us: u64) -> bool {
        #[cfg(all(feature = "std", not(loom)))]
        return self.inner.add_sample(us);
        #[cfg(not(all(feature = "std", not(loom))))]
        false
    }

    /// (samples, their sum in µs) counted by [`add_sample`](Self::add_sample) so far.
    pub(crate) fn sample_totals(&self) -> (u64, u64) {
        #[cfg(all(feature = "std", not(loom)))]
        return self.inner.sample_totals();
        #[cfg(not(all(feature = "std", not(loom))))]
        (0, 0)
    }
}

/// Under loom: one shared pair of counters, so that the model checker sees every count.
#[cfg(loom)]
mod shared {
    use crate::sync::{AtomicU64, Ordering};

    pub(super) struct Shared([AtomicU64; 2]);

    impl Shared {
        pub(super) fn new() -> Self {
            Self([AtomicU64::new(0), AtomicU64::new(0)])
        }

        pub(super) fn bump(&self, which: usize) {
            self.0[which].fetch_add(1, Ordering::Relaxed);
        }

        pub(super) fn try_bump(&self, which: usize) -> bool {
            self.bump(which);
            true
        }

        pub(super) fn totals(&self) -> (u64, u64) {
            (
                self.0[0].load(Ordering::Relaxed),
                self.0[1].load(Ordering::Relaxed),
            )
        }
    }
}

/// Without `std`: 64-bit counts in native 32-bit words.
#[cfg(all(not(feature = "std"), not(loom)))]
mod split {
    pub(super) use super::Split;

    pub(super) struct Pair([Split; 2]);

    impl Pair {
        pub(super) const fn new() -> Self {
            Self([Split::new(), Split::new()])
        }

        #[inline]
        pub(super) fn bump(&self, which: usize) {
            self.0[which].increment();
        }

        #[inline(always)]
        pub(super) fn try_bump(&self, which: usize) -> bool {
            self.bump(which);
            true
        }

        pub(super) fn totals(&self) -> (u64, u64) {
            (self.0[0].get(), self.0[1].get())
        }
    }
}

/// A 64-bit count (up to 2^63) kept in two native 32-bit words, exact under interrupts and
/// threads, with no lock and no 64-bit atomic.
///
/// `low` is the count modulo 2^32. `high` is the number of multiples of 2^31 the count has
/// passed: the increment that brings `low` to a multiple of 2^31 adds one to `high` right after,
/// so `high` lags by at most one, and only in that instant (and for as long as that increment is
/// interrupted). A reader reads `high` (acquire) and then `low`: bit 31 of `low` is the low bit of
/// the true `count >> 31`, which tells whether `high` is up to date or one behind. That is exact
/// as long as fewer than 2^31 counts happen between the carry being due and it being made.
#[cfg(any(test, all(not(feature = "std"), not(loom))))]
pub(crate) struct Split {
    low: portable_atomic::AtomicU32,
    high: portable_atomic::AtomicU32,
}

#[cfg(any(test, all(not(feature = "std"), not(loom))))]
impl Split {
    const HALF: u32 = 0x7FFF_FFFF;

    #[cfg_attr(test, allow(dead_code))]
    pub(crate) const fn new() -> Self {
        Self {
            low: portable_atomic::AtomicU32::new(0),
            high: portable_atomic::AtomicU32::new(0),
        }
    }

    #[inline]
    pub(crate) fn increment(&self) {
        use core::sync::atomic::Ordering;
        let low = self.low.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        if low & Self::HALF == 0 {
            self.high.fetch_add(1, Ordering::Release);
        }
    }

    pub(crate) fn get(&self) -> u64 {
        use core::sync::atomic::Ordering;
        let high = self.high.load(Ordering::Acquire);
        let low = self.low.load(Ordering::Relaxed);
        // `count >> 31` has low bit `low >> 31`; `high` is it, or one less.
        let halves = if high & 1 == low >> 31 {
            u64::from(high)
        } else {
            u64::from(high) + 1
        };
        (halves << 31) | u64::from(low & Self::HALF)
    }

    /// A count starting at `v` (tests of the carry).
    #[cfg(test)]
    fn at(v: u64) -> Self {
        Self {
            low: portable_atomic::AtomicU32::new(v as u32),
            high: portable_atomic::AtomicU32::new((v >> 31) as u32),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn counters_count_both_sides() {
        let c = Counters::new();
        let no = crate::lease::Rejection::new(&crate::lease::Reason::Exhausted);
        let _ = c.count(Ok(()));
        let _ = c.count::<()>(Err(no));
        let _ = c.count::<()>(Err(no));
        c.record_success();
        c.record_failure(&no);
        assert_eq!(c.totals(), (2, 3));
        assert_eq!((c.successful(), c.failed()), (2, 3));
    }

    #[test]
    fn split_counts_across_both_carries() {
        for start in [0, (1 << 31) - 3, (1 << 32) - 3, (3 << 31) - 2, 5 << 40] {
            let s = Split::at(start);
            for i in 0..6 {
                assert_eq!(s.get(), start + i);
                s.increment();
            }
        }
    }

    #[test]
    fn split_reads_right_while_the_carry_is_pending() {
        use core::sync::atomic::Ordering;
        // The increment that made `low` a multiple of 2^31, interrupted before its carry.
        for v in [1u64 << 31, 1 << 32, 3 << 31, 1 << 40] {
            let s = Split::at(v);
            s.high.fetch_sub(1, Ordering::Relaxed);
            assert_eq!(s.get(), v);
            // Counts that come in meanwhile are read right too.
            s.low.fetch_add(7, Ordering::Relaxed);
            assert_eq!(s.get(), v + 7);
        }
    }
}
