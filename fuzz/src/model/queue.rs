//! Waiting: a plain reference queue in front of any limiter model.
//!
//! The semantics (README "Waiting", `src/wait/mod.rs`), written as a list of waiters:
//!
//! - `acquire(n)` creates a waiter that does nothing until first polled. Its first poll:
//!   `n > limit` → ExceedsLimit; closed → Closed; granted at once if the limiter grants `n` and
//!   nobody is queued ahead (oldest-first) — a newest-first newcomer, or a probe, ignores the
//!   queue. Otherwise the queue is served first (time may have brought permits), then: granted
//!   if nobody is ahead and the permits are there; refused QueueFull if the queue has no room
//!   for `n` permits (newest-first: only if `n` exceeds the queue limit; it evicts the oldest
//!   waiters, each completed as Evicted, until there is room); else queued at the back.
//! - Serving: while the waiter at the serving end (oldest-first: the head; newest-first: the
//!   tail) gets its permits from the limiter (ignoring the queue), it is granted, with a stamp.
//!   A rate limiter's waiter is granted as of the first instant its permits were there (at or
//!   before the serving instant), so that serving late grants what serving at every instant
//!   grants: the model finds that instant by searching the clock readings since creation (the
//!   limiter's answer only improves with time) and takes there; a reading behind the state's
//!   tick acts at the state's tick, as for any operation.
//!   Served by: a first poll, a later poll, a waiter leaving, a give-back (a rate limiter's
//!   queue also before it), `replenish()` (first, then the limiter is brought up to date), a
//!   release or dropped lease (concurrency), and a rate limiter's `try_acquire` or first poll
//!   for `n > 0` while anyone waits, in either order (an oldest-first newcomer is then held
//!   back once more and retries; a newest-first one barges past those still waiting).
//! - A later poll serves the queue, then: granted → `Ok` (counted a success now); rejected →
//!   `Err` (counted when it was completed); still queued → pending.
//! - Dropped: before its first poll, nothing; while queued, it leaves (its capacity is free at
//!   once) and the queue is served; after being granted but before it saw the grant, the
//!   permits go back by the limiter's give-back rule and the queue is served — a cancelled
//!   request, counted neither way.
//! - `close()` completes every queued waiter with Closed (counted as failed).
//! - `try_acquire(n)` while waiters are queued (oldest-first): refused Exhausted unless a probe;
//!   RetryAfter is the exact time after which it is granted if nothing else arrives, with the
//!   waiters ahead served as soon as their permits come (see [`QueueModel::retry_after`]).
//! - Statistics: queued permits = permits of the queued waiters; idle duration is `None` while
//!   anyone is queued.

use super::{Denial, Expect, Model, Reason};

/// Ticks the RetryAfter search looks ahead before giving up (then not compared).
const SEARCH_TICKS: u32 = 2_000;

/// Where a waiter is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Created, never polled.
    Unpolled,
    /// In the queue.
    Queued,
    /// Granted with this stamp; the future has not seen it yet.
    Granted(u128),
    /// Completed with this reason (counted already); the future has not seen it yet.
    Rejected(Reason),
    /// Resolved (the future returned `Ready`).
    Done,
}

/// One waiter.
#[derive(Clone, Copy, Debug)]
pub struct Waiter {
    /// Permits asked for.
    pub n: u32,
    /// Where it is.
    pub state: State,
}

/// What a poll returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polled {
    /// Still waiting.
    Pending,
    /// A lease of the waiter's permits.
    Granted,
    /// Refused.
    Refused(Denial),
}

/// The queue in front of a limiter model.
#[derive(Clone, Debug)]
pub struct QueueModel<M: Model> {
    /// The limiter.
    pub inner: M,
    origin: u64,
    limit: u32,
    newest_first: bool,
    /// Every waiter ever created, by id.
    pub waiters: Vec<Waiter>,
    /// Ids of the queued waiters, oldest first.
    queue: Vec<usize>,
}

impl<M: Model> QueueModel<M> {
    /// An empty queue of `limit` permits in front of `inner` (created at the raw reading `origin`).
    pub fn new(inner: M, origin: u64, limit: u32, newest_first: bool) -> Self {
        QueueModel {
            inner,
            origin,
            limit,
            newest_first,
            waiters: Vec::new(),
            queue: Vec::new(),
        }
    }

