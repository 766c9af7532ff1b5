//! The worked examples of the two algorithm articles (seeds 001 and 002) and the trade-offs
//! between the algorithms of issue 15, on a `ManualClock`.

mod common;

use core::time::Duration;

use common::Task;
use tollgate::{
    FixedWindowLimiter, FixedWindowOptions, GcraLimiter, GcraOptions, LeakyBucketMeter,
    LeakyBucketOptions, LeakyBucketShaper, Limiter, ManualClock, OptionsError, QueueOrder, Reason,
    Replenishing, ShaperOptions, SlidingCounterLimiter, SlidingCounterOptions, SlidingLogLimiter,
    SlidingLogOptions, TokenBucketLimiter, TokenBucketOptions,
};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);
const MIN: Duration = Duration::from_secs(60);

fn take(l: &impl Limiter, n: u32) -> bool {
    l.try_acquire(n).is_ok()
}

// ---------------------------------------------------------------------------------------------
// Article 001

/// 001 §1.1: 100 requests at 0:59 and 100 at 1:00 pass a fixed window of 100 per minute — 200
/// in one second. The sliding log refuses the second hundred; the sliding counter refuses all
/// but what the previous window's weight leaves.
#[test]
fn article_001_fixed_window_boundary_burst() {
    let clock = ManualClock::new();
    let fixed = FixedWindowLimiter::with_clock(FixedWindowOptions::new(100, MIN), &clock).unwrap();
    let log: SlidingLogLimiter<_, 100> =
        SlidingLogLimiter::with_capacity(SlidingLogOptions::per_minute(100), &clock).unwrap();
    let counter =
        SlidingCounterLimiter::with_clock(SlidingCounterOptions::per_minute(100), &clock).unwrap();
    clock.advance(Duration::from_secs(59));
    assert!(take(&fixed, 100) && take(&log, 100) && take(&counter, 100));
    clock.advance(SEC); // 1:00
    assert!(take(&fixed, 100), "the fixed window's boundary burst");
    assert!(
        !take(&log, 1),
        "the log counts the last rolling minute exactly"
    );
    // 1:00 is the start of the counter's second window: the previous 100 weigh fully.
    assert!(!take(&counter, 1));
    assert_eq!(
        log.try_acquire(1).unwrap_err().retry_after(),
        Some(Duration::from_secs(59))
    );
}

/// 001 §1.2: the estimate is `previous count · (1 - elapsed fraction) + current count`. (The
/// article's own state — 9 then 5, 11.75 at 01:15 — is asserted on the pure state in
/// `src/sliding_counter/state.rs`; with a limit of 10 that state cannot be reached by admitted
/// requests, so here the same arithmetic is followed through the public API.)
#[test]
fn article_001_sliding_counter_estimate() {
    let clock = ManualClock::new();
    let counter =
        SlidingCounterLimiter::with_clock(SlidingCounterOptions::per_minute(10), &clock).unwrap();
    assert!(take(&counter, 9)); // 9 in [00:00, 00:01)
    clock.advance(MIN); // 01:00: the 9 weigh fully
    assert_eq!(counter.available_permits(), 1);
    assert!(take(&counter, 1));
    clock.advance(Duration::from_secs(15)); // 01:15: 9 · 0.75 + 1 = 7.75
    assert_eq!(counter.available_permits(), 2);
    assert!(take(&counter, 2)); // 9.75
    let denied = counter.try_acquire(1).unwrap_err();
    // 9 · (1 - x) + 3 + 1 ≤ 10 from x = 1/3: 01:20, five seconds on.
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(5)));
    clock.advance(Duration::from_secs(5) - Duration::from_nanos(1));
    assert!(!take(&counter, 1));
    clock.advance(Duration::from_nanos(1));
    assert!(take(&counter, 1));
}

/// 001 §1.2, checked against the article's middleware: a request is admitted when
/// `prev · (1 - elapsed / window) + cur + 1 ≤ limit`, windows advance by whole windows, and two
/// windows of silence reset both counts.
#[test]
fn article_001_middleware_semantics() {
    let clock = ManualClock::new();
    let counter =
        SlidingCounterLimiter::with_clock(SlidingCounterOptions::new(10, MIN), &clock).unwrap();
    assert!(take(&counter, 10));
    assert!(!take(&counter, 1));
    clock.advance(Duration::from_secs(90)); // 10 · 0.5 = 5 in the estimate
    assert_eq!(counter.available_permits(), 5);
    clock.advance(Duration::from_secs(30)); // two windows since: both counts gone
    assert_eq!(counter.available_permits(), 10);
    assert_eq!(counter.idle_duration(), Some(Duration::ZERO));
}

