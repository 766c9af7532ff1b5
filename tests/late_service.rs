//! Issue 24, items 1 and 2: RetryAfter counts the queue ahead on every refusal, and a queue
//! served late grants what a queue served on time grants (each waiter at the instant it fit,
//! the refills after that counted). Hand-polled futures on a manual clock; the property is also
//! checked over pseudo-random runs here and fuzzed (`fuzz/fuzz_targets/late_service.rs`).

use core::time::Duration;

mod common;

use common::Task;
use tollgate::*;

const S: Duration = Duration::from_secs(1);

// Item 1: a queue-full refusal's RetryAfter walks the queue ahead. ----------------------------

#[test]
fn item1_a_queue_full_refusal_counts_each_waiter_ahead_with_the_refill_cap() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(2, 100, 20 * S).with_queue(1, QueueOrder::OldestFirst);
    let bucket = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    bucket.try_acquire(2).unwrap().forget();
    let mut waiter = Task::new(bucket.acquire(1));
    waiter.pending();
    let refused = Task::new(bucket.acquire(2)).ready().unwrap_err();
    assert_eq!(refused.reason(), Reason::QueueFull);
    // At 20 s the bucket holds 2 (capped), the waiter takes 1; 2 more come only at 40 s.
    assert_eq!(refused.retry_after(), Some(40 * S));
    clock.advance(20 * S);
    bucket.replenish();
    assert!(waiter.ready().is_ok());
    assert!(bucket.try_acquire(2).is_err());
    clock.advance(20 * S);
    assert!(
        bucket.try_acquire(2).is_ok(),
        "waiting the RetryAfter was enough"
    );
}

#[test]
fn item1_a_queue_full_refusal_of_a_fixed_window_waits_for_each_window_ahead() {
    let clock = ManualClock::new();
    let opts = FixedWindowOptions::new(2, S).with_queue(2, QueueOrder::OldestFirst);
    let window = FixedWindowLimiter::with_clock(opts, &clock).unwrap();
    window.try_acquire(2).unwrap().forget();
    let mut a = Task::new(window.acquire(2));
    a.pending();
    let refused = Task::new(window.acquire(2)).ready().unwrap_err();
    assert_eq!(refused.reason(), Reason::QueueFull);
    // The waiter takes the next window whole; the refused request fits in the one after.
    assert_eq!(refused.retry_after(), Some(2 * S));
}

#[test]
fn item1_a_queue_full_refusal_of_gcra_counts_the_queue_ahead() {
    let clock = ManualClock::new();
    let opts = GcraOptions::per_second(1).with_queue(1, QueueOrder::OldestFirst);
    let gcra = GcraLimiter::with_clock(opts, &clock).unwrap();
    gcra.try_acquire(1).unwrap().forget();
    let mut a = Task::new(gcra.acquire(1));
    a.pending();
    let refused = Task::new(gcra.acquire(1)).ready().unwrap_err();
    assert_eq!(refused.reason(), Reason::QueueFull);
    assert_eq!(refused.retry_after(), Some(2 * S));
}

#[test]
fn item1_a_queue_full_refusal_of_the_shaper_waits_for_the_slots_ahead() {
    let clock = ManualClock::new();
    let opts = ShaperOptions::per_second(1).with_queue(1, QueueOrder::OldestFirst);
    let shaper = LeakyBucketShaper::with_clock(opts, &clock).unwrap();
    shaper.try_acquire(1).unwrap().forget();
    let mut a = Task::new(shaper.acquire(1));
    a.pending();
    let refused = Task::new(shaper.acquire(1)).ready().unwrap_err();
    assert_eq!(refused.reason(), Reason::QueueFull);
    // The waiter departs at 1 s and holds the slot to 2 s.
    assert_eq!(refused.retry_after(), Some(2 * S));
}

// Item 2: serving late gives what serving on time gives. ---------------------------------

#[test]
fn item2_a_token_bucket_waiter_served_late_is_granted_when_it_fit() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(4, 3, S).with_queue(4, QueueOrder::OldestFirst);
    let bucket = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    bucket.try_acquire(4).unwrap().forget();
    let mut waiter = Task::new(bucket.acquire(4));
    waiter.pending();
    let refused = bucket.try_acquire(1).unwrap_err();
    // The waiter fits at 2 s (6 tokens, capped at 4); one more token comes at 3 s.
    assert_eq!(refused.retry_after(), Some(3 * S));
    clock.advance(3 * S);
    bucket.replenish();
    assert!(waiter.ready().is_ok());
    assert!(
        bucket.try_acquire(1).is_ok(),
        "waiting exactly the RetryAfter, with nothing else happening, is enough"
    );
}

