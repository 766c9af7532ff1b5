//! Reconfiguring GCRA, the leaky buckets, the sliding-window counter and the sliding log while
//! they are in use. GCRA and the leaky buckets: every decision follows a
//! plain GCRA model whose parameters switch at the reconfiguration and whose theoretical arrival
//! time carries over; waiters larger than a lowered burst are failed; what is fixed at creation
//! is refused and changes nothing; concurrent reconfigurations never let more through than the
//! larger configuration would.

use std::time::Duration;

use tollgate::{
    GcraLimiter, GcraOptions, LeakyBucketMeter, LeakyBucketOptions, LeakyBucketShaper, Limiter,
    ManualClock, OptionsError, QueueOrder, Reason, ShaperOptions, SlidingCounterLimiter,
    SlidingCounterOptions, SlidingLogLimiter, SlidingLogOptions,
};

const MS: Duration = Duration::from_millis(1);

/// GCRA as a few lines of arithmetic: `tat` is the theoretical arrival time; a request of `n`
/// is admitted when `max(tat, now) + n·interval - now <= burst·interval`.
struct Model {
    tat: u64,
    interval: u64,
    burst: u64,
}

impl Model {
    fn try_take(&mut self, now: u64, n: u64) -> Result<(), u64> {
        let start = self.tat.max(now);
        let next = start + n * self.interval;
        if next - now <= self.burst * self.interval {
            self.tat = next;
            Ok(())
        } else {
            // The wait until `next - later <= burst·interval`.
            Err(next - now - self.burst * self.interval)
        }
    }
}

