//! loom models of `Lease::settle` (issue 38): a refund racing a queued waiter and a newcomer's
//! `try_acquire`, on the token bucket, GCRA and the sliding window; a debit racing a newcomer
//! on the token bucket and the sliding window. The clock stands still at 0: only the refund can bring permits, so a
//! refund that were lost, or served to nobody, would leave the waiter blocked forever (loom
//! reports the deadlock), and one counted twice would over-admit.
#![cfg(loom)]

use std::sync::Arc;

use loom::future::block_on;
use loom::thread;
use tollgate::{
    AcquireAsync, GcraLimiter, GcraOptions, Limiter, QueueOrder, SlidingWindowLimiter,
    SlidingWindowOptions, TokenBucketLimiter, TokenBucketOptions,
};
use tollgate_loom_tests::{assert_exhausted, check, ns, RecordingClock};

/// The race on a limiter `l` of 2 permits (a queue of 1, oldest first) made empty by one lease
/// of 2: that lease settles to 0 while a waiter queues for 1 and a newcomer tries for 1. The
/// waiter is always granted; the newcomer is granted exactly when a permit is left for it;
/// nothing is lost or granted twice: afterwards `1 - newcomer's` permits are available.
fn refund_races_a_waiter_and_a_newcomer<L>(l: Arc<L>)
where
    L: Limiter + AcquireAsync + Send + Sync + 'static,
{
    let mut lease = l.try_acquire(2).unwrap();
    let l2 = l.clone();
    let waiter = thread::spawn(move || block_on(l2.acquire(1)).map(|lease| lease.permits()));
    let l3 = l.clone();
    let newcomer = thread::spawn(move || l3.try_acquire(1).map(|lease| lease.permits()));
    lease.settle(0).unwrap();
    assert_eq!(lease.permits(), 0);
    assert_eq!(waiter.join().unwrap(), Ok(1));
    let got = match newcomer.join().unwrap() {
        Ok(n) => n,
        Err(e) => {
            assert_eq!(e.reason(), tollgate::Reason::Exhausted, "{e:?}");
            0
        }
    };
    assert_eq!(l.available_permits(), u64::from(1 - got));
    let s = l.statistics();
    assert_eq!(s.queued_permits, 0);
    assert_eq!(
        (s.total_successful, s.total_failed),
        (2 + u64::from(got), 1 - u64::from(got))
    );
}

#[test]
fn bucket_refund_races_a_waiter_and_a_newcomer() {
    check(|| {
        let clock = RecordingClock::new();
        let opts = TokenBucketOptions::new(2, 1, ns(10)).with_queue(1, QueueOrder::OldestFirst);
        let l = Arc::new(TokenBucketLimiter::with_clock(opts, clock).unwrap());
        refund_races_a_waiter_and_a_newcomer(l);
    });
}

#[test]
fn gcra_refund_races_a_waiter_and_a_newcomer() {
    check(|| {
        let clock = RecordingClock::new();
        let opts = GcraOptions::with_period(ns(10))
            .with_burst(2)
            .with_queue(1, QueueOrder::OldestFirst);
        let l = Arc::new(GcraLimiter::with_clock(opts, clock).unwrap());
        refund_races_a_waiter_and_a_newcomer(l);
    });
}

#[test]
fn sliding_window_refund_races_a_waiter_and_a_newcomer() {
    check(|| {
        let clock = RecordingClock::new();
        let opts = SlidingWindowOptions::new(2, ns(20), 2).with_queue(1, QueueOrder::OldestFirst);
        let l = Arc::new(SlidingWindowLimiter::with_clock(opts, clock).unwrap());
        refund_races_a_waiter_and_a_newcomer(l);
    });
}

/// The debit race on `l` (2 permits, one taken by `lease`): `lease` settles to 2 while a
/// newcomer tries for 1. Either the newcomer wins the last permit and the debit goes into
/// debt, or the debit takes it and the newcomer is refused; either way nothing is left, and
/// the next permit waits `in_debt` or `clear` (RetryAfter counting the debt exactly when the
/// newcomer won). Never both granted without the debt.
fn debit_races_a_newcomer<L>(l: Arc<L>, mut lease: tollgate::Lease<'_>, in_debt: u64, clear: u64)
where
    L: Limiter + Send + Sync + 'static,
{
    let l2 = l.clone();
    let newcomer = thread::spawn(move || l2.try_acquire(1).map(|lease| lease.permits()));
    lease.settle(2).unwrap();
    let got = newcomer.join().unwrap().is_ok();
    assert_eq!(l.available_permits(), 0);
    let next = l.try_acquire(1).unwrap_err();
    assert_exhausted(&next, ns(if got { in_debt } else { clear }));
}

/// A bucket of 2 (1 token per 10 ns) holding one lease of 1: with the debt, the next permit
/// takes two refills; without, one.
#[test]
fn bucket_debit_races_a_newcomer() {
    check(|| {
        let clock = RecordingClock::new();
        let opts = TokenBucketOptions::new(2, 1, ns(10));
        let l = Arc::new(TokenBucketLimiter::with_clock(opts, clock).unwrap());
        let lease = l.try_acquire(1).unwrap();
        debit_races_a_newcomer(l.clone(), lease, 20, 10);
    });
}

/// A sliding window of 2 per 20 ns in two segments of 10 ns: a lease of 1 in segment 0, then in
/// segment 1 (10 ns) the race. The window holds 3 when the newcomer wins (the debit in debt,
/// one past the limit, in segment 1), else 2. The next permit waits for segment 0 to leave (at
/// 20 ns) without the debt, and for segment 1 too (at 30 ns) with it.
#[test]
fn sliding_window_debit_races_a_newcomer() {
    check(|| {
        let clock = RecordingClock::new();
        let opts = SlidingWindowOptions::new(2, ns(20), 2);
        let l = Arc::new(SlidingWindowLimiter::with_clock(opts, clock.clone()).unwrap());
        let lease = l.try_acquire(1).unwrap();
        clock.0.advance(ns(10));
        debit_races_a_newcomer(l.clone(), lease, 20, 10);
    });
}
