//! Queued waiting (reference §2), on a manual clock with futures polled by hand: no runtime, no
//! sleeping, every step deterministic.

use core::time::Duration;
use std::sync::Arc;

mod common;

use common::Task;
use tollgate::*;

const SEC: Duration = Duration::from_secs(1);

fn oldest(limit: u32) -> (u32, QueueOrder) {
    (limit, QueueOrder::OldestFirst)
}
fn newest(limit: u32) -> (u32, QueueOrder) {
    (limit, QueueOrder::NewestFirst)
}

fn concurrency(permits: u32, (q, o): (u32, QueueOrder)) -> ConcurrencyLimiter<tollgate::StdClock> {
    ConcurrencyLimiter::new(ConcurrencyOptions::new(permits).with_queue(q, o)).unwrap()
}

// Concurrency ---------------------------------------------------------------------------------

#[test]
fn released_permits_go_to_the_queue_head_in_order() {
    let l = concurrency(2, oldest(10));
    let held = l.try_acquire(2).unwrap();
    let mut a = Task::new(l.acquire(1));
    let mut b = Task::new(l.acquire(2));
    a.pending();
    b.pending();
    assert_eq!(l.statistics().queued_permits, 3);
    drop(held);
    // a (1) is served; b (2) does not fit beside it: head-of-line, b waits.
    assert_eq!((a.woken(), b.woken()), (1, 0));
    let lease_a = a.ready().unwrap();
    b.pending();
    assert_eq!(l.available_permits(), 1);
    drop(lease_a);
    assert_eq!(b.woken(), 1);
    let lease_b = b.ready().unwrap();
    assert_eq!((lease_b.permits(), l.available_permits()), (2, 0));
    drop(lease_b);
    let s = l.statistics();
    assert_eq!(
        (s.available_permits, s.queued_permits, s.total_successful),
        (2, 0, 3)
    );
}

#[test]
fn oldest_first_queue_blocks_newcomers_even_with_free_permits() {
    let l = concurrency(3, oldest(10));
    let held = l.try_acquire(2).unwrap();
    let mut big = Task::new(l.acquire(3));
    big.pending();
    // One permit is free, but the queue is not empty: no barging.
    assert_eq!(l.try_acquire(1).unwrap_err().reason(), Reason::Exhausted);
    let mut small = Task::new(l.acquire(1));
    small.pending();
    drop(held);
    let lease = big.ready().unwrap();
    small.pending();
    drop(lease);
    assert!(small.ready().is_ok());
}

#[test]
fn newest_first_lets_newcomers_take_free_permits_and_serves_the_newest() {
    let l = concurrency(3, newest(10));
    let held = l.try_acquire(2).unwrap();
    let mut big = Task::new(l.acquire(3));
    big.pending();
    // A newcomer takes the free permit ahead of the queue.
    let one = l.try_acquire(1).unwrap();
    let mut a = Task::new(l.acquire(1));
    let mut b = Task::new(l.acquire(1));
    a.pending();
    b.pending();
    drop(one);
    // LIFO: b, the newest, is served first.
    assert_eq!((a.woken(), b.woken(), big.woken()), (0, 1, 0));
    let lb = b.ready().unwrap();
    drop(held);
    // 2 free: a (the newest left) fits, then big (3) does not.
    assert_eq!(a.woken(), 1);
    let la = a.ready().unwrap();
    big.pending();
    drop((la, lb));
    assert!(big.ready().is_ok());
}

#[test]
fn queue_limit_counts_permits_and_oldest_first_rejects_the_newcomer() {
    let l = concurrency(2, oldest(3));
    let _held = l.try_acquire(2).unwrap();
    let mut a = Task::new(l.acquire(1));
    let mut b = Task::new(l.acquire(2));
    a.pending();
    b.pending();
    let mut c = Task::new(l.acquire(1));
    let r = c.ready().unwrap_err();
    assert_eq!((r.reason(), r.retry_after()), (Reason::QueueFull, None));
    assert_eq!(l.statistics().total_failed, 1);
}

