//! RetryAfter exact to the nanosecond, deterministically on a `ManualClock`: behind a queue of
//! waiters (served as soon as their permits arrive, one by one, each capped by the limit), from a
//! stale clock reading, and across the horizon of a limiter's clock reading.
//!
//! "Exact" means: if nothing else arrives and the waiters ahead are served on time (here by
//! `replenish()` at every period boundary, as a `Driver` or the waiters' own timers would), a
//! retry after exactly RetryAfter succeeds and one 1 ns earlier does not.

use core::time::Duration;

mod common;

use common::Task;
use tollgate::*;

const SEC: Duration = Duration::from_secs(1);
const NS: Duration = Duration::from_nanos(1);

/// Moves the clock to `until`, calling `replenish()` at every period boundary on the way (the
/// waiters are served as soon as their permits arrive).
fn serve_on_time_until(l: &dyn Replenishing, clock: &ManualClock, until: Instant) {
    let p = l.replenishment_period().as_nanos() as u64;
    let mut next = (clock.now().as_nanos() / p + 1) * p;
    while next <= until.as_nanos() {
        clock.set(Instant::from_nanos(next));
        l.replenish();
        next += p;
    }
    clock.set(until);
}

/// Asserts that `n` permits are refused 1 ns before `wait` from now and granted at it, the
/// waiters ahead being served on time. `scenario` builds the situation on the clock it is given,
/// asserts the RetryAfter it gets (`wait`), then calls the check it is handed right away.
fn assert_exact(
    wait: Duration,
    n: u32,
    scenario: impl Fn(&ManualClock, &dyn Fn(&dyn Replenishing)),
) {
    let clock = ManualClock::new();
    scenario(&clock, &|l: &dyn Replenishing| {
        let target = clock.now() + wait;
        serve_on_time_until(l, &clock, Instant::from_nanos(target.as_nanos() - 1));
        let r = l
            .try_acquire(n)
            .expect_err("1 ns before RetryAfter must still be refused");
        assert_eq!(r.reason(), Reason::Exhausted);
        serve_on_time_until(l, &clock, target);
        assert!(l.try_acquire(n).is_ok(), "RetryAfter {wait:?} must succeed");
    });
}

// Item 3: the refill cap while the queue ahead is served ----------------------------------------

fn bucket_with_queue(clock: &ManualClock) -> TokenBucketLimiter<&ManualClock> {
    let opts = TokenBucketOptions::new(10, 3, SEC).with_queue(100, QueueOrder::OldestFirst);
    TokenBucketLimiter::with_clock(opts, clock).unwrap()
}

#[test]
fn token_bucket_behind_one_big_waiter_counts_the_cap() {
    // Empty bucket of 10 gaining 3/s; a waiter for 10 ahead. It is served at 4 s (12 capped at
    // 10, 2 tokens lost), then the newcomer's 1 token arrives at 5 s. The uncapped sum (11
    // tokens: 4 s) was too short.
    let scenario = |clock: &ManualClock, then: &dyn Fn(&dyn Replenishing)| {
        let l = bucket_with_queue(clock);
        let _ = l.try_acquire(10).unwrap();
        let mut big = Task::new(l.acquire(10));
        big.pending();
        let r = l.try_acquire(1).unwrap_err();
        assert_eq!(r.retry_after(), Some(5 * SEC));
        then(&l);
        assert!(big.ready().is_ok(), "the waiter ahead was served");
    };
    assert_exact(5 * SEC, 1, scenario);
}

#[test]
fn token_bucket_behind_several_waiters_depends_on_their_sizes() {
    // The same 10 queued permits as two waiters of 5: served at 2 s and 4 s, with 2 tokens left
    // at 4 s: the newcomer's 1 fits at 4 s (from 1.5 s into the first period: 2.5 s).
    let scenario = |clock: &ManualClock, then: &dyn Fn(&dyn Replenishing)| {
        let l = bucket_with_queue(clock);
        let _ = l.try_acquire(10).unwrap();
        clock.advance(SEC / 2);
        let mut a = Task::new(l.acquire(5));
        let mut b = Task::new(l.acquire(5));
        a.pending();
        b.pending();
        clock.advance(SEC);
        let r = l.try_acquire(1).unwrap_err();
        assert_eq!(r.retry_after(), Some(SEC * 5 / 2));
        then(&l);
        assert!(a.ready().is_ok() && b.ready().is_ok());
    };
    assert_exact(SEC * 5 / 2, 1, scenario);
}