#[test]
fn item2_the_serving_call_itself_may_be_the_late_newcomer() {
    // Same as above, but the queue is served by the newcomer's own `try_acquire`.
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(4, 3, S).with_queue(4, QueueOrder::OldestFirst);
    let bucket = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    bucket.try_acquire(4).unwrap().forget();
    let mut waiter = Task::new(bucket.acquire(4));
    waiter.pending();
    clock.advance(3 * S);
    assert!(bucket.try_acquire(1).is_ok());
    assert!(waiter.ready().is_ok());
}

#[test]
fn item2_a_fixed_window_waiter_takes_the_first_window_it_fit() {
    let clock = ManualClock::new();
    let opts = FixedWindowOptions::new(2, S).with_queue(2, QueueOrder::OldestFirst);
    let window = FixedWindowLimiter::with_clock(opts, &clock).unwrap();
    window.try_acquire(2).unwrap().forget();
    let mut waiter = Task::new(window.acquire(2));
    waiter.pending();
    // Nobody looks until window 2: the waiter had window 1, so window 2 is whole.
    clock.advance(Duration::from_millis(2_500));
    window.replenish();
    assert!(waiter.ready().is_ok());
    assert!(window.try_acquire(2).is_ok());
}

#[test]
fn item2_a_gcra_waiter_served_late_is_granted_at_its_slot() {
    let clock = ManualClock::new();
    let opts = GcraOptions::per_second(1).with_queue(1, QueueOrder::OldestFirst);
    let gcra = GcraLimiter::with_clock(opts, &clock).unwrap();
    gcra.try_acquire(1).unwrap().forget();
    let mut waiter = Task::new(gcra.acquire(1));
    waiter.pending();
    let refused = gcra.try_acquire(1).unwrap_err();
    assert_eq!(refused.retry_after(), Some(2 * S));
    // The waiter's slot was at 1 s; the next one at 2 s.
    clock.advance(3 * S);
    gcra.replenish();
    assert!(waiter.ready().is_ok());
    assert!(gcra.try_acquire(1).is_ok());
}

#[test]
fn item2_a_leaky_meter_waiter_served_late_is_granted_when_it_fit() {
    let clock = ManualClock::new();
    let opts = LeakyBucketOptions::new(2, 1, S).with_queue(2, QueueOrder::OldestFirst);
    let meter = LeakyBucketMeter::with_clock(opts, &clock).unwrap();
    meter.try_acquire(2).unwrap().forget();
    let mut waiter = Task::new(meter.acquire(2));
    waiter.pending();
    clock.advance(4 * S);
    meter.replenish();
    assert!(waiter.ready().is_ok());
    // The waiter filled the meter at 2 s; by 4 s it has drained 2 again.
    assert!(meter.try_acquire(2).is_ok());
}

#[test]
fn item2_a_shaper_waiter_served_late_keeps_its_slot() {
    let clock = ManualClock::new();
    let opts = ShaperOptions::per_second(1).with_queue(4, QueueOrder::OldestFirst);
    let shaper = LeakyBucketShaper::with_clock(opts, &clock).unwrap();
    shaper.try_acquire(1).unwrap().forget();
    let mut waiter = Task::new(shaper.acquire(1));
    waiter.pending();
    clock.advance(3 * S);
    shaper.replenish();
    assert!(waiter.ready().is_ok());
    // Its slot was 1 s..2 s: the next departs now.
    assert!(shaper.try_acquire(1).is_ok());
}

/// A newcomer is never granted in the past: an idle full bucket taken at once starts its
/// refill from now, as before.
#[test]
fn item2_newcomers_still_take_at_the_present() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(4, 1, S).with_queue(4, QueueOrder::OldestFirst);
    let bucket = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    clock.advance(10 * S);
    let mut waiter = Task::new(bucket.acquire(4));
    assert!(waiter.ready().is_ok());
    assert_eq!(bucket.try_acquire(1).unwrap_err().retry_after(), Some(S));
}

// The property, over pseudo-random runs: served at every tick, or once in a while. -----------

