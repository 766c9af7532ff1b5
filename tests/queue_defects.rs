//! Regression tests of issue 9's wait-queue, driver and statistics defects. Each test names the
//! item it covers and failed before its fix. Hand-polled futures on a manual clock, except the
//! driver tests, which need the driver's thread (they wait for completion with a generous
//! timeout and assert nothing about elapsed time).

use core::future::Future;
use core::pin::pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::sync::{mpsc, Arc, Mutex};
use std::task::Wake;

mod common;

use common::Task;
use tollgate::*;

fn concurrency(permits: u32, queue: u32, order: QueueOrder) -> ConcurrencyLimiter<ManualClock> {
    let opts = ConcurrencyOptions::new(permits).with_queue(queue, order);
    ConcurrencyLimiter::with_clock(opts, ManualClock::new()).unwrap()
}

/// Runs `f` on a thread and fails (instead of hanging) if it has not finished within `secs`.
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .expect("did not finish: deadlock or lost wake-up")
}

/// Polls `until` every millisecond for up to `secs` seconds.
fn eventually(secs: u64, mut until: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if until() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    until()
}

// Item 1: every path that can grant keeps serving until nothing more fits. -------------------

#[test]
fn item1_cancelling_the_head_grants_every_waiter_that_fits() {
    let l = concurrency(100, 200, QueueOrder::OldestFirst);
    let held = l.try_acquire(40).unwrap(); // 60 free
    let mut head = Task::new(l.acquire(100));
    head.pending();
    let mut small: Vec<_> = (0..40).map(|_| Task::new(l.acquire(1))).collect();
    for t in &mut small {
        t.pending();
    }
    drop(head); // Acquire::drop serves: all 40 fit in the 60 free permits
    assert_eq!(l.statistics().queued_permits, 0);
    assert!(small.iter().all(|t| t.woken() == 1));
    let leases: Vec<_> = small.iter_mut().map(|t| t.ready().unwrap()).collect();
    assert_eq!(l.available_permits(), 20);
    drop((leases, held));
    assert_eq!(l.available_permits(), 100);
}

#[test]
fn item1_one_poll_serves_every_waiter_the_refill_covers() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(40, 40, Duration::from_secs(1))
        .with_queue(100, QueueOrder::OldestFirst);
    let bucket = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    let _ = bucket.try_acquire(40).unwrap();
    let mut waiters: Vec<_> = (0..40).map(|_| Task::new(bucket.acquire(1))).collect();
    for t in &mut waiters {
        t.pending();
    }
    clock.advance(Duration::from_secs(1));
    // One poll of one waiter (Acquire::check) serves the queue: all 40 fit.
    assert!(waiters[0].ready().is_ok());
    assert_eq!(bucket.statistics().queued_permits, 0);
    for t in &mut waiters[1..] {
        assert_eq!(t.woken(), 1);
        assert!(t.ready().is_ok());
    }
}

#[test]
fn item1_a_newcomer_serves_everyone_ahead_before_deciding() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(40, 40, Duration::from_secs(1))
        .with_queue(100, QueueOrder::OldestFirst);
    let bucket = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    let _ = bucket.try_acquire(40).unwrap();
    let mut waiters: Vec<_> = (0..39).map(|_| Task::new(bucket.acquire(1))).collect();
    for t in &mut waiters {
        t.pending();
    }
    clock.advance(Duration::from_secs(1));
    // The newcomer's first poll (Acquire::start) serves the 39 ahead, then takes the 40th token.
    let mut newcomer = Task::new(bucket.acquire(1));
    assert!(newcomer.ready().is_ok());
    assert_eq!(bucket.statistics().queued_permits, 0);
    assert!(waiters.iter_mut().all(|t| t.ready().is_ok()));
}

// Item 4: no waker is dropped (or woken) under the queue lock. ---------------------------------