// ---------------------------------------------------------------------------------------------
// Article 002

/// 002 §1, token bucket: 2500 ms elapsed with a 1000 ms refill interval is two cycles, and the
/// remaining 500 ms count towards the next (no drift): the third cycle lands at 3000 ms.
#[test]
fn article_002_token_bucket_keeps_the_remainder() {
    let clock = ManualClock::new();
    let bucket =
        TokenBucketLimiter::with_clock(TokenBucketOptions::new(10, 1, SEC), &clock).unwrap();
    assert!(take(&bucket, 10));
    clock.advance(Duration::from_millis(2500));
    assert_eq!(bucket.available_permits(), 2);
    assert!(take(&bucket, 2));
    clock.advance(Duration::from_millis(500)); // 3000 ms: the third cycle
    assert_eq!(bucket.available_permits(), 1);
}

/// 002 §2, leaky bucket: water drains continuously at `outflow / leakInterval`; a request is
/// admitted if one more unit fits under the capacity. Capacity 5, 1 unit per 100 ms.
#[test]
fn article_002_leaky_bucket_meter() {
    let clock = ManualClock::new();
    let meter = LeakyBucketMeter::with_clock(
        LeakyBucketOptions::new(5, 1, Duration::from_millis(100)),
        &clock,
    )
    .unwrap();
    for _ in 0..5 {
        assert!(take(&meter, 1));
    }
    assert!(!take(&meter, 1), "overflow");
    // 150 ms drain 1.5 units: one fits, the level is then 4.5.
    clock.advance(Duration::from_millis(150));
    assert_eq!(meter.available_permits(), 1);
    assert!(take(&meter, 1));
    let denied = meter.try_acquire(1).unwrap_err();
    assert_eq!(denied.reason(), Reason::Exhausted);
    assert_eq!(denied.retry_after(), Some(Duration::from_millis(50)));
    // Empty after the level has drained: 4.5 units, 450 ms.
    clock.advance(Duration::from_millis(450));
    assert_eq!(meter.available_permits(), 5);
    assert_eq!(meter.idle_duration(), Some(Duration::ZERO));
    clock.advance(SEC);
    assert_eq!(meter.idle_duration(), Some(SEC));
}

/// 002 §2, "Smooths traffic": the shaper turns a burst of 8 into departures one every 100 ms,
/// each waiter completing exactly at its slot; the queue bounds the backlog.
#[test]
fn article_002_leaky_bucket_shaper_smooths_a_burst() {
    let clock = ManualClock::new();
    let shaper = LeakyBucketShaper::with_clock(
        ShaperOptions::per_second(10).with_queue(6, QueueOrder::OldestFirst),
        &clock,
    )
    .unwrap();
    assert!(take(&shaper, 1)); // departs at 0
    let mut waiting: Vec<_> = (0..7).map(|_| Task::new(shaper.acquire(1))).collect();
    for t in &mut waiting[..6] {
        t.pending();
    }
    // The seventh does not fit the queue of 6.
    assert_eq!(waiting[6].ready().unwrap_err().reason(), Reason::QueueFull);
    assert_eq!(shaper.statistics().queued_permits, 6);
    // try_acquire never jumps the queue, and says when its slot would be: after the six.
    let refused = shaper.try_acquire(1).unwrap_err();
    assert_eq!(refused.retry_after(), Some(Duration::from_millis(700)));
    let mut departures = Vec::new();
    for step in 1..=650u64 {
        clock.advance(MS);
        if shaper.next_service() == Some(Duration::ZERO) {
            shaper.replenish();
        }
        for (i, t) in waiting[..6].iter_mut().enumerate() {
            if t.woken() > 0 && !departures.iter().any(|(j, _)| *j == i) {
                assert!(t.ready().is_ok());
                departures.push((i, step));
            }
        }
    }
    let expected: Vec<_> = (0..6).map(|i| (i, 100 * (i as u64 + 1))).collect();
    assert_eq!(departures, expected, "one departure every 100 ms, in order");
    // Never two at once: the next slot is at 700 ms, and only one request takes it.
    assert!(!take(&shaper, 1));
    clock.advance(50 * MS);
    assert!(take(&shaper, 1));
    assert!(!take(&shaper, 1));
}

