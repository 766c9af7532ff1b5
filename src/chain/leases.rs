//! The lease of a chain, [`ChainLease`], and the inner leases it holds, [`Leases`].

use core::fmt;

use crate::lease::{Lease, Outcome, SettleError};

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

    /// Settles every lease to `actual`, each limiter owing at most `max_debt` after it (see
    /// [`Lease::settle_within`]), in order: all or nothing
    /// where the limiters allow it. When one refuses, those settled before it are settled
    /// back to what they held and its error is returned (a refused debit is undone exactly:
    /// undoing a debit is a refund). The default, for leases that cannot settle (a
    /// [`PartitionedChain`](crate::PartitionedChain)'s), changes nothing and answers
    /// [`SettleError::Unsupported`].
    fn settle_each(&mut self, actual: u32, max_debt: u32) -> Result<(), SettleError> {
        let _ = (actual, max_debt);
        Err(SettleError::Unsupported)
    }

    /// Tells every lease's limiter how the call went ([`Lease::dropped`], [`Lease::ignore`]).
    /// The default, for leases that keep no stamp (a
    /// [`PartitionedChain`](crate::PartitionedChain)'s), tells nobody.
    fn report_each(&mut self, outcome: Outcome) {
        let _ = outcome;
    }
}

/// [`Leases::report_each`] of a slice of leases.
fn report_slice(leases: &mut [Lease<'_>], outcome: Outcome) {
    for lease in leases {
        match outcome {
            Outcome::Dropped => lease.dropped(),
            Outcome::Ignored => lease.ignore(),
            Outcome::Success => {}
        }
    }
}

/// Settles `leases[i]` to `actual(i)`, in order, all or nothing: when one refuses, those
/// settled before it are settled back to `held[i]` (what they held before), last first, and
/// its error is returned.
fn settle_slice(
    leases: &mut [Lease<'_>],
    held: &[u32],
    actual: impl Fn(usize) -> u32,
    max_debt: u32,
) -> Result<(), SettleError> {
    for i in 0..leases.len() {
        if let Err(e) = leases[i].settle_within(actual(i), max_debt) {
            for (done, &h) in leases[..i].iter_mut().zip(held).rev() {
                let _ = done.settle(h);
            }
            return Err(e);
        }
    }
    Ok(())
}

/// The permits each lease of `leases` holds.
fn permits_of<const N: usize>(leases: &[Lease<'_>; N]) -> [u32; N] {
    core::array::from_fn(|i| leases[i].permits())
}

impl<const N: usize> Leases for [Lease<'_>; N] {
    fn release_in_reverse(mut self) {
        for lease in self.iter_mut().rev() {
            drop(core::mem::replace(lease, Lease::unreleased(0)));
        }
    }

    fn settle_each(&mut self, actual: u32, max_debt: u32) -> Result<(), SettleError> {
        let held = permits_of(self);
        settle_slice(self, &held, |_| actual, max_debt)
    }

    fn report_each(&mut self, outcome: Outcome) {
        report_slice(self, outcome);
    }
}

#[cfg(feature = "alloc")]
impl Leases for alloc::vec::Vec<Lease<'_>> {
    fn release_in_reverse(mut self) {
        while let Some(lease) = self.pop() {
            drop(lease);
        }
    }

    fn settle_each(&mut self, actual: u32, max_debt: u32) -> Result<(), SettleError> {
        let held: alloc::vec::Vec<u32> = self.iter().map(Lease::permits).collect();
        settle_slice(self, &held, |_| actual, max_debt)
    }

    fn report_each(&mut self, outcome: Outcome) {
        report_slice(self, outcome);
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
    pub(super) permits: u32,
}

impl<T: Leases> ChainLease<T> {
    pub(super) fn new(leases: T, permits: u32) -> Self {
        Self {
            leases: Some(leases),
            permits,
        }
    }

    /// The permits this lease holds from each limiter of the chain (the first limiter's, when
    /// the counts differ: see [`permits_of_links`](ChainLease::permits_of_links)).
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
        self.settle_within(actual, u32::MAX)
    }

    /// [`settle`](Self::settle), each limiter of the chain owing at most `max_debt` permits
    /// after it (see [`Lease::settle_within`]): all or nothing.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let minute = Duration::from_secs(60);
    /// let tenant = TokenBucketLimiter::with_clock(TokenBucketOptions::new(1_000, 1_000, minute), &clock).unwrap();
    /// let user = TokenBucketLimiter::with_clock(TokenBucketOptions::new(100, 100, minute), &clock).unwrap();
    /// let chain = Chain::new((&tenant, &user));
    /// let mut lease = chain.try_acquire(100).unwrap();
    /// // 130 would leave the user owing 30: refused, and the tenant settled back.
    /// assert_eq!(lease.settle_within(130, 20), Err(SettleError::DebtLimit));
    /// assert_eq!((tenant.available_permits(), user.available_permits()), (900, 0));
    /// lease.settle_within(120, 20).unwrap();
    /// assert_eq!(tenant.available_permits(), 880);
    /// ```
    pub fn settle_within(&mut self, actual: u32, max_debt: u32) -> Result<(), SettleError> {
        let Some(leases) = self.leases.as_mut() else {
            return Err(SettleError::Unsupported);
        };
        leases.settle_each(actual, max_debt)?;
        self.permits = actual;
        Ok(())
    }
}

impl<T: Leases> ChainLease<T> {
    /// Tells every limiter of the chain that the call made under this lease was dropped for
    /// overload ([`Lease::dropped`]): an adaptive limiter in the chain backs off, the others
    /// ignore it.
    pub fn dropped(&mut self) {
        if let Some(leases) = self.leases.as_mut() {
            leases.report_each(Outcome::Dropped);
        }
    }

    /// Tells every limiter of the chain that the call says nothing about capacity
    /// ([`Lease::ignore`]).
    pub fn ignore(&mut self) {
        if let Some(leases) = self.leases.as_mut() {
            leases.report_each(Outcome::Ignored);
        }
    }
}

impl<const N: usize> ChainLease<[Lease<'_>; N]> {
    /// The permits this lease holds from each limiter, in chain order (different counts when
    /// taken with [`Chain::try_acquire_links`](crate::Chain::try_acquire_links), or settled
    /// with [`settle_links`](Self::settle_links)).
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(5)).unwrap();
    /// let b = ConcurrencyLimiter::new(ConcurrencyOptions::new(8)).unwrap();
    /// let chain = Chain::new((&a, &b));
    /// assert_eq!(chain.try_acquire(3).unwrap().permits_of_links(), [3, 3]);
    /// assert_eq!(chain.try_acquire_links([1, 4]).unwrap().permits_of_links(), [1, 4]);
    /// ```
    pub fn permits_of_links(&self) -> [u32; N] {
        match &self.leases {
            Some(leases) => permits_of(leases),
            None => [0; N],
        }
    }

    /// Settles the lease of the `i`-th limiter to `actual[i]` (see [`Lease::settle`]): all or
    /// nothing, as [`Leases::settle_each`] says. What a chain of "requests per minute" and
    /// "tokens per minute" does when a call's tokens are known: one request, and the tokens
    /// it used. [`permits`](Self::permits) then reports the first limiter's count.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let minute = Duration::from_secs(60);
    /// let requests = FixedWindowLimiter::with_clock(FixedWindowOptions::new(500, minute), &clock).unwrap();
    /// let tokens = TokenBucketLimiter::with_clock(TokenBucketOptions::new(100_000, 100_000, minute), &clock).unwrap();
    /// let chain = Chain::new((&requests, &tokens));
    /// // One request, and an estimate of 800 tokens...
    /// let mut call = chain.try_acquire_links([1, 800]).unwrap();
    /// // ...which used 1,312: the bucket takes the 512 more.
    /// call.settle_links([1, 1_312]).unwrap();
    /// assert_eq!((requests.available_permits(), tokens.available_permits()), (499, 98_688));
    /// assert_eq!(call.permits_of_links(), [1, 1_312]);
    /// ```
    pub fn settle_links(&mut self, actual: [u32; N]) -> Result<(), SettleError> {
        let Some(leases) = self.leases.as_mut() else {
            return Err(SettleError::Unsupported);
        };
        let held = permits_of(leases);
        settle_slice(leases, &held, |i| actual[i], u32::MAX)?;
        self.permits = actual.first().copied().unwrap_or(0);
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
