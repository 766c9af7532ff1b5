//! Reconfiguration at run time (issue 16, item 5): the token bucket and the fixed window change
//! their limit, rate and queue limit while in use. The rule: tokens clamp to a lowered limit, a
//! raised one fills with time at the new rate, waiters that could never be served now are
//! failed with `ExceedsLimit`, the rest keep their places and are served as far as the limiter
//! allows; what is fixed at creation (period, window, queue order) and limits the state word
//! cannot hold are refused, changing nothing.

use core::time::Duration;
use std::sync::atomic::{AtomicU64, Ordering};

mod common;

use common::Task;
use tollgate::*;

const SEC: Duration = Duration::from_secs(1);

#[test]
fn a_lowered_limit_clamps_and_a_raised_one_fills_at_the_new_rate() {
    let clock = ManualClock::new();
    let b = TokenBucketLimiter::with_clock(TokenBucketOptions::new(10, 10, SEC), &clock).unwrap();
    b.reconfigure(TokenBucketOptions::new(4, 1, SEC)).unwrap();
    assert_eq!(b.available_permits(), 4);
    assert_eq!(b.try_acquire(5).unwrap_err().reason(), Reason::ExceedsLimit);
    b.try_acquire(4).unwrap().forget();
    let no = b.try_acquire(2).unwrap_err();
    assert_eq!(no.retry_after(), Some(2 * SEC)); // 1 token per second now
    b.reconfigure(TokenBucketOptions::new(20, 5, SEC)).unwrap();
    assert_eq!(b.available_permits(), 0); // raising adds nothing at once
    clock.advance(3 * SEC);
    assert_eq!(b.available_permits(), 15);
    clock.advance(10 * SEC);
    assert_eq!(b.available_permits(), 20);
    assert_eq!(b.options(), TokenBucketOptions::new(20, 5, SEC));
    assert!(b.idle_duration().is_some());
}

#[test]
fn waiters_beyond_the_new_limit_fail_and_the_others_keep_their_places() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(10, 10, SEC).with_queue(100, QueueOrder::OldestFirst);
    let b = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    b.try_acquire(10).unwrap().forget();
    let mut small = Task::new(b.acquire(3));
    let mut big = Task::new(b.acquire(8));
    let mut last = Task::new(b.acquire(2));
    small.pending();
    big.pending();
    last.pending();
    assert_eq!(b.statistics().queued_permits, 13);
    let lowered = TokenBucketOptions::new(5, 5, SEC).with_queue(100, QueueOrder::OldestFirst);
    b.reconfigure(lowered).unwrap();
    assert_eq!(big.ready().unwrap_err().reason(), Reason::ExceedsLimit);
    assert_eq!(b.statistics().queued_permits, 5);
    small.pending();
    last.pending();
    clock.advance(SEC);
    b.replenish();
    assert_eq!(small.ready().unwrap().permits(), 3);
    assert_eq!(last.ready().unwrap().permits(), 2);
    let s = b.statistics();
    assert_eq!((s.total_successful, s.total_failed), (3, 1));
}

#[test]
fn a_new_queue_limit_applies_to_newcomers_only() {
    let clock = ManualClock::new();
    let opts = FixedWindowOptions::new(2, SEC).with_queue(4, QueueOrder::OldestFirst);
    let w = FixedWindowLimiter::with_clock(opts, &clock).unwrap();
    w.try_acquire(2).unwrap().forget();
    let mut queued = Task::new(w.acquire(2));
    queued.pending();
    w.reconfigure(FixedWindowOptions::new(2, SEC).with_queue(1, QueueOrder::OldestFirst))
        .unwrap();
    let mut late = Task::new(w.acquire(1));
    assert_eq!(late.ready().unwrap_err().reason(), Reason::QueueFull);
    queued.pending();
    clock.advance(SEC);
    w.replenish();
    assert_eq!(queued.ready().unwrap().permits(), 2);
    assert_eq!(w.options().queue_limit, 1);
}

#[test]
fn what_is_fixed_at_creation_and_what_the_word_cannot_hold_are_refused() {
    let clock = ManualClock::new();
    let ms = Duration::from_millis(1);
    let b = TokenBucketLimiter::with_clock(TokenBucketOptions::new(10, 1, ms), &clock).unwrap();
    let before = b.options();
    #[allow(unused_mut)]
    let mut refused = vec![
        (
            TokenBucketOptions::new(10, 1, 2 * ms),
            OptionsError::FixedAtCreation,
        ),
        (
            TokenBucketOptions::new(10, 1, ms).with_queue(1, QueueOrder::NewestFirst),
            OptionsError::FixedAtCreation,
        ),
        (TokenBucketOptions::new(0, 1, ms), OptionsError::ZeroLimit),
    ];
    // 1 ms periods: ticks take 44 bits of the 64-bit word, three flags (debt, closed,
    // waiters) 3, tokens the other 17. (Where the state is kept unpacked behind a critical
    // section, any u32 limit fits.)
    #[cfg(not(tollgate_cs_words))]
    refused.push((
        TokenBucketOptions::new(1 << 17, 1, ms),
        OptionsError::LimitTooLarge { max: (1 << 17) - 1 },
    ));
    for (opts, err) in refused {
        assert_eq!(b.reconfigure(opts), Err(err), "{opts:?}");
        assert_eq!(b.options(), before);
        assert_eq!(b.available_permits(), 10);
    }
    b.reconfigure(TokenBucketOptions::new((1 << 17) - 1, 1, ms))
        .unwrap();
    clock.advance(Duration::from_secs(3600));
    assert_eq!(b.available_permits(), (1 << 17) - 1);
    // A window too fine for the 64-bit word keeps the 128-bit one: any u32 limit.
    let w = FixedWindowLimiter::with_clock(
        FixedWindowOptions::new(1 << 20, Duration::from_nanos(4)),
        &clock,
    )
    .unwrap();
    w.reconfigure(FixedWindowOptions::new(u32::MAX, Duration::from_nanos(4)))
        .unwrap();
    assert_eq!(w.available_permits(), 1 << 20);
}

