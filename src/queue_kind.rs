//! Whether a token bucket, fixed window or concurrency limiter has a wait queue: a type
//! parameter, so that a limiter built without one carries none of the queue's code or memory.
//!
//! The queue is what lets `acquire(n).await` wait; `try_acquire` on a limiter that has one must
//! still respect it (an oldest-first queue holds newcomers back, and serves its waiters when a
//! newcomer finds tokens), so its code is reachable from every `try_acquire`. A program that
//! never waits — firmware taking decisions in an interrupt handler, a proxy that answers 429 at
//! once — pays for that in code size and in memory. [`NoQueue`] removes it at compile time.

use crate::options::{OptionsError, QueueOrder};
use crate::wait::WaitQueue;

/// The kind of queue a [`TokenBucketLimiter`](crate::TokenBucketLimiter),
/// [`FixedWindowLimiter`](crate::FixedWindowLimiter) or
/// [`ConcurrencyLimiter`](crate::ConcurrencyLimiter) has: a wait queue (the default, which
/// the limiter's own constructors build) or [`NoQueue`].
///
/// Sealed: there are exactly these two.
///
/// ```
/// use core::time::Duration;
/// use tollgate::{Limiter, ManualClock, NoQueue, QueueKind, TokenBucketLimiter, TokenBucketOptions};
///
/// /// The token limit of a bucket of either kind.
/// fn limit<Q: QueueKind>(bucket: &TokenBucketLimiter<&ManualClock, Q>) -> u32 {
///     bucket.options().token_limit
/// }
///
/// /// The tokens it holds: `Limiter` is implemented for each kind, so generic code names it.
/// fn tokens<L: Limiter>(limiter: &L) -> u64 {
///     limiter.available_permits()
/// }
///
/// let clock = ManualClock::new();
/// let opts = TokenBucketOptions::new(3, 1, Duration::from_secs(1));
/// let queued = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
/// let bare: TokenBucketLimiter<_, NoQueue> = TokenBucketLimiter::without_queue(opts, &clock).unwrap();
/// assert_eq!(limit(&queued), limit(&bare));
/// assert_eq!(tokens(&queued), tokens(&bare));
/// ```
pub trait QueueKind: private::Sealed {
    /// Whether there is a queue at all (known at compile time: code for waiters compiles to
    /// nothing without one).
    #[doc(hidden)]
    const QUEUED: bool;
    /// Whether newcomers may take permits ahead of queued waiters (always, with no queue).
    #[doc(hidden)]
    fn barging(&self) -> bool;
    /// Permits waiting now.
    #[doc(hidden)]
    fn queued_permits(&self) -> u64;
    /// Permits that may wait.
    #[doc(hidden)]
    fn queue_limit(&self) -> u32;
    /// The order waiters are served in (oldest first without a queue: the order of a queue
    /// that does not exist is not kept).
    #[doc(hidden)]
    fn order(&self) -> QueueOrder;
    /// Runs `f` over the queued requests in the order they will be served (under the queue's
    /// lock).
    #[doc(hidden)]
    fn with_requests<R>(&self, f: impl FnOnce(&mut dyn Iterator<Item = u32>) -> R) -> R;
    /// The queue of options with this queue limit and order: refused
    /// ([`OptionsError::NoWaitQueue`]) by [`NoQueue`] for a queue limit above 0.
    #[doc(hidden)]
    fn for_options(queue_limit: u32, order: QueueOrder) -> Result<Self, OptionsError>
    where
        Self: Sized;
}

pub(crate) mod private {
    pub trait Sealed {}
}

impl private::Sealed for WaitQueue {}

impl QueueKind for WaitQueue {
    const QUEUED: bool = true;
    #[inline]
    fn barging(&self) -> bool {
        WaitQueue::barging(self)
    }
    #[inline]
    fn queued_permits(&self) -> u64 {
        WaitQueue::queued_permits(self)
    }
    fn queue_limit(&self) -> u32 {
        WaitQueue::limit(self)
    }
    fn order(&self) -> QueueOrder {
        WaitQueue::order(self)
    }
    fn with_requests<R>(&self, f: impl FnOnce(&mut dyn Iterator<Item = u32>) -> R) -> R {
        WaitQueue::with_requests(self, f)
    }
    fn for_options(queue_limit: u32, order: QueueOrder) -> Result<Self, OptionsError> {
        Ok(WaitQueue::new(queue_limit, order))
    }
}

