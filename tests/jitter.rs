//! Issue 38, part 2: jitter. The thundering herd measured (1,000 clients refused at one
//! instant, retrying at their RetryAfter, with and without jitter), a property over
//! pseudo-random runs (a jittered queue grants what a plain queue grants, when it grants it;
//! each jittered waiter completes within its bound after), and the process timer waking a
//! held waiter. Run with `--nocapture` to see the numbers.

use core::time::Duration;
use std::collections::BTreeMap;

mod common;

use common::{run_when_woken, Task};
use tollgate::*;

const MS: Duration = Duration::from_millis(1);

/// Retries per millisecond of clock time, as (peak, number of milliseconds with a retry).
fn per_ms(retries: &[Instant]) -> (u32, usize) {
    let mut buckets: BTreeMap<u64, u32> = BTreeMap::new();
    for at in retries {
        *buckets.entry(at.as_nanos() / 1_000_000).or_default() += 1;
    }
    (buckets.values().copied().max().unwrap_or(0), buckets.len())
}

/// 1,000 clients refused at one instant by a window of 100 a second, each retrying at its
/// RetryAfter, exact or jittered: the retries of each millisecond.
fn herd(jitter: Option<&Jitter>) -> Vec<Instant> {
    let clock = ManualClock::new();
    let window = FixedWindowLimiter::with_clock(
        FixedWindowOptions::new(100, Duration::from_secs(1)),
        &clock,
    )
    .unwrap();
    window.try_acquire(100).unwrap().forget();
    clock.advance(500 * MS);
    let now = clock.now();
    (0..1_000)
        .map(|_| {
            let refused = window.try_acquire(1).unwrap_err();
            let wait = match jitter {
                None => refused.retry_after(),
                Some(j) => j.retry_after(&refused),
            };
            let wait = wait.unwrap();
            assert!(wait >= refused.retry_after().unwrap(), "never shorter");
            now + wait
        })
        .collect()
}

/// The expected largest of `buckets` counts of `n` draws spread uniformly over them (each
/// count binomial(n, 1/buckets), taken as independent): `Σ_k P(max > k) = Σ_k 1 - F(k)^buckets`.
fn expected_peak(n: u32, buckets: u32) -> f64 {
    let p = 1.0 / f64::from(buckets);
    let (mut pmf, mut cdf, mut e) = ((1.0 - p).powi(n as i32), 0.0, 0.0);
    for k in 0..n {
        cdf += pmf;
        e += 1.0 - cdf.min(1.0).powi(buckets as i32);
        pmf *= f64::from(n - k) / f64::from(k + 1) * p / (1.0 - p);
    }
    e
}