/// 002 §3, fixed window: 100 at 12:00:59 and 100 at 12:01:01 is 200 in two seconds.
#[test]
fn article_002_fixed_window_boundary() {
    let clock = ManualClock::new();
    let fixed = FixedWindowLimiter::with_clock(FixedWindowOptions::new(100, MIN), &clock).unwrap();
    let gcra = GcraLimiter::with_clock(GcraOptions::per_minute(100), &clock).unwrap();
    clock.advance(Duration::from_secs(59));
    assert!(take(&fixed, 100) && take(&gcra, 100));
    clock.advance(Duration::from_secs(2));
    assert!(take(&fixed, 100));
    // GCRA gives back one permit every 600 ms: 3 in the two seconds (at 600, 1200, 1800 ms).
    assert_eq!(gcra.available_permits(), 3);
}

/// 002 §4, sliding log: "max 5 failed login attempts per minute", exactly, over any rolling
/// minute, and its memory is the ring.
#[test]
fn article_002_sliding_log_logins() {
    let clock = ManualClock::new();
    let logins: SlidingLogLimiter<_, 5> =
        SlidingLogLimiter::with_capacity(SlidingLogOptions::per_minute(5), &clock).unwrap();
    assert_eq!(logins.ring_bytes(), 80);
    for s in [0, 5, 20, 21, 58] {
        clock.advance(Duration::from_secs(s) - elapsed(&clock));
        assert!(take(&logins, 1), "attempt at {s} s");
    }
    clock.advance(Duration::from_secs(1)); // 59 s
    let denied = logins.try_acquire(1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(SEC)); // the attempt at 0 s leaves at 60 s
    clock.advance(SEC);
    assert!(take(&logins, 1));
    assert!(!take(&logins, 1));
    assert_eq!(logins.statistics().total_successful, 6);
    assert_eq!(logins.statistics().total_failed, 2);
    // A limit beyond the ring is refused at construction, not truncated.
    let too_big =
        SlidingLogLimiter::<_, 5>::with_capacity(SlidingLogOptions::per_minute(6), &clock);
    assert_eq!(
        too_big.unwrap_err(),
        OptionsError::ExceedsCapacity { max: 5 }
    );
}

fn elapsed(clock: &ManualClock) -> Duration {
    use tollgate::Clock;
    Duration::from_nanos(clock.now().as_nanos())
}

/// 002's rules table: a premium user's token bucket of 1000 refilled 10 per 100 ms.
#[test]
fn article_002_premium_rule() {
    let clock = ManualClock::new();
    let premium =
        TokenBucketLimiter::with_clock(TokenBucketOptions::new(1000, 10, 100 * MS), &clock)
            .unwrap();
    assert!(take(&premium, 1000));
    clock.advance(SEC);
    assert_eq!(premium.available_permits(), 100);
}

// ---------------------------------------------------------------------------------------------
// The trade-offs, side by side

/// The meter and GCRA are one algorithm: on the same trace they admit exactly the same requests.
#[test]
fn meter_and_gcra_agree() {
    let clock = ManualClock::new();
    let meter = LeakyBucketMeter::with_clock(LeakyBucketOptions::new(7, 3, SEC), &clock).unwrap();
    let gcra = GcraLimiter::with_clock(GcraOptions::per_second(3).with_burst(7), &clock).unwrap();
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for _ in 0..2_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        clock.advance(Duration::from_millis(x % 400));
        let n = (x >> 20) as u32 % 8;
        let a = meter
            .try_acquire(n)
            .map(|_| ())
            .map_err(|r| r.retry_after());
        let b = gcra.try_acquire(n).map(|_| ()).map_err(|r| r.retry_after());
        assert_eq!(a, b);
        assert_eq!(meter.available_permits(), gcra.available_permits());
    }
}

/// The sliding counter's error bound: when the previous window's permits all came at its very
/// end, a rolling window can hold up to `2 · limit - 1`; the exact log never more than `limit`.
#[test]
fn sliding_counter_error_bound_against_the_log() {
    let clock = ManualClock::new();
    let limit = 10;
    let counter =
        SlidingCounterLimiter::with_clock(SlidingCounterOptions::per_minute(limit), &clock)
            .unwrap();
    let log: SlidingLogLimiter<_, 10> =
        SlidingLogLimiter::with_capacity(SlidingLogOptions::per_minute(limit), &clock).unwrap();
    clock.advance(Duration::from_millis(59_999));
    assert!(take(&counter, limit) && take(&log, limit)); // all at the end of window 0
                                                         // Late in window 1 (at 1:59.990) the previous 10 weigh 0.017 %: nine more pass the counter.
    clock.advance(Duration::from_millis(59_991));
    let mut admitted = 0;
    while take(&counter, 1) {
        admitted += 1;
    }
    assert_eq!(
        admitted, 9,
        "10 + 9 = 2 · limit - 1 in the last rolling minute"
    );
    // ...while the exact log, whose 10 are still inside the rolling minute, admits none.
    assert!(!take(&log, 1));
}

