//! Issue 25: the compact keyed form of the sliding-window counter. Each key of a `KeyedLimiter`
//! built with `sliding_counter` decides exactly as a `SlidingCounterLimiter` of its own would
//! (created with the keyed limiter), decision by decision: grants, RetryAfter, available
//! permits, the limiter's totals, quota, idle duration — through evictions too; in 16-byte slots
//! (about 21 bytes per key of capacity).

use core::time::Duration;

use tollgate::*;

/// A limiter reads its clock up to 2^63 ns after its creation (past it, time reads as stepped
/// back): the comparisons stay below it.
const HORIZON: u64 = 1 << 63;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

type Keyed<'c> = KeyedLimiter<u32, &'c ManualClock>;
type Own<'c> = SlidingCounterLimiter<&'c ManualClock>;

/// The quota the keyed limiter should report for a key whose own counter is `l`: what it holds
/// now, and the wait for one permit more (`None` when full).
fn own_quota(l: &Own<'_>) -> QuotaState {
    let limit = u64::from(l.options().permit_limit);
    let remaining = l.available_permits().min(limit);
    let reset_after = if remaining >= limit {
        None
    } else {
        l.peek(remaining as u32 + 1).unwrap_err().retry_after()
    };
    QuotaState {
        limit,
        remaining,
        reset_after,
    }
}

/// `steps` random requests against random keys of `keyed` and of one counter per key in `own`,
/// the clock advanced between them (about a window per key's turn, and one step in `16 × keys`
/// a gap of up to three windows); every answer compared.
fn compare(clock: &ManualClock, keyed: &Keyed<'_>, own: &[Own<'_>], steps: usize, seed: u64) {
    let limit = keyed.limit();
    let w = keyed.period().as_nanos() as u64;
    let step = (2 * w / own.len() as u64).max(2);
    let (mut ok, mut ko) = (0u64, 0u64);
    let mut rng = Rng(seed);
    for step_no in 0..steps {
        let x = rng.next();
        let advance = if (x >> 44) % (16 * own.len() as u64) == 0 {
            x % w.saturating_mul(3)
        } else {
            x % step
        };
        let left = HORIZON - 1 - clock.now().as_nanos();
        clock.advance(Duration::from_nanos(advance.min(left)));
        let key = (x >> 20) as u32 % own.len() as u32;
        // Mostly small requests, sometimes the whole limit or one more (refused outright).
        let n = match (x >> 30) % 8 {
            0 => limit,
            1 => limit.saturating_add(1),
            _ => (x >> 33) as u32 % limit.min(16).saturating_add(1),
        };
        let a = keyed.try_acquire(&key, n).map(|l| l.permits());
        let b = own[key as usize].try_acquire(n).map(|l| l.permits());
        assert_eq!(a, b, "step {step_no}: key {key}, n {n}");
        if b.is_ok() {
            ok += 1;
        } else {
            ko += 1;
        }
        let k = (x >> 40) as u32 % own.len() as u32;
        let l = &own[k as usize];
        let s = keyed.statistics(&k);
        assert_eq!(s.available_permits, l.available_permits(), "step {step_no}");
        assert_eq!(s.queued_permits, 0);
        assert_eq!(
            (s.total_successful, s.total_failed),
            (ok, ko),
            "step {step_no}"
        );
        assert_eq!(keyed.quota(&k), own_quota(l), "step {step_no}: key {k}");
        if let Some(idle) = keyed.idle_duration(&k) {
            assert_eq!(Some(idle), l.idle_duration(), "step {step_no}: key {k}");
        }
    }
    // The limiter's totals are the sums of the keys' own.
    let own_ok: u64 = own.iter().map(|l| l.statistics().total_successful).sum();
    let own_ko: u64 = own.iter().map(|l| l.statistics().total_failed).sum();
    assert_eq!((ok, ko), (own_ok, own_ko));
}

fn check(
    opts: SlidingCounterOptions,
    config: PartitionConfig,
    keys: usize,
    steps: usize,
    seed: u64,
) {
    let clock = ManualClock::new();
    let keyed = KeyedLimiter::sliding_counter_with_clock(opts, config, &clock).unwrap();
    let own: Vec<_> = (0..keys)
        .map(|_| SlidingCounterLimiter::with_clock(opts, &clock).unwrap())
        .collect();
    compare(&clock, &keyed, &own, steps, seed);
}