#[test]
fn fixed_window_behind_waiters_packs_each_window_in_order() {
    // 10 per window, all taken; waiters of 6 and 6: one per window (4 left over each time), so
    // the newcomer's 5 fits only in the third window. The summed estimate said the second.
    let scenario = |clock: &ManualClock, then: &dyn Fn(&dyn Replenishing)| {
        let opts = FixedWindowOptions::new(10, SEC).with_queue(100, QueueOrder::OldestFirst);
        let l = FixedWindowLimiter::with_clock(opts, clock).unwrap();
        let _ = l.try_acquire(10).unwrap();
        let mut a = Task::new(l.acquire(6));
        let mut b = Task::new(l.acquire(6));
        a.pending();
        b.pending();
        clock.advance(SEC / 4);
        let r = l.try_acquire(5).unwrap_err();
        assert_eq!(r.retry_after(), Some(3 * SEC - SEC / 4));
        // A newcomer of 4 fits beside the second waiter.
        let r = l.try_acquire(4).unwrap_err();
        assert_eq!(r.retry_after(), Some(2 * SEC - SEC / 4));
        then(&l);
        assert!(a.ready().is_ok() && b.ready().is_ok());
    };
    assert_exact(3 * SEC - SEC / 4, 5, scenario);
}

#[test]
fn sliding_window_behind_a_waiter_counts_its_grant_in_its_segment() {
    // 10 per 3 s in 3 segments: 4 taken in segment 0, 6 in segment 1. A waiter of 4 is granted at
    // segment 3 (when segment 0 leaves) and counts there; the newcomer's 7 needs segment 1's 6
    // and segment 3's 4 gone: segment 6, 5 s after segment 1. The whole-window estimate said 6 s.
    let scenario = |clock: &ManualClock, then: &dyn Fn(&dyn Replenishing)| {
        let opts =
            SlidingWindowOptions::new(10, 3 * SEC, 3).with_queue(100, QueueOrder::OldestFirst);
        let l: SlidingWindowLimiter<_, 4> =
            SlidingWindowLimiter::with_capacity(opts, clock).unwrap();
        let _ = l.try_acquire(4).unwrap();
        clock.advance(SEC);
        let _ = l.try_acquire(6).unwrap();
        let mut a = Task::new(l.acquire(4));
        a.pending();
        let r = l.try_acquire(7).unwrap_err();
        assert_eq!(r.retry_after(), Some(5 * SEC));
        then(&l);
        assert!(a.ready().is_ok());
    };
    assert_exact(5 * SEC, 7, scenario);
}

#[test]
fn without_a_queue_retry_after_is_still_exact() {
    let scenario = |clock: &ManualClock, then: &dyn Fn(&dyn Replenishing)| {
        let opts = SlidingWindowOptions::new(10, 3 * SEC, 3);
        let l: SlidingWindowLimiter<_, 4> =
            SlidingWindowLimiter::with_capacity(opts, clock).unwrap();
        let _ = l.try_acquire(3).unwrap();
        clock.advance(SEC);
        let _ = l.try_acquire(7).unwrap();
        clock.advance(SEC / 3);
        assert_eq!(
            l.try_acquire(4).unwrap_err().retry_after(),
            Some(3 * SEC - SEC / 3)
        );
        then(&l);
    };
    assert_exact(3 * SEC - SEC / 3, 4, scenario);
}