/// Idle spells: GCRA and the meter bank up to their burst; the shaper banks nothing.
#[test]
fn bursts_after_idle() {
    let clock = ManualClock::new();
    let gcra = GcraLimiter::with_clock(GcraOptions::per_second(10).with_burst(5), &clock).unwrap();
    let shaper = LeakyBucketShaper::with_clock(ShaperOptions::per_second(10), &clock).unwrap();
    clock.advance(Duration::from_secs(3600));
    let mut g = 0;
    let mut s = 0;
    for _ in 0..10 {
        g += u32::from(take(&gcra, 1));
        s += u32::from(take(&shaper, 1));
    }
    assert_eq!((g, s), (5, 1));
}

/// Closing rejects later requests and every queued waiter; statistics count both.
#[test]
fn close_and_statistics() {
    let clock = ManualClock::new();
    let gcra = GcraLimiter::with_clock(
        GcraOptions::per_second(1).with_queue(2, QueueOrder::OldestFirst),
        &clock,
    )
    .unwrap();
    assert!(take(&gcra, 1));
    let mut w = Task::new(gcra.acquire(1));
    w.pending();
    gcra.close();
    assert_eq!(w.ready().unwrap_err().reason(), Reason::Closed);
    assert_eq!(gcra.try_acquire(1).unwrap_err().reason(), Reason::Closed);
    assert!(gcra.is_closed());
    let st = gcra.statistics();
    assert_eq!((st.total_successful, st.total_failed), (1, 2));

    let counter =
        SlidingCounterLimiter::with_clock(SlidingCounterOptions::per_second(1), &clock).unwrap();
    counter.close();
    assert_eq!(counter.try_acquire(1).unwrap_err().reason(), Reason::Closed);
    let log: SlidingLogLimiter<_, 1> =
        SlidingLogLimiter::with_capacity(SlidingLogOptions::per_second(1), &clock).unwrap();
    log.close();
    assert_eq!(log.try_acquire(1).unwrap_err().reason(), Reason::Closed);
    assert!(counter.is_closed() && log.is_closed());
}

/// Oversized requests are typed rejections on every new limiter; bad options are typed errors.
#[test]
fn bad_input_is_typed() {
    let clock = ManualClock::new();
    let gcra = GcraLimiter::with_clock(GcraOptions::per_second(3), &clock).unwrap();
    let meter = LeakyBucketMeter::with_clock(LeakyBucketOptions::new(3, 1, SEC), &clock).unwrap();
    let shaper = LeakyBucketShaper::with_clock(ShaperOptions::per_second(3), &clock).unwrap();
    let counter =
        SlidingCounterLimiter::with_clock(SlidingCounterOptions::per_second(3), &clock).unwrap();
    let log: SlidingLogLimiter<_, 3> =
        SlidingLogLimiter::with_capacity(SlidingLogOptions::per_second(3), &clock).unwrap();
    let all: [&dyn Limiter; 5] = [&gcra, &meter, &shaper, &counter, &log];
    for l in all {
        assert_eq!(
            l.try_acquire(u32::MAX).unwrap_err().reason(),
            Reason::ExceedsLimit
        );
        assert!(l.try_acquire(0).is_ok(), "a probe of a fresh limiter");
    }
    let mut big = Task::new(shaper.acquire(2));
    assert_eq!(big.ready().unwrap_err().reason(), Reason::ExceedsLimit);
    assert_eq!(
        GcraLimiter::with_clock(GcraOptions::with_period(Duration::MAX), &clock).unwrap_err(),
        OptionsError::PeriodTooLong
    );
    assert_eq!(
        GcraLimiter::with_clock(
            GcraOptions::with_period(Duration::from_secs(1 << 30)).with_burst(u32::MAX),
            &clock
        )
        .unwrap_err(),
        OptionsError::PeriodTooLong
    );
    assert_eq!(
        LeakyBucketShaper::with_clock(ShaperOptions::per_second(0), &clock).unwrap_err(),
        OptionsError::ZeroLimit
    );
}

/// A clock that steps backwards never makes a limiter more lenient; a huge idle gap reads as a
/// fresh limiter.
#[test]
fn clock_edges() {
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(100));
    let gcra = GcraLimiter::with_clock(GcraOptions::per_second(2), &clock).unwrap();
    let counter =
        SlidingCounterLimiter::with_clock(SlidingCounterOptions::per_second(2), &clock).unwrap();
    let log: SlidingLogLimiter<_, 2> =
        SlidingLogLimiter::with_capacity(SlidingLogOptions::per_second(2), &clock).unwrap();
    let all: [&dyn Limiter; 3] = [&gcra, &counter, &log];
    for l in all {
        assert!(l.try_acquire(2).is_ok());
    }
    clock.set(tollgate::Instant::from_nanos(1)); // before their creation
    for l in all {
        assert!(l.try_acquire(1).is_err());
    }
    clock.set(tollgate::Instant::from_nanos(100_000_000_000 + (1 << 62)));
    for l in all {
        assert!(l.try_acquire(2).is_ok(), "146 years later");
    }
}

