//! The lock around a wait list, chosen by feature:
//!
//! | build | lock |
//! |---|---|
//! | `std` | `std::sync::Mutex` (a futex: waiting threads sleep) |
//! | no `std`, feature `critical-section` | `critical_section::Mutex` (interrupt-safe on a single core) |
//! | no `std`, no `critical-section` | a spin lock on one atomic flag |
//! | `cfg(loom)` | loom's mutex, so the model checker sees every acquisition |
//!
//! The lock is held only on the slow path (enqueue, serve, cancel, close), for a bounded number
//! of list operations; it is never held while a waker runs.

#![allow(unsafe_code)]

/// A lock around a `T`, used through a closure.
pub(crate) struct Lock<T> {
    #[cfg(loom)]
    inner: loom::sync::Mutex<T>,
    #[cfg(all(not(loom), feature = "std"))]
    inner: std::sync::Mutex<T>,
    #[cfg(all(not(loom), not(feature = "std"), feature = "critical-section"))]
    inner: critical_section::Mutex<core::cell::RefCell<T>>,
    #[cfg(all(not(loom), not(feature = "std"), not(feature = "critical-section")))]
    inner: spin::SpinLock<T>,
}

impl<T> Lock<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            #[cfg(loom)]
            inner: loom::sync::Mutex::new(value),
            #[cfg(all(not(loom), feature = "std"))]
            inner: std::sync::Mutex::new(value),
            #[cfg(all(not(loom), not(feature = "std"), feature = "critical-section"))]
            inner: critical_section::Mutex::new(core::cell::RefCell::new(value)),
            #[cfg(all(not(loom), not(feature = "std"), not(feature = "critical-section")))]
            inner: spin::SpinLock::new(value),
        }
    }

    /// Runs `f` with the lock held.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        #[cfg(loom)]
        {
            f(&mut self.inner.lock().unwrap())
        }
        #[cfg(all(not(loom), feature = "std"))]
        {
            // Poisoning cannot leave the list inconsistent: every list operation completes
            // before any code that could panic runs. Keep going rather than panic.
            f(&mut self
                .inner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner))
        }
        #[cfg(all(not(loom), not(feature = "std"), feature = "critical-section"))]
        {
            critical_section::with(|cs| f(&mut self.inner.borrow_ref_mut(cs)))
        }
        #[cfg(all(not(loom), not(feature = "std"), not(feature = "critical-section")))]
        {
            self.inner.with(f)
        }
    }
}

impl<T> core::fmt::Debug for Lock<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Lock { .. }")
    }
}

#[cfg(all(not(loom), not(feature = "std"), not(feature = "critical-section")))]
mod spin {
    use core::cell::UnsafeCell;

    use crossbeam_utils::Backoff;
    use portable_atomic::{AtomicBool, Ordering};

    /// A test-and-test-and-set spin lock.
    pub(crate) struct SpinLock<T> {
        locked: AtomicBool,
        value: UnsafeCell<T>,
    }

    // SAFETY: the value is only reached through `with`, which holds the lock (an acquire on
    // `locked` that pairs with the release of the previous holder), so at most one thread
    // accesses it at a time; moving the lock moves the value, which needs `T: Send`.
    unsafe impl<T: Send> Sync for SpinLock<T> {}
    // SAFETY: as above; the lock owns its value.
    unsafe impl<T: Send> Send for SpinLock<T> {}

    impl<T> SpinLock<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self {
                locked: AtomicBool::new(false),
                value: UnsafeCell::new(value),
            }
        }

        pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
            let backoff = Backoff::new();
            while self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                while self.locked.load(Ordering::Relaxed) {
                    backoff.snooze();
                }
            }
            struct Unlock<'a>(&'a AtomicBool);
            impl Drop for Unlock<'_> {
                fn drop(&mut self) {
                    self.0.store(false, Ordering::Release);
                }
            }
            let _unlock = Unlock(&self.locked);
            // SAFETY: `locked` was swapped from false to true by this thread, so no other thread
            // holds a reference to the value until `_unlock` releases it after `f` returns.
            f(unsafe { &mut *self.value.get() })
        }
    }
}
