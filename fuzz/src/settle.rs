//! The settle property (issue 38): a rate limiter that grants an estimate and settles the lease
//! to `actual` ends in the same state, with the same future answers, as its twin that was
//! asked for `actual` at the same instant.
//!
//! - a **refund** (`actual` below the estimate) is always exact: the twin acquires `actual`;
//! - a **debit** that fits in what was available is exact too: the twin acquires `actual`;
//! - a debit past what is available goes into debt (every rate limiter: `Ok`, the limiter then
//!   shows 0 available) or, past the debt bound, is refused (`DebtLimit`, changing nothing).
//!   The twin then takes the same estimate and the same settle, and the result must match, so
//!   the two stay comparable on every later step.
//!
//! Every third settle is `settle_within(actual, 0)`: it must go through exactly when the
//! actual fits (a debt bound of 0 takes only what is there), and the twin takes the same.
//!
//! After every operation the twins' available permits, and their answer (grant, or reason and
//! RetryAfter) to a probe of a random size, must agree. Seven rate limiters, small limits, a
//! clock moving by random steps; the sliding counter and log on a clock of 1 ns ticks.
//!
//! The sliding window, counter and log are also run against their reference models
//! (`model::sliding_*`), the settle done there as the property says: a refund or a debit that
//! fits as the model acquiring `actual`, a debit past what is free as the model acquiring the
//! estimate and then taking the rest into debt (`debit`, bound one limit). Their available
//! permits, every answer and its RetryAfter must be the model's.

use core::time::Duration;
use std::sync::Arc;

use tollgate::*;

use crate::model::sliding_counter::SlidingCounterModel;
use crate::model::sliding_log::SlidingLogModel;
use crate::model::sliding_window::SlidingWindowModel;
use crate::model::{Denial, Expect, Model};

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
    /// (the actual 0..=2·limit + 1, past every debt bound; probe 1..=limit).
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
                    // Up to twice the limit and one more: past every debt bound.
                    u32::from(c[1]) % (2 * limit + 2),
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
            // A ring of twice the largest limit: a debit always has a slot of its own (the
            // model keeps every entry).
            Box::new(
                SlidingLogLimiter::<_, 32>::with_capacity(
                    SlidingLogOptions::new(l, NS_WINDOW),
                    clock,
                )
                .unwrap(),
            ),
            NS_WINDOW / 4,
        ),
    }
}

/// The reference model of the sliding limiters (kinds 2, 5, 6), built as `make` builds them.
#[derive(Debug)]
enum Reference {
    Window(SlidingWindowModel),
    Counter(SlidingCounterModel),
    Log(SlidingLogModel),
}

impl Reference {
    fn of(input: &Input) -> Option<Reference> {
        let (l, p) = (input.limit, input.per);
        let ns = |d: Duration| d.as_nanos() as u64;
        match input.kind {
            2 => {
                let segments = p.min(4);
                let segment = ns(PERIOD) / u64::from(segments);
                Some(Reference::Window(SlidingWindowModel::new(
                    0, l, segments, segment,
                )))
            }
            5 => Some(Reference::Counter(SlidingCounterModel::new(
                0,
                l,
                ns(NS_WINDOW),
            ))),
            6 => Some(Reference::Log(SlidingLogModel::new(0, l, ns(NS_WINDOW)))),
            _ => None,
        }
    }

    fn model(&mut self) -> &mut dyn ModelDebit {
        match self {
            Reference::Window(m) => m,
            Reference::Counter(m) => m,
            Reference::Log(m) => m,
        }
    }
}

/// A model's acquire, available and debit.
trait ModelDebit {
    fn acquire(&mut self, now: u64, n: u32) -> Result<(), Denial>;
    fn available(&self, now: u64) -> u128;
    fn debit(&mut self, now: u64, n: u32) -> bool;
}

macro_rules! model_debit {
    ($($m:ty),*) => {$(
        impl ModelDebit for $m {
            fn acquire(&mut self, now: u64, n: u32) -> Result<(), Denial> {
                Model::acquire(self, now, n)
            }
            fn available(&self, now: u64) -> u128 {
                Model::available(self, now)
            }
            fn debit(&mut self, now: u64, n: u32) -> bool {
                <$m>::debit(self, now, n)
            }
        }
    )*};
}
model_debit!(SlidingWindowModel, SlidingCounterModel, SlidingLogModel);

