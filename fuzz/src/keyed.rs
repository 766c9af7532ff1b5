//! The compact keyed forms against a full limiter per key: a `KeyedLimiter` of a token bucket,
//! fixed window, GCRA, leaky meter or sliding counter must answer every key exactly as that
//! key's own limiter (made with the keyed limiter, on the same clock) answers — grants,
//! rejections with their RetryAfter, available permits, quota and idle duration — whatever the
//! requests, keys and clock steps. The full limiters are themselves fuzzed against their
//! reference models, so this closes the chain for the keyed forms.
//!
//! The input's bytes: `[kind, limit lo, limit hi, per, period (4 bytes, LE), keys]`, then
//! operations of 4 bytes each: `[key, n, advance lo, advance hi]`, the clock advanced by
//! `advance × scale` ns before the request (`scale` = the period / 1024, at least 1), so that
//! any input walks through whole periods.

use core::time::Duration;

use tollgate::{
    Clock, FixedWindowOptions, GcraOptions, KeyedLimiter, LeakyBucketOptions, Limiter, ManualClock,
    OptionsError, PartitionConfig, Peek, Quota, QuotaState, SlidingCounterLimiter,
    SlidingCounterOptions, TokenBucketOptions,
};

/// A limiter reads its clock up to 2^63 ns after creation: the scenario stays below it.
const HORIZON: u64 = 1 << 63;

/// A key's own limiter, seen through what the comparison asks of it.
trait Own: Peek + Quota {}
impl<L: Peek + Quota> Own for L {}

/// Builds the keyed limiter of `kind` and one full limiter per key, or `None` for options the
/// keyed form refuses (they must then be refused with a typed error, which is checked).
#[allow(clippy::type_complexity)]
fn build<'c>(
    kind: u8,
    limit: u32,
    per: u32,
    period: Duration,
    keys: usize,
    clock: &'c ManualClock,
) -> Option<(KeyedLimiter<u8, &'c ManualClock>, Vec<Box<dyn Own + 'c>>)> {
    let config = PartitionConfig::new(16);
    macro_rules! pair {
        ($opts:expr, $keyed:ident, $own:ty) => {{
            let opts = $opts;
            let keyed = match KeyedLimiter::$keyed(opts, config, clock) {
                Ok(k) => k,
                Err(e) => {
                    // Refused: a typed error, and never for options a full limiter takes
                    // unless the keyed form's word cannot hold them.
                    assert!(
                        <$own>::with_clock(opts, clock).is_err()
                            || matches!(
                                e,
                                OptionsError::LimitTooLarge { .. } | OptionsError::RateTooHigh
                            ),
                        "{opts:?}: keyed refused with {e:?}"
                    );
                    return None;
                }
            };
            let own = (0..keys)
                .map(|_| Box::new(<$own>::with_clock(opts, clock).unwrap()) as Box<dyn Own + 'c>)
                .collect();
            Some((keyed, own))
        }};
    }
    match kind % 5 {
        0 => pair!(
            TokenBucketOptions::new(limit, per.clamp(1, limit), period),
            token_bucket_with_clock,
            tollgate::TokenBucketLimiter<&'c ManualClock>
        ),
        1 => pair!(
            FixedWindowOptions::new(limit, period),
            fixed_window_with_clock,
            tollgate::FixedWindowLimiter<&'c ManualClock>
        ),
        2 => pair!(
            GcraOptions::per(period, limit),
            gcra_with_clock,
            tollgate::GcraLimiter<&'c ManualClock>
        ),
        3 => pair!(
            LeakyBucketOptions::new(limit, per.max(1), period),
            leaky_meter_with_clock,
            tollgate::LeakyBucketMeter<&'c ManualClock>
        ),
        _ => pair!(
            SlidingCounterOptions::new(limit, period),
            sliding_counter_with_clock,
            SlidingCounterLimiter<&'c ManualClock>
        ),
    }
}

/// The quota a key whose own limiter is `l` should report: `l`'s own.
fn own_quota(l: &dyn Own) -> QuotaState {
    l.quota()
}

/// Runs one scenario; panics (with the step) on the first difference. `false` if the input
/// is too short or its options are refused (and the refusal was checked).
pub fn run(data: &[u8]) -> bool {
    if data.len() < 9 {
        return false;
    }
    let kind = data[0];
    let limit = u32::from(u16::from_le_bytes([data[1], data[2]])).max(1);
    let per = u32::from(data[3]);
    let period_ns = u64::from(u32::from_le_bytes([data[4], data[5], data[6], data[7]])).max(2);
    let keys = usize::from(data[8] % 8) + 1;
    let clock = ManualClock::new();
    let Some((keyed, own)) = build(
        kind,
        limit,
        per,
        Duration::from_nanos(period_ns),
        keys,
        &clock,
    ) else {
        return false;
    };
    let scale = (period_ns / 1024).max(1);
    for (step, op) in data[9..].chunks_exact(4).enumerate() {
        let key = op[0] % keys as u8;
        let n = match op[1] {
            255 => limit.saturating_add(1),
            254 => limit,
            x => u32::from(x) % limit.min(16).saturating_add(1),
        };
        let advance = u64::from(u16::from_le_bytes([op[2], op[3]])) * scale;
        let left = HORIZON - 1 - clock.now().as_nanos();
        clock.advance(Duration::from_nanos(advance.min(left)));
        let l = &own[usize::from(key)];
        let a = keyed.try_acquire(&key, n).map(|l| l.permits());
        let b = l.try_acquire(n).map(|l| l.permits());
        assert_eq!(a, b, "step {step}: key {key}, n {n}");
        assert_eq!(
            keyed.statistics(&key).available_permits,
            l.available_permits(),
            "step {step}: key {key}"
        );
        assert_eq!(keyed.quota(&key), own_quota(&**l), "step {step}: key {key}");
        if let Some(idle) = keyed.idle_duration(&key) {
            assert_eq!(Some(idle), l.idle_duration(), "step {step}: key {key}");
        }
    }
    let (ok, ko) = own.iter().fold((0, 0), |(ok, ko), l| {
        let s = l.statistics();
        (ok + s.total_successful, ko + s.total_failed)
    });
    let any = keyed.statistics(&0);
    assert_eq!((any.total_successful, any.total_failed), (ok, ko));
    true
}

#[cfg(test)]
mod tests {
    /// The checked-in seeds replay clean (on stable, without libFuzzer).
    #[test]
    fn seeds_replay() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/keyed");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            assert!(super::run(&std::fs::read(&path).unwrap()), "{path:?}");
        }
    }

    /// Every kind, a few keys, periods walked through: the decisions agree.
    #[test]
    fn walks_every_kind() {
        for kind in 0..5u8 {
            for (limit, per, period) in [(3u16, 1u8, 1_000u32), (1, 1, 7), (40, 3, 1 << 20)] {
                let mut data = vec![kind];
                data.extend_from_slice(&limit.to_le_bytes());
                data.push(per);
                data.extend_from_slice(&period.to_le_bytes());
                data.push(3);
                let mut x = 0x9E37_79B9_u32 ^ u32::from(kind);
                for _ in 0..400 {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    data.extend_from_slice(&x.to_le_bytes());
                }
                assert!(
                    super::run(&data),
                    "kind {kind}, limit {limit}, period {period}"
                );
            }
        }
    }
}
