//! The concurrency limiter's idle stamp: the raw clock reading (nanoseconds) since which it has
//! been idle, in atomics the target has natively.
//!
//! - With native 64-bit atomics: one `AtomicU64`, raised with `fetch_max`, so any number of
//!   releases may date idleness at once (eager dating) and the latest stamp wins.
//! - Without (32-bit MCUs): two 32-bit halves behind a sequence number, written only by the one
//!   caller that holds the word's `dating` flag. A reader never waits for a writer — an interrupt
//!   handler that interrupts a writer and reads would otherwise spin forever — it reports "being
//!   written" instead, which the limiter answers as zero idleness (it only just became idle).

#[cfg(target_has_atomic = "64")]
pub(super) use wide::Stamp;

#[cfg(not(target_has_atomic = "64"))]
pub(super) use halves::Stamp;

/// Whether releases date idleness themselves ([`Stamp::RAISES`] and a cheap clock): a flag
/// with native 64-bit atomics; nothing on 32-bit MCUs, where releases never date (no byte of
/// RAM for a flag that is always false).
#[derive(Clone, Copy, Debug)]
pub(super) struct Eager(#[cfg(target_has_atomic = "64")] bool);

impl Eager {
    pub(super) const fn new(eager: bool) -> Self {
        #[cfg(target_has_atomic = "64")]
        return Self(eager);
        #[cfg(not(target_has_atomic = "64"))]
        {
            let _ = eager;
            Self()
        }
    }

    #[inline(always)]
    pub(super) const fn get(self) -> bool {
        #[cfg(target_has_atomic = "64")]
        return self.0;
        #[cfg(not(target_has_atomic = "64"))]
        false
    }
}

#[cfg(target_has_atomic = "64")]
mod wide {
    use crate::sync::{AtomicU64, Ordering};

    #[derive(Debug)]
    pub(crate) struct Stamp(AtomicU64);

    impl Stamp {
        /// Releases may date idleness themselves (eager dating).
        pub(crate) const RAISES: bool = true;

        crate::sync::const_unless_loom! {
            pub(crate) fn new(nanos: u64) -> Self {
                Self(AtomicU64::new(nanos))
            }
        }

        /// Moves the stamp up to `nanos` (never down). Skips the read-modify-write when the
        /// stamp would not move (a coarse clock, or releases within one tick): a plain load is
        /// far cheaper.
        #[inline]
        pub(crate) fn raise(&self, nanos: u64) {
            if self.0.load(Ordering::Acquire) < nanos {
                self.0.fetch_max(nanos, Ordering::AcqRel);
            }
        }

        /// Writes the stamp (the caller holds the word's `dating` flag).
        pub(crate) fn write_exclusive(&self, nanos: u64) {
            self.raise(nanos);
        }

        /// The stamp (always readable here).
        pub(crate) fn read(&self) -> Option<u64> {
            Some(self.0.load(Ordering::Acquire))
        }
    }
}

#[cfg(any(test, not(target_has_atomic = "64")))]
#[cfg_attr(test, allow(dead_code))]
mod halves {
    use core::sync::atomic::{fence, Ordering};

    use portable_atomic::AtomicU32;

    #[derive(Debug)]
    pub(crate) struct Stamp {
        /// Odd while a write is under way.
        pub(super) seq: AtomicU32,
        low: AtomicU32,
        high: AtomicU32,
    }

    impl Stamp {
        /// Only the holder of the `dating` flag writes: releases never date idleness here.
        pub(crate) const RAISES: bool = false;

        pub(crate) const fn new(nanos: u64) -> Self {
            Self {
                seq: AtomicU32::new(0),
                low: AtomicU32::new(nanos as u32),
                high: AtomicU32::new((nanos >> 32) as u32),
            }
        }

        /// Not used without eager dating; a single writer's write if it were.
        pub(crate) fn raise(&self, nanos: u64) {
            self.write_exclusive(nanos);
        }

        /// Writes the stamp. The caller holds the word's `dating` flag: no other writer.
        pub(crate) fn write_exclusive(&self, nanos: u64) {
            let s = self.seq.load(Ordering::Relaxed);
            self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
            fence(Ordering::Release);
            self.low.store(nanos as u32, Ordering::Relaxed);
            self.high.store((nanos >> 32) as u32, Ordering::Relaxed);
            self.seq.store(s.wrapping_add(2), Ordering::Release);
        }

        /// The stamp, or `None` while a write is under way (never waits).
        pub(crate) fn read(&self) -> Option<u64> {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 != 0 {
                return None;
            }
            let low = self.low.load(Ordering::Relaxed);
            let high = self.high.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            let s2 = self.seq.load(Ordering::Relaxed);
            (s1 == s2).then(|| (u64::from(high) << 32) | u64::from(low))
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::halves::Stamp;

    #[test]
    fn halves_round_trip_and_report_a_write_under_way() {
        let s = Stamp::new(u64::MAX - 5);
        assert_eq!(s.read(), Some(u64::MAX - 5));
        for v in [0, 1, u64::from(u32::MAX), 1 << 32, (7 << 32) | 9, u64::MAX] {
            s.write_exclusive(v);
            assert_eq!(s.read(), Some(v));
        }
        // A reader that interrupts a writer (odd sequence) gets `None`, at once.
        s.seq.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        assert_eq!(s.read(), None);
    }
}