/// The quick refusal's two ways to the wait of a request one refill short: a request no larger
/// than a refill (the rest of the tick, no multiplication), and a larger one that a single refill
/// still covers (the exact count: one tick too). Then one two refills short.
#[test]
fn a_refusal_one_refill_short_waits_for_the_rest_of_the_tick() {
    for (n, wait) in [
        (3, SEC - SEC / 4),
        (5, SEC - SEC / 4),
        (6, 2 * SEC - SEC / 4),
    ] {
        let scenario = move |clock: &ManualClock, then: &dyn Fn(&dyn Replenishing)| {
            // 3 tokens a second, 2 left after 8 taken: one refill covers 3 more.
            let opts = TokenBucketOptions::new(10, 3, SEC);
            let l = TokenBucketLimiter::with_clock(opts, clock).unwrap();
            let _ = l.try_acquire(8).unwrap();
            clock.advance(SEC / 4); // still in the state's own tick: the quick path decides
            let r = l.try_acquire(n).unwrap_err();
            assert_eq!(r.retry_after(), Some(wait), "{n} permits");
            then(&l);
        };
        assert_exact(wait, n, scenario);
    }
}

#[test]
fn gcra_behind_a_waiter_then_alone_once_it_is_served() {
    // One permit a second, burst 1, taken at 0: the next is due at 1 s. A waiter for 1 queued
    // ahead takes it, so a newcomer waits 2 s (its own slot after the waiter's), exactly; once
    // the waiter is served the queue is empty and the word's waiters flag clear, and the
    // newcomer's wait (decided on the quick path) is its slot alone.
    let scenario = |clock: &ManualClock, then: &dyn Fn(&dyn Replenishing)| {
        let opts = GcraOptions::per_second(1).with_queue(2, QueueOrder::OldestFirst);
        let l = GcraLimiter::with_clock(opts, clock).unwrap();
        let _ = l.try_acquire(1).unwrap();
        let mut w = Task::new(l.acquire(1));
        w.pending();
        assert_eq!(l.try_acquire(1).unwrap_err().retry_after(), Some(2 * SEC));
        then(&l);
        assert!(w.ready().is_ok(), "the waiter ahead was served");
    };
    assert_exact(2 * SEC, 1, scenario);

    let clock = ManualClock::new();
    let opts = GcraOptions::per_second(1).with_queue(2, QueueOrder::OldestFirst);
    let l = GcraLimiter::with_clock(opts, &clock).unwrap();
    let _ = l.try_acquire(1).unwrap();
    let mut w = Task::new(l.acquire(1));
    w.pending();
    clock.advance(SEC);
    l.replenish();
    let _lease = w.ready().unwrap();
    assert_eq!(l.statistics().queued_permits, 0);
    clock.advance(SEC / 4);
    assert_eq!(
        l.try_acquire(1).unwrap_err().retry_after(),
        Some(SEC * 3 / 4)
    );
}

// Item 2: a stale reading does not inflate RetryAfter --------------------------------------------

#[test]
fn a_reading_behind_the_state_waits_from_the_state() {
    // A thread whose clock reading is 3.5 s behind the limiter's state (it was preempted after
    // reading the clock; here the clock steps back) knows real time is at least the start of the
    // state's own period: the wait counts from there, not from its stale reading.
    let clock = ManualClock::new();
    let t = TokenBucketLimiter::with_clock(TokenBucketOptions::new(1, 1, SEC), &clock).unwrap();
    let f = FixedWindowLimiter::with_clock(FixedWindowOptions::new(1, SEC), &clock).unwrap();
    let s: SlidingWindowLimiter<_, 3> =
        SlidingWindowLimiter::with_capacity(SlidingWindowOptions::new(1, 3 * SEC, 3), &clock)
            .unwrap();
    clock.set(Instant::from_nanos(10_500_000_000));
    for l in [&t as &dyn Limiter, &f, &s] {
        let _ = l.try_acquire(1).unwrap();
    }
    clock.set(Instant::from_nanos(7_000_000_000));
    assert_eq!(t.try_acquire(1).unwrap_err().retry_after(), Some(SEC));
    assert_eq!(f.try_acquire(1).unwrap_err().retry_after(), Some(SEC));
    assert_eq!(s.try_acquire(1).unwrap_err().retry_after(), Some(3 * SEC));
}

// Item 13: the horizon, validation and the docs agree ---------------------------------------------