/// The model, if any, shows `available` permits at `now`.
fn model_available(
    reference: &mut Option<Reference>,
    now: u64,
    available: u64,
    at: impl Fn() -> String,
) {
    if let Some(r) = reference.as_mut() {
        assert_eq!(u128::from(available), r.model().available(now), "{}", at());
    }
}

/// The model's answer in the library's terms.
fn expected(r: Result<(), Denial>, n: u32) -> Option<Result<u32, (Reason, Option<Duration>)>> {
    match r {
        Ok(()) => Some(Ok(n)),
        Err(d) => match d.retry_after {
            Expect::Exactly(wait) => Some(Err((
                d.reason,
                wait.map(|ns| Duration::from_nanos(ns as u64)),
            ))),
            Expect::Unspecified(_) => None,
        },
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
    let mut reference = Reference::of(input);
    for (step, &(estimate, actual, advance, probe)) in input.ops.iter().enumerate() {
        let at = |what: &str| format!("{input:?}\nstep {step} ({what})");
        let now = clock.now().as_nanos();
        let before = settled.available_permits();
        model_available(&mut reference, now, before, || at("model's available"));
        assert_eq!(
            before,
            direct.available_permits(),
            "{}",
            at("available before")
        );
        match settled.try_acquire(estimate) {
            Ok(mut lease) => {
                let fits = actual <= estimate || u64::from(actual) <= before;
                // Every third settle bounds the debt at 0 (`settle_within`): it takes only
                // what is there, so it goes through exactly when the actual fits.
                let bound = if step % 3 == 1 { 0 } else { u32::MAX };
                let result = lease.settle_within(actual, bound);
                if bound == 0 {
                    assert_eq!(result.is_ok(), fits, "{}", at("a settle owing at most 0"));
                }
                match result {
                    Ok(()) => assert_eq!(lease.permits(), actual, "{}", at("settled count")),
                    Err(SettleError::DebtLimit) => {
                        assert!(!fits, "{}", at("a settle that fits was refused"));
                        assert_eq!(lease.permits(), estimate, "{}", at("refused settle"));
                    }
                    Err(e) => panic!("{}: {e}", at("a rate lease must settle")),
                }
                if let Some(r) = reference.as_mut() {
                    let m = r.model();
                    if fits {
                        assert_eq!(m.acquire(now, actual), Ok(()), "{}", at("model's actual"));
                    } else {
                        assert_eq!(
                            m.acquire(now, estimate),
                            Ok(()),
                            "{}",
                            at("model's estimate")
                        );
                        if bound == u32::MAX {
                            let debt = m.debit(now, actual - estimate);
                            assert_eq!(result.is_ok(), debt, "{}", at("model's debit"));
                        }
                    }
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
                    assert_eq!(
                        result,
                        twin.settle_within(actual, bound),
                        "{}",
                        at("twin's settle")
                    );
                    if result.is_ok() {
                        assert_eq!(settled.available_permits(), 0, "{}", at("in debt"));
                    }
                }
            }
            Err(e) => {
                if let Some(r) = reference.as_mut() {
                    let m = r.model();
                    if let Some(want) = expected(m.acquire(now, estimate), estimate) {
                        let got = Err((e.reason(), e.retry_after()));
                        assert_eq!(got, want, "{}", at("model's refusal"));
                    }
                }
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
        let after = settled.available_permits();
        model_available(&mut reference, now, after, || at("model's available after"));
        let (a, b) = (settled.try_acquire(probe), direct.try_acquire(probe));
        assert_eq!(answer(&a), answer(&b), "{}", at("probe"));
        if let Some(r) = reference.as_mut() {
            if let Some(want) = expected(r.model().acquire(now, probe), probe) {
                assert_eq!(answer(&a), want, "{}", at("model's probe"));
            }
        }
        drop((a, b));
        clock.advance(unit * advance);
    }
}
