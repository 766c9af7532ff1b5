//! The lock around a wait list (and the fixed partition tables), chosen by build:
//!
//! | build | lock |
//! |---|---|
//! | `std` | `std::sync::Mutex` (a futex: waiting threads sleep) |
//! | no `std` | `critical_section::Mutex`: interrupt-safe — an interrupt handler that shares a limiter with thread code can never find the lock held by the code it interrupted |
//! | `cfg(loom)` | loom's mutex, so the model checker sees every acquisition |
//!
//! Without `std` there is no spin lock to choose, on purpose: a spin lock taken by thread code and
//! wanted by an interrupt handler on the same core deadlocks. The program provides the critical
//! section implementation, as every embedded HAL does (`cortex-m`'s `critical-section-single-core`
//! feature, `embassy`, `esp-hal`, `rp2040-hal`'s multi-core one); a program that provides none
//! fails to link, naming `_critical_section_1_0_acquire`.
//!
//! The lock is held only on the slow path (enqueue, serve, cancel, close), for a bounded number
//! of list operations; it is never held while a waker runs or is dropped.

/// A lock around a `T`, used through a closure.
pub(crate) struct Lock<T> {
    #[cfg(loom)]
    inner: loom::sync::Mutex<T>,
    #[cfg(all(not(loom), feature = "std"))]
    inner: std::sync::Mutex<T>,
    #[cfg(all(not(loom), not(feature = "std")))]
    inner: critical_section::Mutex<core::cell::RefCell<T>>,
}

impl<T> Lock<T> {
    /// A lock around `value` (loom's mutex cannot be built in a constant).
    #[cfg(loom)]
    pub(crate) fn new(value: T) -> Self {
        Self {
            inner: loom::sync::Mutex::new(value),
        }
    }

    /// A lock around `value`; `const`, so limiters can be `static`.
    #[cfg(not(loom))]
    pub(crate) const fn new(value: T) -> Self {
        Self {
            #[cfg(feature = "std")]
            inner: std::sync::Mutex::new(value),
            #[cfg(not(feature = "std"))]
            inner: critical_section::Mutex::new(core::cell::RefCell::new(value)),
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
        #[cfg(all(not(loom), not(feature = "std")))]
        {
            critical_section::with(|cs| f(&mut self.inner.borrow_ref_mut(cs)))
        }
    }
}

impl<T> core::fmt::Debug for Lock<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Lock { .. }")
    }
}