#[test]
fn newest_first_evicts_the_oldest_to_make_room() {
    let l = concurrency(4, newest(4));
    let _held = l.try_acquire(4).unwrap();
    let mut a = Task::new(l.acquire(1));
    let mut b = Task::new(l.acquire(1));
    let mut c = Task::new(l.acquire(1));
    a.pending();
    b.pending();
    c.pending();
    // 3 of 4 queue permits used; d needs 3: a and b (the oldest) go, c stays (1 + 3 = 4).
    let mut d = Task::new(l.acquire(3));
    d.pending();
    assert_eq!((a.woken(), b.woken(), c.woken()), (1, 1, 0));
    assert_eq!(a.ready().unwrap_err().reason(), Reason::Evicted);
    assert_eq!(b.ready().unwrap_err().reason(), Reason::Evicted);
    c.pending();
    let s = l.statistics();
    assert_eq!((s.queued_permits, s.total_failed), (4, 2));
    // A whole-queue request evicts everyone older.
    let mut e = Task::new(l.acquire(4));
    e.pending();
    assert_eq!(c.ready().unwrap_err().reason(), Reason::Evicted);
    assert_eq!(d.ready().unwrap_err().reason(), Reason::Evicted);
    // A request larger than the whole queue is rejected without evicting anyone.
    let l2 = concurrency(4, newest(2));
    let _h = l2.try_acquire(4).unwrap();
    let mut f = Task::new(l2.acquire(3));
    assert_eq!(f.ready().unwrap_err().reason(), Reason::QueueFull);
}

#[test]
fn a_zero_queue_limit_means_no_waiting() {
    let l = concurrency(1, oldest(0));
    let _held = l.try_acquire(1).unwrap();
    assert_eq!(
        Task::new(l.acquire(1)).ready().unwrap_err().reason(),
        Reason::QueueFull
    );
    // ...except for 0-permit probes, which never use queue capacity.
    let mut probe = Task::new(l.acquire(0));
    probe.pending();
}

#[test]
fn cancelling_a_queued_waiter_frees_its_capacity_at_once_and_unblocks_those_behind() {
    let l = concurrency(2, oldest(3));
    let held = l.try_acquire(1).unwrap();
    let mut big = Task::new(l.acquire(2));
    let mut small = Task::new(l.acquire(1));
    big.pending();
    small.pending();
    // The queue is full (3 permits)...
    assert_eq!(
        Task::new(l.acquire(1)).ready().unwrap_err().reason(),
        Reason::QueueFull
    );
    // ...dropping `big` frees its 2 at once, and `small`, now at the head, fits in the free
    // permit: it is granted on the spot.
    drop(big);
    assert_eq!(l.statistics().queued_permits, 0);
    assert_eq!(small.woken(), 1);
    assert!(small.ready().is_ok());
    drop(held);
    // Cancellations are not counted as failures (the one failure is the QueueFull).
    assert_eq!(l.statistics().total_failed, 1);
}

#[test]
fn dropping_a_granted_but_unreceived_future_gives_the_permits_on() {
    let l = concurrency(1, oldest(10));
    let held = l.try_acquire(1).unwrap();
    let mut a = Task::new(l.acquire(1));
    let mut b = Task::new(l.acquire(1));
    a.pending();
    b.pending();
    drop(held); // a is granted...
    assert_eq!(a.woken(), 1);
    drop(a); // ...but never polled again: its permit goes to b.
    assert_eq!(b.woken(), 1);
    let lease = b.ready().unwrap();
    drop(lease);
    assert_eq!(l.available_permits(), 1);
}

#[test]
fn dropping_before_the_first_poll_does_nothing() {
    let l = concurrency(1, oldest(1));
    drop(l.acquire(1));
    assert_eq!(
        l.statistics(),
        Statistics {
            available_permits: 1,
            ..Default::default()
        }
    );
}

#[test]
fn zero_permit_waiters_complete_when_a_permit_is_free_in_queue_order() {
    let l = concurrency(1, oldest(1));
    let held = l.try_acquire(1).unwrap();
    let mut probe = Task::new(l.acquire(0));
    let mut one = Task::new(l.acquire(1));
    probe.pending();
    one.pending(); // the queue is "full" with 1 permit; the probe used none of it
    drop(held);
    assert!(probe.ready().is_ok());
    let lease = one.ready().unwrap();
    assert_eq!(lease.permits(), 1);
    assert_eq!(l.statistics().total_successful, 3);
}

