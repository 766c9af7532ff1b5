//! The waiters' timer with feature `embassy-time`: embassy's own timer queue.
//!
//! A waiter at a queue's serving end, on a rate limiter whose clock advances by itself (such as
//! [`EmbassyClock`](crate::embassy::EmbassyClock)), asks embassy's time driver to wake its task
//! at the instant its permits arrive (`embassy_time_driver::schedule_wake`): the same mechanism
//! as `embassy_time::Timer`, with no task to spawn, no allocation and no lock of ours. Woken, it
//! polls, serves the queue and the next waiter in line arms its own wake-up in turn. This replaces
//! the `std` process timer when both features are on.

use core::task::Waker;
use core::time::Duration;

/// One waiter's wake-up request. Embassy's queue keeps no handle to cancel one: a wake-up that
/// is no longer wanted arrives anyway and costs the task one spurious poll.
#[derive(Debug, Default)]
pub(crate) struct Timer;

impl Timer {
    pub(crate) const fn new() -> Self {
        Timer
    }

    /// Wakes `waker` at least `after` from now, rounded up to the driver's next tick.
    pub(crate) fn arm(&mut self, after: Duration, waker: &Waker) {
        let hz = u128::from(embassy_time_driver::TICK_HZ);
        let ticks = (after.as_nanos() * hz).div_ceil(1_000_000_000);
        let at = u64::try_from(ticks)
            .ok()
            .and_then(|t| embassy_time_driver::now().checked_add(t.max(1)));
        if let Some(at) = at {
            embassy_time_driver::schedule_wake(at, waker);
        }
    }

    /// Nothing to undo (see the type's docs).
    pub(crate) fn disarm(&mut self) {}
}
