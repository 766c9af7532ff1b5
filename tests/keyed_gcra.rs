//! Issue 25: the compact keyed form of GCRA and the leaky meter. Each key of a `KeyedLimiter`
//! built with `gcra` / `leaky_meter` decides exactly as a `GcraLimiter` / `LeakyBucketMeter` of
//! its own would (created with the keyed limiter), decision by decision: grants, RetryAfter,
//! available permits, quota, idle duration; in 16 bytes a key.

use core::time::Duration;

use tollgate::*;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn compare<L: Limiter + Quota>(
    clock: &ManualClock,
    keyed: &KeyedLimiter<u32, &ManualClock>,
    own: &[L],
    burst: u32,
    step_ns: u64,
    seed: u64,
) {
    let mut rng = Rng(seed);
    for step in 0..4_000 {
        let x = rng.next();
        clock.advance(Duration::from_nanos(x % step_ns));
        let key = (x >> 20) as u32 % own.len() as u32;
        let n = (x >> 30) as u32 % (burst + 2);
        let a = keyed.try_acquire(&key, n).map(|l| l.permits());
        let b = own[key as usize].try_acquire(n).map(|l| l.permits());
        assert_eq!(a, b, "step {step}: key {key}, n {n}");
        let k = (x >> 40) as u32 % own.len() as u32;
        let l = &own[k as usize];
        assert_eq!(
            keyed.statistics(&k).available_permits,
            l.available_permits(),
            "step {step}"
        );
        assert_eq!(keyed.quota(&k), l.quota(), "step {step}: key {k}");
        if let Some(idle) = keyed.idle_duration(&k) {
            assert_eq!(Some(idle), l.idle_duration(), "step {step}: key {k}");
        }
    }
}

#[test]
fn each_key_decides_as_its_own_gcra_limiter() {
    for (i, opts) in [
        GcraOptions::per_second(10),
        GcraOptions::with_period(Duration::from_nanos(7)).with_burst(3),
        GcraOptions::with_period(Duration::from_millis(250)),
        GcraOptions::per(Duration::from_secs(60), 100),
    ]
    .into_iter()
    .enumerate()
    {
        let clock = ManualClock::new();
        let keyed = KeyedLimiter::gcra_with_clock(opts, PartitionConfig::new(64), &clock).unwrap();
        let own: Vec<_> = (0..5)
            .map(|_| GcraLimiter::with_clock(opts, &clock).unwrap())
            .collect();
        let step = opts.interval.as_nanos() as u64 * 2 + 1;
        compare(
            &clock,
            &keyed,
            &own,
            opts.burst,
            step,
            0x9E37_79B9 + i as u64,
        );
    }
}

#[test]
fn each_key_decides_as_its_own_leaky_meter() {
    for (i, opts) in [
        LeakyBucketOptions::new(4, 1, Duration::from_secs(1)),
        LeakyBucketOptions::new(10, 3, Duration::from_millis(100)),
        LeakyBucketOptions::new(1, 1, Duration::from_nanos(5)),
    ]
    .into_iter()
    .enumerate()
    {
        let clock = ManualClock::new();
        let keyed =
            KeyedLimiter::leaky_meter_with_clock(opts, PartitionConfig::new(64), &clock).unwrap();
        let own: Vec<_> = (0..5)
            .map(|_| LeakyBucketMeter::with_clock(opts, &clock).unwrap())
            .collect();
        let step = opts.leak_interval.as_nanos() as u64 + 1;
        compare(
            &clock,
            &keyed,
            &own,
            opts.capacity,
            step,
            0x2545_F491 + i as u64,
        );
    }
}

#[test]
fn a_keyed_gcra_slot_is_16_bytes_and_idle_keys_are_evicted() {
    let clock = ManualClock::new();
    let config = PartitionConfig::new(1_000).with_idle_timeout(Duration::from_secs(1));
    let keyed: KeyedLimiter<u32, _> =
        KeyedLimiter::gcra_with_clock(GcraOptions::per_second(10), config, &clock).unwrap();
    for k in 0..1_000 {
        assert!(keyed.try_acquire(&k, 1).is_ok());
    }
    assert_eq!(keyed.len(), 1_000);
    // 16-byte slots, a third more than the capacity (open addressing at most 3/4 full).
    assert!(
        keyed.table_bytes() <= 16 * (1_000 + 1_000 / 3 + 64),
        "{}",
        keyed.table_bytes()
    );
    clock.advance(Duration::from_secs(2));
    keyed.evict_idle();
    assert_eq!(keyed.len(), 0);
}

#[test]
fn keyed_gcra_options_are_validated() {
    let clock = ManualClock::new();
    assert_eq!(
        KeyedLimiter::<u32, _>::gcra_with_clock(
            GcraOptions::per_second(0),
            PartitionConfig::new(8),
            &clock
        )
        .unwrap_err(),
        OptionsError::ZeroLimit
    );
    let opts = LeakyBucketOptions::new(4, 0, Duration::from_secs(1));
    assert_eq!(
        KeyedLimiter::<u32, _>::leaky_meter_with_clock(opts, PartitionConfig::new(8), &clock)
            .unwrap_err(),
        OptionsError::ZeroTokensPerPeriod
    );
}