/// No wait queue: a [`TokenBucketLimiter`](crate::TokenBucketLimiter),
/// [`FixedWindowLimiter`](crate::FixedWindowLimiter) or
/// [`ConcurrencyLimiter`](crate::ConcurrencyLimiter) that only decides at once
/// (`try_acquire`), with none of the queue's code or memory. Built by the limiters'
/// `without_queue` and `at_epoch_without_queue` constructors; its options' queue limit must be
/// 0 ([`OptionsError::NoWaitQueue`](crate::OptionsError::NoWaitQueue) otherwise).
///
/// On a Cortex-M4 (`benches/size.sh`) a token bucket's `try_acquire` is about half the code
/// of one with a queue, and the limiter about a third of the memory; a concurrency limiter's
/// acquire and release, with no queue to hand permits to, well under half. Everything else is
/// the same: the same decisions, RetryAfter, statistics, idle duration, `close`,
/// `reconfigure`, and a concurrency lease still gives its permits back when dropped. There is
/// no `acquire` to wait with.
///
/// ```
/// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Limiter, ManualClock, NoQueue};
///
/// static PERMITS: ConcurrencyLimiter<ManualClock, NoQueue> =
///     ConcurrencyLimiter::at_epoch_without_queue(ConcurrencyOptions::new(2), ManualClock::new());
///
/// let lease = PERMITS.try_acquire(2).unwrap();
/// assert!(PERMITS.try_acquire(1).is_err());
/// drop(lease);
/// assert_eq!(PERMITS.available_permits(), 2);
/// ```
///
/// ```
/// use core::time::Duration;
/// use tollgate::{Limiter, ManualClock, NoQueue, TokenBucketLimiter, TokenBucketOptions};
///
/// static BUCKET: TokenBucketLimiter<ManualClock, NoQueue> = TokenBucketLimiter::at_epoch_without_queue(
///     TokenBucketOptions::new(2, 1, Duration::from_millis(10)),
///     ManualClock::new(),
/// );
///
/// assert!(BUCKET.try_acquire(2).is_ok());
/// let denied = BUCKET.try_acquire(1).unwrap_err();
/// assert_eq!(denied.retry_after(), Some(Duration::from_millis(10)));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NoQueue;

impl private::Sealed for NoQueue {}

impl QueueKind for NoQueue {
    const QUEUED: bool = false;
    #[inline(always)]
    fn barging(&self) -> bool {
        true
    }
    #[inline(always)]
    fn queued_permits(&self) -> u64 {
        0
    }
    #[inline(always)]
    fn queue_limit(&self) -> u32 {
        0
    }
    fn order(&self) -> QueueOrder {
        QueueOrder::OldestFirst
    }
    #[inline(always)]
    fn with_requests<R>(&self, f: impl FnOnce(&mut dyn Iterator<Item = u32>) -> R) -> R {
        f(&mut core::iter::empty())
    }
    fn for_options(queue_limit: u32, _order: QueueOrder) -> Result<Self, OptionsError> {
        Self::checked(queue_limit)
    }
}

/// `Ok` if what a limiter fixes at creation is unchanged (`same`), and so is its queue's order
/// (`order`, against `before`) when it has a queue: without one, any order is accepted, as the
/// order of a queue that does not exist means nothing.
pub(crate) fn unchanged<Q: QueueKind>(
    same: bool,
    order: QueueOrder,
    before: QueueOrder,
) -> Result<(), OptionsError> {
    if same && (!Q::QUEUED || order == before) {
        Ok(())
    } else {
        Err(OptionsError::FixedAtCreation)
    }
}

impl NoQueue {
    /// No queue for options with this queue limit: refused unless it is 0.
    pub(crate) const fn checked(queue_limit: u32) -> Result<Self, OptionsError> {
        // 0, or the quota constructors' waiting default, which a limiter without a queue has
        // nothing to apply to.
        if queue_limit == 0 || queue_limit == crate::options::UNBOUNDED_QUEUE {
            Ok(NoQueue)
        } else {
            Err(OptionsError::NoWaitQueue)
        }
    }

    /// Runs `f` under the lock of the rare paths of every limiter without a queue (a
    /// `reconfigure` whose parameters take more than one store, a concurrency release that pays
    /// a debt): a `critical-section` section without `std`, a process-wide mutex with it. Held
    /// for a handful of stores.
    #[inline(always)]
    pub(crate) fn serialized<R>(f: impl FnOnce() -> R) -> R {
        #[cfg(loom)]
        {
            loom::lazy_static! {
                static ref RARE: loom::sync::Mutex<()> = loom::sync::Mutex::new(());
            }
            let _held = RARE.lock().unwrap();
            f()
        }
        #[cfg(all(not(loom), feature = "std"))]
        {
            static RARE: std::sync::Mutex<()> = std::sync::Mutex::new(());
            // The lock guards no data of its own: a panic under it leaves nothing inconsistent.
            let _held = RARE
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            f()
        }
        #[cfg(all(not(loom), not(feature = "std")))]
        {
            critical_section::with(|_| f())
        }
    }

    /// [`checked`](Self::checked) for constant constructors: a queue limit above 0 stops the
    /// build.
    pub(crate) const fn in_const(queue_limit: u32) -> Self {
        OptionsError::valid_in_const(Self::checked(queue_limit))
    }
}
