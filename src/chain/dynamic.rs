//! [`DynChain`] (feature `alloc`): a chain of limiters chosen at run time, and [`EmptyChain`].

use core::fmt;
#[cfg(feature = "alloc")]
use core::time::Duration;

#[cfg(doc)]
use super::Chain; // for the doc links
#[cfg(feature = "alloc")]
use super::{combine, combine_idle, ChainLease, Leases};
#[cfg(feature = "alloc")]
use crate::lease::{Lease, Reason, Rejection, Statistics};
#[cfg(feature = "alloc")]
use crate::limiter::{AcquireAsync, Limiter};
#[cfg(feature = "alloc")]
use crate::sync::{AtomicBool, Ordering};

/// A chain with no limiters: `DynChain::new` needs at least one (as .NET's `CreateChained`).
///
/// ```
/// use tollgate::EmptyChain;
/// assert_eq!(EmptyChain.to_string(), "a chain needs at least one limiter");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmptyChain;

impl fmt::Display for EmptyChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a chain needs at least one limiter")
    }
}

impl core::error::Error for EmptyChain {}

/// A chain of limiters chosen at run time (feature `alloc`): a list of pointers to limiters —
/// `&dyn Limiter`, `Box<dyn Limiter + Send + Sync>`, `Arc<…>` — asked in order, all or nothing,
/// by the same rules as [`Chain`]. Each grant allocates the `Vec` its lease keeps the inner
/// leases in.
///
/// ```
/// use tollgate::*;
///
/// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
/// let b = NoopLimiter::new();
/// let chain = DynChain::new(vec![&a as &dyn Limiter, &b]).unwrap();
/// let lease = chain.try_acquire(1).unwrap();
/// assert_eq!(chain.try_acquire(1).unwrap_err().reason(), Reason::Exhausted);
/// drop(lease);
/// assert!(chain.try_acquire(1).is_ok());
/// assert_eq!(DynChain::<&dyn Limiter>::new(vec![]).unwrap_err(), EmptyChain);
/// ```
#[cfg(feature = "alloc")]
pub struct DynChain<B> {
    links: alloc::vec::Vec<B>,
    closed: AtomicBool,
}

#[cfg(feature = "alloc")]
impl<B> DynChain<B>
where
    B: core::ops::Deref,
    B::Target: Limiter,
{
    /// A chain of `links`, asked in order; [`EmptyChain`] if there are none. The chain owns its
    /// list: changing the caller's copy later changes nothing (as .NET clones the array).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::*;
    ///
    /// // Chosen at run time, e.g. from configuration.
    /// let mut links: Vec<Arc<dyn Limiter + Send + Sync>> = vec![Arc::new(NoopLimiter::new())];
    /// links.push(Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap()));
    /// let chain = DynChain::new(links).unwrap();
    /// assert_eq!(chain.links().len(), 2);
    /// assert_eq!(DynChain::<Box<dyn Limiter>>::new(Vec::new()).unwrap_err(), EmptyChain);
    /// ```
    pub fn new(links: alloc::vec::Vec<B>) -> Result<Self, EmptyChain> {
        if links.is_empty() {
            return Err(EmptyChain);
        }
        Ok(Self {
            links,
            closed: AtomicBool::new(false),
        })
    }

    /// The chained limiters.
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(2)).unwrap();
    /// let noop = NoopLimiter::new();
    /// let chain = DynChain::new(vec![&a as &dyn Limiter, &noop]).unwrap();
    /// let _lease = chain.try_acquire(1).unwrap();
    /// assert_eq!(chain.links()[0].available_permits(), 1);
    /// ```
    pub fn links(&self) -> &[B] {
        &self.links
    }

    /// Acquires `permits` from each limiter in order, without waiting; all or nothing.
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(2)).unwrap();
    /// let b = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
    /// let chain = DynChain::new(vec![Box::new(&a) as Box<dyn Limiter>, Box::new(&b)]).unwrap();
    /// let lease = chain.try_acquire(1).unwrap();
    /// assert_eq!(chain.try_acquire(1).unwrap_err().reason(), Reason::Exhausted); // `b` is full
    /// assert_eq!(a.available_permits(), 1); // `a`'s second permit was given back
    /// drop(lease);
    /// assert_eq!((a.available_permits(), b.available_permits()), (2, 1));
    /// ```
    pub fn try_acquire(
        &self,
        permits: u32,
    ) -> Result<ChainLease<alloc::vec::Vec<Lease<'_>>>, Rejection> {
        if self.is_closed() {
            return Err(Rejection::new(&Reason::Closed));
        }
        let mut leases = alloc::vec::Vec::with_capacity(self.links.len());
        for link in &self.links {
            match link.try_acquire(permits) {
                Ok(lease) => leases.push(lease),
                Err(rejection) => {
                    leases.release_in_reverse();
                    return Err(rejection);
                }
            }
        }
        Ok(ChainLease::new(leases, permits))
    }

    /// The permits free now: the minimum over the chain (a snapshot; see
    /// [`Limiter::available_permits`] for what it means behind a queue).
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(3)).unwrap();
    /// let b = ConcurrencyLimiter::new(ConcurrencyOptions::new(10)).unwrap();
    /// let chain = DynChain::new(vec![&a as &dyn Limiter, &b]).unwrap();
    /// let _lease = chain.try_acquire(2).unwrap();
    /// assert_eq!(chain.available_permits(), 1); // min(1, 8)
    /// ```
    pub fn available_permits(&self) -> u64 {
        self.statistics().available_permits
    }

    /// The chain's statistics, by the rules of [`Chain::statistics`].
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(4)).unwrap();
    /// let b = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
    /// let chain = DynChain::new(vec![&a as &dyn Limiter, &b]).unwrap();
    /// let _lease = chain.try_acquire(1).unwrap();
    /// assert!(chain.try_acquire(1).is_err()); // `b` rejects
    /// let s = chain.statistics();
    /// assert_eq!((s.available_permits, s.total_successful, s.total_failed), (0, 1, 1));
    /// ```
    pub fn statistics(&self) -> Statistics {
        combine(self.links.iter().map(|l| l.statistics()))
    }

    /// `None` if any limiter is in use, else the shortest idle duration.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let a = ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(1), &clock).unwrap();
    /// let b = ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(1), &clock).unwrap();
    /// let chain = DynChain::new(vec![&a, &b]).unwrap();
    /// let lease = b.try_acquire(1).unwrap();
    /// clock.advance(Duration::from_secs(2));
    /// assert_eq!(chain.idle_duration(), None); // `b` is in use
    /// drop(lease);
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(chain.idle_duration(), Some(Duration::from_secs(1))); // min(3 s, 1 s)
    /// ```
    pub fn idle_duration(&self) -> Option<Duration> {
        combine_idle(self.links.iter().map(|l| l.idle_duration()))
    }

    /// Closes the chain (not the limiters in it).
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let inner = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
    /// let chain = DynChain::new(vec![&inner]).unwrap();
    /// chain.close();
    /// assert_eq!(chain.try_acquire(1).unwrap_err().reason(), Reason::Closed);
    /// assert!(!inner.is_closed() && inner.try_acquire(1).is_ok());
    /// ```
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Whether [`close`](Self::close) has been called.
    ///
    /// ```
    /// use tollgate::{DynChain, NoopLimiter};
    ///
    /// let noop = NoopLimiter::new();
    /// let chain = DynChain::new(vec![&noop]).unwrap();
    /// assert!(!chain.is_closed());
    /// chain.close();
    /// assert!(chain.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