/// xorshift64: deterministic runs without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A waiting request: its index, the wake-ups it had when last polled, its future.
type Waiting<'a> = (usize, usize, Task<'a, Result<Lease<'a>, Rejection>>);

/// What a limiter answers each of `requests` (each `(tick it arrives, permits, waits?)`: a
/// waiting `acquire` or a `try_acquire`), whenever the answer is seen, and its statistics at
/// the end, when its queue is served by `replenish` every `every` ticks (and by whatever the
/// requests themselves serve).
fn run<L: Limiter + Replenishing>(
    limiter: &L,
    clock: &ManualClock,
    tick: Duration,
    requests: &[(u64, u32, bool)],
    every: u64,
    acquire: impl for<'a> Fn(&'a L, u32) -> Task<'a, Result<Lease<'a>, Rejection>>,
) -> (Vec<Option<bool>>, Statistics) {
    let horizon = requests.iter().map(|r| r.0).max().unwrap_or(0) + 400;
    let mut answers = vec![None; requests.len()];
    // Each waiter with the wake-ups it had when last polled: polled again only when woken, as
    // an executor does (a poll serves the queue itself).
    let mut waiting: Vec<Waiting<'_>> = Vec::new();
    let mut next = 0;
    let settle = |waiting: &mut Vec<Waiting<'_>>, answers: &mut Vec<Option<bool>>| {
        waiting.retain_mut(|(i, seen, task)| {
            if task.woken() == *seen {
                return true;
            }
            *seen = task.woken();
            match task.poll() {
                core::task::Poll::Ready(r) => {
                    answers[*i] = Some(r.is_ok());
                    false
                }
                core::task::Poll::Pending => true,
            }
        });
    };
    for t in 0..=horizon {
        if t > 0 {
            clock.advance(tick);
        }
        if t % every == 0 {
            limiter.replenish();
        }
        settle(&mut waiting, &mut answers);
        while next < requests.len() && requests[next].0 == t {
            let (_, n, waits) = requests[next];
            if waits {
                let mut task = acquire(limiter, n);
                match task.poll() {
                    core::task::Poll::Ready(r) => answers[next] = Some(r.is_ok()),
                    core::task::Poll::Pending => waiting.push((next, task.woken(), task)),
                }
            } else {
                answers[next] = Some(limiter.try_acquire(n).is_ok());
            }
            next += 1;
        }
    }
    // Every waiter has had 400 ticks, more than any wait here.
    limiter.replenish();
    settle(&mut waiting, &mut answers);
    assert!(waiting.is_empty(), "a waiter was left behind");
    (answers, limiter.statistics())
}

fn requests(rng: &mut Rng, limit: u32) -> Vec<(u64, u32, bool)> {
    let mut t = 0;
    (0..40)
        .map(|_| {
            t += rng.below(12);
            let n = 1 + rng.below(u64::from(limit)) as u32;
            (t, n, rng.below(3) != 0)
        })
        .collect()
}