#[test]
fn each_key_decides_as_its_own_sliding_counter() {
    for (i, opts) in [
        SlidingCounterOptions::per_second(10),
        SlidingCounterOptions::per_minute(100),
        SlidingCounterOptions::new(3, Duration::from_nanos(1_000)),
        SlidingCounterOptions::new(7, Duration::from_millis(250)),
        SlidingCounterOptions::new(1_000, Duration::from_secs(3_600)),
    ]
    .into_iter()
    .enumerate()
    {
        check(
            opts,
            PartitionConfig::new(64),
            5,
            4_000,
            0x9E37_79B9 + i as u64,
        );
    }
}

#[test]
fn edge_options_decide_as_their_own_counter() {
    let longest = Duration::from_nanos((1 << 62) - 1);
    for (i, opts) in [
        // Limit 1.
        SlidingCounterOptions::per_second(1),
        // The shortest window (2 ns: one permit), and a short one.
        SlidingCounterOptions::new(1, Duration::from_nanos(2)),
        SlidingCounterOptions::new(1, Duration::from_nanos(7)),
        // The largest limit for one second, for one hour, and for the longest window.
        SlidingCounterOptions::per_second(32_767),
        SlidingCounterOptions::new(2_097_151, Duration::from_secs(3_600)),
        SlidingCounterOptions::new((1 << 31) - 1, longest),
    ]
    .into_iter()
    .enumerate()
    {
        check(
            opts,
            PartitionConfig::new(64),
            3,
            3_000,
            0x2545_F491 + i as u64,
        );
    }
}

/// Near the clock's horizon the window index is at its largest: still exact.
#[test]
fn windows_near_the_horizon_are_exact() {
    for (i, opts) in [
        SlidingCounterOptions::new(1, Duration::from_nanos(2)),
        SlidingCounterOptions::new(31, Duration::from_nanos(1_000)),
        SlidingCounterOptions::per_second(32_767),
    ]
    .into_iter()
    .enumerate()
    {
        let clock = ManualClock::new();
        let keyed =
            KeyedLimiter::sliding_counter_with_clock(opts, PartitionConfig::new(16), &clock)
                .unwrap();
        let own: Vec<_> = (0..3)
            .map(|_| SlidingCounterLimiter::with_clock(opts, &clock).unwrap())
            .collect();
        let w = opts.window.as_nanos() as u64;
        clock.advance(Duration::from_nanos(HORIZON - 1 - 600 * w));
        compare(&clock, &keyed, &own, 1_000, 0xC0FF_EE00 + i as u64);
    }
}

/// Keys evicted when idle (both counts expired) come back as fresh counters: nothing changes.
#[test]
fn eviction_of_idle_keys_changes_no_decision() {
    let opts = SlidingCounterOptions::per_second(5);
    let config = PartitionConfig::new(8).with_idle_timeout(Duration::from_millis(300));
    check(opts, config, 8, 6_000, 0x5EED);
    // Many keys, all stored at once, some evicted between their visits.
    let config = PartitionConfig::new(2_000).with_idle_timeout(Duration::from_millis(100));
    check(opts, config, 2_000, 40_000, 0xB16B_00B5);
}

#[test]
fn idle_keys_are_evicted_and_remove_and_close_work() {
    let clock = ManualClock::new();
    let config = PartitionConfig::new(1_000).with_idle_timeout(Duration::from_secs(1));
    let keyed: Keyed<'_> = KeyedLimiter::sliding_counter_with_clock(
        SlidingCounterOptions::per_second(4),
        config,
        &clock,
    )
    .unwrap();
    for k in 0..1_000 {
        assert!(keyed.try_acquire(&k, 4).is_ok());
    }
    assert_eq!(keyed.len(), 1_000);
    assert_eq!(
        keyed.try_acquire(&3, 1).unwrap_err().reason(),
        Reason::Exhausted
    );
    // A new key when full: nothing is idle yet (every estimate is 4).
    assert_eq!(
        keyed.try_acquire(&5_000, 1).unwrap_err().reason(),
        Reason::PartitionsFull
    );
    // Idle from the start of window 2; evicted once idle for longer than the timeout.
    clock.advance(Duration::from_millis(1_500));
    assert_eq!(keyed.idle_duration(&7), None); // window 1: the 4 still weigh
    clock.advance(Duration::from_millis(1_000)); // 2.5 s: idle for 0.5 s
    assert_eq!(keyed.idle_duration(&7), Some(Duration::from_millis(500)));
    keyed.evict_idle();
    assert_eq!(keyed.len(), 1_000);
    clock.advance(Duration::from_millis(600)); // idle for 1.1 s
    keyed.evict_idle();
    assert_eq!(keyed.len(), 0);

    assert!(keyed.try_acquire(&1, 4).is_ok());
    assert!(keyed.try_acquire(&1, 1).is_err());
    assert!(keyed.remove(&1));
    assert!(!keyed.remove(&1));
    assert!(keyed.try_acquire(&1, 4).is_ok()); // fresh again
    keyed.close();
    assert!(keyed.is_closed() && keyed.is_empty());
    assert_eq!(
        keyed.try_acquire(&1, 1).unwrap_err().reason(),
        Reason::Closed
    );
}

