//! Reference models: each limiter's documented semantics, written to be read, not to be fast.
//!
//! Rules for every model:
//! - plain fields and wide integers (`u128`): no packing, no atomics, no saturating tricks;
//! - time enters only as the clock's raw reading, converted by [`time::elapsed`];
//! - every decision is explained in the words of the semantics it models.
//!
//! ## Time, and clocks that step backwards
//!
//! A rate limiter divides time into ticks (periods, windows, segments) counted from its creation
//! instant. The state of a model describes the limiter *as of* some tick: the tick of its last
//! change (a take, or a replenish that moved it forward). An operation whose clock reading falls
//! in an earlier tick — the clock stepped backwards — acts at the state's own tick: no time passed,
//! and nothing that was given back is taken away again. Reads (available permits, statistics,
//! idle duration), probes and denials change nothing, so they do not move the state's tick either
//! (the library writes nothing on them: "a denial writes nothing").

pub mod concurrency;
pub mod fixed_window;
pub mod options;
pub mod queue;
pub mod sliding_window;
pub mod time;
pub mod token_bucket;

pub use tollgate::Reason;

/// What a model expects of one observable value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect<T> {
    /// Exactly this.
    Exactly(T),
    /// The semantics do not say (a documented limit of the library); not compared.
    Unspecified(&'static str),
}

/// A denied request, as a model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Denial {
    /// Why.
    pub reason: Reason,
    /// The wait in nanoseconds after which the same request succeeds if nothing else happens
    /// (`None`: no RetryAfter).
    pub retry_after: Expect<Option<u128>>,
}

impl Denial {
    /// A denial without RetryAfter.
    pub fn plain(reason: Reason) -> Self {
        Denial {
            reason,
            retry_after: Expect::Exactly(None),
        }
    }
}

/// The common face of the models, for the harness.
pub trait Model: Clone + core::fmt::Debug {
    /// `try_acquire(n)` with the clock reading `now`; counts the outcome in the statistics.
    fn acquire(&mut self, now: u64, n: u32) -> Result<(), Denial>;
    /// Permits that could be acquired at `now`.
    fn available(&self, now: u64) -> u128;
    /// `idle_duration()` at `now`, in nanoseconds.
    fn idle(&self, now: u64) -> Expect<Option<u128>>;
    /// `close()`.
    fn close(&mut self);
    /// `is_closed()`.
    fn is_closed(&self) -> bool;
    /// (successful, failed) requests so far.
    fn counts(&self) -> (u64, u64);
    /// The permit limit.
    fn limit(&self) -> u32;
    /// One replenishment step in nanoseconds (period, window, segment); `None` for the
    /// concurrency limiter.
    fn step_ns(&self) -> Option<u128>;
    /// The whole window in nanoseconds (the sliding window's segments × segment; the step
    /// otherwise).
    fn window_ns(&self) -> Option<u128> {
        self.step_ns()
    }
    /// Nanoseconds since creation, as the limiter reads them.
    fn elapsed(&self, now: u64) -> u128;
    /// `Replenishing::replenish()` at `now`: permits available afterwards.
    fn replenish(&mut self, _now: u64) -> u128 {
        unreachable!("not a replenishing limiter")
    }
    /// Whether the clock reads an earlier tick than the one the state is dated by (the clock
    /// stepped backwards after the state moved on).
    fn clock_behind(&self, _now: u64) -> bool {
        false
    }
    /// Whether `now` is past a documented limit of the library's time representation.
    fn beyond_limits(&self, _now: u64) -> bool {
        false
    }
    /// Permits given back by hand or by a dropped lease (concurrency limiter).
    fn release(&mut self, _now: u64, _n: u32) {
        unreachable!("rate limiters take nothing back")
    }
    /// A release (or give-back) while waiters are queued: the permits are handed on to the
    /// queue under its lock, and the idle clock is not restarted (the limiter was not left
    /// wholly free).
    fn release_queued(&mut self, now: u64, n: u32) {
        self.release(now, n)
    }
    /// The wait queue has just become empty at `now` (its waiters flag is cleared): a
    /// concurrency limiter left wholly free by it starts its idle clock then.
    fn queue_emptied(&mut self, _now: u64) {}
    /// The statistics counters (the queue model counts waiters' outcomes in them).
    fn counts_mut(&mut self) -> &mut Counts;
    /// What a grant at `now` is stamped with (the sliding window: the segment it was taken in);
    /// handed back to [`give_back`](Self::give_back).
    fn stamp(&self, _now: u64) -> u128 {
        0
    }
    /// A waiter granted `n` permits at `stamp` went away without receiving them: the permits
    /// go back by the limiter's rule (see each model).
    fn give_back(&mut self, now: u64, n: u32, stamp: u128);
    /// Whether an idle-duration comparison is meaningful now (`false` only where the model
    /// cannot know the library's documented answer).
    fn idle_known(&self) -> bool {
        true
    }
    /// Permits of the queued waiters (`statistics().queued_permits`).
    fn queued_permits(&self) -> u128 {
        0
    }
    /// Whether no waiter is queued.
    fn queue_empty(&self) -> bool {
        true
    }
    /// A new waiter for `n` permits, not polled yet (see [`queue::QueueModel`]); its id.
    fn waiter_new(&mut self, _n: u32) -> usize {
        unreachable!("no queue in this scenario")
    }
    /// Polls waiter `id` at `now`.
    fn waiter_poll(&mut self, _id: usize, _now: u64) -> queue::Polled {
        unreachable!("no queue in this scenario")
    }
    /// Waiter `id` as the model sees it.
    fn waiter(&self, _id: usize) -> queue::Waiter {
        unreachable!("no queue in this scenario")
    }
    /// Drops waiter `id`'s future at `now`.
    fn waiter_drop(&mut self, _id: usize, _now: u64) {
        unreachable!("no queue in this scenario")
    }
}

/// Counts granted and refused requests (every `Ok` and every `Err`, whatever the reason).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Granted.
    pub successful: u64,
    /// Refused.
    pub failed: u64,
}

impl Counts {
    /// Counts `r` and hands it back.
    pub fn count(&mut self, r: Result<(), Denial>) -> Result<(), Denial> {
        match r {
            Ok(()) => self.successful += 1,
            Err(_) => self.failed += 1,
        }
        r
    }
}
