//! The one place that chooses atomics.
//!
//! Under `cfg(loom)` every atomic comes from [loom] so that the model checker in `loom-tests/`
//! can explore every interleaving of the limiters' state transitions. Otherwise the atomics come
//! from [portable-atomic]: `core`'s atomics where the target has them, and on targets with no
//! compare-and-swap at all (thumbv6m, riscv32imc) its `critical-section` implementation.
//!
//! **Never a spin lock.** On targets without native 64-bit atomics (32-bit MCUs), the 64- and
//! 128-bit words are [`CsAtomic`] cells: each operation is one `critical-section` section —
//! interrupt-safe on a single core, and a few cycles (`cpsid`/`cpsie` on Cortex-M). portable-atomic's
//! `fallback` feature (a global table of seqlock spin locks, which an interrupt handler spins on
//! forever when it interrupts the holder) is not enabled, so no build can link it:
//! `benches/size.sh` checks its lock table is absent.
//!
//! **`cfg(tollgate_cs_cells)`** names that choice for the whole crate: it is set (by `build.rs`)
//! when the state words are [`CsAtomic`] cells, that is when not under `cfg(loom)` and either the
//! target has no native 64-bit atomics or `--cfg tollgate_cs_words` asks for the cells on a host.
//! Code that depends on how the words are kept tests `tollgate_cs_cells` /
//! `not(tollgate_cs_cells)`, never the target's atomics.
//!
//! loom has no 128-bit atomic, so under loom [`AtomicU128`] is a [`CsAtomic`] whose critical
//! section is a loom mutex: a linearizable cell whose every operation is one indivisible step, which is exactly the
//! contract of a hardware 128-bit compare-and-swap (its orderings are modelled as sequentially
//! consistent, which is stronger than what the code asks for).
//!
//! [loom]: https://docs.rs/loom
//! [portable-atomic]: https://docs.rs/portable-atomic

pub(crate) use core::sync::atomic::Ordering;

// Unused on 32-bit MCUs (`tollgate_cs_cells`), where the cells that fence and spin are behind a
// critical section instead.
#[cfg(not(loom))]
#[cfg_attr(tollgate_cs_cells, allow(unused_imports))]
pub(crate) use core::sync::atomic::fence;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::fence;

/// A spin-wait hint (under loom, a yield, so that the model lets the writer finish).
#[cfg(not(loom))]
#[cfg_attr(tollgate_cs_cells, allow(unused_imports))]
pub(crate) use core::hint::spin_loop;
#[cfg(loom)]
pub(crate) use loom::hint::spin_loop;