    /// Permits of the queued waiters.
    pub fn queued(&self) -> u128 {
        self.queue
            .iter()
            .map(|&i| u128::from(self.waiters[i].n))
            .sum()
    }

    fn rate(&self) -> bool {
        self.inner.step_ns().is_some()
    }

    /// The limiter grants `n` now (counted nowhere), ignoring the queue.
    fn take(&mut self, now: u64, n: u32) -> Option<u128> {
        let saved = *self.inner.counts_mut();
        let r = self.inner.acquire(now, n);
        *self.inner.counts_mut() = saved;
        r.ok().map(|()| self.inner.stamp(now))
    }

    /// Whether the limiter would grant `n` now (changes nothing).
    fn would_grant(&self, now: u64, n: u32) -> bool {
        self.inner.clone().acquire(now, n).is_ok()
    }

    /// The first clock reading, at or before `now`, at which the limiter grants `n` (`now` if
    /// it does not grant them then either): a binary search over the nanoseconds since
    /// creation, since a rate limiter's answer to the same request only improves as time
    /// passes (readings behind its state act at its state's tick).
    fn first_fit(&self, now: u64, n: u32) -> u64 {
        let e_now = self.inner.elapsed(now);
        if e_now == 0 || !self.would_grant(now, n) {
            return now;
        }
        let raw = |e: u128| self.origin.wrapping_add(e as u64);
        let (mut lo, mut hi) = (0u128, e_now);
        if self.would_grant(raw(0), n) {
            return raw(0);
        }
        // would_grant(raw(lo)) is false, would_grant(raw(hi)) is true.
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.would_grant(raw(mid), n) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        raw(hi)
    }

    /// Serves the serving end while it fits.
    pub fn serve(&mut self, now: u64) {
        let had = !self.queue.is_empty();
        self.serve_inner(now);
        if had && self.queue.is_empty() {
            self.inner.queue_emptied(now);
        }
    }

    fn serve_inner(&mut self, now: u64) {
        while let Some(&id) = if self.newest_first {
            self.queue.last()
        } else {
            self.queue.first()
        } {
            let n = self.waiters[id].n;
            let at = if self.rate() {
                self.first_fit(now, n)
            } else {
                now
            };
            let Some(stamp) = self.take(at, n) else {
                break;
            };
            self.waiters[id].state = State::Granted(stamp);
            self.queue.retain(|&i| i != id);
        }
    }

    /// A new waiter for `n` permits (not polled yet); its id.
    pub fn enqueue(&mut self, n: u32) -> usize {
        self.waiters.push(Waiter {
            n,
            state: State::Unpolled,
        });
        self.waiters.len() - 1
    }

    fn fail(&mut self, d: Denial) -> Polled {
        self.inner.counts_mut().failed += 1;
        Polled::Refused(d)
    }

    /// Polls waiter `id` at `now`.
    pub fn poll(&mut self, id: usize, now: u64) -> Polled {
        let n = self.waiters[id].n;
        match self.waiters[id].state {
            State::Unpolled => {
                let out = self.start(id, n, now);
                if out != Polled::Pending {
                    self.waiters[id].state = State::Done;
                }
                out
            }
            State::Queued | State::Granted(_) | State::Rejected(_) => {
                if self.waiters[id].state == State::Queued {
                    self.serve(now); // a queued waiter serves the queue first
                }
                match self.waiters[id].state {
                    State::Granted(_) => {
                        self.waiters[id].state = State::Done;
                        self.inner.counts_mut().successful += 1;
                        Polled::Granted
                    }
                    State::Rejected(r) => {
                        self.waiters[id].state = State::Done;
                        Polled::Refused(Denial::plain(r))
                    }
                    _ => Polled::Pending,
                }
            }
            State::Done => unreachable!("the harness polls no resolved future"),
        }
    }