#[test]
fn periods_must_end_before_the_horizon_of_2_pow_63_ns() {
    let clock = ManualClock::new();
    let horizon = Duration::from_nanos(1 << 63);
    let longest = horizon - NS;
    assert_eq!(
        TokenBucketLimiter::with_clock(TokenBucketOptions::new(1, 1, horizon), &clock).err(),
        Some(OptionsError::PeriodTooLong)
    );
    assert_eq!(
        FixedWindowLimiter::with_clock(FixedWindowOptions::new(1, horizon), &clock).err(),
        Some(OptionsError::PeriodTooLong)
    );
    assert_eq!(
        SlidingWindowLimiter::<_, 2>::with_capacity(
            SlidingWindowOptions::new(1, horizon, 2),
            &clock
        )
        .err(),
        Some(OptionsError::PeriodTooLong)
    );
    // The longest period accepted completes, and its RetryAfter says exactly when.
    let t = TokenBucketLimiter::with_clock(TokenBucketOptions::new(1, 1, longest), &clock).unwrap();
    let f = FixedWindowLimiter::with_clock(FixedWindowOptions::new(1, longest), &clock).unwrap();
    for l in [&t as &dyn Limiter, &f] {
        let _ = l.try_acquire(1).unwrap();
        assert_eq!(l.try_acquire(1).unwrap_err().retry_after(), Some(longest));
    }
    clock.advance(longest);
    for l in [&t as &dyn Limiter, &f] {
        assert!(l.try_acquire(1).is_ok());
    }
}

#[test]
fn a_reading_before_creation_decides_as_at_creation() {
    // Created 100 s into the clock, then read 40 s before that: the reading counts as the
    // instant of creation (the quick paths send it to the general path, which clamps it), for a
    // grant and for a refusal's exact wait alike, on every rate limiter with a quick path.
    let clock = ManualClock::starting_at(Instant::from_nanos(100_000_000_000));
    let t = TokenBucketLimiter::with_clock(TokenBucketOptions::new(2, 1, SEC), &clock).unwrap();
    let f = FixedWindowLimiter::with_clock(FixedWindowOptions::new(2, SEC), &clock).unwrap();
    let g = GcraLimiter::with_clock(GcraOptions::per_second(2), &clock).unwrap();
    let s: SlidingWindowLimiter<_, 2> =
        SlidingWindowLimiter::with_capacity(SlidingWindowOptions::new(2, SEC, 2), &clock).unwrap();
    let c =
        SlidingCounterLimiter::with_clock(SlidingCounterOptions::per_second(2), &clock).unwrap();
    clock.set(Instant::from_nanos(60_000_000_000));
    for l in [&t as &dyn Limiter, &f, &g, &s, &c] {
        let _ = l.try_acquire(2).unwrap();
        let wait = l.try_acquire(1).unwrap_err().retry_after().unwrap();
        assert!(wait > Duration::ZERO && wait <= 2 * SEC, "{wait:?}");
    }
    // The same waits as the same calls at the instant of creation itself.
    let clock2 = ManualClock::starting_at(Instant::from_nanos(100_000_000_000));
    let t2 = TokenBucketLimiter::with_clock(TokenBucketOptions::new(2, 1, SEC), &clock2).unwrap();
    let g2 = GcraLimiter::with_clock(GcraOptions::per_second(2), &clock2).unwrap();
    for (a, b) in [(&t as &dyn Limiter, &t2 as &dyn Limiter), (&g, &g2)] {
        let _ = b.try_acquire(2).unwrap();
        assert_eq!(
            a.try_acquire(1).unwrap_err().retry_after(),
            b.try_acquire(1).unwrap_err().retry_after()
        );
    }
}

#[test]
fn past_the_horizon_a_limiter_only_limits_more() {
    // Up to 2^63 − 1 ns after creation every gap reads exactly; from 2^63 ns on the reading is
    // taken for a clock stepped back before creation: no refill, never an over-admission.
    let clock = ManualClock::new();
    let t = TokenBucketLimiter::with_clock(TokenBucketOptions::new(2, 1, NS), &clock).unwrap();
    let _ = t.try_acquire(2).unwrap();
    clock.set(Instant::from_nanos((1 << 63) - 1));
    assert_eq!(t.available_permits(), 2);
    let _ = t.try_acquire(2).unwrap();
    clock.set(Instant::from_nanos(1 << 63));
    assert_eq!(t.available_permits(), 0);
    assert!(t.try_acquire(1).is_err());
}
