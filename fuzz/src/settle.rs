//! The settle property (issue 38): a rate limiter that grants an estimate and settles the lease
//! to `actual` ends in the same state, with the same future answers, as its twin that was
//! asked for `actual` at the same instant.
//!
//! - a **refund** (`actual` below the estimate) is always exact: the twin acquires `actual`;
//! - a **debit** that fits in what was available is exact too: the twin acquires `actual`;
//! - a debit past what is available goes into debt (token bucket, fixed window, GCRA, leaky
//!   meter: `Ok`, the limiter then shows 0 available) or is refused (`DebtLimit`, changing
//!   nothing: the sliding window, counter and log, and any debit past the bound). The twin then
//!   takes the same estimate and the same settle, and the result must match, so the two stay
//!   comparable on every later step.
//!
//! After every operation the twins' available permits, and their answer (grant, or reason and
//! RetryAfter) to a probe of a random size, must agree. Seven rate limiters, small limits, a
//! clock moving by random steps; the sliding counter and log on a clock of 1 ns ticks.

use core::time::Duration;
use std::sync::Arc;

use tollgate::*;

/// A scenario.
#[derive(Clone, Debug)]
pub struct Input {
    /// Which limiter (0..7).
    pub kind: u8,
    /// The limit (burst, capacity): 1..=16.
    pub limit: u32,
    /// Tokens per period (bucket), leak per interval (meter), segments (sliding window):
    /// 1..=limit.
    pub per: u32,
    /// Operations: (estimate, actual, clock step in periods / 4, probe size), sizes 0..=limit
    /// (probe 1..=limit).
    pub ops: Vec<(u32, u32, u32, u32)>,
}

impl Input {
    /// Reads a scenario from the fuzzer's bytes (never fails: missing bytes read as zeros).
    pub fn decode(data: &[u8]) -> Input {
        let mut bytes = data.iter().copied();
        let mut byte = || bytes.next().unwrap_or(0);
        let kind = byte() % 7;
        let limit = 1 + u32::from(byte() % 16);
        let per = 1 + u32::from(byte()) % limit;
        let rest = data.get(3..).unwrap_or(&[]);
        let ops = rest
            .chunks_exact(4)
            .map(|c| {
                let size = |b: u8| u32::from(b) % (limit + 1);
                (
                    size(c[0]),
                    size(c[1]),
                    u32::from(c[2] % 8),
                    1 + u32::from(c[3]) % limit,
                )
            })
            .collect();
        Input {
            kind,
            limit,
            per,
            ops,
        }
    }

    /// The bytes [`decode`](Self::decode) reads back as this scenario.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![self.kind, (self.limit - 1) as u8, (self.per - 1) as u8];
        for &(e, a, step, probe) in &self.ops {
            v.extend([e as u8, a as u8, step as u8, (probe - 1) as u8]);
        }
        v
    }
}

/// The period of every limiter but the sliding counter and log.
const PERIOD: Duration = Duration::from_millis(400);
/// The window of the sliding counter and log (on 1 ns ticks: their permits come back at any
/// nanosecond, so a coarse clock step would hide their timing).
const NS_WINDOW: Duration = Duration::from_nanos(400);

/// The limiter of `input` on `clock`, and the clock step of one unit.
fn make(input: &Input, clock: Arc<ManualClock>) -> (Box<dyn Limiter>, Duration) {
    let (l, p) = (input.limit, input.per);
    let quarter = PERIOD / 4;
    match input.kind {
        0 => (
            Box::new(
                TokenBucketLimiter::with_clock(TokenBucketOptions::new(l, p, PERIOD), clock)
                    .unwrap(),
            ),
            quarter,
        ),
        1 => (
            Box::new(
                FixedWindowLimiter::with_clock(FixedWindowOptions::new(l, PERIOD), clock).unwrap(),
            ),
            quarter,
        ),
        2 => (
            Box::new(
                SlidingWindowLimiter::with_clock(
                    SlidingWindowOptions::new(l, PERIOD, p.min(4)),
                    clock,
                )
                .unwrap(),
            ),
            quarter,
        ),
        3 => (
            Box::new(
                GcraLimiter::with_clock(GcraOptions::with_period(PERIOD / l).with_burst(l), clock)
                    .unwrap(),
            ),
            quarter,
        ),
        4 => (
            Box::new(
                LeakyBucketMeter::with_clock(LeakyBucketOptions::new(l, p, PERIOD), clock).unwrap(),
            ),
            quarter,
        ),
        5 => (
            Box::new(
                SlidingCounterLimiter::with_clock(SlidingCounterOptions::new(l, NS_WINDOW), clock)
                    .unwrap(),
            ),
            NS_WINDOW / 4,
        ),
        _ => (
            Box::new(
                SlidingLogLimiter::with_clock(SlidingLogOptions::new(l, NS_WINDOW), clock).unwrap(),
            ),
            NS_WINDOW / 4,
        ),
    }
}

/// What a request was answered: the permits granted, or the reason and RetryAfter.
fn answer(r: &Result<Lease<'_>, Rejection>) -> Result<u32, (Reason, Option<Duration>)> {
    r.as_ref()
        .map(|l| l.permits())
        .map_err(|e| (e.reason(), e.retry_after()))
}

/// Runs `input`; panics with the step on the first difference.
pub fn check(input: &Input) {
    let clock = Arc::new(ManualClock::new());
    let (settled, unit) = make(input, clock.clone());
    let (direct, _) = make(input, clock.clone());
    for (step, &(estimate, actual, advance, probe)) in input.ops.iter().enumerate() {
        let at = |what: &str| format!("{input:?}\nstep {step} ({what})");
        let before = settled.available_permits();
        assert_eq!(
            before,
            direct.available_permits(),
            "{}",
            at("available before")
        );
        match settled.try_acquire(estimate) {
            Ok(mut lease) => {
                let fits = actual <= estimate || u64::from(actual) <= before;
                let result = lease.settle(actual);
                match result {
                    Ok(()) => assert_eq!(lease.permits(), actual, "{}", at("settled count")),
                    Err(SettleError::DebtLimit) => {
                        assert!(!fits, "{}", at("a settle that fits was refused"));
                        assert_eq!(lease.permits(), estimate, "{}", at("refused settle"));
                    }
                    Err(e) => panic!("{}: {e}", at("a rate lease must settle")),
                }
                if fits {
                    // Exact: as if `actual` had been asked for.
                    let twin = direct.try_acquire(actual);
                    assert!(twin.is_ok(), "{}", at("twin refused the actual"));
                } else {
                    // Into debt, or refused: the twin does the same.
                    let mut twin = direct
                        .try_acquire(estimate)
                        .unwrap_or_else(|e| panic!("{}: {e:?}", at("twin refused the estimate")));
                    assert_eq!(result, twin.settle(actual), "{}", at("twin's settle"));
                    if result.is_ok() {
                        assert_eq!(settled.available_permits(), 0, "{}", at("in debt"));
                    }
                }
            }
            Err(e) => {
                let twin = direct.try_acquire(estimate);
                assert_eq!(
                    Err((e.reason(), e.retry_after())),
                    answer(&twin),
                    "{}",
                    at("estimate refused")
                );
            }
        }
        assert_eq!(
            settled.available_permits(),
            direct.available_permits(),
            "{}",
            at("available after")
        );
        let (a, b) = (settled.try_acquire(probe), direct.try_acquire(probe));
        assert_eq!(answer(&a), answer(&b), "{}", at("probe"));
        drop((a, b));
        clock.advance(unit * advance);
    }
}
