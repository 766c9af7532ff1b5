//! loom models of the wait queue (issue 4): futures polled on loom threads, racing the releases,
//! refills, cancellations and closes that serve or fail them.
//!
//! Each model asserts no lost wake-up (a waiter that should complete does: `block_on` would
//! otherwise be reported by loom as a deadlock), no leaked permit (everything is back at the end)
//! and no duplicated permit (never more held than the limit).
#![cfg(loom)]

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use loom::future::block_on;
use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use loom::thread;
use tollgate::*;

fn limiter(permits: u32, queue: u32, order: QueueOrder) -> Arc<ConcurrencyLimiter<ManualClock>> {
    let opts = ConcurrencyOptions::new(permits).with_queue(queue, order);
    Arc::new(ConcurrencyLimiter::with_clock(opts, ManualClock::new()).unwrap())
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(f);
}

/// A waiter enqueues while the only permit is released: it is always granted and woken.
#[test]
fn enqueue_races_release() {
    model(|| {
        let l = limiter(1, 4, QueueOrder::OldestFirst);
        let held = l.try_acquire(1).unwrap();
        let l2 = l.clone();
        let waiter = thread::spawn(move || {
            let lease = block_on(l2.acquire(1)).expect("granted");
            assert_eq!(l2.available_permits(), 0);
            drop(lease);
        });
        drop(held);
        waiter.join().unwrap();
        let s = l.statistics();
        assert_eq!((s.available_permits, s.queued_permits), (1, 0));
        assert_eq!(s.total_successful, 2);
    });
}

/// A queued waiter is dropped while the permit is being handed to it: the permit is never lost
/// and never counted twice, whichever wins.
#[test]
fn cancel_races_hand_off() {
    model(|| {
        let l = limiter(1, 4, QueueOrder::OldestFirst);
        let held = l.try_acquire(1).unwrap();
        let l2 = l.clone();
        let waiter = thread::spawn(move || {
            let mut fut = pin!(l2.acquire(1));
            let waker = futures_noop_waker();
            let first = fut.as_mut().poll(&mut Context::from_waker(&waker));
            // Either the release already happened (granted at once) or it is queued; then it is
            // dropped without waiting further.
            if let Poll::Ready(r) = first {
                drop(r.expect("granted"));
            }
        });
        drop(held);
        waiter.join().unwrap();
        let s = l.statistics();
        assert_eq!((s.available_permits, s.queued_permits), (1, 0));
        assert!(l.try_acquire(1).is_ok());
    });
}

/// Two waiters and one release: the permit is never held twice at once, and whichever waiter
/// is dropped while queued or granted-but-unreceived gives everything back.
#[test]
fn two_waiters_one_release() {
    model(|| {
        let l = limiter(1, 4, QueueOrder::OldestFirst);
        let holders = Arc::new(AtomicUsize::new(0));
        let held = l.try_acquire(1).unwrap();
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (l, holders) = (l.clone(), holders.clone());
                thread::spawn(move || {
                    let mut fut = pin!(l.acquire(1));
                    let waker = futures_noop_waker();
                    if let Poll::Ready(r) = fut.as_mut().poll(&mut Context::from_waker(&waker)) {
                        let lease = r.expect("granted");
                        let now = holders.fetch_add(1, SeqCst) + 1;
                        assert_eq!(now, 1, "a permit is held twice");
                        holders.fetch_sub(1, SeqCst);
                        drop(lease);
                    }
                })
            })
            .collect();
        drop(held);
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(l.available_permits(), 1);
        assert_eq!(l.statistics().queued_permits, 0);
    });
}

/// close() races a waiter enqueueing: the waiter always completes, with Closed.
#[test]
fn close_races_enqueue() {
    model(|| {
        let l = limiter(1, 4, QueueOrder::OldestFirst);
        let held = l.try_acquire(1).unwrap();
        let l2 = l.clone();
        let waiter = thread::spawn(move || block_on(l2.acquire(1)).map(|_| ()));
        l.close();
        assert_eq!(waiter.join().unwrap().unwrap_err().reason(), Reason::Closed);
        drop(held);
        assert_eq!(l.statistics().queued_permits, 0);
        assert_eq!(l.try_acquire(1).unwrap_err().reason(), Reason::Closed);
    });
}

/// A refill (clock advance + replenish) races a waiter enqueueing on a token bucket: the waiter
/// is always served, by the replenish or by its own slow path, and takes exactly one token.
#[test]
fn replenish_races_enqueue() {
    model(|| {
        let clock = Arc::new(ManualClock::new());
        let opts = TokenBucketOptions::new(1, 1, Duration::from_secs(1))
            .with_queue(2, QueueOrder::OldestFirst);
        let t = Arc::new(TokenBucketLimiter::with_clock(opts, clock.clone()).unwrap());
        let _ = t.try_acquire(1).unwrap();
        let t2 = t.clone();
        let waiter = thread::spawn(move || block_on(t2.acquire(1)).map(|l| l.permits()));
        clock.advance(Duration::from_secs(1));
        t.replenish();
        assert_eq!(waiter.join().unwrap(), Ok(1));
        let s = t.statistics();
        assert_eq!(
            (s.available_permits, s.queued_permits, s.total_successful),
            (0, 0, 2)
        );
    });
}