/// A waker that owns a lease: dropping its last handle releases the permit.
struct HoldsLease(#[allow(dead_code)] Mutex<Option<OwnedLease>>);
impl Wake for HoldsLease {
    fn wake(self: Arc<Self>) {}
}

#[test]
fn item4_a_replaced_waker_owning_the_blocking_lease_does_not_deadlock() {
    let granted = within(20, || {
        let l = Arc::new(concurrency(1, 4, QueueOrder::OldestFirst));
        let lease = l.try_acquire_owned(1).unwrap();
        let owner = Waker::from(Arc::new(HoldsLease(Mutex::new(Some(lease)))));
        let mut fut = pin!(l.acquire(1));
        assert!(fut
            .as_mut()
            .poll(&mut Context::from_waker(&owner))
            .is_pending());
        // The queue's clone is now the only handle: it owns the lease.
        drop(owner);
        // Re-polled with another waker: the old one is replaced and dropped, which releases the
        // permit, which serves this very waiter.
        let other = Waker::noop();
        let mut polls = 0;
        loop {
            polls += 1;
            match fut.as_mut().poll(&mut Context::from_waker(other)) {
                Poll::Ready(r) => break r.map(|lease| lease.permits()),
                Poll::Pending if polls < 3 => {}
                Poll::Pending => panic!("never granted"),
            }
        }
    });
    assert_eq!(granted, Ok(1));
}

#[test]
fn item4_a_cancelled_waiter_whose_waker_owns_the_lease_does_not_deadlock() {
    let available = within(20, || {
        let l = Arc::new(concurrency(1, 4, QueueOrder::OldestFirst));
        let lease = l.try_acquire_owned(1).unwrap();
        let owner = Waker::from(Arc::new(HoldsLease(Mutex::new(Some(lease)))));
        let mut behind = Task::new(l.acquire(1));
        {
            let mut fut = Box::pin(l.acquire(1));
            assert!(fut
                .as_mut()
                .poll(&mut Context::from_waker(&owner))
                .is_pending());
            behind.pending();
            drop(owner);
            drop(fut); // cancelled: its waker (the lease) is dropped after unlocking
        }
        // The released permit went on to the waiter behind.
        assert_eq!(behind.woken(), 1);
        let got = behind.ready().map(|lease| lease.permits());
        (got, l.statistics().queued_permits)
    });
    assert_eq!(available, (Ok(1), 0));
}

// Item 5: NewestFirst eviction of more than one wake batch. ------------------------------------

#[test]
fn item5_newest_first_evicts_twenty_waiters_at_once() {
    let l = concurrency(20, 20, QueueOrder::NewestFirst);
    let _held = l.try_acquire(20).unwrap();
    let mut small: Vec<_> = (0..20).map(|_| Task::new(l.acquire(1))).collect();
    for t in &mut small {
        t.pending();
    }
    let mut big = Task::new(l.acquire(20));
    big.pending();
    for t in &mut small {
        assert_eq!(t.woken(), 1);
        assert_eq!(t.ready().unwrap_err().reason(), Reason::Evicted);
    }
    let s = l.statistics();
    assert_eq!(
        (s.queued_permits, s.total_failed, s.total_successful),
        (20, 20, 1)
    );
}

// Items 6 and 7: the driver is told whenever the next waiter changes. ---------------------------

#[test]
fn item6_a_second_driver_after_the_first_is_dropped_is_notified() {
    let clock = Arc::new(ManualClock::new());
    let opts = TokenBucketOptions::new(1, 1, Duration::from_millis(20))
        .with_queue(4, QueueOrder::OldestFirst);
    let bucket = Arc::new(TokenBucketLimiter::with_clock(opts, clock.clone()).unwrap());
    drop({
        let first = Driver::new().unwrap();
        first.register(&bucket);
        first
    });
    let second = Driver::new().unwrap();
    second.register(&bucket);
    let _ = bucket.try_acquire(1).unwrap();
    // Let the driver settle into its wait (nobody queued: no timeout). Not an assertion on time:
    // only what the driver hears from now on matters.
    std::thread::sleep(Duration::from_millis(200));
    let mut waiter = Task::new(bucket.acquire(1));
    waiter.pending(); // notifies the live driver: it sleeps 20 ms (the manual clock's wait)
    clock.advance(Duration::from_millis(20));
    // The second driver serves it; the test never polls the waiter again before it is served.
    assert!(eventually(10, || bucket.statistics().queued_permits == 0));
    assert!(waiter.ready().is_ok());
    drop(second);
}

#[test]
fn item7_cancelling_the_head_tells_the_driver() {
    let clock = Arc::new(ManualClock::new());
    // One token per 100 ms (of the manual clock); the driver sleeps that long in real time.
    let opts = TokenBucketOptions::new(100, 1, Duration::from_millis(100))
        .with_queue(200, QueueOrder::OldestFirst);
    let bucket = Arc::new(TokenBucketLimiter::with_clock(opts, clock.clone()).unwrap());
    let driver = Driver::new().unwrap();
    driver.register(&bucket);
    let _ = bucket.try_acquire(100).unwrap();
    let mut head = Task::new(bucket.acquire(100)); // due in 10 s: the driver sleeps 10 s
    head.pending();
    // Let the driver settle into that sleep (not an assertion on time: see below).
    std::thread::sleep(Duration::from_millis(200));
    let mut behind = Task::new(bucket.acquire(1));
    behind.pending();
    drop(head); // `behind` is next, due in 100 ms: the driver must recompute
    clock.advance(Duration::from_millis(100));
    assert!(
        eventually(5, || bucket.statistics().queued_permits == 0),
        "the driver slept on the cancelled head's deadline"
    );
    assert!(behind.ready().is_ok());
    drop(driver);
}

// Item 8: dropping a driver strands nobody. ---------------------------------------------------

#[test]
fn item8_dropping_the_driver_strands_no_waiter() {
    let opts = TokenBucketOptions::new(1, 1, Duration::from_millis(50))
        .with_queue(4, QueueOrder::OldestFirst);
    let bucket = Arc::new(TokenBucketLimiter::new(opts).unwrap());
    let driver = Driver::new().unwrap();
    driver.register(&bucket);
    let _ = bucket.try_acquire(1).unwrap();
    let b = bucket.clone();
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        // A real executor on this thread: parked until woken.
        let r = block_on(b.acquire(1)).map(|l| l.permits());
        let _ = tx.send(r);
    });
    while bucket.statistics().queued_permits == 0 {
        std::thread::yield_now();
    }
    drop(driver);
    // The waiter's permits come with time; the process timer serves it.
    assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(Ok(1)));
    waiter.join().unwrap();
}

// Item 10: a waiter granted then dropped before it completed is a cancellation. ---------------

#[test]
fn item10_a_granted_but_unreceived_waiter_is_not_counted() {
    let l = concurrency(1, 4, QueueOrder::OldestFirst);
    let held = l.try_acquire(1).unwrap();
    let mut a = Task::new(l.acquire(1));
    a.pending();
    drop(held); // grants a
    drop(a); // never received: cancelled, the permit comes back
    let s = l.statistics();
    assert_eq!((s.total_successful, s.total_failed), (1, 0));
    assert_eq!(s.available_permits, 1);
    // A received grant counts once.
    let held = l.try_acquire(1).unwrap();
    let mut b = Task::new(l.acquire(1));
    b.pending();
    drop(held);
    drop(b.ready().unwrap());
    assert_eq!(l.statistics().total_successful, 3);
}

fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}
