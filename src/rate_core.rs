//! The contract every lock-free rate core meets, named: what the limiter fronts
//! ([`rate_limiter!`](crate::rate_limiter::rate_limiter)) and the wait queue ask of a core
//! besides its decision ([`QuickPath`](crate::quick_path::QuickPath), or the sliding log's own)
//! and its state word ([`CellCore`](crate::state_cell::CellCore)). What every core shares is
//! written here once, as provided methods.
//!
//! Implemented by [`BucketCore`](crate::bucket::BucketCore) (token bucket, fixed window),
//! [`GcraCore`](crate::gcra::GcraCore) (GCRA, leaky meter and shaper), and the cores of the
//! sliding window, the sliding counter and the sliding log.

use core::time::Duration;

use crate::clock::Clock;
use crate::core_common::RateBase;
use crate::lease::{SettleError, Statistics};
use crate::queue_kind::QueueKind;
use crate::wait::LockedTake;

/// A rate core: its time, statistics, queue and clock, its limit and period, and its side of
/// the waiting protocol.
pub(crate) trait RateCore {
    /// The clock the core reads.
    type Clock: Clock;
    /// Its wait queue, or `NoQueue`.
    type Queue: QueueKind;

    /// Its time in its own unit, its statistics, its queue and its clock.
    fn base(&self) -> &RateBase<Self::Clock, Self::Queue>;

    /// Permits per period (or window, or burst) now.
    fn limit(&self) -> u32;

    /// How often permits come back: the refill period, the window, the segment or the
    /// emission interval.
    fn period(&self) -> Duration;

    /// Permits a request could take now.
    fn available(&self) -> u64;

    /// How long the core has had every permit free with nobody waiting, if it has.
    fn idle_duration(&self) -> Option<Duration>;

    /// The statistics now: the counts, the permits available, and those queued.
    fn statistics(&self) -> Statistics {
        let base = self.base();
        base.counters
            .statistics(self.available(), base.queue.queued_permits())
    }

    /// Brings a stored state up to date (a state computed from elapsed time has nothing to
    /// write).
    fn catch_up(&self) {}

    /// What [`Replenishing::replenish`](crate::limiter::Replenishing::replenish) answers once
    /// the queue is served: the state brought up to date, then the permits available now.
    fn replenished(&self) -> u64 {
        self.catch_up();
        self.available()
    }

    /// [`replenished`](Self::replenished) without the queue lock, when nobody waits and the
    /// common case holds; `None` sends the caller to the lock (serve the queue, then
    /// [`replenished`](Self::replenished)).
    ///
    /// `Some` only when the state read carried no waiter flag and was brought up to date from
    /// that very state in one step: a compare-and-swap from it, or nothing to write because no
    /// refill was due. That step orders the call with a waiter deciding under the lock on an
    /// earlier clock reading: a waiter whose flag lands first fails the swap (and the call
    /// takes the lock and serves it); one whose flag comes after re-decides on the refilled
    /// state (its flag is set by a compare-and-swap too) and takes what this call added. Only a
    /// core whose every refill changes its word can skip the lock so: for a state computed
    /// from elapsed time (GCRA), a swap from a word to itself would not order anything.
    fn replenished_unwaited(&self) -> Option<u64> {
        None
    }

    /// Under the queue lock: takes `n` ignoring the queue flag, or finds them short, setting
    /// the flag in the same step when `flag_if_short`.
    fn take_locked(&self, n: u32, flag_if_short: bool) -> LockedTake;

    /// Under the queue lock, for the waiter at the serving end: takes `n` as of the instant (or
    /// tick) they first fit in, or finds them short.
    fn take_for_waiter(&self, n: u32) -> LockedTake;

    /// Returns `n` permits granted at `stamp` to a waiter that never received them, where the
    /// algorithm can; whether anyone waits.
    fn give_back(&self, n: u32, stamp: u64) -> bool;

    /// The whole stamp of a lease's (its low [`STAMP_BITS`](crate::lease::STAMP_BITS) bits),
    /// for [`give_back`](Self::give_back): the same for a core whose stamps fit (or that needs
    /// none).
    fn unmark(&self, stamp: u64) -> u64 {
        stamp
    }

    /// Takes `n` more permits for a lease settled above its estimate
    /// ([`Lease::settle`](crate::Lease::settle)): at once, past any waiter, and into debt when
    /// they are not there, as far as the core's debt bound and `max_debt` (the caller's)
    /// allow; past either, [`SettleError::DebtLimit`] and nothing is taken.
    fn take_debt(&self, n: u32, max_debt: u32) -> Result<(), SettleError>;

    /// How long until time alone lets `total` permits be granted.
    fn wait_for(&self, total: u64) -> Duration;

    /// How long from now until the last of `requests` (served in this order, each as soon as
    /// it fits) is granted by time alone.
    fn wait_for_requests(&self, requests: &mut dyn Iterator<Item = u32>) -> Duration;

    /// How long until a request of `n` permits (a probe counts as one) behind the waiters
    /// `ahead` would be granted by time alone.
    fn wait_behind_waiters(&self, ahead: &mut dyn Iterator<Item = u32>, n: u32) -> Duration {
        self.wait_for_requests(&mut ahead.chain(core::iter::once(n.max(1))))
    }
}

/// The first items of every [`RateCore`] impl on a core with a `base` field and type
/// parameters `C` (the clock) and `Q` (the queue kind).
macro_rules! base_field {
    () => {
        type Clock = C;
        type Queue = Q;

        fn base(&self) -> &$crate::core_common::RateBase<C, Q> {
            &self.base
        }
    };
}
pub(crate) use base_field;