/// A deterministic pseudo-random walk (xorshift).
fn walk(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

#[test]
fn gcra_decisions_follow_the_model_across_reconfigurations() {
    for seed in [1u64, 7, 42, 1234] {
        let mut next = walk(seed);
        let clock = ManualClock::new();
        let (mut interval, mut burst) = (1_000u64, 5u32);
        let opts = |interval: u64, burst: u32| {
            GcraOptions::with_period(Duration::from_nanos(interval)).with_burst(burst)
        };
        let gcra = GcraLimiter::with_clock(opts(interval, burst), &clock).unwrap();
        let mut model = Model {
            tat: 0,
            interval,
            burst: u64::from(burst),
        };
        let mut now = 0u64;
        for step in 0..4_000 {
            let x = next();
            if x % 97 == 0 {
                interval = 1 + x % 3_000;
                burst = 1 + (x >> 20) as u32 % 12;
                gcra.reconfigure(opts(interval, burst)).unwrap();
                assert_eq!(gcra.options(), opts(interval, burst));
                model.interval = interval;
                model.burst = u64::from(burst);
            }
            let dt = (x >> 8) % 900;
            clock.advance(Duration::from_nanos(dt));
            now += dt;
            let n = 1 + ((x >> 32) as u32) % burst;
            match (gcra.try_acquire(n), model.try_take(now, u64::from(n))) {
                (Ok(lease), Ok(())) => {
                    lease.forget();
                }
                (Err(r), Err(wait)) => {
                    assert_eq!(r.reason(), Reason::Exhausted, "step {step}");
                    assert_eq!(
                        r.retry_after(),
                        Some(Duration::from_nanos(wait)),
                        "step {step}"
                    );
                }
                (ours, theirs) => panic!("step {step}: {ours:?} vs the model's {theirs:?}"),
            }
        }
    }
}

#[test]
fn a_lowered_burst_fails_the_waiters_it_strands_and_serves_the_rest() {
    let clock = ManualClock::new();
    let opts = GcraOptions::with_period(MS)
        .with_burst(4)
        .with_queue(10, QueueOrder::OldestFirst);
    let gcra = GcraLimiter::with_clock(opts, &clock).unwrap();
    gcra.try_acquire(4).unwrap().forget();
    let cx = &mut std::task::Context::from_waker(std::task::Waker::noop());
    use std::future::Future;
    let mut big = Box::pin(gcra.acquire(3));
    let mut small = Box::pin(gcra.acquire(1));
    assert!(big.as_mut().poll(cx).is_pending());
    assert!(small.as_mut().poll(cx).is_pending());
    assert_eq!(gcra.statistics().queued_permits, 4);
    // Burst 2: the waiter of 3 can never be served.
    gcra.reconfigure(opts.with_burst(2)).unwrap();
    match big.as_mut().poll(cx) {
        std::task::Poll::Ready(Err(r)) => assert_eq!(r.reason(), Reason::ExceedsLimit),
        other => panic!("{other:?}"),
    }
    assert!(small.as_mut().poll(cx).is_pending());
    assert_eq!(gcra.statistics().queued_permits, 1);
    clock.advance(4 * MS); // the debt of 4 drains: room for the waiter of 1
    assert!(matches!(
        small.as_mut().poll(cx),
        std::task::Poll::Ready(Ok(_))
    ));
}

#[test]
fn what_is_fixed_at_creation_is_refused_and_changes_nothing() {
    let clock = ManualClock::new();
    let opts = GcraOptions::per_second(10).with_queue(2, QueueOrder::OldestFirst);
    let gcra = GcraLimiter::with_clock(opts, &clock).unwrap();
    gcra.try_acquire(3).unwrap().forget();
    for (new, err) in [
        (
            GcraOptions::per_second(10).with_queue(2, QueueOrder::NewestFirst),
            OptionsError::FixedAtCreation,
        ),
        (GcraOptions::per_second(0), OptionsError::ZeroLimit),
        (
            GcraOptions::with_period(Duration::ZERO),
            OptionsError::ZeroPeriod,
        ),
    ] {
        assert_eq!(gcra.reconfigure(new), Err(err));
        assert_eq!(gcra.options(), opts);
        assert_eq!(gcra.available_permits(), 7);
    }

    let meter_opts = LeakyBucketOptions::new(5, 1, MS);
    let meter = LeakyBucketMeter::with_clock(meter_opts, &clock).unwrap();
    let zero_leak = LeakyBucketOptions::new(5, 0, MS);
    assert_eq!(
        meter.reconfigure(zero_leak),
        Err(OptionsError::ZeroTokensPerPeriod)
    );
    let lifo = meter_opts.with_queue(1, QueueOrder::NewestFirst);
    assert_eq!(meter.reconfigure(lifo), Err(OptionsError::FixedAtCreation));
    assert_eq!(meter.options(), meter_opts);

    let shaper_opts = ShaperOptions::per_second(10);
    let shaper = LeakyBucketShaper::with_clock(shaper_opts, &clock).unwrap();
    let lifo = shaper_opts.with_queue(1, QueueOrder::NewestFirst);
    assert_eq!(shaper.reconfigure(lifo), Err(OptionsError::FixedAtCreation));
    assert_eq!(shaper.options(), shaper_opts);
}

#[test]
fn the_meter_keeps_its_level_and_drains_at_the_new_rate() {
    let clock = ManualClock::new();
    let sec = Duration::from_secs(1);
    let meter = LeakyBucketMeter::with_clock(LeakyBucketOptions::new(10, 1, sec), &clock).unwrap();
    meter.try_acquire(8).unwrap().forget();
    // Leak 4 a second: the level of 8 drains in 2 s.
    let faster = LeakyBucketOptions::new(10, 4, sec);
    meter.reconfigure(faster).unwrap();
    assert_eq!(meter.options(), faster);
    // The level is kept as time owed (8 s at the old rate): after a speed-up the rule can only
    // limit more, until that time has passed.
    assert_eq!(meter.available_permits(), 0);
    // A lower capacity with the old rate: the level of 8 is over 5 until 3 s have drained.
    let meter2 = LeakyBucketMeter::with_clock(LeakyBucketOptions::new(10, 1, sec), &clock).unwrap();
    meter2.try_acquire(8).unwrap().forget();
    meter2
        .reconfigure(LeakyBucketOptions::new(5, 1, sec))
        .unwrap();
    assert!(meter2.try_acquire(1).is_err());
    clock.advance(3 * sec);
    assert_eq!(meter2.available_permits(), 0);
    clock.advance(sec);
    assert_eq!(meter2.available_permits(), 1);
}

#[test]
fn the_shaper_keeps_scheduled_departures_and_spaces_the_next_by_the_new_interval() {
    let clock = ManualClock::new();
    let shaper = LeakyBucketShaper::with_clock(ShaperOptions::per_second(10), &clock).unwrap();
    shaper.try_acquire(1).unwrap().forget(); // next slot at 100 ms
    shaper.reconfigure(ShaperOptions::per_second(4)).unwrap(); // 250 ms apart
    assert_eq!(
        shaper.try_acquire(1).unwrap_err().retry_after(),
        Some(100 * MS)
    );
    clock.advance(100 * MS);
    shaper.try_acquire(1).unwrap().forget();
    assert_eq!(
        shaper.try_acquire(1).unwrap_err().retry_after(),
        Some(250 * MS)
    );
}

/// Four threads take single permits from a stopped clock while a fifth switches the burst
/// between 1,000 and 10 (same interval) over and over: nothing is granted beyond the larger
/// burst, and after the last switch (to 10) at most 10 are available.
#[test]
fn reconfiguring_under_load_never_over_admits() {
    let clock = ManualClock::new();
    let big = GcraOptions::with_period(MS).with_burst(1_000);
    let small = GcraOptions::with_period(MS).with_burst(10);
    let gcra = GcraLimiter::with_clock(big, &clock).unwrap();
    let granted: u32 = std::thread::scope(|s| {
        let takers: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    (0..2_000)
                        .filter(|_| gcra.try_acquire(1).map(|l| l.forget()).is_ok())
                        .count() as u32
                })
            })
            .collect();
        s.spawn(|| {
            for i in 0..200 {
                gcra.reconfigure(if i % 2 == 0 { small } else { big })
                    .unwrap();
            }
            gcra.reconfigure(small).unwrap();
        })
        .join()
        .unwrap();
        takers.into_iter().map(|t| t.join().unwrap()).sum()
    });
    assert!(granted <= 1_000, "{granted} granted");
    assert!(gcra.available_permits() <= 10);
    assert_eq!(gcra.options(), small);
    let s = gcra.statistics();
    assert_eq!(s.total_successful, u64::from(granted));
    assert_eq!(s.total_successful + s.total_failed, 8_000);
}

