//! Unit tests of the wait queue, small enough for miri (`cargo +nightly miri test --lib wait`):
//! they drive the intrusive list through real futures — link, grant, cancel at every stage,
//! evict, close — so miri checks every unsafe block on the paths that matter.

use core::future::Future;
use core::pin::{pin, Pin};
use core::task::{Context, Poll, Waker};
use core::time::Duration;

use crate::*;

fn cx() -> Context<'static> {
    Context::from_waker(Waker::noop())
}

/// A request for `n` permits of `l`, polled once: queued. Boxed, to be dropped at any point.
fn queued(
    l: &ConcurrencyLimiter<ManualClock>,
    n: u32,
) -> Pin<Box<impl Future<Output = Result<Lease<'_>, Rejection>> + '_>> {
    let mut waiter = Box::pin(l.acquire(n));
    assert!(waiter.as_mut().poll(&mut cx()).is_pending());
    waiter
}

fn concurrency(permits: u32, queue: u32, order: QueueOrder) -> ConcurrencyLimiter<ManualClock> {
    let opts = ConcurrencyOptions::new(permits).with_queue(queue, order);
    ConcurrencyLimiter::with_clock(opts, ManualClock::new()).unwrap()
}

/// Runs `f` on a limiter of 1 permit (queue of 4) with the permit held by the lease `f` is given;
/// checks that the permit is available again once `f` is done (and every lease it held dropped).
#[cfg(feature = "std")]
fn with_its_permit_held(f: impl FnOnce(&ConcurrencyLimiter<ManualClock>, Lease<'_>)) {
    let l = concurrency(1, 4, QueueOrder::OldestFirst);
    f(&l, l.try_acquire(1).unwrap());
    assert_eq!(l.available_permits(), 1);
}

/// `l`'s (successful, failed, queued permits) counts.
#[cfg(feature = "std")]
fn counts(l: &ConcurrencyLimiter<ManualClock>) -> (u64, u64, u64) {
    let s = l.statistics();
    (s.total_successful, s.total_failed, s.queued_permits)
}

/// A blocking wait for 1 permit of `l` that must never sleep: `left` answers how long is left
/// each time the wait asks.
#[cfg(feature = "std")]
fn wait_without_sleeping<'a>(
    l: &'a ConcurrencyLimiter<ManualClock>,
    left: impl FnMut() -> Option<Duration>,
) -> Result<Lease<'a>, Rejection> {
    super::blocking::wait_with(l, 1, Waker::noop(), left, |_| {
        panic!("the wait must not sleep")
    })
}

#[test]
fn link_grant_and_cancel_through_futures() {
    let l = concurrency(1, 8, QueueOrder::OldestFirst);
    let held = l.try_acquire(1).unwrap();
    let mut a = pin!(l.acquire(1));
    let mut b = pin!(l.acquire(1));
    let mut c = Box::pin(l.acquire(1));
    assert!(a.as_mut().poll(&mut cx()).is_pending());
    assert!(b.as_mut().poll(&mut cx()).is_pending());
    assert!(c.as_mut().poll(&mut cx()).is_pending());
    drop(held); // grants a
    let Poll::Ready(Ok(lease_a)) = a.as_mut().poll(&mut cx()) else {
        panic!("a not granted")
    };
    drop(lease_a); // grants b
                   // c is cancelled while queued behind a granted, unreceived b.
    drop(c);
    let Poll::Ready(Ok(lease_b)) = b.as_mut().poll(&mut cx()) else {
        panic!("b not granted")
    };
    drop(lease_b);
    assert_eq!(l.statistics().queued_permits, 0);
    assert_eq!(l.available_permits(), 1);
}

#[test]
fn cancel_after_grant_before_receipt_hands_on() {
    let l = concurrency(1, 8, QueueOrder::NewestFirst);
    let held = l.try_acquire(1).unwrap();
    let mut b = queued(&l, 1);
    let a = queued(&l, 1);
    drop(held); // newest first: grants a
    drop(a); // never received: the permit goes to b
    assert!(matches!(b.as_mut().poll(&mut cx()), Poll::Ready(Ok(_))));
}

