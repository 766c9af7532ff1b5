//! The lease of a chain, [`ChainLease`], and the inner leases it holds, [`Leases`].

use core::fmt;

use crate::lease::{Lease, SettleError};

/// The inner leases of a [`ChainLease`]: a tuple, an array or (feature `alloc`) a `Vec`, which
/// can give its leases back last to first.
///
/// ```
/// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Leases, Limiter};
///
/// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
/// let b = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
/// let held = [a.try_acquire(1).unwrap(), b.try_acquire(1).unwrap()];
/// held.release_in_reverse(); // b's permit first, then a's
/// assert_eq!((a.available_permits(), b.available_permits()), (1, 1));
/// ```
pub trait Leases {
    /// Drops the leases, the last one first.
    ///
    /// ```
    /// use std::cell::RefCell;
    /// use tollgate::Leases;
    ///
    /// /// Records when it is dropped.
    /// struct Held<'a>(&'static str, &'a RefCell<Vec<&'static str>>);
    /// impl Drop for Held<'_> {
    ///     fn drop(&mut self) { self.1.borrow_mut().push(self.0) }
    /// }
    /// let log = RefCell::new(Vec::new());
    /// (Held("global", &log), Held("tenant", &log), Held("user", &log)).release_in_reverse();
    /// assert_eq!(*log.borrow(), ["user", "tenant", "global"]);
    /// ```
    fn release_in_reverse(self);

    /// Settles every lease, each holding `held` permits, to `actual`, in order (see
    /// [`Lease::settle`]): all or nothing where the limiters allow it. When one refuses, those
    /// settled before it are settled back to `held` and its error is returned (a refused
    /// debit is undone exactly: undoing a debit is a refund). The default, for leases that
    /// cannot settle (a [`PartitionedChain`](crate::PartitionedChain)'s), changes nothing and
    /// answers [`SettleError::Unsupported`].
    fn settle_each(&mut self, held: u32, actual: u32) -> Result<(), SettleError> {
        let _ = (held, actual);
        Err(SettleError::Unsupported)
    }
}

/// [`Leases::settle_each`] over a slice of leases.
fn settle_slice(leases: &mut [Lease<'_>], held: u32, actual: u32) -> Result<(), SettleError> {
    for i in 0..leases.len() {
        if let Err(e) = leases[i].settle(actual) {
            for done in leases[..i].iter_mut().rev() {
                let _ = done.settle(held);
            }
            return Err(e);
        }
    }
    Ok(())
}

impl<const N: usize> Leases for [Lease<'_>; N] {
    fn release_in_reverse(mut self) {
        for lease in self.iter_mut().rev() {
            drop(core::mem::replace(lease, Lease::unreleased(0)));
        }
    }

    fn settle_each(&mut self, held: u32, actual: u32) -> Result<(), SettleError> {
        settle_slice(self, held, actual)
    }
}

#[cfg(feature = "alloc")]
impl Leases for alloc::vec::Vec<Lease<'_>> {
    fn release_in_reverse(mut self) {
        while let Some(lease) = self.pop() {
            drop(lease);
        }
    }

    fn settle_each(&mut self, held: u32, actual: u32) -> Result<(), SettleError> {
        settle_slice(self, held, actual)
    }
}

/// The lease of a chain: every inner lease, dropped in reverse order (the last limiter's first)
/// when this lease is dropped.
///
/// ```
/// use tollgate::{Chain, ConcurrencyLimiter, ConcurrencyOptions};
///
/// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(2)).unwrap();
/// let b = ConcurrencyLimiter::new(ConcurrencyOptions::new(5)).unwrap();
/// let chain = Chain::new((&a, &b));
/// let lease = chain.try_acquire(2).unwrap();
/// assert_eq!(lease.permits(), 2);
/// assert_eq!(chain.available_permits(), 0); // the minimum
/// drop(lease); // b's permits go back, then a's
/// assert_eq!((a.statistics().available_permits, b.statistics().available_permits), (2, 5));
/// # use tollgate::Limiter;
/// ```
#[must_use = "dropping a lease releases its permits at once"]
pub struct ChainLease<T: Leases> {
    pub(super) leases: Option<T>,
    permits: u32,
}

impl<T: Leases> ChainLease<T> {
    pub(super) fn new(leases: T, permits: u32) -> Self {
        Self {
            leases: Some(leases),
            permits,
        }
    }

    /// The permits this lease holds from each limiter of the chain.
    ///
    /// ```
    /// use tollgate::{Chain, ConcurrencyLimiter, ConcurrencyOptions, Limiter};
    ///
    /// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(5)).unwrap();
    /// let b = ConcurrencyLimiter::new(ConcurrencyOptions::new(8)).unwrap();
    /// let chain = Chain::new((&a, &b));
    /// let lease = chain.try_acquire(3).unwrap();
    /// assert_eq!(lease.permits(), 3); // 3 from a, and 3 from b
    /// assert_eq!((a.available_permits(), b.available_permits()), (2, 5));
    /// ```
    pub const fn permits(&self) -> u32 {
        self.permits
    }

    /// Settles the lease of every limiter of the chain to `actual` (see [`Lease::settle`]):
    /// all or nothing, as [`Leases::settle_each`] says.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let minute = Duration::from_secs(60);
    /// let tenant = TokenBucketLimiter::with_clock(TokenBucketOptions::new(10_000, 10_000, minute), &clock).unwrap();
    /// let user = TokenBucketLimiter::with_clock(TokenBucketOptions::new(2_000, 2_000, minute), &clock).unwrap();
    /// let chain = Chain::new((&tenant, &user));
    /// let mut lease = chain.try_acquire(1_000).unwrap();
    /// lease.settle(250).unwrap();
    /// assert_eq!((tenant.available_permits(), user.available_permits()), (9_750, 1_750));
    /// // More than the user's debt bound (one limit, 2,000, below zero): nothing is taken.
    /// assert_eq!(lease.settle(5_000), Err(SettleError::DebtLimit));
    /// assert_eq!((tenant.available_permits(), user.available_permits()), (9_750, 1_750));
    /// ```
    pub fn settle(&mut self, actual: u32) -> Result<(), SettleError> {
        if actual != self.permits {
            let Some(leases) = self.leases.as_mut() else {
                return Err(SettleError::Unsupported);
            };
            leases.settle_each(self.permits, actual)?;
            self.permits = actual;
        }
        Ok(())
    }
}

impl<T: Leases> Drop for ChainLease<T> {
    fn drop(&mut self) {
        if let Some(leases) = self.leases.take() {
            leases.release_in_reverse();
        }
    }
}

impl<T: Leases> fmt::Debug for ChainLease<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChainLease")
            .field("permits", &self.permits)
            .finish_non_exhaustive()
    }
}