#[test]
fn close_completes_every_waiter_with_closed() {
    let l = concurrency(1, oldest(10));
    let held = l.try_acquire(1).unwrap();
    let mut a = Task::new(l.acquire(1));
    let mut b = Task::new(l.acquire(0));
    a.pending();
    b.pending();
    l.close();
    assert_eq!((a.woken(), b.woken()), (1, 1));
    assert_eq!(a.ready().unwrap_err().reason(), Reason::Closed);
    assert_eq!(b.ready().unwrap_err().reason(), Reason::Closed);
    assert_eq!(
        Task::new(l.acquire(1)).ready().unwrap_err().reason(),
        Reason::Closed
    );
    drop(held);
    assert_eq!(l.statistics().queued_permits, 0);
}

#[test]
fn counts_near_u32_max_do_not_overflow() {
    let l = concurrency(u32::MAX, oldest(u32::MAX));
    let held = l.try_acquire(u32::MAX).unwrap();
    let mut a = Task::new(l.acquire(u32::MAX));
    let mut b = Task::new(l.acquire(u32::MAX));
    a.pending();
    assert_eq!(b.ready().unwrap_err().reason(), Reason::QueueFull);
    assert_eq!(l.statistics().queued_permits, u64::from(u32::MAX));
    drop(held);
    assert_eq!(a.ready().unwrap().permits(), u32::MAX);
}

#[test]
fn blocking_acquire_is_woken_by_a_release_on_another_thread_and_times_out_cleanly() {
    let l = concurrency(1, oldest(4));
    let held = l.try_acquire(1).unwrap();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| l.acquire_blocking(1, None).map(|lease| lease.permits()));
        while l.statistics().queued_permits == 0 {
            std::thread::yield_now();
        }
        drop(held);
        assert_eq!(waiter.join().unwrap(), Ok(1));
    });
    let held = l.try_acquire(1).unwrap();
    let r = l
        .acquire_blocking(1, Some(Duration::from_millis(1)))
        .unwrap_err();
    assert_eq!(r.reason(), Reason::TimedOut);
    assert_eq!(l.statistics().queued_permits, 0);
    drop(held);
    assert_eq!(l.available_permits(), 1);
}

// Rate limiters -------------------------------------------------------------------------------

#[test]
fn token_bucket_waiters_are_served_as_time_brings_tokens() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(3, 1, SEC).with_queue(5, QueueOrder::OldestFirst);
    let t = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    let _ = t.try_acquire(3).unwrap();
    let mut a = Task::new(t.acquire(1));
    let mut b = Task::new(t.acquire(2));
    a.pending();
    b.pending();
    assert_eq!(t.next_service(), Some(SEC));
    // RetryAfter counts the queue ahead: 3 queued + 1 = 4 tokens = 4 periods.
    assert_eq!(t.try_acquire(1).unwrap_err().retry_after(), Some(4 * SEC));
    let mut c = Task::new(t.acquire(3));
    let full = c.ready().unwrap_err();
    assert_eq!(
        (full.reason(), full.retry_after()),
        (Reason::QueueFull, Some(6 * SEC))
    );
    clock.advance(SEC);
    // Nobody noticed yet; replenish serves the head.
    assert_eq!(a.woken(), 0);
    assert_eq!(t.replenish(), 0);
    assert_eq!(a.woken(), 1);
    assert!(a.ready().is_ok());
    assert_eq!(t.next_service(), Some(2 * SEC)); // b needs 2 tokens
    clock.advance(SEC);
    // Any acquisition that sees the elapsed time serves the queue first.
    assert_eq!(t.try_acquire(1).unwrap_err().reason(), Reason::Exhausted);
    assert_eq!(b.woken(), 0); // 1 token: b needs 2
    clock.advance(SEC);
    assert!(t.try_acquire(1).is_err()); // serves b (2 tokens), nothing left for the newcomer
    assert!(b.ready().is_ok());
    assert_eq!(t.next_service(), None);
}

#[test]
fn a_waiter_polled_after_time_passes_serves_itself() {
    let clock = ManualClock::new();
    let opts = FixedWindowOptions::new(1, SEC).with_queue(1, QueueOrder::OldestFirst);
    let f = FixedWindowLimiter::with_clock(opts, &clock).unwrap();
    let _ = f.try_acquire(1).unwrap();
    let mut a = Task::new(f.acquire(1));
    a.pending();
    clock.advance(SEC);
    assert!(a.ready().is_ok());
    assert_eq!(f.available_permits(), 0);
}

