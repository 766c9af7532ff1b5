//! `Peek`: what `try_acquire` would answer, with nothing taken and nothing counted. Each limiter
//! runs a deterministic pseudo-random schedule (time steps, takes of every size, releases), and
//! before every take a peek of the same size at the same instant must give the same answer —
//! grant or rejection, reason and RetryAfter to the nanosecond — and leave the available
//! permits and the statistics as they were.

use std::time::Duration;

use tollgate::{
    ConcurrencyLimiter, ConcurrencyOptions, FixedWindowLimiter, FixedWindowOptions, GcraLimiter,
    GcraOptions, LeakyBucketMeter, LeakyBucketOptions, LeakyBucketShaper, Lease, Limiter,
    ManualClock, Peek, Rejection, ShaperOptions, SlidingCounterLimiter, SlidingCounterOptions,
    SlidingLogLimiter, SlidingLogOptions, SlidingWindowLimiter, SlidingWindowOptions,
    TokenBucketLimiter, TokenBucketOptions,
};

/// xorshift64: a fixed, reproducible schedule.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn same(peeked: &Result<(), Rejection>, taken: &Result<Lease<'_>, Rejection>) -> bool {
    match (peeked, taken) {
        (Ok(()), Ok(_)) => true,
        (Err(a), Err(b)) => a == b,
        _ => false,
    }
}

/// Runs `steps` of the schedule on `l`: before each take, a peek that must agree with it.
fn agree<L: Limiter + Peek>(l: &L, clock: &ManualClock, limit: u32, seed: u64, steps: usize) {
    let mut rng = Rng(seed);
    let mut held: Vec<Lease<'_>> = Vec::new();
    let (mut grants, mut denials) = (0, 0);
    for step in 0..steps {
        let x = rng.next();
        match x % 8 {
            0 => clock.advance(Duration::from_millis((x >> 8) % 700)),
            1 if !held.is_empty() => drop(held.swap_remove((x >> 8) as usize % held.len())),
            _ => {
                let n = ((x >> 8) % u64::from(limit + 2)) as u32;
                let before = (l.available_permits(), l.statistics());
                let peeked = l.peek(n);
                assert_eq!(
                    (l.available_permits(), l.statistics()),
                    before,
                    "step {step}"
                );
                let taken = l.try_acquire(n);
                assert!(
                    same(&peeked, &taken),
                    "step {step}: peek {peeked:?}, take {taken:?}"
                );
                match taken {
                    Ok(lease) => {
                        grants += 1;
                        held.push(lease);
                    }
                    Err(_) => denials += 1,
                }
            }
        }
    }
    assert!(
        grants > 50 && denials > 50,
        "{grants} grants, {denials} denials"
    );
}

#[test]
fn token_bucket_peeks_what_it_would_take() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(7, 3, Duration::from_secs(1));
    let l = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    agree(&l, &clock, 7, 0x9E37_79B9_7F4A_7C15, 3_000);
}

#[test]
fn fixed_window_peeks_what_it_would_take() {
    let clock = ManualClock::new();
    let opts = FixedWindowOptions::new(6, Duration::from_secs(1));
    let l = FixedWindowLimiter::with_clock(opts, &clock).unwrap();
    agree(&l, &clock, 6, 0xD1B5_4A32_D192_ED03, 3_000);
}

#[test]
fn sliding_window_peeks_what_it_would_take() {
    let clock = ManualClock::new();
    let opts = SlidingWindowOptions::new(8, Duration::from_secs(2), 4);
    let l = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
    agree(&l, &clock, 8, 0x94D0_49BB_1331_11EB, 3_000);
}

#[test]
fn concurrency_limiter_peeks_what_it_would_take() {
    let clock = ManualClock::new();
    let l = ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(5), &clock).unwrap();
    agree(&l, &clock, 5, 0xBF58_476D_1CE4_E5B9, 3_000);
}

#[test]
fn gcra_peeks_what_it_would_take() {
    let clock = ManualClock::new();
    let opts = GcraOptions::per_second(3).with_burst(6);
    let l = GcraLimiter::with_clock(opts, &clock).unwrap();
    agree(&l, &clock, 6, 0x2545_F491_4F6C_DD1D, 3_000);
}

#[test]
fn leaky_buckets_peek_what_they_would_take() {
    let clock = ManualClock::new();
    let meter = LeakyBucketMeter::with_clock(
        LeakyBucketOptions::new(5, 2, Duration::from_millis(500)),
        &clock,
    )
    .unwrap();
    agree(&meter, &clock, 5, 0x9E6C_63D0_676A_9A99, 3_000);
    let shaper = LeakyBucketShaper::with_clock(ShaperOptions::per_second(4), &clock).unwrap();
    agree(&shaper, &clock, 1, 0x7F4A_7C15_9E37_79B9, 3_000);
}

#[test]
fn sliding_counter_and_log_peek_what_they_would_take() {
    let clock = ManualClock::new();
    let counter =
        SlidingCounterLimiter::with_clock(SlidingCounterOptions::per_second(7), &clock).unwrap();
    agree(&counter, &clock, 7, 0x1234_5678_9ABC_DEF1, 3_000);
    let log: SlidingLogLimiter<_, 8> =
        SlidingLogLimiter::with_capacity(SlidingLogOptions::per_second(8), &clock).unwrap();
    agree(&log, &clock, 8, 0x0F1E_2D3C_4B5A_6978, 3_000);
}

#[test]
fn a_closed_limiter_peeks_closed() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(2, 2, Duration::from_secs(1));
    let l = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    l.close();
    assert_eq!(l.peek(1).unwrap_err().reason(), tollgate::Reason::Closed);
    let shared = std::sync::Arc::new(l);
    assert_eq!(
        shared.peek(1).unwrap_err().reason(),
        tollgate::Reason::Closed
    );
}