/// Four threads take single permits from one window while a fifth lowers its limit from 1,000
/// to 10 and raises it back, over and over: nothing is ever granted beyond what the larger
/// limit allows in the window, and once the last reconfiguration (to 10) returns, at most 10
/// are available.
#[test]
fn reconfiguring_under_load_never_over_admits() {
    let clock = ManualClock::new();
    let big = FixedWindowOptions::new(1_000, SEC);
    let small = FixedWindowOptions::new(10, SEC);
    let w = FixedWindowLimiter::with_clock(big, &clock).unwrap();
    let granted = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..2_000 {
                    if let Ok(l) = w.try_acquire(1) {
                        l.forget();
                        granted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        s.spawn(|| {
            for _ in 0..500 {
                w.reconfigure(small).unwrap();
                w.reconfigure(big).unwrap();
            }
            w.reconfigure(small).unwrap();
        });
    });
    let granted = granted.load(Ordering::Relaxed);
    assert!(
        granted <= 1_000,
        "{granted} granted in one window of at most 1,000"
    );
    assert!(w.available_permits() <= 10);
    assert_eq!(w.statistics().total_successful, granted);
}

#[test]
fn a_sliding_window_keeps_what_it_counted_under_a_new_limit() {
    let clock = ManualClock::new();
    let minute = Duration::from_secs(60);
    let opts = SlidingWindowOptions::new(10, minute, 2).with_queue(20, QueueOrder::OldestFirst);
    let w = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
    w.try_acquire(6).unwrap().forget();
    let mut four = Task::new(w.acquire(4));
    assert_eq!(four.ready().unwrap().permits(), 4); // 10 of 10 now
    let mut nine = Task::new(w.acquire(9));
    let mut two = Task::new(w.acquire(2));
    nine.pending();
    two.pending();
    let lowered = SlidingWindowOptions::new(5, minute, 2).with_queue(20, QueueOrder::OldestFirst);
    w.reconfigure(lowered).unwrap();
    assert_eq!(nine.ready().unwrap_err().reason(), Reason::ExceedsLimit);
    let no = w.try_acquire(1).unwrap_err();
    assert_eq!(no.reason(), Reason::Exhausted); // 10 counted, 5 allowed, one waiter ahead
    clock.advance(minute); // the segment holding all 10 slides out
    w.replenish();
    assert_eq!(two.ready().unwrap().permits(), 2);
    assert_eq!(w.available_permits(), 3);
    let other = SlidingWindowOptions::new(5, minute, 3).with_queue(20, QueueOrder::OldestFirst);
    assert_eq!(w.reconfigure(other), Err(OptionsError::FixedAtCreation));
    assert_eq!(w.options(), lowered);
}

#[test]
fn a_raised_concurrency_limit_serves_waiters_and_a_lowered_one_fails_the_too_large() {
    let opts = ConcurrencyOptions::new(2).with_queue(10, QueueOrder::OldestFirst);
    let l = ConcurrencyLimiter::with_clock(opts, ManualClock::new()).unwrap();
    let held = l.try_acquire(2).unwrap();
    let mut three = Task::new(l.acquire(3)); // more than the limit of 2: refused
    assert_eq!(three.ready().unwrap_err().reason(), Reason::ExceedsLimit);
    let mut one = Task::new(l.acquire(1));
    one.pending();
    l.reconfigure(ConcurrencyOptions::new(3).with_queue(10, QueueOrder::OldestFirst))
        .unwrap();
    let one = one.ready().unwrap(); // the raise made 1 available
    let mut two = Task::new(l.acquire(2));
    two.pending();
    l.reconfigure(ConcurrencyOptions::new(1).with_queue(10, QueueOrder::OldestFirst))
        .unwrap();
    assert_eq!(two.ready().unwrap_err().reason(), Reason::ExceedsLimit);
    drop(held); // pays the 2 owed
    assert_eq!(l.available_permits(), 0);
    drop(one);
    assert_eq!(l.available_permits(), 1);
    assert!(l.idle_duration().is_some());
    assert_eq!(
        l.reconfigure(ConcurrencyOptions::new(1).with_queue(10, QueueOrder::NewestFirst)),
        Err(OptionsError::FixedAtCreation)
    );
}

/// Four threads acquire and release single permits while a fifth moves the limit between 2
/// and 8: no more than 8 are ever held at once, nothing is lost or owed forever, and after
/// the last change (to 3) every permit comes back.
#[test]
fn adaptive_limits_under_load_never_leak_or_over_admit() {
    let l = ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(8), ManualClock::new()).unwrap();
    let held = AtomicU64::new(0);
    let most = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..5_000 {
                    if let Ok(lease) = l.try_acquire(1) {
                        let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        held.fetch_sub(1, Ordering::SeqCst);
                        drop(lease);
                    }
                }
            });
        }
        s.spawn(|| {
            for i in 0..2_000u32 {
                l.reconfigure(ConcurrencyOptions::new(2 + i % 7)).unwrap();
            }
            l.reconfigure(ConcurrencyOptions::new(3)).unwrap();
        });
    });
    assert!(most.load(Ordering::SeqCst) <= 8);
    assert_eq!(l.available_permits(), 3);
    assert_eq!(l.options().permit_limit, 3);
}