    fn start(&mut self, id: usize, n: u32, now: u64) -> Polled {
        if n > self.inner.limit() {
            return self.fail(Denial::plain(Reason::ExceedsLimit));
        }
        if self.inner.is_closed() {
            return self.fail(Denial::plain(Reason::Closed));
        }
        if n > 0 && self.rate() && !self.queue.is_empty() {
            // Those whose permits came before now are served first (the newcomer is then held
            // back by an oldest-first queue, or barges past a newest-first one).
            self.serve(now);
        }
        let blocked = n > 0 && !self.queue.is_empty() && !self.newest_first;
        if !blocked && self.take(now, n).is_some() {
            self.inner.counts_mut().successful += 1;
            return Polled::Granted;
        }
        self.serve(now);
        let queued = self.queued();
        let behind = !self.queue.is_empty() && !self.newest_first;
        let room = u128::from(self.limit).saturating_sub(queued);
        let can_queue = n == 0 || room >= u128::from(n) || (self.newest_first && n <= self.limit);
        if !behind && self.take(now, n).is_some() {
            self.inner.counts_mut().successful += 1;
            return Polled::Granted;
        }
        if !can_queue {
            let retry_after = if self.rate() {
                // As for `try_acquire`: when the request would be granted at once (the queue
                // ahead served), not merely let into the queue.
                self.retry_after(now, n)
            } else {
                Expect::Exactly(None)
            };
            return self.fail(Denial {
                reason: Reason::QueueFull,
                retry_after,
            });
        }
        while n > 0 && u128::from(self.limit).saturating_sub(self.queued()) < u128::from(n) {
            let Some(&oldest) = self.queue.first() else {
                break;
            };
            self.queue.remove(0);
            self.waiters[oldest].state = State::Rejected(Reason::Evicted);
            self.inner.counts_mut().failed += 1;
        }
        self.queue.push(id);
        self.waiters[id].state = State::Queued;
        Polled::Pending
    }

    /// The future of waiter `id` is dropped at `now`.
    pub fn cancel(&mut self, id: usize, now: u64) {
        let w = self.waiters[id];
        self.waiters[id].state = State::Done;
        match w.state {
            State::Queued => {
                self.queue.retain(|&i| i != id);
                self.serve(now);
                if self.queue.is_empty() {
                    self.inner.queue_emptied(now);
                }
            }
            State::Granted(stamp) => {
                if self.rate() && !self.queue.is_empty() {
                    // Those whose permits came before now first: giving back brings the
                    // limiter up to date.
                    self.serve(now);
                }
                if self.rate() || self.queue.is_empty() {
                    self.inner.give_back(now, w.n, stamp);
                } else {
                    self.inner.release_queued(now, w.n);
                }
                self.serve(now);
            }
            State::Unpolled | State::Rejected(_) | State::Done => {}
        }
    }

    /// The exact wait after which a newcomer for `n` permits is granted at once if nothing else
    /// arrives, while the waiters ahead are served as soon as their permits come (RetryAfter of
    /// a `try_acquire` held back by the queue, and of a first poll refused QueueFull). Found by
    /// stepping through the ticks at which the limiter's state can change.
    fn retry_after(&self, now: u64, n: u32) -> Expect<Option<u128>> {
        if self.newest_first && !self.queue.is_empty() {
            return Expect::Unspecified("newest-first: whether the waiters are served first");
        }
        let step = self.inner.step_ns().expect("a rate limiter");
        let e = self.inner.elapsed(now);
        if e == 0 && now != self.origin {
            return Expect::Unspecified("clock before creation");
        }
        if self.inner.clock_behind(now) {
            return Expect::Unspecified("a reading behind the state's tick");
        }
        let mut t = e / step;
        for _ in 0..SEARCH_TICKS {
            t += 1;
            let at = t * step;
            if at >= 1 << 63 {
                return Expect::Unspecified("beyond the clock's forward range");
            }
            let then = self.origin.wrapping_add(at as u64);
            if self.inner.beyond_limits(then) {
                return Expect::Unspecified("beyond the library's time limit");
            }
            let mut m = self.clone();
            m.serve(then);
            if m.queue.is_empty() && m.would_grant(then, n) {
                return Expect::Exactly(Some(at - e));
            }
        }
        Expect::Unspecified("more ticks ahead than the model searches")
    }
}