#[test]
fn rate_permits_of_a_dropped_granted_waiter_come_back() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(3, 3, SEC).with_queue(5, QueueOrder::OldestFirst);
    let t = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    let _ = t.try_acquire(3).unwrap();
    let mut a = Task::new(t.acquire(2));
    a.pending();
    clock.advance(SEC);
    t.replenish();
    assert_eq!(t.available_permits(), 1);
    drop(a);
    assert_eq!(t.available_permits(), 3);

    let opts = SlidingWindowOptions::new(3, 2 * SEC, 2).with_queue(5, QueueOrder::OldestFirst);
    let s = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
    let _ = s.try_acquire(3).unwrap();
    let mut b = Task::new(s.acquire(2));
    b.pending();
    clock.advance(2 * SEC);
    s.replenish();
    assert_eq!(s.available_permits(), 1);
    drop(b);
    assert_eq!(s.available_permits(), 3);
}

#[test]
fn sliding_window_queue_full_retry_after_counts_the_queue_ahead() {
    let clock = ManualClock::new();
    let opts = SlidingWindowOptions::new(4, 4 * SEC, 4).with_queue(2, QueueOrder::OldestFirst);
    let s = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
    let _ = s.try_acquire(1).unwrap(); // segment 0
    clock.advance(SEC);
    let _ = s.try_acquire(3).unwrap(); // segment 1
    let mut a = Task::new(s.acquire(2));
    a.pending();
    // 2 queued ahead + 1 = 3 must leave: segment 0 (1) at 4 s, segment 1 (3) at 5 s.
    let r = Task::new(s.acquire(1)).ready().unwrap_err();
    assert_eq!(
        (r.reason(), r.retry_after()),
        (Reason::QueueFull, Some(4 * SEC))
    );
    assert_eq!(s.try_acquire(1).unwrap_err().retry_after(), Some(4 * SEC));
    clock.advance(3 * SEC);
    assert_eq!(s.replenish(), 1);
    a.pending();
    clock.advance(SEC);
    assert_eq!(s.replenish(), 2);
    assert!(a.ready().is_ok());
}

#[test]
fn rate_limiter_close_fails_waiters_and_newest_first_evicts() {
    let clock = ManualClock::new();
    let opts = FixedWindowOptions::new(2, SEC).with_queue(2, QueueOrder::NewestFirst);
    let f = FixedWindowLimiter::with_clock(opts, &clock).unwrap();
    let _ = f.try_acquire(2).unwrap();
    let mut a = Task::new(f.acquire(2));
    a.pending();
    let mut b = Task::new(f.acquire(1));
    b.pending();
    assert_eq!(a.ready().unwrap_err().reason(), Reason::Evicted);
    f.close();
    assert_eq!(b.ready().unwrap_err().reason(), Reason::Closed);
    let s = f.statistics();
    assert_eq!(
        (s.total_successful, s.total_failed, s.queued_permits),
        (1, 2, 0)
    );
}

#[test]
fn blocking_waits_on_a_rate_limiter_wake_themselves() {
    // StdClock, 2 ms windows: the blocked thread sleeps until the next window and serves itself.
    let opts =
        FixedWindowOptions::new(1, Duration::from_millis(2)).with_queue(1, QueueOrder::OldestFirst);
    let f = FixedWindowLimiter::new(opts).unwrap();
    let _ = f.try_acquire(1).unwrap();
    let lease = f.acquire_blocking(1, Some(Duration::from_secs(60)));
    assert!(lease.is_ok());
}

#[test]
fn the_driver_serves_async_waiters_with_nobody_else_calling() {
    let driver = Driver::new().unwrap();
    let opts = TokenBucketOptions::new(1, 1, Duration::from_millis(2))
        .with_queue(4, QueueOrder::OldestFirst);
    let t = Arc::new(TokenBucketLimiter::new(opts).unwrap());
    driver.register(&t);
    let _ = t.try_acquire(1).unwrap();
    let mut a = Task::new(t.acquire(1));
    a.pending();
    while a.woken() == 0 {
        std::thread::yield_now();
    }
    assert!(a.ready().is_ok());
}

#[test]
fn any_executor_tokio_included() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let l = Arc::new(concurrency(2, oldest(1000)));
    rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..200u32 {
            let l = l.clone();
            tasks.push(tokio::spawn(async move {
                let lease = l.acquire(1 + i % 2).await.unwrap();
                tokio::task::yield_now().await;
                drop(lease);
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    let s = l.statistics();
    assert_eq!(
        (s.available_permits, s.queued_permits, s.total_successful),
        (2, 0, 200)
    );
}