#[test]
fn item2_serving_late_grants_what_serving_on_time_grants() {
    let tick = Duration::from_millis(250);
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    for round in 0..300 {
        let limit = 1 + rng.below(6) as u32;
        let per = 1 + rng.below(u64::from(limit) + 2) as u32;
        let period = tick * (1 + rng.below(4) as u32);
        let queue = limit * (1 + rng.below(3) as u32);
        let order = if round % 3 == 2 {
            QueueOrder::NewestFirst
        } else {
            QueueOrder::OldestFirst
        };
        let reqs = requests(&mut rng, limit);
        let every = 2 + rng.below(9);
        let rng_segments = rng.below(4) as u32;
        let kind = round % 8;
        let outcome = |every: u64| {
            let clock = ManualClock::new();
            match kind {
                7 => {
                    // The log's entries leave at any nanosecond: served at every nanosecond,
                    // or every few, with windows of a few nanoseconds.
                    let ns = Duration::from_nanos(1);
                    let window = ns * (1 + rng_segments * 2 + per);
                    let opts = SlidingLogOptions::new(limit, window).with_queue(queue, order);
                    let l = SlidingLogLimiter::<_, 8>::with_capacity(opts, &clock).unwrap();
                    run(&l, &clock, ns, &reqs, every, |l, n| Task::new(l.acquire(n)))
                }
                6 => {
                    // The counter's waiters fit at any nanosecond (the previous window's weight
                    // falls continuously): served at every nanosecond, or every few, with
                    // windows of a few nanoseconds.
                    let ns = Duration::from_nanos(1);
                    let window = ns * (2 + rng_segments * 2 + per);
                    let opts = SlidingCounterOptions::new(limit, window).with_queue(queue, order);
                    let l = SlidingCounterLimiter::with_clock(opts, &clock).unwrap();
                    run(&l, &clock, ns, &reqs, every, |l, n| Task::new(l.acquire(n)))
                }
                0 => {
                    let opts = TokenBucketOptions::new(limit, per, period).with_queue(queue, order);
                    let l = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
                    run(&l, &clock, tick, &reqs, every, |l, n| {
                        Task::new(l.acquire(n))
                    })
                }
                1 => {
                    let opts = FixedWindowOptions::new(limit, period).with_queue(queue, order);
                    let l = FixedWindowLimiter::with_clock(opts, &clock).unwrap();
                    run(&l, &clock, tick, &reqs, every, |l, n| {
                        Task::new(l.acquire(n))
                    })
                }
                2 => {
                    let opts = GcraOptions::per(period, limit).with_queue(queue, order);
                    let l = GcraLimiter::with_clock(opts, &clock).unwrap();
                    run(&l, &clock, tick, &reqs, every, |l, n| {
                        Task::new(l.acquire(n))
                    })
                }
                4 => {
                    let opts = ShaperOptions::per(period, limit)
                        .with_max_permits(limit)
                        .with_queue(queue, order);
                    let l = LeakyBucketShaper::with_clock(opts, &clock).unwrap();
                    run(&l, &clock, tick, &reqs, every, |l, n| {
                        Task::new(l.acquire(n))
                    })
                }
                5 => {
                    let segments = 1 + rng_segments;
                    let opts = SlidingWindowOptions::new(limit, period * segments, segments)
                        .with_queue(queue, order);
                    let l = SlidingWindowLimiter::<_, 8>::with_capacity(opts, &clock).unwrap();
                    run(&l, &clock, tick, &reqs, every, |l, n| {
                        Task::new(l.acquire(n))
                    })
                }
                _ => {
                    let opts = LeakyBucketOptions::new(limit, per.min(limit), period)
                        .with_queue(queue, order);
                    let l = LeakyBucketMeter::with_clock(opts, &clock).unwrap();
                    run(&l, &clock, tick, &reqs, every, |l, n| {
                        Task::new(l.acquire(n))
                    })
                }
            }
        };
        assert_eq!(
            outcome(1),
            outcome(every),
            "round {round}: kind {kind}, limit {limit}, per {per}, period {period:?}, \
             queue {queue}, served every {every} ticks, requests {reqs:?}"
        );
    }
}

/// A reconfiguration applies from its instant: the time before it is served at the old rate
/// (a waiter whose tokens came meanwhile is granted as of then), the new rate counts after.
#[test]
fn item2_a_reconfiguration_serves_the_time_before_it_at_the_old_rate() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(4, 3, S).with_queue(4, QueueOrder::OldestFirst);
    let bucket = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    bucket.try_acquire(4).unwrap().forget();
    let mut waiter = Task::new(bucket.acquire(4));
    waiter.pending();
    clock.advance(3 * S);
    // Nobody looked: the waiter fit at 2 s, and 3 more tokens came at 3 s, at the old rate.
    bucket
        .reconfigure(TokenBucketOptions::new(4, 1, S).with_queue(4, QueueOrder::OldestFirst))
        .unwrap();
    assert!(waiter.ready().is_ok());
    assert!(bucket.try_acquire(3).is_ok());
    assert_eq!(bucket.try_acquire(1).unwrap_err().retry_after(), Some(S));
}

/// A partition's limiter grants its waiters as the limiter inside does: as of when they fit.
#[test]
fn item2_a_partitions_waiter_served_late_is_granted_when_it_fit() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(4, 3, S).with_queue(4, QueueOrder::OldestFirst);
    let bucket = PartitionKind::token_bucket(opts).unwrap().limiter(&clock);
    bucket.try_acquire(4).unwrap().forget();
    let mut waiter = Task::new(bucket.acquire(4));
    waiter.pending();
    clock.advance(3 * S);
    // Served by the waiter's own poll, through the partition's side of the protocol.
    assert!(waiter.ready().is_ok());
    assert!(bucket.try_acquire(1).is_ok());
}