/// The measurement. Without jitter every client retries in the same millisecond (the
/// window's next start, 500 ms on): a peak of 1,000. With `Jitter::up_to(100 ms)` the retries
/// are uniform over 100 ms: 10 a millisecond on average, a fall by the expected factor of 100
/// in the mean; the peak is the largest of 100 binomial(1000, 1/100) counts, whose expected
/// value (`expected_peak`) is 18.7: an expected fall of the peak by 53×. Asserted: the peak,
/// averaged over 20 seeds, within 15 % of that expectation; every seed's peak at most 25 (a
/// fall of at least 40×); the retries cover at least 99 of the 100 milliseconds. With
/// `Jitter::up_to(1 s)`: 1 a millisecond on average (a fall of 1,000× in the mean), an expected
/// peak of 5.5 (182×), each seed's at most 8 (at least 125×).
#[test]
fn jitter_spreads_a_thundering_herd_by_the_expected_factor() {
    let (exact_peak, exact_ms) = per_ms(&herd(None));
    assert_eq!((exact_peak, exact_ms), (1_000, 1));
    println!("no jitter: 1000 retries in {exact_ms} ms, peak {exact_peak} per ms");
    for (bound_ms, mean, peak_limit, min_ms) in
        [(100u64, 10u32, 25u32, 99usize), (1_000, 1, 8, 600)]
    {
        let mut peaks = Vec::new();
        for seed in 0..20 {
            let jitter = Jitter::up_to(Duration::from_millis(bound_ms)).with_seed(seed);
            let retries = herd(Some(&jitter));
            let (peak, spread) = per_ms(&retries);
            let first = retries.iter().min().unwrap().as_nanos();
            assert!(first >= 1_000_000_000, "a retry before the RetryAfter");
            assert!(peak <= peak_limit, "seed {seed}: peak {peak}");
            assert!(spread >= min_ms, "seed {seed}: {spread} ms");
            peaks.push(peak);
        }
        let (lo, hi) = (peaks.iter().min().unwrap(), peaks.iter().max().unwrap());
        let avg = f64::from(peaks.iter().sum::<u32>()) / peaks.len() as f64;
        let expected = expected_peak(1_000, bound_ms as u32);
        println!(
            "up to {bound_ms} ms: mean {mean} per ms (a fall of {}x); expected peak {expected:.1} ({:.0}x); peak over 20 seeds min {lo} / avg {avg:.1} / max {hi}: a fall of {:.0}x to {:.0}x, {:.0}x on average (asserted: average within 15 % of the expected peak, each <= {peak_limit})",
            1_000 / mean,
            1_000.0 / expected,
            1_000.0 / f64::from(*hi),
            1_000.0 / f64::from(*lo),
            1_000.0 / avg,
        );
        assert!(
            (avg - expected).abs() <= 0.15 * expected,
            "{avg} vs {expected}"
        );
    }
    // A fraction of the wait: 20 % of the 500 ms RetryAfter is the same 100 ms spread.
    let jitter = Jitter::percent(20).with_seed(1);
    let (peak, spread) = per_ms(&herd(Some(&jitter)));
    println!("20 % of the wait: peak {peak} per ms over {spread} ms");
    assert!(peak <= 25 && spread >= 99);
}

/// A small deterministic generator for the runs below (not the crate's).
struct Rng(u64);
impl Rng {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

type Waiting<'a> = Task<'a, Result<Lease<'a>, Rejection>>;
/// A waiter on the plain limiter and its twin on the jittered one (`None` once dropped), the
/// instants they completed at, and whether each was granted.
type Twins<'a> = (
    Option<Waiting<'a>>,
    Option<Waiting<'a>>,
    Option<Instant>,
    Option<Instant>,
    [Option<bool>; 2],
);

