//! The generic compare-and-swap driver: load the word, let a pure transition decide, write the
//! decision with one compare-and-swap, retry on interference.
//!
//! The transitions themselves live in each limiter's `state` module and know nothing of atomics;
//! this loop is the only code that touches the state word on the acquire and release paths, and it
//! is what the loom models in `loom-tests/` check.

#[cfg(any(loom, target_has_atomic = "64"))]
use crossbeam_utils::Backoff;

#[cfg(not(tollgate_cs_cells))]
use crate::sync::{AtomicU128, AtomicU64};
use crate::sync::{AtomicUsize, Ordering};

/// An atomic word that the driver can run a transition over.
pub(crate) trait Word {
    /// The plain value.
    type Value: Copy + Eq;
    fn load(&self) -> Self::Value;
    fn cas(&self, current: Self::Value, new: Self::Value) -> Result<Self::Value, Self::Value>;

    /// [`transition`] on this word: by default a compare-and-swap loop.
    ///
    /// A lost race backs off (spins a little longer each time) before deciding again, except on
    /// targets without native 64-bit atomics (32-bit MCUs): there a CAS is lost to an interrupt
    /// handler on the same core, which has finished by the time the loop runs again, or to the
    /// one other core of a dual-core part, so it retries at once and carries no back-off code
    /// (a firmware budget: the back-off is about 30 bytes per loop on thumbv7em).
    #[inline(always)]
    fn run<T, E>(
        &self,
        mut decide: impl FnMut(Self::Value) -> Result<(Self::Value, T), E>,
    ) -> Result<(Self::Value, T), E> {
        #[cfg(any(loom, target_has_atomic = "64"))]
        let backoff = Backoff::new();
        let mut current = self.load();
        loop {
            let (new, out) = decide(current)?;
            if new == current {
                return Ok((current, out));
            }
            match self.cas(current, new) {
                Ok(_) => return Ok((current, out)),
                Err(actual) => {
                    current = actual;
                    #[cfg(any(loom, target_has_atomic = "64"))]
                    backoff.spin();
                }
            }
        }
    }
}

/// [`Word`] for an atomic with `load` and `compare_exchange_weak`, the generics in brackets, and
/// any further items of the impl after the value type (a [`Word::run`] of its own).
macro_rules! word {
    ($(#[$m:meta])* impl[$($gen:tt)*] $atomic:ty => $value:ty { $($extra:tt)* }) => {
        $(#[$m])*
        impl<$($gen)*> Word for $atomic {
            type Value = $value;
            #[inline]
            fn load(&self) -> $value {
                self.load(Ordering::Acquire)
            }
            #[inline]
            fn cas(&self, current: $value, new: $value) -> Result<$value, $value> {
                self.compare_exchange_weak(current, new, Ordering::AcqRel, Ordering::Acquire)
            }
            $($extra)*
        }
    };
}

word!(#[cfg(not(tollgate_cs_cells))] impl[] AtomicU64 => u64 {});
word!(
    /// The target's native word (the concurrency limiter's: 32 bits on 32-bit MCUs).
    impl[] AtomicUsize => usize {}
);
word!(#[cfg(not(tollgate_cs_cells))] impl[] AtomicU128 => u128 {});
word! {
    /// A value behind a critical section (targets without native 64-bit atomics): the 64- and
    /// 128-bit words, and state kept unpacked (its weak compare-and-swap never fails
    /// spuriously).
    #[cfg(tollgate_cs_cells)]
    impl[T: Copy + Eq] crate::sync::CsAtomic<T> => T {
        /// The decision and its write in one critical section: nothing can interleave, so there
        /// is no compare-and-swap to retry (and no code for one). `decide` is a pure transition
        /// of a few dozen instructions (at most a 64-bit division on the slow path): that is how
        /// long interrupts stay masked.
        #[inline(always)]
        fn run<U, E>(&self, decide: impl FnMut(T) -> Result<(T, U), E>) -> Result<(T, U), E> {
            self.update(decide)
        }
    }
}

/// One compare-and-swap of `current` (a value just loaded) for `new`: whether it was written.
/// For a caller that decided on a loaded value without [`transition`] and falls back to it when
/// the word moved meanwhile.
#[inline(always)]
pub(crate) fn swap_once<W: Word>(word: &W, current: W::Value, new: W::Value) -> bool {
    word.cas(current, new).is_ok()
}

/// Runs `decide` over the word until its decision is written.
///
/// `decide(current)` returns `Ok((new, out))` to write `new` (nothing is written when `new ==
/// current`) or `Err(e)` to stop without writing anything: a denial writes nothing. On a lost race
/// `decide` runs again on the fresh value. Returns the value the decision was made on, with `out`.
#[inline(always)]
pub(crate) fn transition<W: Word, T, E>(
    word: &W,
    decide: impl FnMut(W::Value) -> Result<(W::Value, T), E>,
) -> Result<(W::Value, T), E> {
    word.run(decide)
}