// ---------------------------------------------------------------------------------------------
// The sliding-window counter and log: the limit changes, the window is fixed.

#[test]
fn the_counter_keeps_its_counts_under_a_new_limit() {
    let clock = ManualClock::new();
    let minute = Duration::from_secs(60);
    let opts = SlidingCounterOptions::new(10, minute);
    let counter = SlidingCounterLimiter::with_clock(opts, &clock).unwrap();
    counter.try_acquire(6).unwrap().forget();
    counter
        .reconfigure(SlidingCounterOptions::new(5, minute))
        .unwrap();
    assert_eq!(counter.options(), SlidingCounterOptions::new(5, minute));
    assert_eq!(counter.available_permits(), 0);
    let denied = counter.try_acquire(1).unwrap_err();
    assert_eq!(denied.reason(), Reason::Exhausted);
    assert_eq!(
        counter.try_acquire(6).unwrap_err().reason(),
        Reason::ExceedsLimit
    );
    // The next window weighs the 6 by the part of it still covered: gone after a full window.
    clock.advance(2 * minute);
    assert_eq!(counter.available_permits(), 5);
    counter
        .reconfigure(SlidingCounterOptions::new(20, minute))
        .unwrap();
    assert_eq!(counter.available_permits(), 20);
    for (bad, err) in [
        (
            SlidingCounterOptions::new(5, 2 * minute),
            OptionsError::FixedAtCreation,
        ),
        (
            SlidingCounterOptions::new(0, minute),
            OptionsError::ZeroLimit,
        ),
    ] {
        assert_eq!(counter.reconfigure(bad), Err(err));
        assert_eq!(counter.options().permit_limit, 20);
    }
}

/// The log's guarantee holds across reconfigurations: at every admission, the admissions in
/// the rolling window ending there (itself included) are at most the limit in force.
#[test]
fn the_log_never_lets_a_window_hold_more_than_the_limit_in_force() {
    for seed in [3u64, 5, 99] {
        let mut next = walk(seed);
        let clock = ManualClock::new();
        let window = 1_000u64;
        let opts = |limit| SlidingLogOptions::new(limit, Duration::from_nanos(window));
        let log = SlidingLogLimiter::<_, 16>::with_capacity(opts(8), &clock).unwrap();
        let mut limit = 8u32;
        let mut admitted: Vec<u64> = Vec::new();
        let mut now = 0u64;
        for step in 0..5_000 {
            let x = next();
            if x % 61 == 0 {
                limit = 1 + (x >> 12) as u32 % 16;
                log.reconfigure(opts(limit)).unwrap();
            }
            let dt = (x >> 4) % 150;
            clock.advance(Duration::from_nanos(dt));
            now += dt;
            let n = 1 + (x >> 40) as u32 % limit;
            if let Ok(lease) = log.try_acquire(n) {
                lease.forget();
                admitted.extend(std::iter::repeat_n(now, n as usize));
                let in_window = admitted.iter().filter(|&&t| t + window > now).count();
                assert!(
                    in_window <= limit as usize,
                    "step {step}: {in_window} in the window, limit {limit}"
                );
            }
        }
        assert_eq!(
            log.reconfigure(opts(17)),
            Err(OptionsError::ExceedsCapacity { max: 16 })
        );
        assert_eq!(
            log.reconfigure(SlidingLogOptions::new(4, Duration::from_nanos(2 * window))),
            Err(OptionsError::FixedAtCreation)
        );
        assert_eq!(log.options(), opts(limit));
    }
}