/// Declares a function `const` except under `cfg(loom)`, whose atomics cannot be built in a
/// constant: the limiters' `at_epoch` constructors (for `static` limiters) and what they build.
macro_rules! const_unless_loom {
    ($(#[$attr:meta])* $vis:vis fn $($rest:tt)*) => {
        #[cfg(not(loom))]
        $(#[$attr])*
        $vis const fn $($rest)*
        #[cfg(loom)]
        $(#[$attr])*
        $vis fn $($rest)*
    };
}
pub(crate) use const_unless_loom;

#[cfg(not(loom))]
pub(crate) use portable_atomic::{AtomicBool, AtomicU32, AtomicUsize};

#[cfg(all(not(loom), not(tollgate_cs_cells)))]
pub(crate) use portable_atomic::{AtomicU128, AtomicU64};

#[cfg(tollgate_cs_cells)]
pub(crate) use cs_atomic::{AtomicU128, AtomicU64, CsAtomic};

/// 64- and 128-bit "atomics" for targets without native 64-bit atomics: a value in a
/// `critical_section::Mutex`, every operation one critical section. The same API as
/// portable-atomic's for the operations the crate uses; orderings are irrelevant (a critical
/// section orders everything). [`CsAtomic`] holds any `Copy` value, so a limiter's state can be
/// kept unpacked in it (the token bucket's is).
///
/// `--cfg tollgate_cs_words` selects these cells on a host too (it sets `tollgate_cs_cells`), so
/// that the lib tests run over them (`.ci/run` does, with critical-section's `std`
/// implementation).
///
/// Under `cfg(loom)` the same cells model [`AtomicU128`] (loom has none), with a loom mutex for
/// the critical section.
#[cfg(any(tollgate_cs_cells, loom))]
mod cs_atomic {
    use core::cell::Cell;
    use core::fmt;

    #[cfg(not(loom))]
    use critical_section::Mutex;
    #[cfg(loom)]
    use loom::sync::Mutex;

    use super::Ordering;

    /// A value behind a critical section.
    pub(crate) struct CsAtomic<T: Copy>(Mutex<Cell<T>>);

    /// A 64-bit word behind a critical section.
    #[cfg(not(loom))]
    pub(crate) type AtomicU64 = CsAtomic<u64>;
    /// A 128-bit word behind a critical section.
    pub(crate) type AtomicU128 = CsAtomic<u128>;

    impl<T: Copy + fmt::Debug> fmt::Debug for CsAtomic<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.load(Ordering::Relaxed).fmt(f)
        }
    }

    impl<T: Copy + Default> Default for CsAtomic<T> {
        fn default() -> Self {
            Self::new(T::default())
        }
    }

    impl<T: Copy> CsAtomic<T> {
        super::const_unless_loom! {
            pub(crate) fn new(value: T) -> Self {
                Self(Mutex::new(Cell::new(value)))
            }
        }

        #[cfg(not(loom))]
        #[inline]
        fn with<R>(&self, f: impl FnOnce(&Cell<T>) -> R) -> R {
            critical_section::with(|cs| f(self.0.borrow(cs)))
        }

        /// Under loom: one step of the model, under its mutex.
        #[cfg(loom)]
        fn with<R>(&self, f: impl FnOnce(&Cell<T>) -> R) -> R {
            f(&self.0.lock().unwrap())
        }

        #[inline]
        pub(crate) fn load(&self, _: Ordering) -> T {
            self.with(Cell::get)
        }

        #[inline]
        pub(crate) fn store(&self, value: T, _: Ordering) {
            self.with(|c| c.set(value));
        }
    }

    #[cfg(not(loom))]
    impl<T: Copy> CsAtomic<T> {
        /// Runs `decide` on the value and writes its decision, in one critical section: what a
        /// compare-and-swap loop does, with nothing to compare or retry.
        #[inline]
        pub(crate) fn update<U, E>(
            &self,
            mut decide: impl FnMut(T) -> Result<(T, U), E>,
        ) -> Result<(T, U), E> {
            self.with(|c| {
                let current = c.get();
                let (new, out) = decide(current)?;
                c.set(new);
                Ok((current, out))
            })
        }
    }

    impl<T: Copy + PartialEq> CsAtomic<T> {
        #[inline]
        pub(crate) fn compare_exchange(
            &self,
            current: T,
            new: T,
            _: Ordering,
            _: Ordering,
        ) -> Result<T, T> {
            self.with(|c| {
                let old = c.get();
                if old == current {
                    c.set(new);
                    Ok(old)
                } else {
                    Err(old)
                }
            })
        }

        #[inline]
        pub(crate) fn compare_exchange_weak(
            &self,
            current: T,
            new: T,
            success: Ordering,
            failure: Ordering,
        ) -> Result<T, T> {
            self.compare_exchange(current, new, success, failure)
        }
    }

    #[cfg(not(loom))]
    impl CsAtomic<u64> {
        #[inline]
        pub(crate) fn fetch_max(&self, v: u64, _: Ordering) -> u64 {
            self.with(|c| c.replace(c.get().max(v)))
        }

        /// Wrapping, as an atomic add is.
        #[allow(dead_code)] // used by std-only code (under `--cfg tollgate_cs_words`)
        #[inline]
        pub(crate) fn fetch_add(&self, v: u64, _: Ordering) -> u64 {
            self.with(|c| c.replace(c.get().wrapping_add(v)))
        }

        #[inline]
        pub(crate) fn fetch_min(&self, v: u64, _: Ordering) -> u64 {
            self.with(|c| c.replace(c.get().min(v)))
        }

        #[inline]
        pub(crate) fn swap(&self, v: u64, _: Ordering) -> u64 {
            self.with(|c| c.replace(v))
        }

        /// Wrapping, as an atomic subtraction is.
        #[allow(dead_code)] // used by std-only code (under `--cfg tollgate_cs_words`)
        #[inline]
        pub(crate) fn fetch_sub(&self, v: u64, _: Ordering) -> u64 {
            self.with(|c| c.replace(c.get().wrapping_sub(v)))
        }
    }
}

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};

#[cfg(feature = "std")]
pub(crate) use rwlock::RwLock;

/// A readers-writer lock (feature `std`): `std::sync::RwLock`, or loom's under `cfg(loom)` so
/// that the model checker sees every acquisition. Poisoning is ignored: the data it guards (the
/// partition maps) is never left half-updated by a panic.
#[cfg(feature = "std")]
mod rwlock {
    use core::ops::{Deref, DerefMut};
    use std::sync::PoisonError;

    #[cfg(loom)]
    use loom::sync::RwLock as Inner;
    #[cfg(not(loom))]
    use std::sync::RwLock as Inner;

    #[derive(Debug, Default)]
    pub(crate) struct RwLock<T>(Inner<T>);

    impl<T> RwLock<T> {
        pub(crate) fn new(value: T) -> Self {
            Self(Inner::new(value))
        }

        /// Shared access.
        #[inline]
        pub(crate) fn read(&self) -> impl Deref<Target = T> + '_ {
            self.0.read().unwrap_or_else(PoisonError::into_inner)
        }

        /// Exclusive access.
        #[inline]
        pub(crate) fn write(&self) -> impl DerefMut<Target = T> + '_ {
            self.0.write().unwrap_or_else(PoisonError::into_inner)
        }
    }
}

#[cfg(loom)]
pub(crate) use cs_atomic::AtomicU128;