/// The memory figure: a 16-byte slot (fingerprint and state in one 128-bit word), `4/3` slots
/// per key of capacity — about 21 bytes per key, the same as the other keyed rules.
#[test]
fn a_keyed_sliding_counter_slot_is_16_bytes() {
    let capacity = 100_000;
    let keyed: KeyedLimiter<u64> = KeyedLimiter::sliding_counter(
        SlidingCounterOptions::per_minute(100),
        PartitionConfig::new(capacity),
    )
    .unwrap();
    let bytes = keyed.table_bytes();
    let slots = bytes / 16;
    assert_eq!(bytes % 16, 0);
    assert!(slots >= capacity + capacity / 3, "{slots}");
    assert!(bytes <= 16 * (capacity + capacity / 3 + 64), "{bytes}");
    let per_key = bytes as f64 / keyed.capacity() as f64;
    assert!(per_key <= 21.5, "{per_key} bytes per key");
    // The same table as the token bucket's.
    let bucket: KeyedLimiter<u64> = KeyedLimiter::token_bucket(
        TokenBucketOptions::new(100, 100, Duration::from_secs(60)),
        PartitionConfig::new(capacity),
    )
    .unwrap();
    assert_eq!(bucket.table_bytes(), bytes);
}

/// Prints the memory figure (`cargo test --test keyed_sliding_counter -- --ignored --nocapture`).
#[test]
#[ignore]
fn print_bytes_per_key() {
    for capacity in [1_000, 100_000, 1_000_000] {
        let keyed: KeyedLimiter<u64> = KeyedLimiter::sliding_counter(
            SlidingCounterOptions::per_second(100),
            PartitionConfig::new(capacity),
        )
        .unwrap();
        println!(
            "capacity {capacity}: {} table bytes, {:.2} bytes per key of capacity, 16 per slot",
            keyed.table_bytes(),
            keyed.table_bytes() as f64 / keyed.capacity() as f64
        );
    }
}

#[test]
fn keyed_sliding_counter_options_are_refused_with_typed_errors() {
    let clock = ManualClock::new();
    let make = |opts| {
        KeyedLimiter::<u32, _>::sliding_counter_with_clock(opts, PartitionConfig::new(8), &clock)
            .map(|_| ())
    };
    assert_eq!(
        make(SlidingCounterOptions::per_second(0)),
        Err(OptionsError::ZeroLimit)
    );
    assert_eq!(
        make(SlidingCounterOptions::new(1, Duration::ZERO)),
        Err(OptionsError::ZeroPeriod)
    );
    assert_eq!(
        make(SlidingCounterOptions::new(1, Duration::from_nanos(1 << 62))),
        Err(OptionsError::PeriodTooLong)
    );
    // The two counts and the window index share 64 bits: the limit is bounded by the window.
    assert_eq!(
        make(SlidingCounterOptions::per_second(32_768)),
        Err(OptionsError::LimitTooLarge { max: 32_767 })
    );
    assert_eq!(
        make(SlidingCounterOptions::per_minute(u32::MAX)),
        Err(OptionsError::LimitTooLarge { max: 262_143 })
    );
    assert_eq!(
        make(SlidingCounterOptions::new(1, Duration::from_nanos(1))),
        Err(OptionsError::WindowTooShort)
    );
    assert_eq!(
        make(SlidingCounterOptions::new(
            1 << 31,
            Duration::from_nanos((1 << 62) - 1)
        )),
        Err(OptionsError::LimitTooLarge { max: (1 << 31) - 1 })
    );
    assert_eq!(make(SlidingCounterOptions::per_second(32_767)), Ok(()));
    assert_eq!(
        make(SlidingCounterOptions::new(1, Duration::from_nanos(2))),
        Ok(())
    );
    // The capacity is checked as for every rule.
    assert_eq!(
        KeyedLimiter::<u32, _>::sliding_counter_with_clock(
            SlidingCounterOptions::per_second(1),
            PartitionConfig::new(usize::MAX),
            &clock
        )
        .unwrap_err(),
        OptionsError::CapacityTooLarge {
            max: KeyedLimiter::<u32>::MAX_CAPACITY
        }
    );
}
