//! A rate limiter's `try_acquire` reads its clock at most once, whichever path decides: the
//! quick one (in the state word's own tick), the general one (a new tick, a probe, a closed
//! limiter, a 128-bit word) or a refusal for a request over the limit. The decision and its
//! RetryAfter are made on that one reading: a second one would cost a `StdClock` read (25-40 ns)
//! and could grant on an instant the RetryAfter was not computed from.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tollgate::{
    Clock, FixedWindowLimiter, FixedWindowOptions, GcraLimiter, GcraOptions, Instant, Limiter,
    ManualClock, Reason, SlidingWindowLimiter, SlidingWindowOptions, TokenBucketLimiter,
    TokenBucketOptions,
};

/// A manual clock that counts its readings.
struct Counting<'a> {
    clock: &'a ManualClock,
    reads: AtomicU64,
}

impl<'a> Counting<'a> {
    fn new(clock: &'a ManualClock) -> Self {
        Self {
            clock,
            reads: AtomicU64::new(0),
        }
    }

    fn take_reads(&self) -> u64 {
        self.reads.swap(0, Ordering::Relaxed)
    }
}

impl Clock for Counting<'_> {
    fn now(&self) -> Instant {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.clock.now()
    }
}

const SEC: Duration = Duration::from_secs(1);

/// What one `try_acquire` answered.
#[derive(Debug, PartialEq)]
enum Answer {
    Granted,
    Refused(Reason),
}

/// `try_acquire(n)` on `l`, whose clock is `c`: its answer, after checking it read the clock at
/// most once.
fn acquire_once<L: Limiter>(l: &L, c: &Counting<'_>, n: u32, what: &str) -> Answer {
    c.take_reads();
    let answer = match l.try_acquire(n) {
        Ok(lease) => {
            lease.forget();
            Answer::Granted
        }
        Err(r) => Answer::Refused(r.reason()),
    };
    let reads = c.take_reads();
    assert!(
        reads <= 1,
        "{what}: {reads} clock readings in one try_acquire"
    );
    answer
}

/// The same script for every limiter of limit 2 per second: both permits granted in the first
/// tick (the first call through the general path, the second through the quick one), refused
/// in it, refused over the limit, a probe, granted again after a new tick begins (general path),
/// refused once closed.
fn script<L: Limiter>(l: &L, manual: &ManualClock, c: &Counting<'_>) {
    use Answer::*;
    assert_eq!(acquire_once(l, c, 1, "first"), Granted);
    assert_eq!(acquire_once(l, c, 1, "quick grant"), Granted);
    assert_eq!(
        acquire_once(l, c, 1, "quick denial"),
        Refused(Reason::Exhausted)
    );
    assert_eq!(
        acquire_once(l, c, 3, "over the limit"),
        Refused(Reason::ExceedsLimit)
    );
    assert_eq!(acquire_once(l, c, 0, "probe"), Refused(Reason::Exhausted));
    manual.advance(SEC);
    assert_eq!(acquire_once(l, c, 2, "new tick"), Granted);
    assert_eq!(
        acquire_once(l, c, 1, "denial after it"),
        Refused(Reason::Exhausted)
    );
    l.close();
    assert_eq!(acquire_once(l, c, 1, "closed"), Refused(Reason::Closed));
}

#[test]
fn token_bucket_reads_the_clock_once_per_decision() {
    let manual = ManualClock::new();
    let c = Counting::new(&manual);
    let l = TokenBucketLimiter::with_clock(TokenBucketOptions::new(2, 2, SEC), &c).unwrap();
    script(&l, &manual, &c);
}

#[test]
fn token_bucket_without_queue_reads_the_clock_once_per_decision() {
    let manual = ManualClock::new();
    let c = Counting::new(&manual);
    let l = TokenBucketLimiter::without_queue(TokenBucketOptions::new(2, 2, SEC), &c).unwrap();
    script(&l, &manual, &c);
}

#[test]
fn token_bucket_on_its_128_bit_word_reads_the_clock_once_per_decision() {
    // `u32::MAX` tokens refilled every nanosecond do not fit the 64-bit word.
    let manual = ManualClock::new();
    let c = Counting::new(&manual);
    let opts = TokenBucketOptions::new(u32::MAX, u32::MAX, Duration::from_nanos(1));
    let l = TokenBucketLimiter::with_clock(opts, &c).unwrap();
    for n in [1, u32::MAX - 1, 1, 0] {
        acquire_once(&l, &c, n, "wide word");
    }
}

#[test]
fn fixed_window_reads_the_clock_once_per_decision() {
    let manual = ManualClock::new();
    let c = Counting::new(&manual);
    let l = FixedWindowLimiter::with_clock(FixedWindowOptions::new(2, SEC), &c).unwrap();
    script(&l, &manual, &c);
}

#[test]
fn sliding_window_reads_the_clock_once_per_decision() {
    let manual = ManualClock::new();
    let c = Counting::new(&manual);
    // One segment: the window is a tick, as in the script.
    let l = SlidingWindowLimiter::with_clock(SlidingWindowOptions::new(2, SEC, 1), &c).unwrap();
    script(&l, &manual, &c);
}

#[test]
fn sliding_window_behind_earlier_segments_reads_the_clock_once() {
    let manual = ManualClock::new();
    let c = Counting::new(&manual);
    let l = SlidingWindowLimiter::with_clock(SlidingWindowOptions::new(2, SEC, 4), &c).unwrap();
    assert_eq!(acquire_once(&l, &c, 1, "first"), Answer::Granted);
    manual.advance(SEC / 4);
    assert_eq!(acquire_once(&l, &c, 1, "next segment"), Answer::Granted);
    // Denied with permits in an earlier segment: the general path reads the ring.
    assert_eq!(
        acquire_once(&l, &c, 1, "behind"),
        Answer::Refused(Reason::Exhausted)
    );
}

#[test]
fn gcra_reads_the_clock_once_per_decision() {
    let manual = ManualClock::new();
    let c = Counting::new(&manual);
    let l = GcraLimiter::with_clock(GcraOptions::with_period(SEC / 2).with_burst(2), &c).unwrap();
    use Answer::*;
    assert_eq!(acquire_once(&l, &c, 1, "first"), Granted);
    assert_eq!(acquire_once(&l, &c, 1, "quick grant"), Granted);
    assert_eq!(
        acquire_once(&l, &c, 1, "quick denial"),
        Refused(Reason::Exhausted)
    );
    assert_eq!(
        acquire_once(&l, &c, 3, "over the burst"),
        Refused(Reason::ExceedsLimit)
    );
    assert_eq!(acquire_once(&l, &c, 0, "probe"), Refused(Reason::Exhausted));
    manual.advance(SEC);
    assert_eq!(acquire_once(&l, &c, 2, "after a second"), Granted);
    l.close();
    assert_eq!(acquire_once(&l, &c, 1, "closed"), Refused(Reason::Closed));
}