/// The property, over 300 pseudo-random runs: a token bucket whose waiters wait with jitter
/// and its twin whose waiters wait plainly, fed the same requests, drops and clock steps,
/// polled in the same order at every step, agree at every step on the queue and the permits
/// (the jitter changes no grant and no grant's instant); every waiter ends the same way in
/// both; a jittered one completes no earlier than its twin and at most its bound (plus one
/// step, the polling's resolution) later; a jittered waiter dropped while its twin has not
/// completed leaves the same state as its twin does; the statistics agree at the end.
#[test]
fn a_jittered_queue_grants_what_a_plain_queue_grants() {
    let (mut granted, mut delayed, mut dropped) = (0, 0, 0);
    for run in 0..300u64 {
        let mut rng = Rng(run);
        let limit = 1 + rng.next(4) as u32;
        let opts = TokenBucketOptions::new(limit, 1 + rng.next(3) as u32, 10 * MS)
            .with_queue(12, QueueOrder::OldestFirst);
        let (clock_p, clock_j) = (ManualClock::new(), ManualClock::new());
        let plain = TokenBucketLimiter::with_clock(opts, &clock_p).unwrap();
        let jittered = TokenBucketLimiter::with_clock(opts, &clock_j).unwrap();
        let bound = Duration::from_millis(rng.next(40));
        let jitter = Jitter::up_to(bound).with_seed(run);
        let mut waiters: Vec<Twins<'_>> = Vec::new();
        for _ in 0..150 {
            match rng.next(5) {
                0 | 1 => {
                    let n = 1 + rng.next(u64::from(limit)) as u32;
                    waiters.push((
                        Some(Task::new(plain.acquire(n))),
                        Some(Task::new(jittered.acquire_jittered(n, &jitter))),
                        None,
                        None,
                        [None, None],
                    ));
                }
                2 | 3 => {
                    let step = Duration::from_millis(1 + rng.next(7));
                    clock_p.advance(step);
                    clock_j.advance(step);
                }
                _ => {
                    // Drop a waiter whose plain twin has not completed (both are in the same
                    // state then: queued, or granted and unreceived).
                    let live: Vec<usize> = (0..waiters.len())
                        .filter(|&i| waiters[i].2.is_none() && waiters[i].0.is_some())
                        .collect();
                    if !live.is_empty() {
                        let i = live[rng.next(live.len() as u64) as usize];
                        waiters[i].0 = None;
                        waiters[i].1 = None;
                    }
                }
            }
            poll_all(&mut waiters, &clock_p, &clock_j);
            assert_eq!(
                plain.statistics().queued_permits,
                jittered.statistics().queued_permits,
                "run {run}"
            );
            assert_eq!(
                plain.available_permits(),
                jittered.available_permits(),
                "run {run}"
            );
        }
        // Time enough for every waiter; polled each millisecond.
        for _ in 0..(2_000 + bound.as_millis() as u64) {
            clock_p.advance(MS);
            clock_j.advance(MS);
            poll_all(&mut waiters, &clock_p, &clock_j);
        }
        for (i, (p, j, at_p, at_j, outcome)) in waiters.iter().enumerate() {
            if p.is_none() {
                dropped += 1;
                continue;
            }
            assert!(j.is_some());
            assert_eq!(outcome[0], outcome[1], "run {run} waiter {i}");
            let (Some(at_p), Some(at_j)) = (at_p, at_j) else {
                panic!("run {run} waiter {i} never completed")
            };
            assert!(
                at_j >= at_p,
                "run {run} waiter {i}: {at_j:?} before {at_p:?}"
            );
            granted += usize::from(outcome[0] == Some(true));
            delayed += usize::from(at_j > at_p);
            assert!(
                *at_j <= *at_p + bound + 7 * MS,
                "run {run} waiter {i}: {at_j:?} past {at_p:?} + {bound:?}"
            );
        }
        let (sp, sj) = (plain.statistics(), jittered.statistics());
        assert_eq!(
            (sp.total_successful, sp.total_failed),
            (sj.total_successful, sj.total_failed),
            "run {run}"
        );
    }
    println!("300 runs: {granted} waiters granted, {delayed} of them delayed by their jitter, {dropped} dropped");
    assert!(delayed > granted / 2 && dropped > 100);
}

fn poll_all(waiters: &mut [Twins<'_>], clock_p: &ManualClock, clock_j: &ManualClock) {
    for (p, j, at_p, at_j, outcome) in waiters.iter_mut() {
        if let (Some(t), None) = (p.as_mut(), *at_p) {
            if let core::task::Poll::Ready(r) = t.poll() {
                *at_p = Some(clock_p.now());
                outcome[0] = Some(r.is_ok());
            }
        }
        if let (Some(t), None) = (j.as_mut(), *at_j) {
            if let core::task::Poll::Ready(r) = t.poll() {
                *at_j = Some(clock_j.now());
                outcome[1] = Some(r.is_ok());
            }
        }
    }
}

/// On a clock that moves by itself, the process timer wakes a held waiter when its delay is
/// over: polled only when woken, it completes after its permit came and within the bound.
#[test]
fn the_process_timer_wakes_a_held_waiter() {
    let opts = TokenBucketOptions::new(1, 1, 50 * MS).with_queue(1, QueueOrder::OldestFirst);
    let bucket = TokenBucketLimiter::new(opts).unwrap();
    let jitter = Jitter::up_to(30 * MS).with_seed(4);
    bucket.try_acquire(1).unwrap().forget();
    let start = std::time::Instant::now();
    let lease =
        run_when_woken(bucket.acquire_jittered(1, &jitter), Duration::from_secs(5)).expect("woken");
    assert_eq!(lease.unwrap().permits(), 1);
    let took = start.elapsed();
    println!("a waiter for a permit 50 ms away, jitter up to 30 ms: completed after {took:?}");
    assert!(took >= 49 * MS, "{took:?}");
}