/// Issue 9, items 1 and 4: the head waiter is cancelled while a release races it, with a
/// smaller waiter behind. Whoever serves (the cancel or the release), the waiter behind is
/// granted and woken (`block_on` would report a deadlock otherwise), and no permit leaks.
#[test]
fn cancel_head_races_release_with_a_waiter_behind() {
    model(|| {
        let l = limiter(2, 4, QueueOrder::OldestFirst);
        let held = l.try_acquire(1).unwrap();
        let held2 = l.try_acquire(1).unwrap();
        // The head (2 permits) queues on its own thread and is dropped there.
        let l3 = l.clone();
        let canceller = thread::spawn(move || {
            let mut head = Box::pin(l3.acquire(2));
            let waker = futures_noop_waker();
            assert!(head
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending());
            drop(head);
        });
        let l2 = l.clone();
        let behind = thread::spawn(move || block_on(l2.acquire(1)).map(|lease| lease.permits()));
        drop(held);
        canceller.join().unwrap();
        assert_eq!(behind.join().unwrap(), Ok(1));
        drop(held2);
        let s = l.statistics();
        assert_eq!((s.available_permits, s.queued_permits), (2, 0));
    });
}

/// The lock-free completion (`src/wait/list.rs`, rule 4): a waiter re-polled while a release
/// grants it on another thread sees either "still queued" (and looks under the lock) or the
/// whole grant, never a half-written one: its lease is received once, and the permit is never
/// lost nor held twice.
#[test]
fn granted_waiter_finishes_without_the_lock() {
    model(|| {
        let l = limiter(1, 4, QueueOrder::OldestFirst);
        let held = l.try_acquire(1).unwrap();
        let l2 = l.clone();
        let waiter = thread::spawn(move || {
            let mut fut = pin!(l2.acquire(1));
            let waker = futures_noop_waker();
            let mut cx = Context::from_waker(&waker);
            loop {
                if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
                    let lease = r.expect("granted");
                    assert_eq!(l2.available_permits(), 0);
                    return lease.permits();
                }
                thread::yield_now();
            }
        });
        drop(held);
        assert_eq!(waiter.join().unwrap(), 1);
        let s = l.statistics();
        assert_eq!((s.available_permits, s.queued_permits), (1, 0));
        assert_eq!((s.total_successful, s.total_failed), (2, 0));
    });
}

/// A waiter dropped after the release handed it the permit (directly, in the release's CAS)
/// but before it looked: it leaves without the lock and gives the permit back, which goes on to
/// the waiter behind it (woken: `block_on` would report a deadlock otherwise).
#[test]
fn handed_off_then_dropped_passes_the_permit_on() {
    model(|| {
        let l = limiter(1, 4, QueueOrder::OldestFirst);
        let held = l.try_acquire(1).unwrap();
        let l2 = l.clone();
        let dropper = thread::spawn(move || {
            let mut fut = pin!(l2.acquire(1));
            let waker = futures_noop_waker();
            if let Poll::Ready(r) = fut.as_mut().poll(&mut Context::from_waker(&waker)) {
                drop(r.expect("granted"));
            }
        });
        let l3 = l.clone();
        let behind = thread::spawn(move || block_on(l3.acquire(1)).map(|lease| lease.permits()));
        drop(held);
        dropper.join().unwrap();
        assert_eq!(behind.join().unwrap(), Ok(1));
        let s = l.statistics();
        assert_eq!((s.available_permits, s.queued_permits), (1, 0));
    });
}

fn futures_noop_waker() -> std::task::Waker {
    std::task::Waker::noop().clone()
}

