//! The one place that chooses atomics.
//!
//! Under `cfg(loom)` every atomic comes from [loom] so that the model checker in `loom-tests/`
//! can explore every interleaving of the limiters' state transitions. Otherwise the atomics come
//! from [portable-atomic], which is `core`'s atomics where the target has them and a fallback
//! (critical sections, or global locks) where it does not (thumbv6m, riscv32imc, 64- and 128-bit
//! words on 32-bit MCUs).
//!
//! loom has no 128-bit atomic, so under loom [`AtomicU128`] is modelled by a loom mutex around a
//! `u128`: a linearizable cell whose every operation is one indivisible step, which is exactly the
//! contract of a hardware 128-bit compare-and-swap (its orderings are modelled as sequentially
//! consistent, which is stronger than what the code asks for).
//!
//! [loom]: https://docs.rs/loom
//! [portable-atomic]: https://docs.rs/portable-atomic

pub(crate) use core::sync::atomic::Ordering;

#[cfg(not(loom))]
pub(crate) use portable_atomic::{AtomicBool, AtomicU128, AtomicU64, AtomicUsize};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

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
pub(crate) use loom_u128::AtomicU128;

#[cfg(loom)]
mod loom_u128 {
    use super::Ordering;

    /// A 128-bit atomic for loom: one mutex-protected cell, each operation one step.
    #[derive(Debug)]
    pub(crate) struct AtomicU128(loom::sync::Mutex<u128>);

    impl AtomicU128 {
        pub(crate) fn new(v: u128) -> Self {
            Self(loom::sync::Mutex::new(v))
        }
        pub(crate) fn load(&self, _: Ordering) -> u128 {
            *self.0.lock().unwrap()
        }
        #[allow(dead_code)]
        pub(crate) fn store(&self, v: u128, _: Ordering) {
            *self.0.lock().unwrap() = v;
        }
        pub(crate) fn compare_exchange(
            &self,
            current: u128,
            new: u128,
            _: Ordering,
            _: Ordering,
        ) -> Result<u128, u128> {
            let mut g = self.0.lock().unwrap();
            if *g == current {
                *g = new;
                Ok(current)
            } else {
                Err(*g)
            }
        }
        pub(crate) fn compare_exchange_weak(
            &self,
            current: u128,
            new: u128,
            s: Ordering,
            f: Ordering,
        ) -> Result<u128, u128> {
            self.compare_exchange(current, new, s, f)
        }
    }
}