/// fuzz reproducer `sliding_log-horizon-edge` (formerly `fuzz/known-failures/`): 5 taken at
/// creation, a probe at 2^63 − 1 ns (the last forward instant: the entries have left the window),
/// then a reading before creation (`u64::MAX` for a limiter created at 0: past the horizon, a
/// step back). Probes, denials, reads and `replenish` date nothing, so the log acts at its newest
/// entry's time, where the 5 still count: the step back limits more, never less. The library
/// used to expire the entries at the probe and report 5 free (and admit 5 more at time 0).
#[test]
fn sliding_log_a_probe_past_the_window_does_not_date_the_log() {
    let clock = ManualClock::new();
    let log: SlidingLogLimiter<_, 8> =
        SlidingLogLimiter::with_capacity(SlidingLogOptions::per_minute(5), &clock).unwrap();
    assert!(take(&log, 5));
    clock.set(tollgate::Instant::from_nanos((1 << 63) - 1));
    assert_eq!(log.available_permits(), 5);
    assert!(log.try_acquire(0).is_ok());
    assert_eq!(log.replenish(), 5);
    clock.set(tollgate::Instant::from_nanos(u64::MAX));
    assert_eq!(log.available_permits(), 0);
    let denied = log.try_acquire(5).unwrap_err();
    assert_eq!(denied.reason(), Reason::Exhausted);
    assert_eq!(denied.retry_after(), Some(MIN));
    // An admission at the last forward instant dates the log there: a step back then acts at it.
    clock.set(tollgate::Instant::from_nanos((1 << 63) - 1));
    assert!(take(&log, 5));
    clock.set(tollgate::Instant::from_nanos(u64::MAX));
    assert_eq!(log.available_permits(), 0);
}

/// Issue 15's limiters as `static`s (firmware: shared by thread code and interrupt handlers),
/// built by their `at_epoch` constant constructors: time counts from the clock's epoch, not from
/// a reading at creation.
#[test]
fn static_limiters_count_from_the_epoch() {
    use tollgate::Instant;

    static CLOCK: ManualClock = ManualClock::new();
    static GCRA: GcraLimiter<&ManualClock> =
        GcraLimiter::at_epoch(GcraOptions::per_second(2), &CLOCK);
    static METER: LeakyBucketMeter<&ManualClock> =
        LeakyBucketMeter::at_epoch(LeakyBucketOptions::new(2, 2, SEC), &CLOCK);
    static SHAPER: LeakyBucketShaper<&ManualClock> =
        LeakyBucketShaper::at_epoch(ShaperOptions::per_second(2), &CLOCK);
    static COUNTER: SlidingCounterLimiter<&ManualClock> =
        SlidingCounterLimiter::at_epoch(SlidingCounterOptions::per_second(2), &CLOCK);
    static LOG: SlidingLogLimiter<&ManualClock, 2> =
        SlidingLogLimiter::at_epoch(SlidingLogOptions::per_second(2), &CLOCK);

    // Each is built as if at the epoch: 10 s after it, whatever was idle is full.
    CLOCK.set(Instant::from_nanos(10_000_000_000));
    let rate: [&dyn Limiter; 4] = [&GCRA, &METER, &COUNTER, &LOG];
    for l in rate {
        assert!(l.try_acquire(2).is_ok());
        let no = l.try_acquire(1).unwrap_err();
        assert_eq!(no.reason(), Reason::Exhausted);
        assert!(no.retry_after().is_some());
        assert_eq!(l.idle_duration(), None);
    }
    assert!(take(&SHAPER, 1));
    assert_eq!(
        SHAPER.try_acquire(1).unwrap_err().retry_after(),
        Some(Duration::from_millis(500))
    );
    // The sliding counter's windows are aligned to the epoch: at 11.5 s, the 2 permits of the
    // window from 10 s to 11 s weigh half: 1.
    CLOCK.advance(Duration::from_millis(1_500));
    assert_eq!(COUNTER.available_permits(), 1);
    assert_eq!(LOG.available_permits(), 2);
    assert_eq!(GCRA.available_permits(), 2);
    assert_eq!(METER.options().capacity, 2);
}