impl<M: Model> Model for QueueModel<M> {
    /// `try_acquire(n)`.
    fn acquire(&mut self, now: u64, n: u32) -> Result<(), Denial> {
        if n > 0
            && n <= self.inner.limit()
            && !self.inner.is_closed()
            && self.rate()
            && self.newest_first
            && !self.queue.is_empty()
        {
            // A newest-first newcomer barges, but only past those whose permits have not come:
            // the others are served first.
            self.serve(now);
        }
        let held_back = |m: &Self| n > 0 && !m.queue.is_empty() && !m.newest_first;
        if n > self.inner.limit() || self.inner.is_closed() || !held_back(self) {
            // Not held back by the queue: the limiter decides (and counts) alone. A rate
            // limiter's RetryAfter then counts the queue ahead only if oldest-first, and the
            // queue is empty here or barging, or this is a probe.
            if n == 0 && !self.queue.is_empty() && self.rate() {
                // A probe ignores the queue, but a failed one serves it and retries.
                if !self.would_grant(now, 0) {
                    self.serve(now);
                    if self.queue.is_empty() {
                        return self.inner.acquire(now, 0);
                    }
                    let ra = self.retry_after(now, 0);
                    return self.fail_try(ra);
                }
            }
            let r = self.inner.acquire(now, n);
            return match r {
                Err(d) if d.reason == Reason::Exhausted && !self.queue.is_empty() => {
                    let ra = if self.rate() && !self.newest_first {
                        self.retry_after(now, n)
                    } else if self.rate() {
                        d.retry_after
                    } else {
                        Expect::Exactly(None)
                    };
                    Err(Denial {
                        retry_after: ra,
                        ..d
                    })
                }
                r => r,
            };
        }
        if self.rate() {
            // Held back by the queue: serve it, then retry once.
            self.serve(now);
            if !held_back(self) {
                return self.inner.acquire(now, n);
            }
            let ra = self.retry_after(now, n);
            return self.fail_try(ra);
        }
        let ra = Expect::Exactly(None);
        self.fail_try(ra)
    }

    fn available(&self, now: u64) -> u128 {
        self.inner.available(now)
    }

    fn idle(&self, now: u64) -> Expect<Option<u128>> {
        if !self.queue.is_empty() {
            return Expect::Exactly(None);
        }
        if !self.inner.idle_known() {
            return Expect::Unspecified("a give-back emptied the last counted segment");
        }
        self.inner.idle(now)
    }

    fn close(&mut self) {
        self.inner.close();
        for id in core::mem::take(&mut self.queue) {
            self.waiters[id].state = State::Rejected(Reason::Closed);
            self.inner.counts_mut().failed += 1;
        }
    }

    fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    fn counts(&self) -> (u64, u64) {
        self.inner.counts()
    }

    fn limit(&self) -> u32 {
        self.inner.limit()
    }

    fn step_ns(&self) -> Option<u128> {
        self.inner.step_ns()
    }

    fn window_ns(&self) -> Option<u128> {
        self.inner.window_ns()
    }

    fn elapsed(&self, now: u64) -> u128 {
        self.inner.elapsed(now)
    }

    fn replenish(&mut self, now: u64) -> u128 {
        // Served first: bringing the limiter up to date caps what came after a waiter fit.
        self.serve(now);
        self.inner.replenish(now);
        self.inner.available(now)
    }

    fn clock_behind(&self, now: u64) -> bool {
        self.inner.clock_behind(now)
    }

    fn beyond_limits(&self, now: u64) -> bool {
        self.inner.beyond_limits(now)
    }

    fn release(&mut self, now: u64, n: u32) {
        if self.queue.is_empty() {
            self.inner.release(now, n);
        } else {
            self.inner.release_queued(now, n);
        }
        self.serve(now);
    }

    fn counts_mut(&mut self) -> &mut super::Counts {
        self.inner.counts_mut()
    }

    fn give_back(&mut self, now: u64, n: u32, stamp: u128) {
        self.inner.give_back(now, n, stamp);
        self.serve(now);
    }

    fn queued_permits(&self) -> u128 {
        self.queued()
    }

    fn queue_empty(&self) -> bool {
        self.queue.is_empty()
    }

    fn waiter_new(&mut self, n: u32) -> usize {
        self.enqueue(n)
    }

    fn waiter_poll(&mut self, id: usize, now: u64) -> Polled {
        self.poll(id, now)
    }

    fn waiter_drop(&mut self, id: usize, now: u64) {
        self.cancel(id, now)
    }

    fn waiter(&self, id: usize) -> Waiter {
        self.waiters[id]
    }
}

impl<M: Model> QueueModel<M> {
    fn fail_try(&mut self, retry_after: Expect<Option<u128>>) -> Result<(), Denial> {
        self.inner.counts_mut().failed += 1;
        Err(Denial {
            reason: Reason::Exhausted,
            retry_after,
        })
    }
}