/// Issue 24, item 2: a waiter whose tokens came while nobody looked is served late, by a
/// newcomer's `try_acquire` racing a `replenish()`. Whichever serves, the waiter is granted as
/// of the tick it fit (2 s) and the refill after it (3 s) is kept: the newcomer's token is
/// there, and the bucket ends where a queue served on time would have left it.
#[test]
fn late_service_races_a_newcomer() {
    for order in [QueueOrder::OldestFirst, QueueOrder::NewestFirst] {
        model(move || {
            let clock = Arc::new(ManualClock::new());
            let opts = TokenBucketOptions::new(4, 3, Duration::from_secs(1)).with_queue(4, order);
            let t = Arc::new(TokenBucketLimiter::with_clock(opts, clock.clone()).unwrap());
            t.try_acquire(4).unwrap().forget();
            let mut waiter = pin!(t.acquire(4));
            let waker = futures_noop_waker();
            let mut cx = Context::from_waker(&waker);
            assert!(waiter.as_mut().poll(&mut cx).is_pending());
            clock.advance(Duration::from_secs(3));
            let t2 = t.clone();
            let newcomer = thread::spawn(move || t2.try_acquire(1).map(|l| l.permits()));
            t.replenish();
            assert_eq!(newcomer.join().unwrap(), Ok(1));
            assert!(matches!(waiter.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
            let s = t.statistics();
            assert_eq!((s.available_permits, s.queued_permits), (2, 0));
        });
    }
}

/// The same race on GCRA: the waiter's slot was at 1 s, the newcomer's at 2 s; at 3 s both fit.
#[test]
fn late_service_races_a_newcomer_on_gcra() {
    model(|| {
        let clock = Arc::new(ManualClock::new());
        let opts = GcraOptions::per_second(1).with_queue(1, QueueOrder::OldestFirst);
        let g = Arc::new(GcraLimiter::with_clock(opts, clock.clone()).unwrap());
        g.try_acquire(1).unwrap().forget();
        let mut waiter = pin!(g.acquire(1));
        let waker = futures_noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(waiter.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::from_secs(3));
        let g2 = g.clone();
        let newcomer = thread::spawn(move || g2.try_acquire(1).map(|l| l.permits()));
        g.replenish();
        assert_eq!(newcomer.join().unwrap(), Ok(1));
        assert!(matches!(waiter.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
        assert_eq!(g.statistics().queued_permits, 0);
    });
}

/// The same race on a sliding window (issue 24, item 2): the waiter fit in segment 2 (when the
/// permits taken at 0 s left) and is counted there however late it is served, so by 4 s it has
/// left the window too and the newcomer finds the whole limit free.
#[test]
fn late_service_races_a_newcomer_on_a_sliding_window() {
    model(|| {
        let clock = Arc::new(ManualClock::new());
        let opts = SlidingWindowOptions::new(2, Duration::from_secs(2), 2)
            .with_queue(2, QueueOrder::OldestFirst);
        let w = Arc::new(SlidingWindowLimiter::with_clock(opts, clock.clone()).unwrap());
        w.try_acquire(2).unwrap().forget();
        let mut waiter = pin!(w.acquire(1));
        let waker = futures_noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(waiter.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::from_secs(4));
        let w2 = w.clone();
        let newcomer = thread::spawn(move || w2.try_acquire(2).map(|l| l.permits()));
        w.replenish();
        assert_eq!(newcomer.join().unwrap(), Ok(2));
        assert!(matches!(waiter.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
        let s = w.statistics();
        assert_eq!((s.available_permits, s.queued_permits), (0, 0));
    });
}

/// The same race on a sliding counter: the waiter fit in window 1 (at 3 s, when the 2 taken at
/// 0 s weigh half) and is counted there however late it is served, so by 6 s (window 3) both
/// counts have rolled away and the newcomer finds the whole limit free. Counted at the serving
/// instant instead, the waiter would still weigh fully and the newcomer be refused.
#[test]
fn late_service_races_a_newcomer_on_a_sliding_counter() {
    model(|| {
        let clock = Arc::new(ManualClock::new());
        let opts = SlidingCounterOptions::new(2, Duration::from_secs(2))
            .with_queue(2, QueueOrder::OldestFirst);
        let c = Arc::new(SlidingCounterLimiter::with_clock(opts, clock.clone()).unwrap());
        c.try_acquire(2).unwrap().forget();
        let mut waiter = pin!(c.acquire(1));
        let waker = futures_noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(waiter.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::from_secs(6));
        let c2 = c.clone();
        let newcomer = thread::spawn(move || c2.try_acquire(2).map(|l| l.permits()));
        c.replenish();
        assert_eq!(newcomer.join().unwrap(), Ok(2));
        assert!(matches!(waiter.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
        let s = c.statistics();
        assert_eq!((s.available_permits, s.queued_permits), (0, 0));
    });
}

/// The same race on a sliding log: the waiter fit at 2 s (when the 2 taken at 0 s left) and its
/// entry is recorded then, so it has left the window by 4 s and the newcomer takes the whole
/// limit, whichever thread served the waiter.
#[test]
fn late_service_races_a_newcomer_on_a_sliding_log() {
    model(|| {
        let clock = Arc::new(ManualClock::new());
        let opts = SlidingLogOptions::new(2, Duration::from_secs(2))
            .with_queue(2, QueueOrder::OldestFirst);
        let l = Arc::new(SlidingLogLimiter::with_clock(opts, clock.clone()).unwrap());
        l.try_acquire(2).unwrap().forget();
        let mut waiter = pin!(l.acquire(1));
        let waker = futures_noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(waiter.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::from_secs(4));
        let l2 = l.clone();
        let newcomer = thread::spawn(move || l2.try_acquire(2).map(|l| l.permits()));
        l.replenish();
        assert_eq!(newcomer.join().unwrap(), Ok(2));
        assert!(matches!(waiter.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
        let s = l.statistics();
        assert_eq!((s.available_permits, s.queued_permits), (0, 0));
    });
}