#[test]
fn evict_and_close_complete_linked_nodes() {
    let l = concurrency(1, 2, QueueOrder::NewestFirst);
    let _held = l.try_acquire(1).unwrap();
    let mut a = queued(&l, 1);
    let mut b = queued(&l, 1);
    let mut c = Box::pin(l.acquire(2));
    assert!(c.as_mut().poll(&mut cx()).is_ready()); // 2 > limit 1: rejected, nobody evicted
    let mut d = queued(&l, 1); // evicts a
    assert!(
        matches!(a.as_mut().poll(&mut cx()), Poll::Ready(Err(r)) if r.reason() == Reason::Evicted)
    );
    l.close();
    assert!(
        matches!(b.as_mut().poll(&mut cx()), Poll::Ready(Err(r)) if r.reason() == Reason::Closed)
    );
    assert!(
        matches!(d.as_mut().poll(&mut cx()), Poll::Ready(Err(r)) if r.reason() == Reason::Closed)
    );
}

#[test]
fn many_waiters_beyond_one_wake_batch() {
    let l = concurrency(40, 100, QueueOrder::OldestFirst);
    let held = l.try_acquire(40).unwrap();
    let mut waiters: Vec<_> = (0..40).map(|_| Box::pin(l.acquire(1))).collect();
    for w in &mut waiters {
        assert!(w.as_mut().poll(&mut cx()).is_pending());
    }
    drop(held); // serves all 40 in three wake batches
    for w in &mut waiters {
        assert!(matches!(w.as_mut().poll(&mut cx()), Poll::Ready(Ok(_))));
    }
}

#[cfg(feature = "std")]
#[test]
fn rate_waiters_across_threads() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(2, 2, Duration::from_secs(1))
        .with_queue(4, QueueOrder::OldestFirst);
    let t = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    let _ = t.try_acquire(2).unwrap();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| t.acquire_blocking(2, None).map(|l| l.permits()));
        while t.statistics().queued_permits == 0 {
            std::thread::yield_now();
        }
        clock.advance(Duration::from_secs(1));
        t.replenish();
        assert_eq!(waiter.join().unwrap(), Ok(2));
    });
}

/// Issue 9, item 9: a blocking wait whose timeout races a grant counts the request once. The
/// grant is made at the worst moment — after the last poll found the waiter queued, while the
/// wait decides that its time is up — by the `left` hook of the blocking loop.
#[cfg(feature = "std")]
#[test]
fn a_timeout_racing_a_grant_counts_the_request_once() {
    with_its_permit_held(|l, held| {
        let held = core::cell::Cell::new(Some(held));
        let result = wait_without_sleeping(l, || {
            // The release grants the queued waiter; then the timeout is found to have passed.
            drop(held.take());
            Some(Duration::ZERO)
        });
        // The grant won: the caller receives the lease, and it is counted once.
        let _lease = result.expect("the racing grant is received");
        assert_eq!(counts(l), (2, 0, 0));
    });
}

/// The same race lost by the grant: still queued at the timeout, the waiter leaves (nothing
/// leaks) and the timeout is the one count.
#[cfg(feature = "std")]
#[test]
fn a_timeout_with_no_grant_counts_one_failure() {
    with_its_permit_held(|l, _held| {
        let r = wait_without_sleeping(l, || Some(Duration::ZERO));
        assert_eq!(r.unwrap_err().reason(), Reason::TimedOut);
        assert_eq!(counts(l), (1, 1, 0));
    });
}

/// The lock-free completion across threads (list.rs, rule 4): the owner reads its status
/// without the lock once `done` is set; miri's data-race detector checks that the grant's
/// writes are ordered before that read.
#[cfg(feature = "std")]
#[test]
fn a_grant_on_another_thread_is_read_without_the_lock() {
    with_its_permit_held(|l, held| {
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let mut fut = pin!(l.acquire(1));
                loop {
                    if let Poll::Ready(r) = fut.as_mut().poll(&mut cx()) {
                        return r.map(|lease| lease.permits());
                    }
                    std::thread::yield_now();
                }
            });
            while l.statistics().queued_permits == 0 {
                std::thread::yield_now();
            }
            drop(held);
            assert_eq!(waiter.join().unwrap(), Ok(1));
        });
    });
}