#[cfg(feature = "alloc")]
impl<B> DynChain<B>
where
    B: core::ops::Deref,
    B::Target: AcquireAsync,
{
    /// Waits for `permits` from each limiter in order, with [`Chain::acquire`]'s guarantees:
    /// each wait completes before the next limiter is asked; on a rejection the leases already
    /// granted are dropped last first and the rejection is returned; dropping the future at any
    /// point gives back whatever it holds (last first) and leaves the queue it waits in.
    ///
    /// For chains of one limiter type (or of pointers to it: `Vec<Arc<TokenBucketLimiter>>`,
    /// `Vec<&ConcurrencyLimiter>`).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::*;
    /// # fn block_on<F: core::future::Future>(f: F) -> F::Output {
    /// #     let mut f = core::pin::pin!(f);
    /// #     let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
    /// #     loop { if let core::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
    /// # }
    /// let opts = ConcurrencyOptions::new(1).with_queue(1, QueueOrder::OldestFirst);
    /// let global = Arc::new(ConcurrencyLimiter::new(opts).unwrap());
    /// let per_user = Arc::new(ConcurrencyLimiter::new(opts).unwrap());
    /// let chain = DynChain::new(vec![global.clone(), per_user.clone()]).unwrap();
    /// let lease = block_on(chain.acquire(1)).unwrap();
    /// assert_eq!((global.available_permits(), per_user.available_permits()), (0, 0));
    /// drop(lease);
    /// assert_eq!((global.available_permits(), per_user.available_permits()), (1, 1));
    /// ```
    pub async fn acquire(
        &self,
        permits: u32,
    ) -> Result<ChainLease<alloc::vec::Vec<Lease<'_>>>, Rejection> {
        if self.is_closed() {
            return Err(Rejection::new(&Reason::Closed));
        }
        // The chain lease holds what is granted so far: on `?`, or if the future is dropped
        // mid-way, it gives it back last first.
        let mut held = ChainLease::new(alloc::vec::Vec::with_capacity(self.links.len()), permits);
        for link in &self.links {
            let lease = (**link).acquire(permits).await?;
            if let Some(leases) = held.leases.as_mut() {
                leases.push(lease);
            }
        }
        Ok(held)
    }
}

#[cfg(feature = "alloc")]
impl<B> fmt::Debug for DynChain<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynChain")
            .field("links", &self.links.len())
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish()
    }
}
